"""Emulated hosts on one machine: 2-254 "machines", each with its own address, link and /dev/shm.

The project's emulated cluster for tests and benchmarks (``launch.remote: netns``), and for
trying things by hand (``python -m dgl_grappa.cluster.testhosts -n 3 --bandwidth 1gbit -- CMD
...``, :func:`.cli.main`). Production launches do not load it: the launcher reaches it only
through :class:`dgl_grappa.cluster.access.HostAccess`, whose netns implementation is
:class:`.access.TestHostAccess`. Needs root, iproute2 and util-linux.

* :mod:`.namespaces` - the hosts (:class:`Host`): network, mount and UTS namespaces on a
  job-private bridge, and their links (``tc``: a NIC per host, or one shared link; netem delay);
* :mod:`.shares` - CPU shares and time dilation: each host's share of the cores
  (:mod:`.cgroups`) and the links slowed to match (:mod:`.dilation`, the arithmetic);
* :mod:`.counters` - each host's byte counters;
* :mod:`.teardown` - the one place that removes a job (close, atexit, SIGTERM/SIGHUP, and the
  stale-job sweep for owners killed by SIGKILL);
* :mod:`.job` - :class:`TestHosts`, one job's hosts, which puts the parts together;
* :mod:`.access` - the hosts as a launcher reaches them;
* :mod:`.cli` - the command line.

Example:
    >>> with TestHosts(2, bandwidth="1gbit") as hosts:                       # doctest: +SKIP
    ...     hosts[0].run(["ping", "-c1", hosts[1].address], timeout=10)
    ...     print(hosts.wire_bytes())
"""

from .base import NAME_PREFIX, NETNS_DIR, STATE_DIR, TestHostsError, check_hosts_possible
from .job import TestHosts
from .namespaces import Host, netem_available
from .teardown import sweep_stale

__all__ = [
    "NAME_PREFIX",
    "NETNS_DIR",
    "STATE_DIR",
    "Host",
    "TestHosts",
    "TestHostsError",
    "check_hosts_possible",
    "netem_available",
    "sweep_stale",
]
