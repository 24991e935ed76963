"""Emulated hosts on one machine: 2-4 "machines", each with its own address, link and /dev/shm.

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

Links (:meth:`TestHosts.shape`): per host, a ``tc tbf`` on both ends of its veth (host
end = upload, bridge end = download), so every host has its own full-duplex NIC; or, with
``shared_link=True``, every packet that enters the bridge is redirected through one
shaped ``ifb`` device: the whole cluster shares one link, as the one-loopback mode of
:mod:`dgl_grappa.cluster.netns` does. ``latency_ms`` (one-way, host to host) needs the netem
qdisc; where the kernel lacks it, asking for latency is a one-line error.

CPU shares and time dilation (``cpu_shares``, ``host_cpus``, ``dilation``): the hosts share
this machine's cores, so without limits a host computes as fast as the contention allows
while its link keeps its full rate. With CPU shares every host gets a fixed part of the
cores (cgroup v1, :mod:`dgl_grappa.cluster.cgroups`: whole cores pinned by cpuset where
there are enough, else an equal CFS quota of a core), and every process started in the
host (:meth:`Host.prefix`, hence ``popen``, ``run`` and every launcher) runs inside them.
When a host gets 1/D of a core, every link is shaped at bandwidth / D and latency x D
(:mod:`dgl_grappa.cluster.dilation`), so compute and network keep the emulated cluster's
ratio; times measured there are D times the emulated cluster's.

Everything a job creates (namespaces, mounts, cgroups) is named after its id and removed in
one place (:func:`_teardown`): by :meth:`TestHosts.close` (context exit, atexit, SIGTERM/SIGHUP
turned into SystemExit), and, for a job whose owner died without cleaning up (SIGKILL),
by :func:`sweep_stale` at the start of the next job. Needs root, iproute2 and util-linux.

Example:
    >>> with TestHosts(2, bandwidth="1gbit") as hosts:                       # doctest: +SKIP
    ...     srv = hosts[1].popen(["python", "-m", "http.server", "8000"])
    ...     hosts[0].run(["curl", f"http://{hosts[1].address}:8000/"], timeout=10)
    ...     print(hosts.wire_bytes())

Command line: ``python -m dgl_grappa.cluster.testhosts -n 3 --bandwidth 1gbit -- CMD ...`` (see :func:`main`).
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import ipaddress
import json
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from . import cgroups as _cg
from .dilation import CFS_PERIOD_US, HostCpus, dilated_latency_ms, dilated_rate, dilation_factor, parse_cpu_list, parse_dilation, \
    plan_host_cpus
from .netns import IsolationError, rate_bits
from .ptree import kill_listed

log = logging.getLogger("dgl_grappa")

NAME_PREFIX = "dgh-"
"""Network namespaces of test hosts are named ``dgh-<job>`` (bridge) and ``dgh-<job>-h<i>``; a
host's cgroups (CPU shares) are named like its namespace."""
STATE_DIR = Path("/run/dgl_grappa/testhosts")
"""``<job>/owner`` (pid and start time of the owning process), ``<job>/h<i>.mnt`` and
``<job>/h<i>.uts`` (persistent mount and UTS namespaces), ``<job>/hosts`` (their /etc/hosts).
A private bind mount, as mount-namespace files require."""
NETNS_DIR = Path("/run/netns")
_TIMEOUT_S = 30.0
_JOB_RE = re.compile(re.escape(NAME_PREFIX) + r"([0-9a-f]+)(?:-h[0-9]+)?$")


class TestHostsError(IsolationError):
    """Test hosts cannot be made or used here (the message says why and what to do)."""

    __test__ = False


# ---------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------

def _run(argv: list[str], *, input: str | None = None, check: bool = True,
         timeout: float = _TIMEOUT_S) -> subprocess.CompletedProcess:
    try:
        p = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TestHostsError(f"'{' '.join(argv)}' did not finish in {timeout:.0f} s") from None
    if check and p.returncode != 0:
        err = " ".join((p.stderr or p.stdout).split()) or f"status {p.returncode}"
        raise TestHostsError(f"'{' '.join(argv)}' failed: {err}")
    return p


def _batch(ns: str | None, tool: str, lines: list[str]) -> None:
    # One ip/tc process per namespace instead of one per command (ip -batch is iproute2's own).
    if lines:
        _run([tool] + (["-n", ns] if ns else []) + ["-batch", "-"], input="\n".join(lines) + "\n")


def check_hosts_possible() -> str | None:
    """Why test hosts cannot be made here, or None if they can.

    Returns:
        None, or one line naming what is missing (root, ip/tc, nsenter/unshare).
    """
    if os.geteuid() != 0:
        return "test hosts need root (network and mount namespaces, veth, tc); run as root"
    for tool, pkg in (("ip", "iproute2"), ("tc", "iproute2"), ("nsenter", "util-linux"),
                      ("unshare", "util-linux"), ("mount", "mount")):
        if shutil.which(tool) is None:
            return f"test hosts need the {tool} command; install it, e.g. apt-get install -y {pkg}"
    return None


def netem_available() -> bool:
    """True when this kernel has the netem qdisc (probed in a throw-away network namespace)."""
    p = subprocess.run(["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                       capture_output=True, timeout=_TIMEOUT_S)
    return p.returncode == 0


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


def _owner_alive(job: str) -> bool:
    import psutil

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


# ---------------------------------------------------------------------------------------
# Teardown: the one place that removes what a job made
# ---------------------------------------------------------------------------------------

def _teardown(job: str) -> None:
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
        _run(["umount", str(m)], check=False)
        m.unlink(missing_ok=True)
    # Hosts first, the bridge's namespace last (deleting it also removes the bridge ends).
    for n in sorted(names, key=lambda n: (n == NAME_PREFIX + job, n)):
        _run(["ip", "netns", "del", n], check=False)
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
    Path("/run/lock").mkdir(parents=True, exist_ok=True)
    with open("/run/lock/dgl_grappa-testhosts.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _release_dirs() -> None:
    with _dirs_lock():
        _release_dirs_locked()


def _release_dirs_locked() -> None:
    # Leave nothing behind once no job is left: our state dir's bind mount, and /run/netns
    # when no named namespace is left (a non-empty or busy one is someone else's: kept).
    if STATE_DIR.is_dir() and not any(STATE_DIR.iterdir()):
        _run(["umount", str(STATE_DIR)], check=False)
        try:
            STATE_DIR.rmdir()
            STATE_DIR.parent.rmdir()
        except OSError:
            pass
    if NETNS_DIR.is_dir() and not any(NETNS_DIR.iterdir()):
        if _run(["umount", str(NETNS_DIR)], check=False).returncode == 0:
            try:
                NETNS_DIR.rmdir()
            except OSError:
                pass


def sweep_stale() -> list[str]:
    """Remove the leftovers of test-host jobs whose owning process is gone.

    Returns:
        The ids of the jobs removed (a job of a live process is never touched).
    """
    jobs = {m.group(1) for n in _list_netns() if (m := _JOB_RE.match(n))}
    jobs |= {m.group(1) for d in _cg.named(NAME_PREFIX) if (m := _JOB_RE.match(Path(d).name))}
    if STATE_DIR.is_dir():
        jobs |= {d.name for d in STATE_DIR.iterdir() if d.is_dir()}
    stale = sorted(j for j in jobs if not _owner_alive(j))
    for job in stale:
        _teardown(job)
    return stale


def _ensure_state_dir() -> None:
    # unshare --mount=FILE needs FILE on a private mount (else the bind mount would
    # propagate into the namespace it pins); make STATE_DIR one, as ip does for /run/netns.
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    if _run(["mountpoint", "-q", str(STATE_DIR)], check=False).returncode != 0:
        _run(["mount", "--bind", str(STATE_DIR), str(STATE_DIR)])
    _run(["mount", "--make-private", str(STATE_DIR)])


# ---------------------------------------------------------------------------------------
# Closing on exit and on SIGTERM / SIGHUP
# ---------------------------------------------------------------------------------------

_LIVE: "weakref.WeakSet[TestHosts]" = weakref.WeakSet()
_HANDLERS_SET = False


def _close_all() -> None:
    for h in list(_LIVE):
        h.close()


def _exit_on_signal(signum, frame):
    # SystemExit unwinds every `with TestHosts(...)` block (and atexit runs after it).
    raise SystemExit(128 + signum)


def _install_exit_handlers() -> None:
    global _HANDLERS_SET
    if _HANDLERS_SET:
        return
    _HANDLERS_SET = True
    atexit.register(_close_all)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):  # never replace the app's own
                signal.signal(sig, _exit_on_signal)


# ---------------------------------------------------------------------------------------
# The hosts
# ---------------------------------------------------------------------------------------

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
            after :func:`dgl_grappa.cluster.cgroups.join_prefix` with CPU shares.

        Example:
            >>> subprocess.run(hosts[0].prefix() + ["ip", "addr"], timeout=10)  # doctest: +SKIP
        """
        # The cgroups are joined before nsenter: the host's own /sys hides the cgroup mounts.
        return (_cg.join_prefix(self.cgroup_dirs) if self.cgroup_dirs else []) + [
            "nsenter", f"--net={NETNS_DIR / self.netns}", f"--mount={self.mnt}",
            f"--uts={self.mnt.with_suffix('.uts')}", "--wd=.", "--"]

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
        host_cpus: each host's :class:`~dgl_grappa.cluster.dilation.HostCpus`, or [].

    Example:
        >>> with TestHosts(3, bandwidth="200mbit") as hosts:                  # doctest: +SKIP
        ...     print([h.address for h in hosts], hosts[0].prefix())
        >>> with TestHosts(2, bandwidth="1gbit", cpu_shares=True, host_cpus="0") as hosts:  # doctest: +SKIP
        ...     print(hosts.cpu_share, hosts.dilation)    # 0.5 2.0: each link shaped at 500mbit
    """

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, n: int, bandwidth: str | None = None, latency_ms: float = 0.0,
                 shared_link: bool = False, subnet: str = "10.77.0.0/24", shm_size: str = "4g",
                 cpu_shares: bool | None = False, host_cpus: str = "", dilation: str | float = "auto",
                 cpu_period_us: int = CFS_PERIOD_US):
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
        self._validate_link(*self._link)
        sweep_stale()
        _install_exit_handlers()
        _LIVE.add(self)
        try:
            import psutil

            jobdir = STATE_DIR / self.job
            with _dirs_lock():
                _ensure_state_dir()
                jobdir.mkdir()
                # The owner record comes first: a crash from here on leaves a sweepable job.
                (jobdir / "owner").write_text(f"{os.getpid()} {psutil.Process().create_time()}\n")
            addrs = list(self.subnet.hosts())[: self.n]
            self.hosts = [Host(i, str(addrs[i]), f"h{i}", f"{self.jobns}-h{i}", jobdir / f"h{i}.mnt")
                          for i in range(self.n)]
            self._share_cpus()
            (jobdir / "hosts").write_text("127.0.0.1 localhost\n::1 localhost\n"
                                          + "".join(f"{h.address} {h.name}\n" for h in self.hosts))
            _batch(None, "ip", [f"netns add {self.jobns}"] + [f"netns add {h.netns}" for h in self.hosts])
            lines = ["link set lo up", "link add br0 type bridge", "link set br0 up"]
            for h in self.hosts:
                lines += [f"link add h{h.index} type veth peer name eth0 netns {h.netns}",
                          f"link set h{h.index} master br0", f"link set h{h.index} up"]
            _batch(self.jobns, "ip", lines)
            for h in self.hosts:
                _batch(h.netns, "ip", ["link set lo up", f"addr add {h.address}/{self.subnet.prefixlen} dev eth0",
                                       "link set eth0 up"])
                self._make_mount_ns(h)
            self.shape(*self._link)
        except BaseException:
            self.close()
            raise
        return self

    def _share_cpus(self) -> None:
        # Decides the CPU shares and D, and makes each host's cgroups (before any process
        # can start in a host, so none runs unconfined).
        want = self._cpu_shares
        why = _cg.problem() if want is not False else None
        if why is None and want is not False:
            usable = _cg.usable_cpus()
            cpus = self._host_cpus or usable
            if not cpus or not set(cpus) <= set(usable):
                raise TestHostsError(f"host_cpus={','.join(map(str, self._host_cpus))} names cores this process may "
                                     f"not use; pick among {','.join(map(str, usable))}")
            plans = plan_host_cpus(self.n, cpus, period_us=self._cpu_period_us)
            try:
                for h, plan in zip(self.hosts, plans):
                    h.cgroup_dirs = _cg.create(h.netns, plan)
            except _cg.CgroupError as exc:  # a machine whose cgroups looked usable but are not
                _cg.remove(_cg.named(f"{self.jobns}-h"))
                for h in self.hosts:
                    h.cgroup_dirs = ()
                why = str(exc)
        if why is not None and want:
            raise TestHostsError(why)
        if want is False or why is not None:
            self.dilation = float(self._dilation) if not isinstance(self._dilation, str) else 1.0
            if why is not None:
                log.warning("test hosts %s: no CPU shares (%s); the hosts share the cores freely, links dilated x%.3g",
                            self.job, why, self.dilation)
            return
        self.host_cpus = plans
        self.cpu_share = self.host_cpus[0].share
        self.dilation = dilation_factor(self._dilation, self.n, len(cpus))
        log.info("test hosts %s: CPU shares of %.3g cores per host (cpus %s), links dilated x%.3g", self.job,
                 self.cpu_share, " ".join(p.cpus for p in self.host_cpus), self.dilation)

    def _make_mount_ns(self, h: Host) -> None:
        # A persistent mount namespace (pinned by a bind mount of its ns file) made from
        # inside the host's network namespace, so its fresh sysfs shows the host's
        # interfaces. The copies of /run/netns and of our state dir are detached in it: a
        # host must not pin the other hosts' namespaces.
        uts = h.mnt.with_suffix(".uts")
        h.mnt.touch()
        uts.touch()
        script = (f"mount -t tmpfs -o size={self.shm_size},mode=1777 tmpfs /dev/shm && "
                  f"mount -t sysfs sysfs /sys && mount --bind {h.mnt.parent / 'hosts'} /etc/hosts && "
                  f"hostname {h.name} && {{ umount -R -l {STATE_DIR} {NETNS_DIR} 2>/dev/null; true; }}")
        _run(["nsenter", f"--net={NETNS_DIR / h.netns}", "unshare", f"--mount={h.mnt}", f"--uts={uts}",
              "--propagation", "private", "sh", "-c", script])

    def close(self) -> None:
        """Kill everything started inside the hosts and remove all that the job made (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for h in self.hosts:
            for p in h._procs:
                if p.poll() is None:
                    p.kill()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        _teardown(self.job)
        _LIVE.discard(self)

    # --- links ---------------------------------------------------------------------------

    def _validate_link(self, bandwidth: str | None, latency_ms: float, shared_link: bool) -> None:
        if bandwidth:
            try:
                rate_bits(bandwidth)
            except ValueError as exc:
                raise TestHostsError(str(exc)) from None
        if latency_ms < 0:
            raise TestHostsError(f"latency_ms={latency_ms} must be >= 0")
        if latency_ms > 0:
            if self._netem is None:
                self._netem = netem_available()
            if not self._netem:
                raise TestHostsError(f"latency_ms={latency_ms} needs the netem qdisc, which this kernel lacks "
                                     "(CONFIG_NET_SCH_NETEM); set latency_ms=0 or use a kernel with netem")

    def shape(self, bandwidth: str | None = None, latency_ms: float = 0.0, shared_link: bool = False) -> None:
        """Replace the link emulation of every host (no argument = unshaped).

        Args:
            bandwidth: tc rate per host and direction, or of the one shared link.
            latency_ms: one-way host-to-host delay (per-host mode: half on each end).
            shared_link: one shaped link for all hosts instead of one per host.

        With a dilation D (:attr:`dilation`) the qdiscs get bandwidth / D and latency x D;
        :attr:`link` keeps the values asked for.
        """
        self._validate_link(bandwidth, latency_ms, shared_link)
        asked = (bandwidth or None, float(latency_ms), bool(shared_link))
        if bandwidth:
            bandwidth = dilated_rate(bandwidth, self.dilation)
        latency_ms = dilated_latency_ms(latency_ms, self.dilation)
        # Clear first; tc -force keeps going past "nothing to delete".
        _run(["tc", "-n", self.jobns, "-force", "-batch", "-"], check=False,
             input="".join(f"qdisc del dev h{h.index} root\nqdisc del dev h{h.index} ingress\n" for h in self.hosts))
        _run(["ip", "-n", self.jobns, "link", "del", "ifb0"], check=False)
        for h in self.hosts:
            _run(["tc", "-n", h.netns, "qdisc", "del", "dev", "eth0", "root"], check=False)
        if shared_link and (bandwidth or latency_ms):
            # Every frame entering the bridge takes one trip through ifb0's queue (ifb sends
            # it back to the bridge after), so the hosts share that queue's rate.
            _batch(self.jobns, "ip", ["link add ifb0 type ifb", "link set ifb0 up"])
            lines = _qdisc_lines("ifb0", bandwidth, latency_ms)
            for h in self.hosts:
                lines += [f"qdisc add dev h{h.index} ingress",
                          f"filter add dev h{h.index} parent ffff: protocol all u32 match u32 0 0 "
                          "action mirred egress redirect dev ifb0"]
            _batch(self.jobns, "tc", lines)
        elif bandwidth or latency_ms:
            _batch(self.jobns, "tc", [ln for h in self.hosts for ln in _qdisc_lines(f"h{h.index}", bandwidth,
                                                                                     latency_ms / 2)])
            for h in self.hosts:
                _batch(h.netns, "tc", _qdisc_lines("eth0", bandwidth, latency_ms / 2))
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
        out = []
        for h in self.hosts:
            info = json.loads(_run(["ip", "-n", h.netns, "-j", "-s", "link", "show", "dev", "eth0"]).stdout)[0]
            s = info["stats64"]
            out.append({"host": h.index, "address": h.address, "tx_bytes": s["tx"]["bytes"],
                        "rx_bytes": s["rx"]["bytes"], "tx_packets": s["tx"]["packets"],
                        "rx_packets": s["rx"]["packets"]})
        return out

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


# ---------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    """``python -m dgl_grappa.cluster.testhosts [-n N] [--bandwidth R] ... [-- CMD ...]``.

    Creates the hosts, prints their addresses and prefixes, runs CMD in every host at once
    (with ``TESTHOST_INDEX``, ``TESTHOST_ADDRS`` and ``MASTER_ADDR`` = host 0 set; output
    lines tagged ``[h<i>]``), prints the per-host wire bytes and tears everything down.

    Returns:
        The largest exit status of the commands (124 when they ran past ``--timeout``).
    """
    import argparse
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(prog="python -m dgl_grappa.cluster.testhosts",
                                 description="emulated hosts on this machine (network + mount namespaces)")
    ap.add_argument("-n", "--hosts", type=int, default=2, help="number of hosts (default 2)")
    ap.add_argument("--bandwidth", default="", help="tc rate of each host's link, e.g. 1gbit (default: unshaped)")
    ap.add_argument("--latency-ms", type=float, default=0.0, help="one-way host-to-host delay (needs netem)")
    ap.add_argument("--shared-link", action="store_true", help="all hosts behind one shaped link")
    ap.add_argument("--cpu-shares", action="store_true",
                    help="give each host a fixed share of the cores (cgroups) and dilate the links to match")
    ap.add_argument("--host-cpus", default="", help="with --cpu-shares: the cores to share out, e.g. 0 or 0-3 "
                                                    "(default: all this process may use)")
    ap.add_argument("--dilation", default="auto",
                    help="auto (D = hosts per core with --cpu-shares), off, or a factor D: links at bandwidth / D, "
                         "latency x D")
    ap.add_argument("--timeout", type=float, default=600.0, help="bound on CMD, seconds (default 600)")
    ap.add_argument("--sweep", action="store_true", help="only remove leftovers of dead jobs, then exit")
    args = ap.parse_args(own)
    if args.sweep:
        print("removed stale jobs:", " ".join(sweep_stale()) or "none")
        return 0
    try:
        with TestHosts(args.hosts, args.bandwidth, args.latency_ms, args.shared_link, cpu_shares=args.cpu_shares,
                       host_cpus=args.host_cpus, dilation=args.dilation) as hosts:
            cpu = (f", {hosts.cpu_share:.3g} cores per host, dilation {hosts.dilation:.3g}"
                   if hosts.cpu_share is not None or hosts.dilation != 1 else "")
            print(f"job {hosts.job}: {len(hosts)} hosts, link {hosts.link}{cpu}", flush=True)
            for h in hosts:
                cpus = f" cpus {hosts.host_cpus[h.index].cpus}" if hosts.host_cpus else ""
                print(f"  h{h.index}  {h.address:<15}{cpus} {' '.join(h.prefix()[-6:])}", flush=True)
            if not cmd:
                return 0
            before = hosts.wire_bytes()
            procs, pumps = [], []
            for h in hosts:
                env = dict(os.environ, TESTHOST_INDEX=str(h.index), TESTHOST_ADDRS=",".join(hosts.addresses),
                           MASTER_ADDR=hosts[0].address)
                p = h.popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                t = threading.Thread(target=lambda p=p, i=h.index: [print(f"[h{i}] {ln}", end="", flush=True)
                                                                    for ln in p.stdout], daemon=True)
                t.start()
                procs.append(p)
                pumps.append(t)
            deadline, rcs = time.monotonic() + args.timeout, []
            for p in procs:
                try:
                    rcs.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)
                    rcs.append(124)
            for t in pumps:
                t.join(timeout=5)
            for b, a in zip(before, hosts.wire_bytes()):
                print(f"  h{a['host']}  tx {a['tx_bytes'] - b['tx_bytes']:>12,d} B   "
                      f"rx {a['rx_bytes'] - b['rx_bytes']:>12,d} B   exit {rcs[a['host']]}")
            return max(rcs)
    except TestHostsError as exc:
        print(f"testhosts: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
