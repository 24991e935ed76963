"""Processes: local multi-process launch with bounded waits, and the worker's identity.

One machine: ``spawn_workers`` starts ``nprocs`` spawned processes that each call
``fn(rank, *args)``; ``init_distributed`` joins them into a gloo group on 127.0.0.1 with a
timeout on every collective. Nothing here waits without a bound: the join loop kills the
whole group by PID when the job's deadline passes or a worker dies.
"""
from __future__ import annotations

import datetime
import logging
import os
import signal
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from .procs import JobFailed

log = logging.getLogger("dgl_grappa")


@dataclass(frozen=True)
class Identity:
    """Who this process is: passed around instead of reading environment variables.

    Attributes:
        rank: global rank in the gloo group.
        world_size: number of workers.
        part: the partition this worker trains on (= rank in Grappa mode).
    """

    rank: int
    world_size: int
    part: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_distributed(rank: int, world_size: int, port: int, timeout_s: float) -> Identity:
    """Join the gloo process group on 127.0.0.1:port; every collective is bounded by timeout_s.

    Returns:
        The worker's :class:`Identity` (part = rank).
    """
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    return Identity(rank=rank, world_size=world_size, part=rank)


def shutdown_distributed(clean: bool = True) -> None:
    """Leave the process group if this process joined one (safe to call twice).

    Args:
        clean: every rank reached the end normally. Then all ranks meet at a barrier first
            (bounded by the group's timeout), so none tears down while another still talks
            to it; after an error the group is destroyed at once.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return
    if clean:
        dist.barrier()
        # torch 2.2's gloo worker thread frees the last finished work objects after the
        # wait returns, and freeing their tensors needs the GIL; destroying the group joins
        # that thread while holding the GIL, which deadlocked here (seen with py-spy). A
        # short sleep releases the GIL so the worker thread can finish first.
        time.sleep(0.2)
    dist.destroy_process_group()


def setup_logging(rank: int | None = None, level: int = logging.INFO) -> None:
    """Log lines carry the rank, e.g. ``[rank 1] ...``; the launcher logs as ``[main]``."""
    prefix = "[main]" if rank is None else f"[rank {rank}]"
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(f"%(asctime)s {prefix} %(message)s", "%H:%M:%S"))
    root = logging.getLogger("dgl_grappa")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def threads_per_worker(nprocs: int, requested: int = 0) -> int:
    """Torch threads for each of nprocs workers sharing this machine's cores."""
    if requested > 0:
        return requested
    return max(1, (os.cpu_count() or 1) // max(1, nprocs))


class WorkerFailed(JobFailed):
    """A spawned worker raised, died, or the job ran past its deadline."""


def _kill_all(ctx: Any) -> None:
    for p in ctx.processes:
        if p.is_alive():
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for p in ctx.processes:
        p.join(timeout=10)


def spawn_workers(fn: Callable, nprocs: int, args: tuple, timeout_s: float, poll_s: float = 1.0) -> None:
    """Run ``fn(rank, *args)`` in ``nprocs`` spawned processes and wait, at most timeout_s.

    Args:
        fn: a top-level (picklable) function.
        nprocs: number of processes.
        args: extra arguments for fn.
        timeout_s: the whole job's bound; past it every worker is killed.

    Raises:
        WorkerFailed: a worker raised (its traceback is in the message), exited non-zero,
            or the deadline passed. The other workers are killed first.
    """
    ctx = mp.start_processes(fn, args=args, nprocs=nprocs, join=False, start_method="spawn")
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                if ctx.join(timeout=poll_s):
                    return
            except mp.ProcessRaisedException as exc:
                raise WorkerFailed(f"worker {exc.error_index} failed:\n{exc}") from None
            except mp.ProcessExitedException as exc:
                raise WorkerFailed(f"worker {exc.error_index} exited with code {exc.exit_code}") from None
            if time.monotonic() > deadline:
                raise WorkerFailed(f"the job ran past run.timeout_s={timeout_s:.0f}s; all workers were killed "
                                   "(raise --run.timeout_s if the job is just slow)")
    finally:
        _kill_all(ctx)


def set_threads(n: int) -> None:
    torch.set_num_threads(n)
    os.environ["OMP_NUM_THREADS"] = str(n)
