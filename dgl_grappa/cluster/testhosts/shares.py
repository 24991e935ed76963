"""CPU shares and time dilation of test hosts: deciding both for a job and giving each host its cgroups.

The hosts share this machine's cores, so without limits a host computes as fast as the
contention allows while its link keeps its full rate. With CPU shares every host gets a
fixed part of the cores (cgroup v1, :mod:`.cgroups`: whole cores pinned by cpuset where
there are enough, else an equal CFS quota of a core), and every process started in the
host (:meth:`~dgl_grappa.cluster.testhosts.Host.prefix`) runs inside them. When a host
gets 1/D of a core, every link is shaped at bandwidth / D and latency x D
(:mod:`.dilation`), so compute and network keep the emulated cluster's ratio; times
measured there are D times the emulated cluster's.

Example:
    >>> s = share_cpus("1a2b3c", hosts, want=True, host_cpus=[0], period_us=20_000, dilation="auto")  # doctest: +SKIP
    >>> s.cpu_share, s.dilation          # two hosts on core 0                                          # doctest: +SKIP
    (0.5, 2.0)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import dgl_grappa.cluster.testhosts.cgroups as _cg  # the module: tests stand in for its probes

from .base import NAME_PREFIX, TestHostsError
from .dilation import HostCpus, dilation_factor, plan_host_cpus
from .namespaces import Host

log = logging.getLogger("dgl_grappa")


@dataclass
class Shares:
    """What a job's hosts got.

    Attributes:
        dilation: D, the links' slow-down (1: none).
        cpu_share: cores each host gets, or None without CPU shares.
        host_cpus: each host's :class:`~.dilation.HostCpus`, or [] without CPU shares.
    """

    dilation: float = 1.0
    cpu_share: float | None = None
    host_cpus: list[HostCpus] = field(default_factory=list)


def share_cpus(
    job: str, hosts: list[Host], want: bool | None, host_cpus: list[int], period_us: int, dilation: str | float
) -> Shares:
    """Decide the CPU shares and D, and make each host's cgroups (``host.cgroup_dirs``).

    Called before any process can start in a host, so none runs unconfined.

    Args:
        job: the job's id (for log lines).
        hosts: the job's hosts (their ``netns`` names their cgroups).
        want: True = shares required (an error where cgroups cannot be made), None = where
            they can (a log line otherwise), False = none.
        host_cpus: the cores the shares divide ([] = every core this process may use).
        period_us: the CFS period of a quota of a fraction of a core.
        dilation: "auto", "off" or a factor (as :func:`.dilation.parse_dilation` returns it).

    Raises:
        TestHostsError: shares were required but cannot be given, or ``host_cpus`` names
            cores this process may not use (one line).
    """
    why = _cg.problem() if want is not False else None
    if why is None and want is not False:
        usable = _cg.usable_cpus()
        cpus = host_cpus or usable
        if not cpus or not set(cpus) <= set(usable):
            raise TestHostsError(
                f"host_cpus={','.join(map(str, host_cpus))} names cores this process may "
                f"not use; pick among {','.join(map(str, usable))}"
            )
        plans = plan_host_cpus(len(hosts), cpus, period_us=period_us)
        try:
            for h, plan in zip(hosts, plans):
                h.cgroup_dirs = _cg.create(h.netns, plan)
        except _cg.CgroupError as exc:  # a machine whose cgroups looked usable but are not
            _cg.remove(_cg.named(f"{NAME_PREFIX}{job}-h"))
            for h in hosts:
                h.cgroup_dirs = ()
            why = str(exc)
    if why is not None and want:
        raise TestHostsError(why)
    if want is False or why is not None:
        d = float(dilation) if not isinstance(dilation, str) else 1.0
        if why is not None:
            log.warning(
                "test hosts %s: no CPU shares (%s); the hosts share the cores freely, links dilated x%.3g", job, why, d
            )
        return Shares(dilation=d)
    out = Shares(dilation=dilation_factor(dilation, len(hosts), len(cpus)), cpu_share=plans[0].share, host_cpus=plans)
    log.info(
        "test hosts %s: CPU shares of %.3g cores per host (cpus %s), links dilated x%.3g",
        job,
        out.cpu_share,
        " ".join(p.cpus for p in out.host_cpus),
        out.dilation,
    )
    return out
