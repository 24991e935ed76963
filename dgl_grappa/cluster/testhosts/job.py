"""One job's test hosts: :class:`TestHosts`, which makes them, shapes their links and removes them.

How the parts fit: :mod:`.namespaces` makes the namespaces and shapes the links,
:mod:`.shares` gives the hosts their CPU shares and decides the time dilation,
:mod:`.counters` reads the hosts' byte counters and :mod:`.teardown` removes everything,
on every way out. Needs root, iproute2 and util-linux.

Example:
    >>> with TestHosts(2, bandwidth="1gbit") as hosts:                       # doctest: +SKIP
    ...     srv = hosts[1].popen(["python", "-m", "http.server", "8000"])
    ...     hosts[0].run(["curl", f"http://{hosts[1].address}:8000/"], timeout=10)
    ...     print(hosts.wire_bytes())
"""

from __future__ import annotations

import ipaddress
import re
import secrets

from .base import NAME_PREFIX, TestHostsError, check_hosts_possible
from .counters import wire_bytes as host_wire_bytes
from .dilation import CFS_PERIOD_US, HostCpus, dilated_latency_ms, dilated_rate, parse_cpu_list, parse_dilation
from .namespaces import Host, check_link, netem_available
from .namespaces import build as build_hosts
from .namespaces import shape as shape_links
from .shares import share_cpus
from .teardown import claim as claim_job
from .teardown import sweep_stale, track, untrack
from .teardown import teardown as teardown_hosts


class TestHosts:
    """``n`` emulated hosts joined by a bridge, each on its own (optionally shaped) link.

    Args:
        n: number of hosts (1-254).
        bandwidth: tc rate of each host's link in each direction (e.g. "1gbit"); None or
            "" = unshaped.
        latency_ms: one-way delay between two hosts (needs netem); 0 = none.
        shared_link: all hosts share one link of ``bandwidth`` instead of one link each.
        subnet: the hosts' IPv4 subnet; host i gets its (i+1)-th address.
        shm_size: size of each host's private /dev/shm tmpfs.
        cpu_shares: give each host a fixed share of the cores (cgroups): True = required (an
            error where cgroups cannot be made), None = where they can (a log line
            otherwise), False = none (the hosts share the cores freely).
        host_cpus: the cores the shares divide, as a cpu list ("0", "0-3"); "" = every core
            this process may run on.
        dilation: "auto" (with CPU shares of 1/D of a core: D; else 1), "off" (1) or a
            factor D: every link runs at bandwidth / D with latency x D.
        cpu_period_us: the CFS period of a quota of a fraction of a core.

    Attributes:
        dilation: the effective D (after :meth:`start`).
        cpu_share: cores each host gets, or None without CPU shares (after :meth:`start`).
        host_cpus: each host's :class:`~dgl_grappa.cluster.testhosts.dilation.HostCpus`, or [].

    Example:
        >>> with TestHosts(3, bandwidth="200mbit") as hosts:                  # doctest: +SKIP
        ...     print([h.address for h in hosts], hosts[0].prefix())
        >>> with TestHosts(2, bandwidth="1gbit", cpu_shares=True, host_cpus="0") as hosts:  # doctest: +SKIP
        ...     print(hosts.cpu_share, hosts.dilation)    # 0.5 2.0: each link shaped at 500mbit
    """

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(
        self,
        n: int,
        bandwidth: str | None = None,
        latency_ms: float = 0.0,
        shared_link: bool = False,
        subnet: str = "10.77.0.0/24",
        shm_size: str = "4g",
        cpu_shares: bool | None = False,
        host_cpus: str = "",
        dilation: str | float = "auto",
        cpu_period_us: int = CFS_PERIOD_US,
    ):
        net = ipaddress.ip_network(subnet)
        if not 1 <= n <= min(254, net.num_addresses - 2):
            raise TestHostsError(f"TestHosts(n={n}): n must be between 1 and {min(254, net.num_addresses - 2)}")
        if not re.fullmatch(r"[0-9]+[kmg]?", shm_size):
            raise TestHostsError(f"shm_size={shm_size!r} is not a tmpfs size; write e.g. 4g or 512m")
        try:
            self._dilation = parse_dilation(dilation, key="dilation")
            self._host_cpus = parse_cpu_list(host_cpus) if host_cpus else []
        except ValueError as exc:
            raise TestHostsError(str(exc)) from None
        self.n, self.subnet, self.shm_size = n, net, shm_size
        self._cpu_period_us = int(cpu_period_us)
        self._link = (bandwidth or None, float(latency_ms), bool(shared_link))
        self._cpu_shares = False if self._dilation == "off" else cpu_shares
        self.job = secrets.token_hex(3)
        self.jobns = NAME_PREFIX + self.job
        self.hosts: list[Host] = []
        self.dilation = 1.0
        self.cpu_share: float | None = None
        self.host_cpus: list[HostCpus] = []
        self._closed = False
        self._netem: bool | None = None

    # --- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> "TestHosts":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> "TestHosts":
        """Create the namespaces, bridge, veths and mount namespaces; shape the links.

        Returns:
            self. On any failure everything made so far is removed before the error is raised.
        """
        why = check_hosts_possible()
        if why:
            raise TestHostsError(why)
        self._check_link(*self._link)
        sweep_stale()
        track(self)
        try:
            jobdir = claim_job(self.job)
            addrs = list(self.subnet.hosts())[: self.n]
            self.hosts = [
                Host(i, str(addrs[i]), f"h{i}", f"{self.jobns}-h{i}", jobdir / f"h{i}.mnt") for i in range(self.n)
            ]
            shares = share_cpus(
                self.job, self.hosts, self._cpu_shares, self._host_cpus, self._cpu_period_us, self._dilation
            )
            self.dilation, self.cpu_share, self.host_cpus = shares.dilation, shares.cpu_share, shares.host_cpus
            build_hosts(self.jobns, self.hosts, self.subnet.prefixlen, self.shm_size)
            self.shape(*self._link)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Kill everything started inside the hosts and remove all that the job made (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for h in self.hosts:
            h.kill_started()
        teardown_hosts(self.job)
        untrack(self)

    # --- links ---------------------------------------------------------------------------

    def _check_link(self, bandwidth: str | None, latency_ms: float, shared_link: bool) -> None:
        check_link(bandwidth, latency_ms, self._has_netem)

    def _has_netem(self) -> bool:
        if self._netem is None:  # probed once per job
            self._netem = netem_available()
        return self._netem

    def shape(self, bandwidth: str | None = None, latency_ms: float = 0.0, shared_link: bool = False) -> None:
        """Replace the link emulation of every host (no argument = unshaped).

        Args:
            bandwidth: tc rate per host and direction, or of the one shared link.
            latency_ms: one-way host-to-host delay (per-host mode: half on each end).
            shared_link: one shaped link for all hosts instead of one per host.

        With a dilation D (:attr:`dilation`) the qdiscs get bandwidth / D and latency x D;
        :attr:`link` keeps the values asked for.
        """
        self._check_link(bandwidth, latency_ms, shared_link)
        asked = (bandwidth or None, float(latency_ms), bool(shared_link))
        if bandwidth:
            bandwidth = dilated_rate(bandwidth, self.dilation)
        shape_links(self.jobns, self.hosts, bandwidth, dilated_latency_ms(latency_ms, self.dilation), shared_link)
        self._link = asked

    @property
    def link(self) -> dict:
        """The current emulation as asked for: {"bandwidth", "latency_ms", "shared_link"} (the qdiscs
        run at bandwidth / :attr:`dilation` and latency x :attr:`dilation`)."""
        return dict(zip(("bandwidth", "latency_ms", "shared_link"), self._link))

    def wire_bytes(self) -> list[dict]:
        """Counters of each host's interface (bytes it put on / took off its link).

        Returns:
            One dict per host: host, address, tx_bytes, rx_bytes, tx_packets, rx_packets.
        """
        return host_wire_bytes(self.hosts)

    # --- container protocol ----------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.hosts)

    def __getitem__(self, i: int) -> Host:
        return self.hosts[i]

    def __iter__(self):
        return iter(self.hosts)

    @property
    def addresses(self) -> list[str]:
        """The hosts' addresses, host 0 first."""
        return [h.address for h in self.hosts]
