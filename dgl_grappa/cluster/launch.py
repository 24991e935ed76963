"""Processes: local multi-process launch with bounded waits, and the worker's identity.

One machine: ``spawn_workers`` starts ``nprocs`` spawned processes that each call
``fn(rank, *args)``; ``init_distributed`` joins them into a gloo group on 127.0.0.1 with a
timeout on every collective. Nothing here waits without a bound: the join loop kills the
whole group by PID when the job's deadline passes or a worker dies. A worker started by
torchrun, Slurm or the multi-host launcher joins with ``init_distributed_env`` instead
(``init_method="env://"``, identity from :func:`dgl_grappa.cluster.hosts.worker_identity`).

Devices (``run.device``): on cpu the group is gloo; on cuda it is ``cpu:gloo,cuda:nccl``:
NCCL all-reduces the gradient buckets (CUDA tensors), gloo carries the small control
collectives on CPU tensors and objects (epoch clock, step counts, summaries), and the
worker uses the GPU of its LOCAL_RANK (:func:`select_device`). A host with more workers than
GPUs shares them (worker k on GPU k mod the count); NCCL refuses two ranks on one GPU, so
there gloo all-reduces the CUDA buckets too (:func:`gpus_shared`).
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import multiprocessing.connection as mp_connection
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ..config import ConfigError
from .basics import free_port, setup_logging, threads_per_worker  # noqa: F401  (re-exported)
from .procs import JobFailed, rc_text
from .ptree import kill_listed
from .signals import STOP_GRACE_S, STOP_WORKER, Stopped, StopSignals, catch_stop, die_with_parent

log = logging.getLogger("dgl_grappa")


@dataclass(frozen=True)
class Identity:
    """Who this process is: passed around instead of reading environment variables.

    Attributes:
        rank: global rank in the gloo group.
        world_size: number of workers.
        part: the partition this worker trains on (= rank in Grappa mode).
        local_rank: rank among the workers of its host.
        host_index: index of its host (0 on one machine).
        gpu_slot: its index among the workers sharing its machine's GPUs (:func:`gpu_place`; its GPU is
            this modulo their count with run.device=cuda); None: ``local_rank``.
    """

    rank: int
    world_size: int
    part: int
    local_rank: int = 0
    host_index: int = 0
    gpu_slot: int | None = None

    @property
    def gpu_index(self) -> int:
        return self.local_rank if self.gpu_slot is None else self.gpu_slot

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def backend_for(device: str, shared: bool = False) -> str:
    """The process group's backend for ``run.device``: gloo, or NCCL for CUDA tensors + gloo for CPU ones.

    ``shared``: several workers of this host use one GPU (:func:`gpus_shared`); NCCL refuses that, so
    gloo carries the CUDA tensors as well (it copies them through the host).
    """
    return "gloo" if device == "cpu" or shared else "cpu:gloo,cuda:nccl"


def gpu_place(who, remote: str) -> tuple[int, int]:
    """A multi-host worker's index among the workers that share its machine's GPUs, and their number.

    Emulated test hosts (``launch.remote: netns``) are one machine: all their workers share its GPUs, by
    global rank (a host's LOCAL_RANK 0 would put every worker on GPU 0, and NCCL would take them for
    separate machines). Elsewhere: LOCAL_RANK among the host's LOCAL_WORLD_SIZE.

    Example:
        >>> from types import SimpleNamespace as W
        >>> gpu_place(W(rank=3, world_size=4, local_rank=0, local_world_size=1), "netns")
        (3, 4)
    """
    return (who.rank, who.world_size) if remote == "netns" else (who.local_rank, who.local_world_size)


def gpus_shared(workers_here: int) -> bool:
    """Whether ``workers_here`` workers on this host outnumber its GPUs (then some share one)."""
    return torch.cuda.is_available() and workers_here > torch.cuda.device_count()


DGL_CUDA_WHEEL = "pip install dgl==2.1.0 -f https://data.dgl.ai/wheels/torch-2.2/cu121/repo.html"
"""DGL's CUDA build for the pinned torch 2.2 (from DGL's own wheel site; no package registry has one)."""


def check_dgl_cuda(device: torch.device) -> None:
    """Raise a one-line ConfigError unless this DGL can put a graph on ``device`` (a CUDA build).

    The pinned ``dgl`` wheel from the package registry is CPU-only: sampling works, but the
    blocks (and the model's message passing) cannot move to a GPU.
    """
    import dgl  # deferred: only a CUDA run asks DGL for its build; the launchers import this module without DGL

    try:
        dgl.graph(([0], [0])).to(device)
    except Exception as exc:  # noqa: BLE001 - DGLError, RuntimeError: DGL words it differently by version
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(
            f"run.device=cuda needs a CUDA build of DGL ({first}); install it with "
            f"'{DGL_CUDA_WHEEL}', or use --run.device=cpu"
        ) from None


def select_device(device: str, local_rank: int = 0, check_dgl: bool = False) -> torch.device:
    """The torch device of a worker: the CPU, or the GPU of its local rank (made current).

    Args:
        device: ``run.device``.
        local_rank: the worker's rank on its host (LOCAL_RANK): its GPU (modulo the host's GPU
            count: more workers than GPUs share them).
        check_dgl: with cuda, also check that DGL is a CUDA build (:func:`check_dgl_cuda`): only
            DGL's layers (``train.kernels: dgl``) need one; the torch kernels need torch's alone.

    Raises:
        ConfigError: run.device=cuda where torch sees no GPU, or (check_dgl) a CPU-only DGL.
    """
    if device == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError(
            "run.device=cuda but torch sees no CUDA device here (no GPU, or no driver); use --run.device=cpu"
        )
    n = torch.cuda.device_count()
    if local_rank >= n:
        log.info(
            "run.device=cuda: LOCAL_RANK=%d on a host of %d GPU(s): it shares GPU %d", local_rank, n, local_rank % n
        )
    torch.cuda.set_device(local_rank % n)
    dev = torch.device("cuda", local_rank % n)
    if check_dgl:
        check_dgl_cuda(dev)
    return dev


def init_distributed(rank: int, world_size: int, port: int, timeout_s: float, device: str = "cpu") -> Identity:
    """Join the process group on 127.0.0.1:port; every collective is bounded by timeout_s.

    Args:
        device: ``run.device``; cuda selects GPU ``rank`` first (one machine: local rank = rank).

    Returns:
        The worker's :class:`Identity` (part = rank).
    """
    select_device(device, rank)
    dist.init_process_group(
        backend_for(device, shared=device == "cuda" and gpus_shared(world_size)),
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    return Identity(rank=rank, world_size=world_size, part=rank, local_rank=rank)


def init_distributed_env(who, timeout_s: float, device: str = "cpu", remote: str = "") -> Identity:
    """Join the process group from a torchrun / Slurm / launcher environment (``init_method="env://"``).

    Args:
        who: the worker's :class:`dgl_grappa.cluster.hosts.WorkerIdentity` (from the environment).
        timeout_s: bound on every collective.
        device: ``run.device`` (cuda: the GPU of ``who.local_rank``, or of its rank on test hosts).
        remote: ``launch.remote`` (:func:`gpu_place`).

    Returns:
        The worker's :class:`Identity` (part = rank, local rank and host from ``who``).
    """
    # env:// reads these; under Slurm they may have been derived (first host, job-id port).
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = who.master_addr, str(who.master_port)
    slot, sharing = gpu_place(who, remote)
    select_device(device, slot)
    shared = device == "cuda" and gpus_shared(sharing)
    dist.init_process_group(
        backend_for(device, shared),
        init_method="env://",
        rank=who.rank,
        world_size=who.world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    return Identity(
        rank=who.rank,
        world_size=who.world_size,
        part=who.rank,
        local_rank=who.local_rank,
        host_index=who.host_index,
        gpu_slot=slot,
    )


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
    # torch 2.2's gloo worker thread frees the last finished work objects after the wait
    # returns, and freeing tensors made in Python needs the GIL; destroying the group joins
    # that thread while holding the GIL. That deadlocked after a clean end (seen with
    # py-spy) and after an error (a broadcast_object_list then destroy: 23 of 40 toy runs
    # hung). A short sleep releases the GIL so the worker thread finishes first (0 of 30
    # hung, also with both cores busy).
    time.sleep(0.2)
    dist.destroy_process_group()


class UserError(Exception):
    """Raised by a spawned worker for a user error (one line, e.g. a checkpoint that cannot be
    written): the launcher reports its message alone and does not restart the job."""


class WorkerFailed(JobFailed):
    """A spawned worker raised, died, or the job ran past its deadline.

    Attributes:
        rank: the first worker that failed (None: the deadline passed).
        exit_code: its exit status (negative: killed by that signal), None if it raised.
        timed_out: the job ran past its deadline (not a worker's death).
        stalled: the worker stopped answering (no heartbeat for run.peer_timeout_s); not retried.
        user_error: the one-line message of a worker's :class:`UserError`, else None.
    """

    def __init__(
        self,
        msg: str,
        rank: int | None = None,
        exit_code: int | None = None,
        timed_out: bool = False,
        user_error: str | None = None,
        stalled: bool = False,
    ):
        super().__init__(msg)
        self.rank, self.exit_code, self.timed_out, self.user_error = rank, exit_code, timed_out, user_error
        self.stalled = stalled

    @property
    def reason(self) -> str:
        """One line: which worker, how ("worker 1 was killed by SIGKILL")."""
        if self.timed_out or self.rank is None or self.stalled:
            return str(self).splitlines()[0]
        if self.exit_code is None:
            lines = [ln for ln in str(self).splitlines() if ln.strip()]
            return f"worker {self.rank} raised {lines[-1].strip() if lines else 'an exception'}"

        return f"worker {self.rank} {rc_text(self.exit_code)}"


def _kill_all(processes: list, timeout_s: float = 10.0) -> None:
    """SIGKILL every live process of the group by PID; reap each, waiting at most ``timeout_s`` in all."""
    # Reaped by join, not by psutil: join must see each exit status (spawn_workers reads it).
    kill_listed([p.pid for p in processes if p.is_alive()], timeout_s=None)
    deadline = time.monotonic() + timeout_s
    for p in processes:
        p.join(timeout=max(0.0, deadline - time.monotonic()))


def _beat(beats, rank: int, every_s: float) -> None:
    """The heartbeat thread of a worker: its slot in the shared array, stamped every ``every_s`` seconds."""
    while True:
        beats[rank] = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process of the machine
        time.sleep(every_s)


def _worker_entry(rank: int, fn: Callable, parent_pid: int, stoppable: bool, beats, beat_s: float, args: tuple) -> None:
    """A spawned worker's first frame: die with the launcher, take stop requests, beat, then ``fn``."""
    die_with_parent(parent_pid)
    if stoppable:
        catch_stop()
    if beats is not None:
        threading.Thread(target=_beat, args=(beats, rank, beat_s), name="dgl_grappa-heartbeat", daemon=True).start()
    fn(rank, *args)


class _Watch:
    """The launcher's view of the workers' heartbeats: which one stopped answering for longer than ``timeout_s``.

    A beat is stale when the launcher itself has watched it unchanged for that long: after a pause of
    the launcher (the whole job stopped with Ctrl-Z, say) the clock starts again for everyone.
    """

    def __init__(self, beats, timeout_s: float):
        self.beats, self.timeout_s = beats, timeout_s
        now = time.monotonic()
        self.last = [0.0] * len(beats)
        self.changed = [now] * len(beats)
        self.polled = now

    def stalled(self, procs: list) -> tuple[int, float] | None:
        """(rank, seconds without a beat) of the first live worker that stopped beating, else None."""
        now = time.monotonic()
        if now - self.polled > max(2.0, self.timeout_s / 2):  # the launcher was not running: start afresh
            self.changed = [now] * len(self.changed)
        self.polled = now
        for i, p in enumerate(procs):
            beat = self.beats[i]
            if beat != self.last[i]:
                self.last[i], self.changed[i] = beat, now
            elif beat > 0 and p.exitcode is None and now - self.changed[i] > self.timeout_s:
                return i, now - self.changed[i]
        return None


def spawn_workers(
    fn: Callable,
    nprocs: int,
    args: tuple,
    timeout_s: float,
    poll_s: float = 1.0,
    stop: StopSignals | None = None,
    peer_timeout_s: float = 0.0,
) -> None:
    """Run ``fn(rank, *args)`` in ``nprocs`` spawned processes and wait, at most timeout_s.

    The first worker that dies (any signal, any non-zero status) or raises ends the wait:
    the others are SIGKILLed by PID at once (a survivor would otherwise block in its next
    collective until the gloo timeout), and every join is bounded. Each worker dies with this
    process (``PR_SET_PDEATHSIG``), so not even a SIGKILL of the launcher leaves one behind.

    Args:
        fn: a top-level (picklable) function.
        nprocs: number of processes.
        args: extra arguments for fn.
        timeout_s: the whole job's bound; past it every worker is killed.
        stop: the launcher's :class:`~dgl_grappa.cluster.signals.StopSignals`: a stop signal is passed on
            to every worker (``fn`` reads :func:`~dgl_grappa.cluster.signals.stop_requested`), which
            get :data:`~dgl_grappa.cluster.signals.STOP_GRACE_S` to end before they are killed.
        peer_timeout_s: > 0: each worker stamps a heartbeat from a thread of its own, and one that
            stops stamping for this long (stopped, hung) is named, and the job ends.

    Raises:
        WorkerFailed: a worker raised (its traceback is in the message), exited non-zero,
            stopped answering, or the deadline passed. The other workers are killed first.
        Stopped: ``stop`` caught a signal; the workers ended (or were killed past the grace).
    """
    beats = mp.get_context("spawn").Array("d", nprocs, lock=False) if peer_timeout_s > 0 else None
    beat_s = max(0.2, min(2.0, peer_timeout_s / 5))
    ctx = mp.start_processes(
        _worker_entry,
        args=(fn, os.getpid(), stop is not None, beats, beat_s, args),
        nprocs=nprocs,
        join=False,
        start_method="spawn",
    )
    procs = ctx.processes
    log.info("workers started: %s", ", ".join(f"rank {i} pid {p.pid}" for i, p in enumerate(procs)))
    watch = _Watch(beats, peer_timeout_s) if beats is not None else None
    deadline = time.monotonic() + timeout_s
    stop_by = None  # the grace's end once a stop was passed on
    if stop is not None:
        stop.defer = True
    try:
        while True:
            mp_connection.wait([p.sentinel for p in procs if p.exitcode is None], timeout=poll_s)
            if stop is not None and stop.signum:
                if stop_by is None:
                    name = signal.Signals(stop.signum).name
                    log.warning(
                        "%s: asking every worker to stop at its next checkpointed step (at most %.0f s)",
                        name,
                        STOP_GRACE_S,
                    )
                    for p in procs:
                        if p.exitcode is None:
                            with contextlib.suppress(ProcessLookupError):
                                os.kill(p.pid, STOP_WORKER)
                    stop_by = time.monotonic() + STOP_GRACE_S
                if all(p.exitcode is not None for p in procs) or time.monotonic() > stop_by:
                    raise Stopped(f"stopped by {signal.Signals(stop.signum).name}", stop.signum)
                continue
            for i, p in enumerate(procs):
                if p.exitcode is None or p.exitcode == 0:
                    continue
                _kill_all(procs)
                queue = ctx.error_queues[i]
                if not queue.empty():
                    trace = queue.get()
                    last = [ln for ln in trace.splitlines() if ln.strip()][-1:] or [""]
                    marker = f"{UserError.__module__}.{UserError.__name__}: "
                    user = last[0][len(marker) :] if last[0].startswith(marker) else None
                    raise WorkerFailed(user or f"worker {i} failed:\n{trace}", rank=i, user_error=user)
                raise WorkerFailed(f"worker {i} {rc_text(p.exitcode)}", rank=i, exit_code=p.exitcode)
            if all(p.exitcode == 0 for p in procs):
                return
            late = watch.stalled(procs) if watch is not None else None
            if late is not None:
                rank, age = late
                _kill_all(procs)
                raise WorkerFailed(
                    f"worker {rank} (rank {rank} on host {socket.gethostname()}) stopped answering: "
                    f"no heartbeat for {age:.0f} s (run.peer_timeout_s={peer_timeout_s:g}); every "
                    "worker was killed and the job stopped",
                    rank=rank,
                    stalled=True,
                )
            if time.monotonic() > deadline:
                raise WorkerFailed(
                    f"the job ran past run.timeout_s={timeout_s:.0f}s; all workers were killed "
                    "(raise --run.timeout_s if the job is just slow)",
                    timed_out=True,
                )
    finally:
        if stop is not None:
            stop.defer = False
        _kill_all(procs)


def check_port_free(port: int, key: str, host: str = "127.0.0.1") -> None:
    """Raise a one-line ConfigError when ``port`` cannot be bound on ``host`` (``key`` names the setting)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                f"{key}={port}: port {port} on {host} is already in use ({exc.strerror}); pick another "
                f"port, or {key}=0 for a free one"
            ) from None


def set_threads(n: int) -> None:
    """Use ``n`` threads in this process: torch's intra-op pool and ``OMP_NUM_THREADS`` (read by
    the OpenMP code of DGL and METIS and inherited by the processes this one starts); the one
    place that sets both."""
    torch.set_num_threads(n)
    os.environ["OMP_NUM_THREADS"] = str(n)
