"""Killing processes by PID: the one implementation that the launchers, the guard and the test hosts call.

Every kill here is SIGKILL (a job's processes get no say in whether they stop), sent to a
set of processes listed *before* any of them is signalled: a death that takes others with
it (``PR_SET_PDEATHSIG``) or re-parents them cannot hide one from the list. Every wait is
bounded.

Free of heavy imports (stdlib and psutil only), like :mod:`dgl_grappa.cluster.guard`, which
imports it on remote hosts before torch or DGL are importable.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import time
from typing import Iterable

import psutil

from ..env import ENV_JOB  # import-free, like this module

_PR_SET_PDEATHSIG = 1


def kill_with_parent(parent_pid: int | None = None) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux ``prctl``; kept across exec).

    Safe between fork and exec (a ``preexec_fn``). With ``parent_pid``: exit now if that parent is already
    gone (it died before the request took effect).
    """
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)


def kill_listed(procs: Iterable, timeout_s: float | None = 10.0) -> int:
    """SIGKILL processes listed beforehand, all of them, then wait for them to go.

    Args:
        procs: ``psutil.Process`` objects or PIDs; those already gone are skipped.
        timeout_s: bound on waiting for them to die (:func:`wait_dead`, which reaps our own
            children). None: do not wait, for a caller that reaps them itself
            (multiprocessing's ``join`` would never see an exit status psutil had reaped).

    Returns:
        How many were signalled.
    """
    listed = []
    for p in procs:
        try:
            listed.append(p if isinstance(p, psutil.Process) else psutil.Process(p))
        except psutil.NoSuchProcess:
            pass
    sent = []
    for p in listed:
        try:
            p.send_signal(signal.SIGKILL)  # psutil refuses a PID reused since it was listed
            sent.append(p)
        except psutil.NoSuchProcess:
            pass
    if timeout_s is not None:
        wait_dead(sent, timeout_s)
    return len(sent)


def wait_dead(procs: list, timeout_s: float) -> list:
    """Wait, at most ``timeout_s``, until none of ``procs`` runs any more; those that still do.

    A process is done when it is gone (our own children are reaped on the way) or when it
    is a zombie that another process must reap: an init that reaps late (or never, in
    some containers) must not stretch every kill to its full bound.
    """
    deadline = time.monotonic() + timeout_s
    left = list(procs)
    while left:
        _, left = psutil.wait_procs(left, timeout=max(0.0, min(0.05, deadline - time.monotonic())))
        left = [p for p in left if not _zombie_of_another(p)]
        if time.monotonic() >= deadline:
            break
    return left


def _zombie_of_another(p) -> bool:
    try:
        return p.status() == psutil.STATUS_ZOMBIE and p.ppid() != os.getpid()
    except psutil.NoSuchProcess:
        return True


def _tree(pid: int) -> tuple[list, list]:
    """``([root], descendants)`` of a live process, or ``([], [])`` when it is gone."""
    try:
        root = psutil.Process(pid)
        return [root], root.children(recursive=True)
    except psutil.NoSuchProcess:
        return [], []


def kill_tree(pid: int, include_self: bool = True, group: bool = False, timeout_s: float = 10.0) -> int:
    """SIGKILL a process and all its descendants, by PID, and wait for them (bounded).

    Args:
        pid: root of the tree (it must still be alive: a reaped PID may be someone else's).
        include_self: kill ``pid`` itself too (False: only its descendants).
        group: also SIGKILL process group ``pid`` (the root leads one, e.g. started with
            ``start_new_session=True``): it catches what was re-parented away from the tree.
        timeout_s: bound on waiting for them to disappear.

    Returns:
        Number of processes signalled through the tree (the group's are not counted).
    """
    root, descendants = _tree(pid)
    procs = descendants + (root if include_self else [])
    n = kill_listed(procs, timeout_s=None)
    if group:
        kill_group(pid)
    wait_dead(procs, timeout_s)
    return n


def kill_group(pgid: int) -> None:
    """SIGKILL process group ``pgid``, if it still has members (a group id is not reused while they live)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_session(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """Kill a child started with ``start_new_session=True``: its tree, itself and its process group; reap it.

    The tree is walked only while the child is alive (after it has been reaped its PID
    could belong to someone else); the group (id = the child's PID) catches whatever is
    left, e.g. processes re-parented away from the tree, or all of it once the child is gone.
    The child itself is reaped by ``proc.wait`` (not by psutil), so ``proc.returncode`` is
    its real status.
    """
    root, descendants = _tree(proc.pid) if proc.poll() is None else ([], [])
    kill_listed(descendants + root, timeout_s=None)
    kill_group(proc.pid)
    wait_dead(descendants, timeout_s)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pass


def job_processes(job: str) -> list:
    """Live processes on this host (this one and zombies excluded) whose environment carries ``DGL_GRAPPA_JOB=job``."""
    out = []
    for p in psutil.process_iter(["pid"]):
        if p.pid == os.getpid():
            continue
        try:
            if p.status() != psutil.STATUS_ZOMBIE and p.environ().get(ENV_JOB) == job:
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return out


def kill_job(job: str, timeout_s: float = 10.0) -> int:
    """SIGKILL every process on this host whose environment carries ``DGL_GRAPPA_JOB=job``.

    Returns:
        How many were signalled (this process excluded).
    """
    return kill_listed(job_processes(job), timeout_s=timeout_s)
