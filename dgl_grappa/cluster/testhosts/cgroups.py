"""CPU shares of test hosts: one cgroup v1 pair (``cpu`` and ``cpuset``) per host.

Layout of one host (``<name>`` is the host's namespace name, ``dgh-<job>-h<i>``)::

    <cpuset mount>/<name>   cpuset.cpus = the host's cores, cpuset.mems = the parent's
    <cpu mount>/<name>      cpu.cfs_period_us / cpu.cfs_quota_us = its share of a core (or no quota)

The numbers come from :func:`dgl_grappa.cluster.testhosts.dilation.plan_host_cpus`. A command joins
its host's cgroups through the argv prefix of :func:`join_prefix`: a ``sh`` writes its own
PID into both ``cgroup.procs`` and then ``exec``s the rest of the command (the host's
``nsenter`` prefix), so the command, with the same PID, and everything it forks run in
the cgroups from their first instruction; a failed write stops the command with the
shell's message instead of running it unconfined. The prefix is part of
:meth:`dgl_grappa.cluster.testhosts.Host.prefix`, which every launcher path uses (Popen,
run, the ``netns`` remote of :mod:`dgl_grappa.cluster.remote`).

The cgroups sit at the top of each hierarchy, named after the job, so that the stale-job
sweep of :mod:`dgl_grappa.cluster.testhosts.teardown` finds them whatever cgroup its own process is
in; :func:`remove` kills what is left in them and removes them (the one teardown of the
job calls it). Needs root and the v1 ``cpu`` (with CFS bandwidth control) and ``cpuset``
controllers mounted; :func:`problem` says what is missing.

Example:
    >>> dirs = create("dgh-1a2b3c-h0", HostCpus("0"))                       # doctest: +SKIP
    >>> subprocess.run(join_prefix(dirs) + ["cat", "/proc/self/cgroup"], timeout=10)  # doctest: +SKIP
    >>> remove(dirs)                                                           # doctest: +SKIP
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

from ..netns import IsolationError
from ..ptree import kill_listed
from .dilation import HostCpus, parse_cpu_list

MOUNTS = Path("/proc/self/mounts")


class CgroupError(IsolationError):
    """A cgroup could not be made, set or removed (one line: which file, and why)."""


def _mount_of(controller: str) -> Path | None:
    """Mount point of the cgroup v1 hierarchy that holds ``controller`` (None: not mounted)."""
    try:
        lines = MOUNTS.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "cgroup" and controller in fields[3].split(","):
            return Path(fields[1])
    return None


def roots() -> tuple[Path | None, Path | None]:
    """Mount points of the v1 ``cpu`` and ``cpuset`` hierarchies (None where not mounted)."""
    return _mount_of("cpu"), _mount_of("cpuset")


def problem() -> str | None:
    """Why CPU shares cannot be given here, or None if they can.

    Returns:
        None, or one line naming what is missing (root, a controller, CFS bandwidth control).
    """
    if os.geteuid() != 0:
        return "CPU shares of test hosts need root (cgroups); run as root"
    cpu, cpuset = roots()
    missing = [n for n, r in (("cpu", cpu), ("cpuset", cpuset)) if r is None]
    if missing:
        return (
            f"CPU shares of test hosts need the cgroup v1 {' and '.join(missing)} controller"
            f"{'s' if len(missing) > 1 else ''} mounted (e.g. at /sys/fs/cgroup/{missing[0]}); this machine "
            "does not have it (cgroup v2 alone is not supported)"
        )
    if not (cpu / "cpu.cfs_quota_us").exists():
        return f"CPU shares of test hosts need CFS bandwidth control ({cpu}/cpu.cfs_quota_us is missing)"
    for r in (cpu, cpuset):
        if not os.access(r, os.W_OK):
            return f"CPU shares of test hosts need to create cgroups in {r}, which is read-only here"
    return None


def usable_cpus() -> list[int]:
    """Cores test hosts may be given: this process's affinity, within the top cpuset's cores."""
    cpus = set(os.sched_getaffinity(0))
    _, cpuset = roots()
    if cpuset is not None:
        try:
            cpus &= set(parse_cpu_list((cpuset / "cpuset.effective_cpus").read_text()))
        except (OSError, ValueError):
            pass
    return sorted(cpus)


def _write(path: Path, value: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError as exc:
        raise CgroupError(f"writing {value!r} to {path} failed: {exc.strerror or exc}") from None


def create(name: str, host: HostCpus) -> tuple[str, str]:
    """Make one host's cgroups (``cpu`` and ``cpuset``, named ``name``) and set its share.

    Returns:
        (cpu dir, cpuset dir), for :func:`join_prefix` and :func:`remove`. A partly made
        pair is left for the caller's :func:`remove` (a retry of the same name fails).
    """
    cpu_root, cpuset_root = roots()
    if cpu_root is None or cpuset_root is None:
        raise CgroupError(problem() or "the cgroup v1 cpu and cpuset controllers are not mounted")
    cpu, cpuset = cpu_root / name, cpuset_root / name
    for d in (cpu, cpuset):
        try:
            d.mkdir()
        except OSError as exc:
            raise CgroupError(f"creating the cgroup {d} failed: {exc.strerror or exc}") from None
    # A cpuset takes no task before both its cpus and mems are set; mems as the parent's.
    _write(cpuset / "cpuset.mems", (cpuset_root / "cpuset.mems").read_text().strip())
    _write(cpuset / "cpuset.cpus", host.cpus)
    _write(cpu / "cpu.cfs_period_us", str(host.period_us))
    _write(cpu / "cpu.cfs_quota_us", str(host.quota_us))
    return str(cpu), str(cpuset)


def join_prefix(dirs: tuple[str, ...] | list[str]) -> list[str]:
    """argv prefix that runs the rest of the command inside these cgroups (same PID).

    Example:
        >>> p = join_prefix(["/sys/fs/cgroup/cpu/x", "/sys/fs/cgroup/cpuset/x"])
        >>> p[:2], p[3:]
        (['sh', '-c'], ['dgh-cgroup', '/sys/fs/cgroup/cpu/x', '/sys/fs/cgroup/cpuset/x', '--'])
    """
    script = (
        'for d in "$@"; do [ "$d" = -- ] && break; echo $$ > "$d/cgroup.procs" || exit 126; shift; done; '
        'shift; exec "$@"'
    )
    return ["sh", "-c", script, "dgh-cgroup", *dirs, "--"]


def named(prefix: str) -> list[str]:
    """Every cgroup (in either hierarchy) whose name starts with ``prefix``, e.g. "dgh-" or "dgh-1a2b3c-h"."""
    out = []
    for r in roots():
        if r is None:
            continue
        try:
            out += [str(d) for d in sorted(r.iterdir()) if d.is_dir() and d.name.startswith(prefix)]
        except OSError:
            continue
    return out


def pids(dirs: list[str]) -> list[int]:
    """PIDs of the processes in these cgroups (a cgroup already gone has none)."""
    out: set[int] = set()
    for d in dirs:
        try:
            out.update(int(x) for x in Path(d, "cgroup.procs").read_text().split())
        except (OSError, ValueError):
            continue
    out.discard(os.getpid())
    return sorted(out)


def remove(dirs: list[str], timeout_s: float = 10.0) -> list[str]:
    """Remove these cgroups, killing any process still in them; bounded by ``timeout_s``.

    Returns:
        The cgroups that could not be removed in time (normally none).
    """
    left = [d for d in dirs if Path(d).is_dir()]
    deadline = time.monotonic() + timeout_s
    while left:
        busy = pids(left)
        if busy:
            kill_listed(busy, timeout_s=None)  # reaped by their parents; rmdir waits below
        still = []
        for d in left:
            try:
                os.rmdir(d)
            except FileNotFoundError:
                pass
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    raise CgroupError(f"removing the cgroup {d} failed: {exc.strerror or exc}") from None
                still.append(d)
        left = still
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return left
