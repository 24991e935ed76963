"""Test hosts as a launcher reaches them (``launch.remote: netns``): the emulated cluster's
:class:`~dgl_grappa.cluster.access.HostAccess`.

:class:`TestHostAccess` turns the ``network`` section into :class:`~.job.TestHosts` (links,
CPU shares, time dilation), checking before anything is built that they can be made as
asked. A command reaches a host through the same shell string as over ssh, behind the
host's nsenter prefix and with a minimal environment, so the namespace path exercises the
ssh path's quoting and environment; the hosts' byte counters are read here, and closing
removes everything the hosts held.

Example:
    >>> access = TestHostAccess(cfg, num_hosts=2)                              # doctest: +SKIP
    >>> entries, remote = access.open([IpConfigEntry("h0"), IpConfigEntry("h1")])   # doctest: +SKIP
    >>> [e.host for e in entries]                                              # doctest: +SKIP
    ['10.77.0.1', '10.77.0.2']
"""

from __future__ import annotations

import logging
import os
from typing import Callable, Sequence

import dgl_grappa.cluster.testhosts.cgroups as _cg  # the module: tests stand in for its probes

from ...config import Config, ConfigError, NetworkConfig
from ..hosts import IpConfigEntry, Remote
from .dilation import parse_cpu_list
from .job import TestHosts
from .namespaces import netem_available

log = logging.getLogger("dgl_grappa")

_LOCAL_ENV = ("PATH", "HOME", "LANG", "TERM")
"""What a test host's local end keeps of the launcher's environment (ssh passes none; the host needs a PATH)."""


def cpu_shares_asked(net: NetworkConfig) -> bool | None:
    """TestHosts' ``cpu_shares`` from the ``network`` section: asked for (a factor or
    host_cpus: True), where possible (auto: None), or not at all (off: False)."""
    d = str(net.dilation).strip().lower()
    if d == "off":
        return False
    return True if (d != "auto" or net.host_cpus) else None


class TestHostAccess:
    """The emulated hosts of one job, opened and closed for the launcher.

    Args:
        cfg: the run's config (``network``; ``distdgl.shm_size``, each host's /dev/shm).
        num_hosts: how many hosts to make.

    Raises:
        ConfigError: a delay without netem, or CPU shares asked for that cannot be given
            here (one line, before anything is built).

    Attributes:
        hosts: the open :class:`~.job.TestHosts`, or None.
        cpu_shares: what the hosts are asked for (:func:`cpu_shares_asked`).
    """

    __test__ = False  # not a pytest test class, whatever its name
    kind = "netns"

    def __init__(self, cfg: Config, num_hosts: int):
        self.cfg, self.num_hosts = cfg, num_hosts
        net = cfg.network
        if net.latency_ms > 0 and not netem_available():  # before anything is built, not after the partitioning
            raise ConfigError(
                f"network.latency_ms={net.latency_ms} needs the netem qdisc, which this kernel lacks "
                "(CONFIG_NET_SCH_NETEM); set --network.latency_ms=0 or use a kernel with netem"
            )
        self.cpu_shares = cpu_shares_asked(net)
        if self.cpu_shares:
            self._check_cpu_shares(net)
        self.hosts: TestHosts | None = None

    @staticmethod
    def _check_cpu_shares(net: NetworkConfig) -> None:
        # Before anything is built: CPU shares that were asked for must be possible here.
        key = f"network.host_cpus={net.host_cpus}" if net.host_cpus else f"network.dilation={net.dilation}"
        why = _cg.problem()
        if why is not None:
            raise ConfigError(
                f"{key} needs CPU shares of the test hosts, which cannot be given here: {why}; set "
                "--network.dilation=auto (shares where possible) or off"
            )
        if net.host_cpus:
            usable = _cg.usable_cpus()
            bad = sorted(set(parse_cpu_list(net.host_cpus)) - set(usable))
            if bad:
                raise ConfigError(
                    f"network.host_cpus={net.host_cpus} names cores {','.join(map(str, bad))} that this "
                    f"process may not use; pick among {','.join(map(str, usable))}"
                )

    def open(self, entries: list[IpConfigEntry]) -> tuple[list[IpConfigEntry], Remote]:
        """Make the hosts; ``entries`` name them (``h<i>``) or give their addresses.

        Returns:
            The entries by address (DGL's ip_config must hold IPs), and the hosts' nsenter prefixes.
        """
        net = self.cfg.network
        th = TestHosts(
            self.num_hosts,
            bandwidth=net.bandwidth or None,
            latency_ms=net.latency_ms,
            shared_link=net.link == "shared",
            shm_size=self.cfg.distdgl.shm_size.lower(),
            cpu_shares=self.cpu_shares,
            host_cpus=net.host_cpus,
            dilation=net.dilation,
            cpu_period_us=round(float(net.cpu_period_ms) * 1000),
        ).start()
        self.hosts = th
        try:
            names = {h.name: h.address for h in th}
            for e in entries:
                if e.host not in names and e.host not in th.addresses:
                    raise ConfigError(
                        f"launch: {e.host} is not a test host; with launch.remote=netns use "
                        f"{', '.join(names)} or {', '.join(th.addresses)}"
                    )
            resolved = [IpConfigEntry(names.get(e.host, e.host), e.port) for e in entries]
            remote = Remote("netns", prefixes=tuple(tuple(h.prefix()) for h in th))
        except BaseException:
            th.close()
            raise
        log.info(
            "test hosts %s: %s, link %s, %s",
            th.job,
            " ".join(th.addresses),
            th.link,
            f"{th.cpu_share:.3g} cores per host, dilation {th.dilation:.3g}"
            if th.cpu_share is not None
            else f"no CPU shares, dilation {th.dilation:.3g}",
        )
        return resolved, remote

    def local_env(self) -> dict[str, str]:
        # A minimal environment, so that a host sees only what the shell string sets, as over ssh.
        return {k: os.environ[k] for k in _LOCAL_ENV if k in os.environ}

    def default_threads(self, workers_per_host: int, num_workers: int) -> int:
        """The host's share of the cores over its workers (at least 1); without shares, this machine's cores over
        all workers."""
        share = self.hosts.cpu_share if self.hosts is not None else None
        if share is not None:
            return max(1, int(share) // workers_per_host)
        from ..launch import threads_per_worker  # deferred: cluster.launch imports torch

        return threads_per_worker(num_workers)

    def wire_bytes(self) -> list[dict] | None:
        """The hosts' interface counters right now (None before :meth:`open`)."""
        return self.hosts.wire_bytes() if self.hosts is not None else None

    def describe(self, hosts: list[dict]) -> dict:
        """The links as configured; once open also ``network_dilation`` (D: the links ran at
        bandwidth / D and latency x D, so measured times are D x the emulated cluster's),
        ``host_cpu_share`` (cores per host, None without CPU shares) and each host's ``cpus``."""
        net = self.cfg.network
        out = {"link": {"mode": net.link, "bandwidth": net.bandwidth or None, "latency_ms": net.latency_ms}}
        th = self.hosts
        if th is not None:
            out["network_dilation"], out["host_cpu_share"] = th.dilation, th.cpu_share
            for h, plan in zip(hosts, th.host_cpus):
                h["cpus"] = plan.cpus
        return out

    def close(self, kill_job: Callable[[int], None], used: Sequence[int]) -> None:
        """Remove the hosts: every process inside dies with them (``kill_job`` is not needed)."""
        if self.hosts is not None:
            self.hosts.close()
            self.hosts = None
