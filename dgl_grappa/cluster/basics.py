"""What every launcher uses that needs no torch: the log format, a free port, threads per worker.

:mod:`.launch` re-exports them. A process that only starts and supervises others (the DistDGL launcher,
``python -m dgl_grappa.distdgl _launch``) imports them from here, and so starts without torch and DGL: seconds
of every DistDGL job's start, before its first server can start.
"""

from __future__ import annotations

import logging
import os
import socket


def setup_logging(rank: int | None = None, level: int = logging.INFO) -> None:
    """Log lines carry the rank, e.g. ``[rank 1] ...``; the launcher logs as ``[main]``."""
    prefix = "[main]" if rank is None else f"[rank {rank}]"
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(f"%(asctime)s {prefix} %(message)s", "%H:%M:%S"))
    root = logging.getLogger("dgl_grappa")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def threads_per_worker(nprocs: int, requested: int = 0) -> int:
    """Torch threads for each of nprocs workers sharing this machine's cores."""
    if requested > 0:
        return requested
    return max(1, (os.cpu_count() or 1) // max(1, nprocs))
