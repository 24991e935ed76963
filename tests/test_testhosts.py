"""Emulated test hosts: isolation, private /dev/shm, shaped links, gloo across hosts, cleanup.

Real namespaces throughout; skipped (with the reason) only where they cannot be made (not root).
No test asserts on absolute time: throughput is compared as a ratio with a measurement
taken in the same test.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from dgl_grappa.cluster.hosts import Remote, WorkerIdentity, remote_argv, torchrun_env
from dgl_grappa.cluster.testhosts import (
    NETNS_DIR,
    STATE_DIR,
    TestHosts,
    TestHostsError,
    cgroups,
    check_hosts_possible,
    netem_available,
    sweep_stale,
)

_WHY = check_hosts_possible()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=f"test hosts cannot be made here: {_WHY}")
PY = sys.executable
MB = 1 << 20

LISTEN = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(8); s.settimeout(60)
print("ready", flush=True)
while True:
    c, _ = s.accept(); c.sendall(sys.argv[3].encode()); c.close()
"""
PROBE = """
import json, socket, sys
out = {}
for t in sys.argv[1:]:
    h, p = t.rsplit(":", 1)
    try:
        with socket.create_connection((h, int(p)), timeout=1.0) as c:
            c.settimeout(5); out[t] = c.recv(16).decode()
    except OSError as e:
        out[t] = "ERR " + type(e).__name__
print(json.dumps(out))
"""
RECV = """
import json, socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1); s.settimeout(60)
print("ready", flush=True)
c, _ = s.accept(); c.settimeout(60)
n, t0 = 0, None
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    t0 = t0 or time.time()
    n += len(b)
print(json.dumps({"bytes": n, "t0": t0, "t1": time.time()}), flush=True)
"""
SEND = """
import socket, sys
n = int(sys.argv[3]); buf = bytes(1 << 20)
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60) as s:
    while n > 0:
        s.sendall(buf[:min(n, len(buf))]); n -= len(buf)
"""
ALLREDUCE = """
import datetime, os, torch, torch.distributed as dist
from dgl_grappa.cluster.hosts import worker_identity
me = worker_identity(os.environ)
dist.init_process_group("gloo", init_method="env://", rank=me.rank, world_size=me.world_size,
                        timeout=datetime.timedelta(seconds=60))
t = torch.tensor([float(me.rank + 1)] * 1000)
dist.all_reduce(t)
print(me.rank, me.host_index, t[0].item(), flush=True)
dist.destroy_process_group()
"""


def _ready(p, timeout=20.0):
    # The child prints "ready" once it listens; a bounded wait (readline blocks, so poll first).
    import select

    r, _, _ = select.select([p.stdout], [], [], timeout)
    assert r and p.stdout.readline().strip() == "ready", "listener did not start"


def _machine_addresses():
    out = subprocess.run(["ip", "-j", "-4", "addr", "show"], capture_output=True, text=True, timeout=10).stdout
    return [a["local"] for i in json.loads(out) for a in i.get("addr_info", []) if a.get("scope") == "global"]


def _leftovers(job):
    """Everything of a job that should be gone after teardown."""
    names = [n for n in (os.listdir(NETNS_DIR) if NETNS_DIR.is_dir() else []) if n.startswith(f"dgh-{job}")]
    return names + ([str(STATE_DIR / job)] if (STATE_DIR / job).exists() else []) + cgroups.named(f"dgh-{job}-")


def _alive(pid):
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


# --- isolation ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 4])
def test_hosts_reach_each_other_and_nothing_else(n):
    # A listener in the machine's own namespace: no host may reach it, under any address.
    outside = socket.socket()
    outside.bind(("0.0.0.0", 0))
    outside.listen(8)
    port = outside.getsockname()[1]
    try:
        with TestHosts(n) as hosts:
            for h in hosts:
                p = h.popen([PY, "-c", LISTEN, h.address, "7000", f"h{h.index}"], stdout=subprocess.PIPE, text=True)
                _ready(p)
            foreign = [f"{a}:{port}" for a in _machine_addresses()] + [f"127.0.0.1:{port}", f"10.77.0.200:{port}"]
            probes = [
                h.popen(
                    [PY, "-c", PROBE, *[f"{o.address}:7000" for o in hosts], *foreign],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for h in hosts
            ]
            for h, p in zip(hosts, probes):
                got = json.loads(p.communicate(timeout=30)[0])
                for o in hosts:
                    assert got[f"{o.address}:7000"] == f"h{o.index}", (h.index, got)
                for t in foreign:
                    assert got[t].startswith("ERR"), f"host {h.index} reached {t} outside the job: {got}"
                routes = subprocess.run(
                    ["ip", "-n", h.netns, "route"], capture_output=True, text=True, timeout=10
                ).stdout
                assert "default" not in routes and routes.count("\n") == 1, routes
    finally:
        outside.close()


def test_each_host_has_its_own_dev_shm():
    with TestHosts(2) as hosts:
        hosts[0].run(["sh", "-c", "echo x > /dev/shm/grappa-probe"], timeout=10, check=True)
        ls = [h.run(["ls", "/dev/shm"], timeout=10, capture_output=True, text=True).stdout.split() for h in hosts]
        assert ls == [["grappa-probe"], []]  # a second process of host 0 sees it, host 1 does not
        assert not Path("/dev/shm/grappa-probe").exists()
        # sysfs of the host's own namespace: tools that read /sys/class/net see its interfaces
        assert hosts[1].run(["ls", "/sys/class/net"], timeout=10, capture_output=True, text=True).stdout.split() == [
            "eth0",
            "lo",
        ]
        # its own hostname, resolving to its own address; the other hosts resolve by name too
        code = (
            "import socket; print(socket.gethostname(), socket.gethostbyname(socket.gethostname()), "
            "socket.gethostbyname('h0'))"
        )
        out = hosts[1].run([PY, "-c", code], timeout=10, capture_output=True, text=True, check=True).stdout.split()
        assert out == ["h1", hosts[1].address, hosts[0].address]
        assert socket.gethostname() != "h1" and "h1" not in Path("/etc/hosts").read_text().split()


# --- links -------------------------------------------------------------------------------


def _transfer(hosts, pairs, nbytes):
    """Concurrent bulk TCP transfers src -> dst; returns (aggregate bytes/s, per-pair results)."""
    recvs = []
    for k, (src, dst) in enumerate(pairs):
        p = hosts[dst].popen([PY, "-c", RECV, hosts[dst].address, str(7100 + k)], stdout=subprocess.PIPE, text=True)
        _ready(p)
        recvs.append(p)
    sends = [
        hosts[src].popen([PY, "-c", SEND, hosts[dst].address, str(7100 + k), str(nbytes)])
        for k, (src, dst) in enumerate(pairs)
    ]
    for s in sends:
        assert s.wait(timeout=60) == 0
    res = [json.loads(r.communicate(timeout=60)[0]) for r in recvs]
    assert all(r["bytes"] == nbytes for r in res)
    span = max(r["t1"] for r in res) - min(r["t0"] for r in res)
    return sum(r["bytes"] for r in res) / span, res


def test_shaping_per_host_links_and_shared_link():
    n = 4 * MB
    with TestHosts(4) as hosts:
        free, _ = _transfer(hosts, [(0, 1)], 4 * n)  # larger: an unshaped transfer is over in ~20 ms
        hosts.shape("100mbit")
        before = hosts.wire_bytes()
        one, _ = _transfer(hosts, [(0, 1)], n)
        after = hosts.wire_bytes()
        d = [{k: a[k] - b[k] for k in ("tx_bytes", "rx_bytes")} for a, b in zip(after, before)]
        disjoint, _ = _transfer(hosts, [(0, 1), (2, 3)], n)  # separate NICs: about 2x one link
        incast, _ = _transfer(hosts, [(0, 1), (2, 1)], n)  # both into host 1's downlink: about 1x
        hosts.shape("100mbit", shared_link=True)
        shared, _ = _transfer(hosts, [(0, 1), (2, 3)], n)  # one link for all: about 1x
        hosts.shape()
        free2, _ = _transfer(hosts, [(0, 1)], 4 * n)
    mbit = {
        k: round(v * 8 / 1e6)
        for k, v in dict(free=free, one=one, disjoint=disjoint, incast=incast, shared=shared, free_again=free2).items()
    }
    print("throughput Mbit/s:", mbit)
    assert one < 0.5 * free, mbit
    assert one < 0.5 * free2, mbit  # shape() with no argument removes the shaping again
    assert disjoint > 1.5 * incast, f"download of host 1 is not shaped, or hosts share a link: {mbit}"
    assert disjoint > 1.5 * shared, f"shared_link does not share one link: {mbit}"
    # the counters of each host's interface see the bytes (plus headers), and only where they went
    assert d[0]["tx_bytes"] >= n and d[1]["rx_bytes"] >= n, d
    assert d[0]["tx_bytes"] < 1.2 * n and d[1]["rx_bytes"] < 1.2 * n, d
    assert d[2]["rx_bytes"] < n / 100 and d[3]["rx_bytes"] < n / 100, d


def test_both_veth_ends_are_shaped():
    with TestHosts(2, bandwidth="200mbit") as hosts:

        def qd(ns: str, dev: str) -> str:
            return subprocess.run(
                ["tc", "-n", ns, "qdisc", "show", "dev", dev], capture_output=True, text=True, timeout=10
            ).stdout

        for h in hosts:
            assert "tbf" in qd(h.netns, "eth0") and "200Mbit" in qd(h.netns, "eth0")  # upload
            assert "tbf" in qd(hosts.jobns, f"h{h.index}")  # download
        assert hosts.link == {"bandwidth": "200mbit", "latency_ms": 0.0, "shared_link": False}


def test_latency_needs_netem():
    if netem_available():
        with TestHosts(2, latency_ms=40) as hosts:
            p = hosts[1].popen([PY, "-c", LISTEN, hosts[1].address, "7000", "x"], stdout=subprocess.PIPE, text=True)
            _ready(p)
            code = (
                "import socket, sys, time; t = time.time(); socket.create_connection((sys.argv[1], 7000), 5)"
                ".close(); print(time.time() - t)"
            )
            rtt = float(
                hosts[0]
                .run([PY, "-c", code, hosts[1].address], timeout=30, capture_output=True, text=True, check=True)
                .stdout
            )
            assert rtt >= 0.08  # a TCP connect is one round trip: 2 x 40 ms at least
    else:
        before = set(os.listdir(NETNS_DIR)) if NETNS_DIR.is_dir() else set()
        with pytest.raises(TestHostsError, match="latency_ms=5.0 needs the netem qdisc") as e:
            TestHosts(2, latency_ms=5).start()
        assert "\n" not in str(e.value)
        after = set(os.listdir(NETNS_DIR)) if NETNS_DIR.is_dir() else set()
        assert after <= before, "a failed start left namespaces behind"
        warnings.warn(
            "this kernel has no netem: checked that latency_ms is refused with a clear error; "
            "the delay itself was not measured"
        )


def test_bad_rate_is_one_line_error():
    with pytest.raises(TestHostsError, match="'fast' is not a tc rate"):
        TestHosts(2, bandwidth="fast").start()


# --- CPU shares and time dilation ---------------------------------------------------------

_CG_WHY = cgroups.problem()
needs_cgroups = pytest.mark.skipif(_CG_WHY is not None, reason=f"CPU shares cannot be given here: {_CG_WHY}")


def _cgroup_of(pid):
    """{"cpu": path, "cpuset": path} of a live process (paths as /proc/<pid>/cgroup writes them)."""
    out = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        out.update({c: path for c in ctrls.split(",") if c in ("cpu", "cpuset")})
    return out


def _settled_cgroup(pid, want, tries=200):
    # Popen returns before the wrapper has written its PID; a bounded wait for it.
    for _ in range(tries):
        if _cgroup_of(pid) == want:
            return True
        time.sleep(0.05)
    return False


def _qdiscs(ns, dev):
    return subprocess.run(
        ["tc", "-n", ns, "qdisc", "show", "dev", dev], capture_output=True, text=True, timeout=10
    ).stdout


def _name(proc):
    try:
        return proc.name()
    except Exception:  # gone meanwhile
        return ""


def _read(d, name):
    return Path(d, name).read_text().strip()


@needs_cgroups
def test_two_hosts_on_one_core_get_half_a_core_each_and_dilated_links():
    core = cgroups.usable_cpus()[-1]
    lat = 4.0 if netem_available() else 0.0
    before = set(cgroups.named("dgh-"))
    pids = []
    with TestHosts(
        2, bandwidth="1gbit", latency_ms=lat, cpu_shares=True, host_cpus=str(core), cpu_period_us=8000
    ) as hosts:
        job = hosts.job
        assert hosts.cpu_share == 0.5 and hosts.dilation == 2.0
        assert hosts.link == {"bandwidth": "1gbit", "latency_ms": lat, "shared_link": False}  # as asked
        remote = Remote("netns", prefixes=tuple(tuple(h.prefix()) for h in hosts))
        for h in hosts:
            want = {"cpu": f"/dgh-{job}-h{h.index}", "cpuset": f"/dgh-{job}-h{h.index}"}
            cpu_dir, cpuset_dir = h.cgroup_dirs
            assert _read(cpuset_dir, "cpuset.cpus") == str(core)
            assert (int(_read(cpu_dir, "cpu.cfs_quota_us")), int(_read(cpu_dir, "cpu.cfs_period_us"))) == (4000, 8000)
            # what a host starts, and what that forks (an orphan whose parent exits at once), runs in its cgroups
            p = h.popen(["sleep", "300"])
            orphan = int(
                h.run(
                    ["sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"], timeout=10, capture_output=True, text=True
                ).stdout
            )
            pids += [p.pid, orphan]
            assert _settled_cgroup(p.pid, want) and _cgroup_of(orphan) == want
            assert {p.pid, orphan} <= set(cgroups.pids(list(h.cgroup_dirs)))
            # the launchers' path: the ssh-style shell string behind the host's prefix
            out = subprocess.run(
                remote_argv(remote, h.index, h.address, ["cat", "/proc/self/cgroup"]),
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout
            assert f"cpu:/dgh-{job}-h{h.index}" in out and f"cpuset:/dgh-{job}-h{h.index}" in out
            # both ends of the host's link at bandwidth / D (and, with netem, latency x D, half on each end)
            for ns, dev in ((h.netns, "eth0"), (hosts.jobns, f"h{h.index}")):
                qd = _qdiscs(ns, dev)
                assert "tbf" in qd and "rate 500Mbit" in qd, qd
                if lat:
                    assert "delay 4ms" in qd, qd
    assert not _leftovers(job)
    assert set(cgroups.named("dgh-")) <= before
    assert not [p for p in pids if _alive(p)], "processes outlived their hosts"


@needs_cgroups
def test_whole_cores_are_pinned_and_not_dilated_and_shared_links_are_dilated_too():
    cores = cgroups.usable_cpus()
    if len(cores) < 2:
        pytest.skip(f"needs 2 usable cores for a whole core per host, has {len(cores)}")
    pair = f"{cores[0]},{cores[1]}"
    with TestHosts(2, bandwidth="1gbit", cpu_shares=True, host_cpus=pair) as hosts:
        assert hosts.cpu_share == 1.0 and hosts.dilation == 1.0
        assert [_read(h.cgroup_dirs[1], "cpuset.cpus") for h in hosts] == [str(cores[0]), str(cores[1])]
        assert [_read(h.cgroup_dirs[0], "cpu.cfs_quota_us") for h in hosts] == ["-1", "-1"]
        assert "rate 1Gbit" in _qdiscs(hosts[0].netns, "eth0")
        job = hosts.job
    assert not _leftovers(job)
    # a factor given explicitly wins over auto's D = 1 (the shares stay whole cores)
    with TestHosts(2, bandwidth="1gbit", cpu_shares=True, host_cpus=pair, dilation="4") as hosts:
        assert hosts.cpu_share == 1.0 and hosts.dilation == 4.0
        assert "rate 250Mbit" in _qdiscs(hosts[0].netns, "eth0") and "rate 250Mbit" in _qdiscs(hosts.jobns, "h1")
        job = hosts.job
    assert not _leftovers(job)
    # four hosts on two cores: two per core, half a core each, D = 2 on the one shared link as well
    with TestHosts(4, bandwidth="1gbit", shared_link=True, cpu_shares=True, host_cpus=pair) as hosts:
        assert hosts.cpu_share == 0.5 and hosts.dilation == 2.0
        assert [_read(h.cgroup_dirs[1], "cpuset.cpus") for h in hosts] == [str(cores[0])] * 2 + [str(cores[1])] * 2
        assert "rate 500Mbit" in _qdiscs(hosts.jobns, "ifb0")
        job = hosts.job
    assert not _leftovers(job)


def test_a_factor_without_cpu_shares_only_dilates_the_links():
    before = set(cgroups.named("dgh-"))
    with TestHosts(2, bandwidth="1gbit", dilation=4) as hosts:
        assert hosts.dilation == 4.0 and hosts.cpu_share is None and not hosts[0].cgroup_dirs
        assert hosts[0].prefix()[0] == "nsenter"
        assert "rate 250Mbit" in _qdiscs(hosts[1].netns, "eth0")
        assert set(cgroups.named("dgh-")) == before
    with TestHosts(2, bandwidth="1gbit", cpu_shares=None, dilation="off") as hosts:  # off: no shares either
        assert hosts.dilation == 1.0 and hosts.cpu_share is None and not hosts[0].cgroup_dirs


def test_where_cgroups_are_missing_auto_logs_and_asking_is_one_line(monkeypatch):
    # A machine without cgroup v1, simulated by what cgroups.problem() says; the hosts are real.
    import logging

    monkeypatch.setattr(cgroups, "problem", lambda: "no cgroup v1 here (simulated)")
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("dgl_grappa").addHandler(handler)
    try:
        with TestHosts(2, bandwidth="1gbit", cpu_shares=None) as hosts:
            assert hosts.cpu_share is None and hosts.dilation == 1.0 and not hosts[1].cgroup_dirs
            assert "rate 1Gbit" in _qdiscs(hosts[1].netns, "eth0")
    finally:
        logging.getLogger("dgl_grappa").removeHandler(handler)
    assert any("no CPU shares (no cgroup v1 here (simulated))" in r.getMessage() for r in records)
    before = set(os.listdir(NETNS_DIR)) if NETNS_DIR.is_dir() else set()
    with pytest.raises(TestHostsError, match="no cgroup v1 here") as e:
        TestHosts(2, cpu_shares=True).start()
    assert "\n" not in str(e.value)
    assert (set(os.listdir(NETNS_DIR)) if NETNS_DIR.is_dir() else set()) <= before


@needs_cgroups
def test_bad_host_cpus_is_one_line_and_leaves_nothing():
    before = set(cgroups.named("dgh-"))
    with pytest.raises(TestHostsError, match="host_cpus=4095 names cores this process may not use") as e:
        TestHosts(2, cpu_shares=True, host_cpus="4095").start()
    assert "\n" not in str(e.value) and set(cgroups.named("dgh-")) <= before
    with pytest.raises(TestHostsError, match="is not a cpu list"):
        TestHosts(2, cpu_shares=True, host_cpus="0-")
    with pytest.raises(TestHostsError, match="^dilation='fast' is not auto, off or a factor > 0"):
        TestHosts(2, dilation="fast")


@needs_cgroups
def test_cluster_gives_hosts_cpu_shares_from_the_config(tmp_path):
    import psutil

    from dgl_grappa.cluster.remote import Cluster
    from dgl_grappa.config import load_config

    core = cgroups.usable_cpus()[0]
    args = [
        "--launch.remote=netns",
        "--partition.num_parts=2",
        "--network.bandwidth=1gbit",
        f"--run.output_dir={tmp_path}",
    ]
    with Cluster(load_config(None, args + [f"--network.host_cpus={core}"]), 2, "job") as cl:
        job = cl.access.hosts.job
        d = cl.describe()
        assert (d["network_dilation"], d["host_cpu_share"]) == (2.0, 0.5)
        assert [h["cpus"] for h in d["hosts"]] == [str(core)] * 2
        assert cl.threads_per_worker() == 1 and cl.threads_per_worker(3) == 3
        # a launcher's long-lived command (under the guard) and its child are in the host's cgroups
        p = cl.start(1, ["sleep", "300"], {}, tmp_path / "sleep.log", "sleep")
        want = {"cpu": f"/dgh-{job}-h1", "cpuset": f"/dgh-{job}-h1"}
        assert _settled_cgroup(p.pid, want)
        for _ in range(200):  # bounded: the guard starts its command once Python is up
            # (the guard's short-lived helpers, e.g. ldconfig, come and go: look for the command)
            sleeps = [k for k in psutil.Process(p.pid).children(recursive=True) if k.pid and _name(k) == "sleep"]
            if sleeps:
                break
            time.sleep(0.05)
        assert sleeps and all(_cgroup_of(k.pid) == want for k in sleeps)
        assert "rate 500Mbit" in _qdiscs(cl.access.hosts[1].netns, "eth0")
    assert not _leftovers(job)
    with Cluster(load_config(None, args + ["--network.dilation=off"]), 2, "job") as cl:
        d = cl.describe()
        assert (d["network_dilation"], d["host_cpu_share"]) == (1.0, None) and "cpus" not in d["hosts"][0]
        assert not cl.access.hosts[0].cgroup_dirs


# --- a real collective across hosts ------------------------------------------------------


def test_gloo_allreduce_across_three_hosts():
    with TestHosts(3, bandwidth="1gbit") as hosts:
        # No GLOO_SOCKET_IFNAME: as on real machines, each host's name resolves to its address.
        remote = Remote("netns", prefixes=tuple(tuple(h.prefix()) for h in hosts), env={"OMP_NUM_THREADS": "1"})
        before = hosts.wire_bytes()
        procs = []
        for h in hosts:
            ident = WorkerIdentity(h.index, 3, 0, 1, h.index, hosts[0].address, 29531, "torchrun")
            argv = remote_argv(
                remote, h.index, h.address, [PY, "-c", ALLREDUCE], env=torchrun_env(ident), cwd=os.getcwd()
            )
            procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        try:
            outs = [p.communicate(timeout=120) for p in procs]
        finally:
            for p in procs:
                p.kill()
        for p, (out, err) in zip(procs, outs):
            assert p.returncode == 0, err[-2000:]
        got = sorted(tuple(o.split()) for o, _ in outs)
        assert got == [("0", "0", "6.0"), ("1", "1", "6.0"), ("2", "2", "6.0")]
        after = hosts.wire_bytes()
        for a, b in zip(after, before):
            assert a["tx_bytes"] - b["tx_bytes"] > 4000, (a, b)  # each host sent its share of the ring


NASTY = ["it's", 'say "hi"', "$HOME", "`id`", "a;b", "x y", "", "*", "new\nline", "--flag", "é"]


def test_shell_quoting_through_a_host():
    # the ssh path's shell string, run by sh inside a host: argv, env and cwd arrive intact
    with TestHosts(1) as hosts:
        code = "import json, os, sys; print(json.dumps([sys.argv[1:], os.environ['ODD'], os.getcwd()]))"
        argv = remote_argv(
            Remote("netns", prefixes=(tuple(hosts[0].prefix()),)),
            0,
            hosts[0].address,
            [PY, "-c", code, *NASTY],
            env={"ODD": "a'b\"c $d"},
            cwd="/tmp",
        )
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout
        assert json.loads(out) == [NASTY, "a'b\"c $d", "/tmp"]


# --- cleanup -----------------------------------------------------------------------------


def test_cleanup_after_an_exception_kills_everything_inside():
    links_before = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True, timeout=10).stdout
    pids, inodes = [], set()
    with pytest.raises(RuntimeError, match="boom"):
        with TestHosts(2) as hosts:
            job = hosts.job
            for h in hosts:
                pids.append(h.popen(["sleep", "300"]).pid)
                # an orphan: its parent exits at once, so only the namespace knows it
                out = h.run(
                    ["sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"], timeout=10, capture_output=True, text=True
                ).stdout
                pids.append(int(out))
                inodes |= {os.stat(NETNS_DIR / h.netns).st_ino, os.stat(h.mnt).st_ino}
            assert all(_alive(p) for p in pids)
            raise RuntimeError("boom")
    assert not _leftovers(job)
    assert not [p for p in pids if _alive(p)], "processes outlived their hosts"
    for d in Path("/proc").iterdir():  # nobody holds the namespaces any more
        if d.name.isdigit():
            try:
                assert {os.stat(d / "ns" / "net").st_ino, os.stat(d / "ns" / "mnt").st_ino}.isdisjoint(inodes), d
            except OSError:
                pass
    assert subprocess.run(["ip", "-br", "link"], capture_output=True, text=True, timeout=10).stdout == links_before


OWNER = """
import sys, time
from dgl_grappa.cluster.testhosts import TestHosts
h = TestHosts(2, cpu_shares=sys.argv[1] == "shares").start()
h[1].popen(["sleep", "300"])
print(h.job, flush=True)
time.sleep(120)
"""


def _owner(shares=False):
    p = subprocess.Popen([PY, "-c", OWNER, "shares" if shares else "-"], stdout=subprocess.PIPE, text=True)
    import select

    r, _, _ = select.select([p.stdout], [], [], 30)
    assert r, "owner did not start"
    return p, p.stdout.readline().strip()


def test_sigterm_tears_down():
    p, job = _owner()
    try:
        assert _leftovers(job)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        p.kill()
        p.wait(timeout=10)
    assert not _leftovers(job)


def _kill_owner(shares=False):
    """An owner killed by SIGKILL (no cleanup code runs): its job and a process inside it remain."""
    p, job = _owner(shares)
    try:
        sleeper = _pids_of(f"dgh-{job}-h1")
    finally:
        p.kill()  # SIGKILL: no cleanup code runs
        p.wait(timeout=10)
    assert len(sleeper) == 1
    assert _leftovers(job) and _alive(sleeper[0])
    return job, sleeper[0]


def _pids_of(netns):
    for _ in range(100):
        pids = [
            int(x)
            for x in subprocess.run(
                ["ip", "netns", "pids", netns], capture_output=True, text=True, timeout=10
            ).stdout.split()
        ]
        if pids:
            return pids
        time.sleep(0.05)  # nsenter enters the namespace a moment after Popen returns
    return []


def test_stale_job_of_a_killed_owner_is_swept_and_live_jobs_are_not():
    with TestHosts(1) as live:
        job, sleeper = _kill_owner()
        removed = sweep_stale()
        assert job in removed and live.job not in removed
        assert live.wire_bytes()[0]["host"] == 0  # still there
        assert not _leftovers(job) and not _alive(sleeper)
    # and a new job sweeps by itself when it starts
    job, sleeper = _kill_owner()
    with TestHosts(1):
        assert not _leftovers(job) and not _alive(sleeper)


@needs_cgroups
def test_stale_job_with_cpu_shares_is_swept_cgroups_included():
    job, sleeper = _kill_owner(shares=True)
    assert cgroups.named(f"dgh-{job}-h") and sleeper in cgroups.pids(cgroups.named(f"dgh-{job}-h1"))
    assert job in sweep_stale()
    assert not _leftovers(job) and not _alive(sleeper)


def test_command_line():
    out = subprocess.run(
        [
            PY,
            "-m",
            "dgl_grappa.cluster.testhosts",
            "-n",
            "2",
            "--bandwidth",
            "500mbit",
            "--",
            "sh",
            "-c",
            'echo "$TESTHOST_INDEX $MASTER_ADDR $TESTHOST_ADDRS"',
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "[h0] 0 10.77.0.1 10.77.0.1,10.77.0.2" in out.stdout and "[h1] 1 10.77.0.1" in out.stdout, out.stdout
    job = out.stdout.split()[1].rstrip(":")
    assert "nsenter --net=/run/netns/dgh-" in out.stdout and not _leftovers(job)
    bad = subprocess.run(
        [PY, "-m", "dgl_grappa.cluster.testhosts", "--latency-ms", "-1"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "latency_ms=-1.0" in bad.stderr
