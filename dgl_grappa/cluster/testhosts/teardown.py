"""Teardown of test hosts: the one place that removes what a job made, on every way out.

A job's namespaces, mounts, cgroups and files are named after its id and removed by
:func:`teardown`: when its :class:`~dgl_grappa.cluster.testhosts.TestHosts` closes (context
exit, atexit, SIGTERM/SIGHUP turned into SystemExit: :func:`track`), and, for a job whose
owner died without cleaning up (SIGKILL), by :func:`sweep_stale` at the start of the next
job. The owner record :func:`claim` writes first tells a live job from a stale one.

Example:
    >>> sweep_stale()            # the jobs of owners that died without cleaning up   # doctest: +SKIP
    ['1a2b3c']
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import shutil
import signal
import threading
import time
import weakref
from pathlib import Path

import psutil

import dgl_grappa.cluster.testhosts.cgroups as _cg  # the module: tests stand in for its probes

from ..ptree import kill_listed
from .base import JOB_RE, NAME_PREFIX, NETNS_DIR, STATE_DIR, run

log = logging.getLogger("dgl_grappa")

_LOCK = Path("/run/lock/dgl_grappa-testhosts.lock")


def _ns_inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _pids_in(namespaces: set[int]) -> list[int]:
    """PIDs of live processes whose network or mount namespace is one of these inodes."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if {os.stat(d / "ns" / "net").st_ino, os.stat(d / "ns" / "mnt").st_ino} & namespaces:
                out.append(int(d.name))
        except OSError:  # gone, or a zombie (its ns links cannot be read)
            continue
    return out


def owner_alive(job: str) -> bool:
    """True while the process that made ``job`` runs (the same process, not a reused PID)."""
    try:
        pid, started = (STATE_DIR / job / "owner").read_text().split()
        owner = psutil.Process(int(pid))
        # Same PID and start time (not a reused PID), and not a zombie waiting to be reaped.
        return abs(owner.create_time() - float(started)) < 1.0 and owner.status() != psutil.STATUS_ZOMBIE
    except (OSError, ValueError, psutil.Error):
        return False


def _list_netns() -> list[str]:
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir())
    except OSError:
        return []


def teardown(job: str) -> None:
    """Kill every process inside the job's namespaces and cgroups, then remove namespaces,
    mounts, cgroups and files.

    Idempotent; also used for stale jobs whose owner died.
    """
    names = [n for n in _list_netns() if n == NAME_PREFIX + job or n.startswith(f"{NAME_PREFIX}{job}-")]
    jobdir = STATE_DIR / job
    mnts = sorted(jobdir.glob("h*.mnt")) + sorted(jobdir.glob("h*.uts")) if jobdir.is_dir() else []
    inodes = {i for i in [_ns_inode(NETNS_DIR / n) for n in names] + [_ns_inode(m) for m in mnts] if i}
    cgroup_dirs = _cg.named(f"{NAME_PREFIX}{job}-h")
    # The namespaces live on while any process is inside: kill them first (ours, by PID).
    # A process in a host's cgroups but not (yet) in its namespaces is killed with them.
    deadline = time.monotonic() + 10.0
    while (inodes or cgroup_dirs) and time.monotonic() < deadline:
        pids = sorted(set(_pids_in(inodes) if inodes else []) | set(_cg.pids(cgroup_dirs)))
        if not pids:
            break
        # No wait here: a killed process stays a zombie until its parent reaps it, and the
        # next listing skips zombies; new ones (forked meanwhile) are caught by the next pass.
        kill_listed(pids, timeout_s=None)
        time.sleep(0.05)
    for m in mnts:
        run(["umount", str(m)], check=False)
        m.unlink(missing_ok=True)
    # Hosts first, the bridge's namespace last (deleting it also removes the bridge ends).
    for n in sorted(names, key=lambda n: (n == NAME_PREFIX + job, n)):
        run(["ip", "netns", "del", n], check=False)
    try:
        left = _cg.remove(cgroup_dirs)
    except _cg.CgroupError as exc:
        left = [str(exc)]
    if left:  # the rest is removed all the same; the next sweep tries these again
        log.warning("test hosts %s: could not remove the cgroups %s", job, " ".join(left))
    shutil.rmtree(jobdir, ignore_errors=True)
    _release_dirs()


@contextlib.contextmanager
def _dirs_lock():
    # Jobs of several processes set up and release the shared dirs; one at a time, or two
    # could stack bind mounts, or one could unmount the dir another just made.
    _LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(_LOCK, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _release_dirs() -> None:
    # Leave nothing behind once no job is left: our state dir's bind mount, and /run/netns
    # when no named namespace is left (a non-empty or busy one is someone else's: kept).
    with _dirs_lock():
        if STATE_DIR.is_dir() and not any(STATE_DIR.iterdir()):
            run(["umount", str(STATE_DIR)], check=False)
            try:
                STATE_DIR.rmdir()
                STATE_DIR.parent.rmdir()
            except OSError:
                pass
        if NETNS_DIR.is_dir() and not any(NETNS_DIR.iterdir()):
            if run(["umount", str(NETNS_DIR)], check=False).returncode == 0:
                try:
                    NETNS_DIR.rmdir()
                except OSError:
                    pass


def claim(job: str) -> Path:
    """Make the job's state dir with its owner record (this process); returns the dir.

    The record comes before anything else of the job: a crash from here on leaves a job
    that :func:`sweep_stale` removes.
    """
    jobdir = STATE_DIR / job
    with _dirs_lock():
        # unshare --mount=FILE needs FILE on a private mount (else the bind mount would
        # propagate into the namespace it pins); make STATE_DIR one, as ip does for /run/netns.
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        if run(["mountpoint", "-q", str(STATE_DIR)], check=False).returncode != 0:
            run(["mount", "--bind", str(STATE_DIR), str(STATE_DIR)])
        run(["mount", "--make-private", str(STATE_DIR)])
        jobdir.mkdir()
        (jobdir / "owner").write_text(f"{os.getpid()} {psutil.Process().create_time()}\n")
    return jobdir


def sweep_stale() -> list[str]:
    """Remove the leftovers of test-host jobs whose owning process is gone.

    Returns:
        The ids of the jobs removed (a job of a live process is never touched).
    """
    jobs = {m.group(1) for n in _list_netns() if (m := JOB_RE.match(n))}
    jobs |= {m.group(1) for d in _cg.named(NAME_PREFIX) if (m := JOB_RE.match(Path(d).name))}
    if STATE_DIR.is_dir():
        jobs |= {d.name for d in STATE_DIR.iterdir() if d.is_dir()}
    stale = sorted(j for j in jobs if not owner_alive(j))
    for job in stale:
        teardown(job)
    return stale


# ---------------------------------------------------------------------------------------
# Closing on exit and on SIGTERM / SIGHUP
# ---------------------------------------------------------------------------------------

_LIVE: weakref.WeakSet = weakref.WeakSet()
_HANDLERS_SET = False


def _close_all() -> None:
    for h in list(_LIVE):
        h.close()


def _exit_on_signal(signum, frame):
    # SystemExit unwinds every `with TestHosts(...)` block (and atexit runs after it).
    raise SystemExit(128 + signum)


def track(hosts) -> None:
    """Close ``hosts`` (anything with ``close()``) at exit and on SIGTERM / SIGHUP, until :func:`untrack`."""
    global _HANDLERS_SET
    if not _HANDLERS_SET:
        _HANDLERS_SET = True
        atexit.register(_close_all)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGHUP):
                if signal.getsignal(sig) in (signal.SIG_DFL, None):  # never replace the app's own
                    signal.signal(sig, _exit_on_signal)
    _LIVE.add(hosts)


def untrack(hosts) -> None:
    """Forget ``hosts`` (closed)."""
    _LIVE.discard(hosts)
