"""What every part of the test hosts shares: their names and places, their error, and running ip, tc and mount.

Example:
    >>> check_hosts_possible() is None or "root" in check_hosts_possible()    # doctest: +SKIP
    True
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from ..netns import IsolationError

NAME_PREFIX = "dgh-"
"""Network namespaces of test hosts are named ``dgh-<job>`` (bridge) and ``dgh-<job>-h<i>``; a
host's cgroups (CPU shares) are named like its namespace."""
STATE_DIR = Path("/run/dgl_grappa/testhosts")
"""``<job>/owner`` (pid and start time of the owning process), ``<job>/h<i>.mnt`` and
``<job>/h<i>.uts`` (persistent mount and UTS namespaces), ``<job>/hosts`` (their /etc/hosts).
A private bind mount, as mount-namespace files require."""
NETNS_DIR = Path("/run/netns")
TIMEOUT_S = 30.0
"""Bound on every ip, tc, mount or nsenter command the test hosts run."""
JOB_RE = re.compile(re.escape(NAME_PREFIX) + r"([0-9a-f]+)(?:-h[0-9]+)?$")
"""A test-host namespace or cgroup name; group 1 is its job's id."""


class TestHostsError(IsolationError):
    """Test hosts cannot be made or used here (the message says why and what to do)."""

    __test__ = False


def run(
    argv: list[str], *, input: str | None = None, check: bool = True, timeout: float = TIMEOUT_S
) -> subprocess.CompletedProcess:
    """Run a system command, bounded; with ``check`` a failure is a one-line :class:`TestHostsError`."""
    try:
        p = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TestHostsError(f"'{' '.join(argv)}' did not finish in {timeout:.0f} s") from None
    if check and p.returncode != 0:
        err = " ".join((p.stderr or p.stdout).split()) or f"status {p.returncode}"
        raise TestHostsError(f"'{' '.join(argv)}' failed: {err}")
    return p


def batch(ns: str | None, tool: str, lines: list[str]) -> None:
    """Run ip or tc commands (one per line) in network namespace ``ns`` (None: this one)."""
    # One ip/tc process per namespace instead of one per command (ip -batch is iproute2's own).
    if lines:
        run([tool] + (["-n", ns] if ns else []) + ["-batch", "-"], input="\n".join(lines) + "\n")


def check_hosts_possible() -> str | None:
    """Why test hosts cannot be made here, or None if they can.

    Returns:
        None, or one line naming what is missing (root, ip/tc, nsenter/unshare).
    """
    if os.geteuid() != 0:
        return "test hosts need root (network and mount namespaces, veth, tc); run as root"
    for tool, pkg in (
        ("ip", "iproute2"),
        ("tc", "iproute2"),
        ("nsenter", "util-linux"),
        ("unshare", "util-linux"),
        ("mount", "mount"),
    ):
        if shutil.which(tool) is None:
            return f"test hosts need the {tool} command; install it, e.g. apt-get install -y {pkg}"
    return None
