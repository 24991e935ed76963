"""Namespaces and links of test hosts: one host's namespaces, the job's bridge, the ``tc`` shaping.

Layout of one job (``<job>`` is a fresh 6-hex-digit id)::

    netns dgh-<job>            job-private: bridge br0 (no address) + one port h<i> per host
      |-- veth h<i> <-> eth0 --  netns dgh-<job>-h<i>: eth0 = 10.77.0.<i+1>/24, lo, no route out
                                 + a persistent mount namespace: private /dev/shm, a sysfs of
                                   its own network namespace, an /etc/hosts naming all hosts
                                 + a UTS namespace: hostname h<i>

The bridge lives in a namespace of its own, so the hosts reach each other and nothing
else (no default route, no address outside the subnet, no interface in the machine's
namespace). Each host's mount namespace gives DistDGL's shared-memory segments, which are
named after the graph and tensor only, a /dev/shm of their own. As on a real cluster, a
host's name resolves to its own address (gloo binds to whatever the hostname resolves to;
with the machine's name, 127.0.0.1, a cross-host rendezvous fails).

Links (:func:`shape`): per host, a ``tc tbf`` on both ends of its veth (host end = upload,
bridge end = download), so every host has its own full-duplex NIC; or, with
``shared_link=True``, every packet that enters the bridge is redirected through one shaped
``ifb`` device: the whole cluster shares one link, as the one-loopback mode of
:mod:`dgl_grappa.cluster.netns` does. A delay needs the netem qdisc (:func:`netem_available`).

Example:
    >>> build("dgh-1a2b3c", hosts, prefixlen=24, shm_size="4g")             # doctest: +SKIP
    >>> shape("dgh-1a2b3c", hosts, "1gbit", latency_ms=0.0, shared_link=False)  # doctest: +SKIP
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import dgl_grappa.cluster.testhosts.cgroups as _cg  # the module: tests stand in for its probes

from ..netns import rate_bits
from .base import NETNS_DIR, STATE_DIR, TIMEOUT_S, TestHostsError, batch, run


@dataclass
class Host:
    """One emulated host: its address and how to run a command inside it.

    Attributes:
        index: position in the job (0-based).
        address: its IPv4 address on the job's bridge.
        name: its hostname inside it ("h<i>"; every host's /etc/hosts resolves all of them).
        netns: name of its network namespace (``ip -n <netns> ...``).
        mnt: file that pins its mount namespace (private /dev/shm); ``mnt.with_suffix(".uts")``
            pins its UTS namespace (hostname).
        cgroup_dirs: its cpu and cpuset cgroups (CPU shares), or () without CPU shares.
    """

    index: int
    address: str
    name: str
    netns: str
    mnt: Path
    cgroup_dirs: tuple[str, ...] = ()
    _procs: list = field(default_factory=list, repr=False)

    def prefix(self) -> list[str]:
        """argv prefix that runs a command inside this host (its cgroups, network + mount namespace).

        The command keeps the caller's environment and working directory, and its PID.

        Returns:
            e.g. ``["nsenter", "--net=/run/netns/dgh-1a2b3c-h0", "--mount=...", "--wd=.", "--"]``,
            after :func:`dgl_grappa.cluster.testhosts.cgroups.join_prefix` with CPU shares.

        Example:
            >>> subprocess.run(hosts[0].prefix() + ["ip", "addr"], timeout=10)  # doctest: +SKIP
        """
        # The cgroups are joined before nsenter: the host's own /sys hides the cgroup mounts.
        return (_cg.join_prefix(self.cgroup_dirs) if self.cgroup_dirs else []) + [
            "nsenter",
            f"--net={NETNS_DIR / self.netns}",
            f"--mount={self.mnt}",
            f"--uts={self.mnt.with_suffix('.uts')}",
            "--wd=.",
            "--",
        ]

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        """Start ``argv`` inside this host; it is killed when the hosts are torn down.

        Args:
            argv: the command.
            **kwargs: passed to :class:`subprocess.Popen` (env, cwd, stdout, ...).

        Returns:
            The Popen of the command itself (the cgroup wrapper and nsenter exec it: same PID).
        """
        p = subprocess.Popen(self.prefix() + list(argv), **kwargs)
        self._procs.append(p)
        return p

    def run(self, argv: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
        """Run ``argv`` inside this host to completion (bounded by ``timeout`` seconds).

        Returns:
            The CompletedProcess (``check``, ``capture_output`` etc. as in subprocess.run).
        """
        return subprocess.run(self.prefix() + list(argv), timeout=timeout, **kwargs)

    def kill_started(self) -> None:
        """Kill what :meth:`popen` started and reap it (bounded)."""
        for p in self._procs:
            if p.poll() is None:
                p.kill()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


# ---------------------------------------------------------------------------------------
# Namespaces
# ---------------------------------------------------------------------------------------


def build(jobns: str, hosts: list[Host], prefixlen: int, shm_size: str) -> None:
    """Make the job's namespaces: the bridge's, and each host's network, mount and UTS namespaces.

    Args:
        jobns: the bridge's namespace (``dgh-<job>``).
        hosts: the hosts, their ``mnt`` files in the job's state dir.
        prefixlen: the subnet's prefix length.
        shm_size: each host's /dev/shm tmpfs size, e.g. "4g".
    """
    jobdir = hosts[0].mnt.parent
    (jobdir / "hosts").write_text(
        "127.0.0.1 localhost\n::1 localhost\n" + "".join(f"{h.address} {h.name}\n" for h in hosts)
    )
    batch(None, "ip", [f"netns add {jobns}"] + [f"netns add {h.netns}" for h in hosts])
    lines = ["link set lo up", "link add br0 type bridge", "link set br0 up"]
    for h in hosts:
        lines += [
            f"link add h{h.index} type veth peer name eth0 netns {h.netns}",
            f"link set h{h.index} master br0",
            f"link set h{h.index} up",
        ]
    batch(jobns, "ip", lines)
    for h in hosts:
        batch(h.netns, "ip", ["link set lo up", f"addr add {h.address}/{prefixlen} dev eth0", "link set eth0 up"])
        _make_mount_ns(h, shm_size)


def _make_mount_ns(h: Host, shm_size: str) -> None:
    # A persistent mount namespace (pinned by a bind mount of its ns file) made from
    # inside the host's network namespace, so its fresh sysfs shows the host's
    # interfaces. The copies of /run/netns and of our state dir are detached in it: a
    # host must not pin the other hosts' namespaces.
    uts = h.mnt.with_suffix(".uts")
    h.mnt.touch()
    uts.touch()
    script = (
        f"mount -t tmpfs -o size={shm_size},mode=1777 tmpfs /dev/shm && "
        f"mount -t sysfs sysfs /sys && mount --bind {h.mnt.parent / 'hosts'} /etc/hosts && "
        f"hostname {h.name} && {{ umount -R -l {STATE_DIR} {NETNS_DIR} 2>/dev/null; true; }}"
    )
    run(
        [
            "nsenter",
            f"--net={NETNS_DIR / h.netns}",
            "unshare",
            f"--mount={h.mnt}",
            f"--uts={uts}",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
        ]
    )


# ---------------------------------------------------------------------------------------
# Links
# ---------------------------------------------------------------------------------------


def netem_available() -> bool:
    """True when this kernel has the netem qdisc (probed in a throw-away network namespace)."""
    p = subprocess.run(
        ["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
        capture_output=True,
        timeout=TIMEOUT_S,
    )
    return p.returncode == 0


def check_link(bandwidth: str | None, latency_ms: float, has_netem: Callable[[], bool]) -> None:
    """A one-line :class:`TestHostsError` for a link that cannot be emulated (``has_netem`` asked only for a delay)."""
    if bandwidth:
        try:
            rate_bits(bandwidth)
        except ValueError as exc:
            raise TestHostsError(str(exc)) from None
    if latency_ms < 0:
        raise TestHostsError(f"latency_ms={latency_ms} must be >= 0")
    if latency_ms > 0 and not has_netem():
        raise TestHostsError(
            f"latency_ms={latency_ms} needs the netem qdisc, which this kernel lacks "
            "(CONFIG_NET_SCH_NETEM); set latency_ms=0 or use a kernel with netem"
        )


def _burst(rate: str) -> int:
    # As in netns._shape: at least one 64 KiB GSO segment and ~4 ms of traffic, or tbf
    # drops packets instead of delaying them.
    return max(256 * 1024, int(rate_bits(rate) / 8 / 250))


def _qdisc_lines(dev: str, rate: str | None, delay_ms: float) -> list[str]:
    """tc batch lines that shape ``dev``'s egress: netem (delay) above tbf (rate)."""
    tbf = f"tbf rate {rate} burst {_burst(rate)} latency 100ms" if rate else ""
    if delay_ms > 0:
        lines = [f"qdisc add dev {dev} root handle 1: netem delay {delay_ms}ms"]
        return lines + ([f"qdisc add dev {dev} parent 1:1 handle 10: {tbf}"] if tbf else [])
    return [f"qdisc add dev {dev} root {tbf}"] if tbf else []


def shape(jobns: str, hosts: list[Host], bandwidth: str | None, latency_ms: float, shared_link: bool) -> None:
    """Replace the qdiscs of every host's link (no bandwidth and no delay: unshaped).

    Args:
        jobns: the bridge's namespace.
        hosts: the job's hosts.
        bandwidth: tc rate per host and direction, or of the one shared link (as the qdiscs run it).
        latency_ms: one-way host-to-host delay (per-host mode: half on each end).
        shared_link: one shaped link for all hosts instead of one per host.
    """
    # Clear first; tc -force keeps going past "nothing to delete".
    run(
        ["tc", "-n", jobns, "-force", "-batch", "-"],
        check=False,
        input="".join(f"qdisc del dev h{h.index} root\nqdisc del dev h{h.index} ingress\n" for h in hosts),
    )
    run(["ip", "-n", jobns, "link", "del", "ifb0"], check=False)
    for h in hosts:
        run(["tc", "-n", h.netns, "qdisc", "del", "dev", "eth0", "root"], check=False)
    if shared_link and (bandwidth or latency_ms):
        # Every frame entering the bridge takes one trip through ifb0's queue (ifb sends
        # it back to the bridge after), so the hosts share that queue's rate.
        batch(jobns, "ip", ["link add ifb0 type ifb", "link set ifb0 up"])
        lines = _qdisc_lines("ifb0", bandwidth, latency_ms)
        for h in hosts:
            lines += [
                f"qdisc add dev h{h.index} ingress",
                f"filter add dev h{h.index} parent ffff: protocol all u32 match u32 0 0 "
                "action mirred egress redirect dev ifb0",
            ]
        batch(jobns, "tc", lines)
    elif bandwidth or latency_ms:
        batch(jobns, "tc", [ln for h in hosts for ln in _qdisc_lines(f"h{h.index}", bandwidth, latency_ms / 2)])
        for h in hosts:
            batch(h.netns, "tc", _qdisc_lines("eth0", bandwidth, latency_ms / 2))
