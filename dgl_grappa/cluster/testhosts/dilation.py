"""Time dilation of test hosts: the arithmetic (pure functions, no system calls).

Emulated test hosts (:mod:`dgl_grappa.cluster.testhosts`) share this machine's cores.
Where N hosts share C < N cores, every host computes about N/C times slower than a real
machine would, while its emulated NIC keeps full speed: the network looks N/C times
cheaper than it is. As in time-dilated network emulation (Gupta et al., NSDI 2006), each
host then gets a fixed share of the CPU, and when that share is 1/D of a core every link
runs at bandwidth / D with latency x D, so that the ratio of compute to network time is
the emulated cluster's. Times measured there are dilated: divide them by D for the
emulated cluster's.

This module decides the numbers; :mod:`dgl_grappa.cluster.testhosts.cgroups` applies the CPU shares
and :class:`dgl_grappa.cluster.testhosts.TestHosts` the links.

Example:
    >>> share = host_cpu_share(hosts=2, cores=1)
    >>> d = dilation_factor("auto", hosts=2, cores=1)
    >>> share, d, dilated_rate("1gbit", d), dilated_latency_ms(5.0, d)
    (0.5, 2.0, '500mbit', 10.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..netns import rate_bits

CFS_PERIOD_US = 20_000
"""CFS bandwidth period of a host's CPU quota. Short, so that a host throttled for its
quota is held back for at most a few milliseconds at a time (the kernel's default, 100 ms,
would let a half-core host run 50 ms at full speed, then stall 50 ms: bursts longer than
most message exchanges); long enough for the kernel's 5 ms bandwidth slices."""

_UNITS = (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3))


def parse_cpu_list(text: str) -> list[int]:
    """The CPUs of a cpu list as the kernel writes them ("0-2,5"), sorted, without repeats.

    Raises:
        ValueError: not a cpu list (one line).

    Example:
        >>> parse_cpu_list("4,0-2")
        [0, 1, 2, 4]
    """
    out: set[int] = set()
    for part in text.strip().split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()) or (sep and int(hi) < int(lo)):
            raise ValueError(f"{text!r} is not a cpu list; write e.g. 0, 0-3 or 0,2")
        out.update(range(int(lo), int(hi if sep else lo) + 1))
    return sorted(out)


def format_cpu_list(cpus: list[int]) -> str:
    """A cpu list in the kernel's form (ranges of consecutive CPUs).

    Example:
        >>> format_cpu_list([0, 1, 2, 4])
        '0-2,4'
    """
    cpus = sorted(set(cpus))
    runs: list[list[int]] = []
    for c in cpus:
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)


def host_cpu_share(hosts: int, cores: int) -> float:
    """Cores each of ``hosts`` test hosts gets when they divide ``cores`` cores equally.

    Whole cores (``cores // hosts`` each; any remainder stays idle) when there are at least
    as many cores as hosts, else ``cores / hosts`` of a core each (a CPU quota).

    Example:
        >>> host_cpu_share(2, 2), host_cpu_share(2, 5), host_cpu_share(4, 2), host_cpu_share(3, 2)
        (1.0, 2.0, 0.5, 0.6666666666666666)
    """
    if hosts < 1 or cores < 1:
        raise ValueError(f"hosts={hosts} and cores={cores} must be >= 1")
    return float(cores // hosts) if cores >= hosts else cores / hosts


def parse_dilation(setting: str | float, key: str = "network.dilation") -> str | float:
    """``network.dilation`` as "auto", "off" or a factor > 0.

    Args:
        setting: the value.
        key: the name the error message gives it.

    Raises:
        ValueError: anything else (one line naming the key).

    Example:
        >>> parse_dilation("auto"), parse_dilation("OFF"), parse_dilation("2")
        ('auto', 'off', 2.0)
    """
    text = str(setting).strip().lower()
    if text in ("auto", "off"):
        return text
    try:
        d = float(text)
    except ValueError:
        d = float("nan")
    if not (math.isfinite(d) and d > 0):
        raise ValueError(f"{key}={setting!r} is not auto, off or a factor > 0; write e.g. {key}=2")
    return d


def dilation_factor(setting: str | float, hosts: int, cores: int) -> float:
    """The dilation D of a test-host job.

    Args:
        setting: "auto" (D = 1 / the hosts' CPU share when that is below one core, i.e.
            hosts / cores when hosts > cores, else 1), "off" (1) or a factor (that factor).
        hosts: number of test hosts.
        cores: cores the hosts' CPU shares divide.

    Example:
        >>> dilation_factor("auto", 4, 2), dilation_factor("auto", 2, 8), dilation_factor("off", 4, 2)
        (2.0, 1.0, 1.0)
        >>> dilation_factor("3", 2, 2)
        3.0
    """
    d = parse_dilation(setting)
    if d == "off":
        return 1.0
    if d == "auto":
        share = host_cpu_share(hosts, cores)
        return 1.0 / share if share < 1.0 else 1.0
    return float(d)


def dilated_rate(rate: str, factor: float) -> str:
    """A tc rate divided by the dilation factor, as a tc rate (exact where the unit allows).

    Raises:
        ValueError: ``rate`` is not a tc rate, or ``factor`` is not > 0.

    Example:
        >>> dilated_rate("1gbit", 2), dilated_rate("1gbit", 3), dilated_rate("200mbit", 1)
        ('500mbit', '333333333bit', '200mbit')
    """
    if not factor > 0:
        raise ValueError(f"dilation factor {factor} must be > 0")
    if factor == 1:
        return rate
    bits = max(1, round(rate_bits(rate) / factor))
    for unit, size in _UNITS:
        if bits % size == 0:
            return f"{bits // size}{unit}"
    return f"{bits}bit"


def dilated_latency_ms(latency_ms: float, factor: float) -> float:
    """A one-way delay multiplied by the dilation factor.

    Example:
        >>> dilated_latency_ms(0.5, 4)
        2.0
    """
    return latency_ms * factor


@dataclass(frozen=True)
class HostCpus:
    """One host's CPU share as cgroup v1 writes it.

    Attributes:
        cpus: its ``cpuset.cpus`` (a cpu list).
        quota_us: its ``cpu.cfs_quota_us`` per ``period_us``; -1 = no quota (whole cores).
        period_us: its ``cpu.cfs_period_us``.
    """

    cpus: str
    quota_us: int = -1
    period_us: int = CFS_PERIOD_US

    @property
    def share(self) -> float:
        """Cores this host may use."""
        n = float(len(parse_cpu_list(self.cpus)))
        return n if self.quota_us < 0 else min(n, self.quota_us / self.period_us)


def plan_host_cpus(hosts: int, cpus: list[int], period_us: int = CFS_PERIOD_US) -> list[HostCpus]:
    """Each host's cpuset and quota: equal shares of ``cpus``.

    At least as many cores as hosts: ``len(cpus) // hosts`` whole cores each, disjoint, no
    quota. Fewer: a quota of ``cores / hosts`` of a core each; where the hosts divide evenly
    onto the cores each host is pinned to one core (hosts/cores hosts per core), else every
    host may run on all of them.

    Example:
        >>> [(h.cpus, h.quota_us) for h in plan_host_cpus(2, [0, 1])]
        [('0', -1), ('1', -1)]
        >>> [(h.cpus, h.quota_us) for h in plan_host_cpus(2, [3], period_us=20000)]
        [('3', 10000), ('3', 10000)]
    """
    cores = len(cpus)
    share = host_cpu_share(hosts, cores)
    if share >= 1.0:
        k = int(share)
        return [HostCpus(format_cpu_list(cpus[i * k : (i + 1) * k]), -1, period_us) for i in range(hosts)]
    if period_us * share < 1000:  # the kernel's smallest quota is 1 ms: lengthen the period instead
        period_us = math.ceil(1000 / share)
    quota = round(period_us * share)
    if hosts % cores == 0:
        per_core = hosts // cores
        return [HostCpus(str(cpus[i // per_core]), quota, period_us) for i in range(hosts)]
    return [HostCpus(format_cpu_list(cpus), quota, period_us) for _ in range(hosts)]
