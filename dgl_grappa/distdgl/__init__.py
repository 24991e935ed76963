"""The DistDGL side: a real DistDGL job (servers + trainers) on the partitions Grappa uses.

Three layers, outermost first:

1. :func:`run_distdgl` (the caller: ``compare``, tests, ``python -m dgl_grappa.distdgl``).
   Makes sure the partitions exist, writes the resolved config, and runs the launcher as
   one child process, inside a private network namespace when the machine allows it (so
   the job's loopback bytes are measured and can be shaped, see :mod:`dgl_grappa.cluster.netns`).
   The wait is bounded; on a timeout the whole process group and tree are killed by PID.
2. :func:`launch` (the launcher process, ``python -m dgl_grappa.distdgl _launch``). One
   DistDGL server and one trainer per partition ("machine"). With more than one machine
   each machine gets its own mount namespace with a private /dev/shm tmpfs (DistDGL's
   segment names depend only on graph and tensor names, so two servers on one host would
   overwrite each other's), and every process of machine i gets its machine id from an
   environment variable (DGL would derive it from the IP, which is 127.0.0.1 for everyone).
   The launcher is a child subreaper, bounds every wait (startup, training, shutdown) and, on
   any failure or at the end, kills every process it started, orphans included; the
   tmpfs goes away with the last process of its namespace. It writes ``job.json``: wall
   time, exit statuses, logs.
3. The trainer program: :mod:`dgl_grappa.distdgl.train` (``python -m
   dgl_grappa.distdgl.train``; DGL's example flow, with the ``--grappa`` flag), which uses
   :class:`TrainerMeter` for timing, byte counts, the global evaluation and summary.json;
   its servers are bare DGL servers (``_server``). ``compare.script`` runs a script of the
   user's own instead, through :mod:`.runscript` (the machine id, then the script as
   ``__main__``), in the trainers and, as DGL's ``tools/launch.py`` has it, in the servers;
   with the package's arguments, or with ``compare.script_args``, its own argument list with
   placeholders for what only the launcher knows (:func:`~dgl_grappa.distdgl.job.expand_script_args`).
   A script that writes no summary.json (DGL's examples) ends as a clean job whose result is
   the launcher's record, without metrics.

Byte accounting of a trainer (:class:`TrafficCounter`, application level): every
``rpc.fast_pull`` (KVStore pulls: rows owned by another machine x (row bytes + 8-byte id))
and every Python RPC payload (neighbour sampling requests and responses, serialised by
``rpc.serialize_to_payload`` / ``deserialize_from_payload``), plus the DDP gradient
payload. Next to it, rank 0 reads the loopback counter of the job's namespace at epoch
boundaries (``wire_bytes``: all processes together, measured).

Importing this package applies the machine-id override when ``DGL_GRAPPA_MACHINE_ID`` is
set, in this process and in the processes multiprocessing spawns from it (DGL's sampler
processes); the launcher runs a script through :mod:`.runscript`, so the script itself needs no
import of dgl_grappa.

Layout: :mod:`.machine_id` (the override, applied by importing this package), :mod:`.runscript`
(a script as ``__main__``, the override first), :mod:`.launcher` (:func:`launch`, the server),
:mod:`.run` (:func:`run_distdgl`), :mod:`.job` (one job: the trainers' and servers' commands),
:mod:`.segments` (one job per partitioning, merged), :mod:`.metering` (:class:`TrainerMeter`,
:class:`TrafficCounter`), :mod:`.cli`. Running a command bounded in its namespaces and
killing process trees is :mod:`dgl_grappa.cluster.procs` (nothing DistDGL-specific).
"""

import importlib

from ..cluster.procs import JobFailed
from .launcher import launch, log  # noqa: F401
from .machine_id import ENV_MACHINE_ID, _override_machine_id  # noqa: F401  (the override, see above)

# The rest is imported on first use (PEP 562): the launcher process (``_launch``) imports this package and
# needs neither torch nor DGL, which the trainer's side and the job runner import.
_LAZY = {
    "num_classes": ("..kinds.embeddings", "dist_num_classes"),
    "main": (".cli", "main"),
    "TRAINER_MODULE": (".job", "TRAINER_MODULE"),
    "trainer_command": (".job", "trainer_command"),
    "TrafficCounter": (".metering", "TrafficCounter"),
    "TrainerMeter": (".metering", "TrainerMeter"),
    "run_distdgl": (".run", "run_distdgl"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(module, __name__), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ENV_MACHINE_ID",
    "JobFailed",
    "TRAINER_MODULE",
    "TrafficCounter",
    "TrainerMeter",
    "launch",
    "main",
    "num_classes",
    "run_distdgl",
    "trainer_command",
]
