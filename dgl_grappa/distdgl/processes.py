"""Processes of a job: the job tag, killing process trees and groups, reaping orphans, exit texts."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

ENV_JOB = "DGL_GRAPPA_JOB"
"""Every process of a job carries this tag (a fresh id per job): tests use it to prove that
nothing outlived the job."""


def kill_tree(pid: int, include_self: bool = True, timeout_s: float = 10.0) -> int:
    """SIGKILL a process and all its descendants, by PID, and reap them.

    The descendants are listed first (while their parents still exist), then everybody
    is killed at once, so no child escapes by being re-parented mid-way.

    Args:
        pid: root of the tree.
        include_self: kill ``pid`` itself too (False: only its descendants).
        timeout_s: bound on waiting for them to disappear.

    Returns:
        Number of processes signalled.
    """
    import psutil

    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    if include_self:
        procs.append(root)
    for p in procs:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=timeout_s)
    return len(procs)


def kill_group_and_tree(proc: subprocess.Popen) -> None:
    """Kill a child started with ``start_new_session=True``: its tree and its process group.

    The tree is walked only while the child is alive (after it has been reaped its PID
    could belong to someone else); the group (id = the child's PID) catches whatever is
    left, e.g. processes re-parented away from the tree.
    """
    if proc.poll() is None:
        kill_tree(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def processes_of_job(job: str) -> list[int]:
    """PIDs of live processes whose environment carries ``DGL_GRAPPA_JOB=job``."""
    import psutil

    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            if p.environ().get(ENV_JOB) == job:
                out.append(p.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return out


def _set_subreaper() -> None:
    # Orphans of our children (e.g. DGL sampler processes of a killed trainer) are then
    # re-parented to us, so kill_tree(os.getpid()) still finds them.
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _tail(path: Path, n: int = 15) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join("    " + ln for ln in lines[-n:])


def _rc_text(rc: int) -> str:
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited with status {rc}"
