"""Helpers for multi-process tests: real gloo groups on 127.0.0.1, spawned, bounded.

Example:
    >>> def check(rank, world_size):            # must be a top-level function
    ...     t = torch.ones(1); dist.all_reduce(t); assert t.item() == world_size
    >>> run_distributed(check, world_size=2)    # doctest: +SKIP
"""

from __future__ import annotations

from typing import Callable

from .launch import free_port, init_distributed, set_threads, shutdown_distributed, spawn_workers


def _entry(rank: int, fn: Callable, world_size: int, port: int, timeout_s: float, args: tuple) -> None:
    set_threads(1)
    init_distributed(rank, world_size, port, timeout_s)
    clean = False
    try:
        fn(rank, world_size, *args)
        clean = True
    finally:
        shutdown_distributed(clean)


def run_distributed(fn: Callable, world_size: int, *args, timeout_s: float = 120.0) -> None:
    """Run ``fn(rank, world_size, *args)`` in world_size spawned workers joined by gloo.

    A worker's exception (with its traceback) is re-raised here as WorkerFailed; the
    children's stderr goes to this process's stderr, which pytest shows on failure.
    """
    port = free_port()
    spawn_workers(_entry, world_size, (fn, world_size, port, min(timeout_s, 60.0), args), timeout_s=timeout_s)
