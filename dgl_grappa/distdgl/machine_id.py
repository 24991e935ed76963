"""The machine-id override: every DistDGL process of one "machine" on a shared host gets its machine id.

DGL finds "its" machine as the first ip_config line with a local address; on one host every
line is 127.0.0.1, so every trainer (and every sampler process) would be machine 0 and read
another machine's rows as its own. The launcher sets ``DGL_GRAPPA_MACHINE_ID`` on the
processes of machine i, and importing this module (``import dgl_grappa.distdgl`` does)
applies it:

* in this process: DGL's ``get_local_machine_id`` returns i;
* in the processes it spawns (DGL's sampler pool uses multiprocessing's ``spawn``; a spawned
  child re-runs the script as ``__mp_main__``, not this module): their command line imports
  this package first, so the override holds there before DGL connects to the servers.

A script started by the launcher needs no import of its own: the launcher runs it through
:mod:`dgl_grappa.distdgl.runscript`, which imports this package and then runs the script as
``__main__``. On separate machines (distinct addresses) the variable is not set and nothing
changes.

Example (what the launcher does for machine 1 of a one-host job)::

    DGL_GRAPPA_MACHINE_ID=1 DGL_ROLE=client ... python -m dgl_grappa.distdgl.runscript train_dist.py --ip_config ...
"""

import multiprocessing.spawn
import os
from pathlib import Path

from ..env import ENV_MACHINE_ID

# The folder that holds the dgl_grappa package: a spawned child imports it from here, whatever
# its working directory or PYTHONPATH.
_ROOT = str(Path(__file__).resolve().parents[2])


def _override_machine_id() -> None:
    mid = os.environ.get(ENV_MACHINE_ID)
    if mid is None:
        return
    import dgl.distributed.rpc_client as _rc  # why: only when the override is asked for (DGL is heavy)

    _rc.get_local_machine_id = lambda server_namebook, _m=int(mid): _m
    _pass_to_spawned_children()


def _pass_to_spawned_children() -> None:
    """Make every child that multiprocessing spawns import this package before it runs anything else."""
    original = multiprocessing.spawn.get_command_line
    if getattr(original, "_grappa_machine_id", False):
        return

    def get_command_line(**kwds):
        cmd = original(**kwds)
        if "-c" in cmd:  # [python, flags..., -c, "from multiprocessing.spawn import spawn_main; ...", ...]
            i = cmd.index("-c") + 1
            # The child's sys.path is replaced by the parent's right after (multiprocessing's prepare()).
            cmd[i] = f"import sys; sys.path.insert(0, {_ROOT!r}); import dgl_grappa.distdgl; {cmd[i]}"
        return cmd

    get_command_line._grappa_machine_id = True
    multiprocessing.spawn.get_command_line = get_command_line


_override_machine_id()
