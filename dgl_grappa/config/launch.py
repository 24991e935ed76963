"""The ``network``, ``launch`` and ``distdgl`` sections: links, hosts and starters, and the DistDGL job."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from .errors import require

TC_RATE = re.compile(r"([0-9]+(?:\.[0-9]+)?)(bit|kbit|mbit|gbit)")
"""A ``tc`` rate (``network.bandwidth``): a number and a unit, e.g. 1gbit, 200mbit, 500kbit."""


_ENV_ITEM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.S)


@dataclass
class NetworkConfig:
    """Network emulation for side-by-side runs."""

    bandwidth: str = ""
    """Shape loopback in a private network namespace with tc tbf, e.g. "1gbit", "200mbit";
    empty = no shaping."""
    isolate: bool = False
    """Run ``train`` in a private network namespace (root) so that the bytes on the wire
    are measured (summary ``wire_bytes_per_epoch``); implied by ``bandwidth`` and always
    on in ``compare``."""
    link: Literal["per_host", "shared"] = "per_host"
    """With test hosts (``launch.remote=netns``): per_host = every host has its own link of
    ``bandwidth`` in each direction (one NIC per machine); shared = all hosts share one link
    of ``bandwidth`` (one switch port for the whole cluster). Without test hosts all workers
    share the job's one loopback, i.e. one shared link, whatever this says."""
    latency_ms: float = 0.0
    """One-way host-to-host delay with test hosts (needs the kernel's netem qdisc; a clear
    error where it is missing); 0 = none."""
    dilation: str = "auto"
    """Time dilation of test hosts (``launch.remote=netns``), which share this machine's
    cores: auto = give every host a fixed CPU share (cgroups: whole cores where there are
    enough, else an equal quota of a core) and, when a host gets 1/D of a core (D = hosts /
    cores), run every link at ``bandwidth`` / D and ``latency_ms`` x D, so compute and network
    keep the emulated cluster's ratio (D = 1 when every host has a whole core; where cgroups
    are missing a log line says so and D = 1); off = no CPU shares, links as given; a number
    = that D, with CPU shares (an error where cgroups are missing). Times in summary.json
    stay as measured (dilated): divide by its ``network_dilation`` for the emulated
    cluster's."""
    host_cpus: str = ""
    """With test hosts: the cores their CPU shares divide, as a cpu list ("0", "0-3", "0,2");
    empty = every core this process may run on. E.g. "0" puts all hosts on one core (two
    hosts: half a core each, D = 2). Setting it asks for CPU shares (an error where cgroups
    are missing; not with dilation off)."""
    cpu_period_ms: float = 20.0
    """With CPU shares of a fraction of a core: the CFS bandwidth period of each host's quota
    (the host runs ``share`` x this per period, then waits). A shorter period holds a
    throttled host back for less at a time; on the dilation check (docs/cluster.md) 5 ms and
    20 ms measured the same. 1-1000; the kernel needs a quota of at least 1 ms, so the period
    grows where share x period would be shorter."""

    def check(self) -> None:
        """The rate, the delay, the dilation factor, the cpu list and the CFS period, each on its own."""
        bw = self.bandwidth
        require(
            bw == "" or TC_RATE.fullmatch(bw.lower()) is not None,
            f"network.bandwidth={bw!r} is not a tc rate; write e.g. 1gbit, 200mbit or 500kbit",
        )
        require(self.latency_ms >= 0, f"network.latency_ms={self.latency_ms} must be >= 0")
        d = str(self.dilation).strip().lower()
        try:
            factor = float(d) if d not in ("auto", "off") else 1.0
        except ValueError:
            factor = float("nan")
        require(
            factor > 0 and factor != float("inf"),  # also false for nan
            f"network.dilation={self.dilation!r} is not auto, off or a factor > 0; write e.g. --network.dilation=2",
        )
        ranges = [r.partition("-") for r in self.host_cpus.split(",")]
        require(
            not self.host_cpus
            or (
                re.fullmatch(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*", self.host_cpus) is not None
                and all(int(a) <= int(b) for a, _, b in ranges if b)
            ),
            f"network.host_cpus={self.host_cpus!r} is not a cpu list; write e.g. 0, 0-3 or 0,2",
        )
        require(
            1.0 <= float(self.cpu_period_ms) <= 1000.0,
            f"network.cpu_period_ms={self.cpu_period_ms} is out of range; write a period from 1 to 1000 ms, e.g. 20",
        )
        require(
            not self.host_cpus or d != "off",
            f"network.host_cpus={self.host_cpus} shares the cores out among test hosts, but network.dilation=off "
            "turns CPU shares off; set --network.dilation=auto or leave host_cpus empty",
        )

    def tunes_cpu_shares(self) -> bool:
        """Whether ``dilation`` (a factor) or ``host_cpus`` is set, which only test hosts' CPU shares serve."""
        return str(self.dilation).strip().lower() not in ("auto", "off") or bool(self.host_cpus)


@dataclass
class DistDGLConfig:
    """The DistDGL baseline job (real servers + trainers)."""

    num_samplers: int = 0
    """Sampler processes per trainer (DGL_NUM_SAMPLER)."""
    base_port: int = 0
    """First server port; 0 = pick free ports."""
    startup_timeout_s: float = 180.0
    """Bound on server start + trainer connect (DGL retries the connection every 3 s)."""
    shutdown_timeout_s: float = 60.0
    """Bound on the servers' exit after the last trainer finished."""
    shm_size: str = "8g"
    """Size limit of each machine's private /dev/shm tmpfs (the partition lives there)."""

    def check(self) -> None:
        """Samplers, ports, the two bounds and the tmpfs size."""
        require(self.num_samplers >= 0, f"distdgl.num_samplers={self.num_samplers} must be >= 0")
        require(0 <= self.base_port <= 65000, f"distdgl.base_port={self.base_port} must be in 0..65000")
        require(
            self.startup_timeout_s > 0 and self.shutdown_timeout_s > 0,
            "distdgl.startup_timeout_s and distdgl.shutdown_timeout_s must be > 0",
        )
        require(
            re.fullmatch(r"[0-9]+[kmg]?", self.shm_size.lower()) is not None,
            f"distdgl.shm_size={self.shm_size!r} is not a size; write e.g. 8g or 512m",
        )


@dataclass
class LaunchConfig:
    """Where and how the workers start, and what happens when one dies.

    One section for every starter: the built-in launcher (this machine, ssh hosts or the
    project's namespace test hosts) and external starters (torchrun, Slurm), which own
    their restarts themselves (workers then resume from the newest checkpoint on start).
    """

    hosts: list[str] = field(default_factory=list)
    """Addresses or names of the machines, host 0 first (it runs rank 0, the rendezvous);
    empty = this machine only. With remote=netns: the test hosts' names h0, h1, ... (or
    empty: one test host per ``workers_per_host`` workers)."""
    ip_config: str = ""
    """DGL's ip_config.txt (one "IP [port]" per line), instead of ``hosts``; a port given
    there is that machine's DGL server port."""
    workers_per_host: int = 0
    """Workers (partitions) per machine, placed in rank order; 0 = num_parts / number of
    hosts, rounded up (with remote=netns and no hosts listed: 1)."""
    remote: Literal["none", "ssh", "netns"] = "none"
    """How a command reaches another host: none (this machine), ssh, or netns (the
    project's test hosts, see dgl_grappa/cluster/testhosts/)."""
    ssh_user: str = ""
    """ssh user name; empty = ssh's default."""
    ssh_port: int = 22
    """ssh port."""
    ssh_identity: str = ""
    """ssh identity file; empty = ssh's default."""
    ssh_options: list[str] = field(default_factory=list)
    """Extra ssh options, e.g. [StrictHostKeyChecking=no]."""
    env: list[str] = field(default_factory=list)
    """Extra KEY=VALUE environment for remote workers (e.g. GLOO_SOCKET_IFNAME=eth0)."""
    master_port: int = 0
    """Port of the rendezvous on the first host; 0 = a free port."""
    copy_partitions: bool = False
    """Storage is not shared: the launcher copies the resolved config and each host's
    partitions to the same path on that host before the start (and fetches rank 0's
    summary back); each later partitioning (schedule.k > 0) is sent by rank 0 to the
    workers of the other hosts over the process group. False = shared storage (as DistDGL
    assumes): every host sees the same files at the same paths."""
    max_restarts: int = 0
    """Restart the whole worker group from the last checkpoint this many times after a
    worker dies (torchrun's semantics); 0 = a dead worker ends the job. With
    ``on_failure: continue``: the most parts taken over in all (0 = as many as the hosts can
    carry: a part goes to a host that was not lost as a whole, and when none is left the job
    stops in one line)."""
    on_failure: Literal["restart", "stop", "continue"] = "restart"
    """What a worker that dies (killed, its host gone) does to the job: ``restart`` the whole
    group from the newest checkpoint, up to ``max_restarts`` times (with the default 0 the job
    stops: torchrun's behaviour); ``stop`` the job at once; or ``continue`` (Grappa's native
    runtime across hosts: ``remote: ssh | netns``): the survivors form a new process group without
    restarting, keep the model and optimizer they hold, and a new worker on a surviving host loads
    the lost part's files and trains it from the step in flight. A worker that raises (a bug, a user
    error) stops the job in every mode."""
    spare_hosts: int = 0
    """``on_failure: continue``: hosts kept idle for take-overs (a lost worker's part goes to a spare
    first, so no survivor doubles up). ``remote: netns`` makes this many more test hosts; with
    ``hosts`` or ``ip_config`` the last this many hosts of the list are the spares. The DistDGL runs
    (its servers need a part per machine) leave them out."""

    def check(self) -> None:
        """The host fields: one way to list machines, well-formed names and options, what each ``remote`` needs."""
        require(
            not (self.hosts and self.ip_config),
            "launch.hosts and launch.ip_config are both set; list the machines in one of them",
        )
        require(
            self.workers_per_host >= 0, f"launch.workers_per_host={self.workers_per_host} must be >= 0 (0 = automatic)"
        )
        require(1 <= self.ssh_port <= 65535, f"launch.ssh_port={self.ssh_port} must be between 1 and 65535")
        require(
            0 <= self.master_port <= 65535, f"launch.master_port={self.master_port} must be in 0..65535 (0 = free port)"
        )
        require(self.max_restarts >= 0, f"launch.max_restarts={self.max_restarts} must be >= 0")
        require(
            self.on_failure != "continue" or self.remote in ("ssh", "netns"),
            "launch.on_failure=continue keeps a job training when one of its machines is lost; it needs the "
            "workers on hosts (launch.remote=ssh, or netns for test hosts): on one machine use "
            "--launch.on_failure=restart with --launch.max_restarts",
        )
        require(self.spare_hosts >= 0, f"launch.spare_hosts={self.spare_hosts} must be >= 0")
        require(
            self.spare_hosts == 0 or self.on_failure == "continue",
            f"launch.spare_hosts={self.spare_hosts} keeps hosts idle for take-overs, which only "
            "launch.on_failure=continue makes; add --launch.on_failure=continue or drop the spares",
        )
        for item in self.env:
            require(
                _ENV_ITEM.fullmatch(item) is not None,
                f"launch.env entry {item!r} is not KEY=VALUE; write e.g. GLOO_SOCKET_IFNAME=eth0",
            )
        for opt in self.ssh_options:
            require(
                bool(opt.strip()), "launch.ssh_options has an empty entry; write options like StrictHostKeyChecking=no"
            )
        seen: set[str] = set()
        for h in self.hosts:
            require(
                bool(re.fullmatch(r"[A-Za-z0-9:][A-Za-z0-9.:-]*", h)),
                f"launch.hosts entry {h!r} is not an address or host name; write e.g. 10.0.0.1 or node01",
            )
            require(
                h not in seen,
                f"launch.hosts lists {h} twice; give each machine once (use workers_per_host "
                "for several workers on one machine)",
            )
            seen.add(h)
        if self.remote == "none":
            require(
                not self.hosts and not self.ip_config,
                "launch.hosts/launch.ip_config list machines but launch.remote=none runs on this machine only; "
                "set --launch.remote=ssh (or netns for test hosts)",
            )
        if self.remote == "ssh":
            require(
                bool(self.hosts or self.ip_config),
                "launch.remote=ssh needs the machines: set launch.hosts=[...] or launch.ip_config=<ip_config.txt>",
            )
        if self.remote == "netns":
            bad = [h for i, h in enumerate(self.hosts) if h != f"h{i}"]
            require(
                not bad,
                f"launch.hosts={self.hosts}: with launch.remote=netns list the test hosts by name in "
                f"order, h0, h1, ... (or leave it empty: one host per workers_per_host workers)",
            )
