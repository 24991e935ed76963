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
   overwrite each other's), and the trainer gets its machine id from an environment
   variable (DGL would derive it from the IP, which is 127.0.0.1 for everyone). The
   launcher is a child subreaper, bounds every wait (startup, training, shutdown) and, on
   any failure or at the end, kills every process it started, orphans included; the
   tmpfs goes away with the last process of its namespace.
3. The trainer program: :mod:`dgl_grappa.distdgl.train` (``python -m
   dgl_grappa.distdgl.train``; DGL's example flow, with the ``--grappa`` flag), which uses
   :class:`TrainerMeter` for timing, byte counts, the global evaluation and summary.json.
   ``compare.script`` runs a script of the user's own instead.

Byte accounting of a trainer (:class:`TrafficCounter`, application level): every
``rpc.fast_pull`` (KVStore pulls: rows owned by another machine x (row bytes + 8-byte id))
and every Python RPC payload (neighbour sampling requests and responses, serialised by
``rpc.serialize_to_payload`` / ``deserialize_from_payload``), plus the DDP gradient
payload. Next to it, rank 0 reads the loopback counter of the job's namespace at epoch
boundaries (``wire_bytes``: all processes together, measured).

Importing this module applies the machine-id override when ``DGL_GRAPPA_MACHINE_ID`` is
set; a trainer script must import it before ``dgl.distributed.initialize`` (DGL's sampler
processes are spawned and re-import the script, so the override must sit at import time).

Layout: :mod:`.machine_id` (the override, applied by importing this package),
:mod:`.launcher` (:func:`launch`, the server), :mod:`.run` (:func:`run_distdgl`), :mod:`.job`
(one job), :mod:`.segments` (one job per partitioning, merged), :mod:`.metering` (:class:`TrainerMeter`,
:class:`TrafficCounter`), :mod:`.cli`. Running a command bounded in its namespaces and
killing process trees is :mod:`dgl_grappa.cluster.procs` (nothing DistDGL-specific).
"""
# First: applies the machine-id override at import time (see above).
from ..cluster.procs import JobFailed
from .cli import main
from .job import TRAINER_MODULE, trainer_command
from .launcher import launch, log  # noqa: F401
from .machine_id import ENV_MACHINE_ID, _override_machine_id  # noqa: F401
from ..kinds.embeddings import dist_num_classes as num_classes
from .metering import TrafficCounter, TrainerMeter
from .run import run_distdgl

__all__ = [
    "ENV_MACHINE_ID", "JobFailed", "TRAINER_MODULE", "TrafficCounter", "TrainerMeter", "launch", "main",
    "num_classes", "run_distdgl", "trainer_command",
]
