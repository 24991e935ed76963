"""Beyond one host: Grappa and DistDGL across namespace test hosts, workers joining from a torchrun
environment, the ssh path, copied partitions, and that nothing outlives a launcher on any host.

Real processes on real test hosts (:mod:`dgl_grappa.cluster.testhosts`: network + mount namespaces
on a bridge); skipped, with the reason, only where those cannot be made (not root). The
ssh path runs the launcher's real ssh code against the test hosts through
``tests/fake_ssh.py``, which behaves as OpenSSH does for what the launcher relies on (one
shell string, no inherited environment, stdin relayed and closed). No assertion on time.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from dgl_grappa.cluster.procs import ENV_JOB, processes_of_job
from dgl_grappa.cluster.testhosts import NETNS_DIR, TestHosts, check_hosts_possible, sweep_stale
from dgl_grappa.runtime.metrics import ring_allreduce_wire_bytes

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
_WHY = check_hosts_possible()
needs_hosts = pytest.mark.skipif(_WHY is not None, reason=f"test hosts cannot be made here: {_WHY}")

# A small job: 3k nodes, a few steps per epoch.
TINY = """
name: tiny
data: {{name: synthetic, synthetic: {{preset: easy, num_nodes: 3000, avg_degree: 10}}}}
partition: {{num_parts: {parts}, method: metis}}
model: {{name: sage, num_layers: 2, hidden: 16}}
train: {{epochs: {epochs}, batch_size: 300, fanouts: [5, 10], eval_every: 1, lr: 0.03}}
run: {{output_dir: {out}, timeout_s: 240, collective_timeout_s: 120, progress: false}}
"""
# On top of the all-reduce payload, per worker and step: TCP/IP headers and ACKs of the ring's
# messages and the epoch's barrier and clock (measured: ~1.4 KB with 2 workers, ~5.8 KB with 4,
# whose ring sends 2(W-1) = 6 messages per worker and step for a 10 KB model).
PER_WORKER_STEP_OVERHEAD = 8192


def _config(tmp: Path, out: Path | str, parts: int = 2, epochs: int = 2, extra: str = "") -> Path:
    p = tmp / "tiny.yaml"
    p.write_text(TINY.format(parts=parts, epochs=epochs, out=out) + extra)
    return p


def _env(**kw) -> dict:
    env = dict(os.environ, DGLBACKEND="pytorch", PYTHONPATH=str(ROOT), **kw)
    for k in (
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
        "SLURM_PROCID",
        "OMP_NUM_THREADS",
    ):
        if k not in kw:
            env.pop(k, None)
    return env


def _cli(*args, timeout=300, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PY, "-m", "dgl_grappa", *args], cwd=ROOT, env=env or _env(), capture_output=True, text=True, timeout=timeout
    )


def _netns() -> set[str]:
    return {n for n in (os.listdir(NETNS_DIR) if NETNS_DIR.is_dir() else []) if n.startswith("dgh-")}


def _ours_left(before: set[str]) -> list[str]:
    """Test-host namespaces made since ``before`` whose owner is dead (ours; live ones are other jobs')."""
    from dgl_grappa.cluster.testhosts.base import JOB_RE
    from dgl_grappa.cluster.testhosts.teardown import owner_alive

    return sorted(n for n in _netns() - before if not owner_alive(JOB_RE.match(n).group(1)))


def _check_grappa_wire(s: dict, n_hosts: int, one_worker_per_host: bool) -> None:
    hosts = s["wire_hosts"]
    assert [h["host"] for h in hosts] == list(range(n_hosts)), hosts
    assert [h["address"] for h in hosts] == [f"10.77.0.{i + 1}" for i in range(n_hosts)]
    for h in hosts:
        assert h["tx_bytes"] > 0 and h["rx_bytes"] > 0 and h["epochs"] == s["epochs"], h
    # every byte one host sends, another receives (the bridge is the only path); up to the edges
    # of the windows, which each host's reader opens and closes at its own moment
    tx, rx = sum(h["tx_bytes"] for h in hosts), sum(h["rx_bytes"] for h in hosts)
    assert abs(tx - rx) <= 0.02 * tx + 2048 * n_hosts * s["epochs"], hosts
    assert s["wire_bytes_per_epoch"] > 0
    if one_worker_per_host:
        # gradients only: the ring all-reduce's payload plus headers, nothing else on any link
        app = ring_allreduce_wire_bytes([s["grad_bytes_per_epoch"]] * s["num_parts"])
        bound = 1.05 * app + PER_WORKER_STEP_OVERHEAD * s["num_parts"] * s["steps_per_epoch"]
        assert app <= s["wire_bytes_per_epoch"] <= bound, (s["wire_bytes_per_epoch"], app, bound)
    assert s["feature_bytes_per_epoch"] == 0


# ---------------------------------------------------------------------------------------
# The guard: the remote end dies with its launcher
# ---------------------------------------------------------------------------------------

TREE = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
print(child.pid, flush=True)
time.sleep(300)
"""


def _guarded(tag: str, *extra):
    p = subprocess.Popen(
        [PY, "-m", "dgl_grappa.cluster.guard", *extra, "--", PY, "-c", TREE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(**{ENV_JOB: tag}),
        cwd=ROOT,
    )
    r, _, _ = select.select([p.stdout], [], [], 30)
    assert r, "the guarded command did not start"
    grandchild = int(p.stdout.readline())
    return p, grandchild


def _gone(pids, timeout=20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{p}").exists() and "Z" not in _state(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0]
    except (OSError, IndexError):
        return "X"


def test_guard_hangup_kills_the_whole_tree():
    tag = uuid.uuid4().hex
    p, grandchild = _guarded(tag)
    assert len(processes_of_job(tag)) == 3  # guard, command, its child
    p.stdin.close()  # what RemoteProcess.stop() does; also what the launcher's death does
    assert p.wait(timeout=30) == 128 + signal.SIGHUP
    assert _gone([grandchild]) and processes_of_job(tag) == []


def test_guard_kills_the_tree_when_the_launcher_is_killed():
    # A "launcher" holds the guard's stdin and is SIGKILLed: no cleanup code of its own runs.
    tag = uuid.uuid4().hex
    code = (
        "import subprocess, sys; p = subprocess.Popen([sys.executable, '-m', 'dgl_grappa.cluster.guard', '--', "
        f"sys.executable, '-c', {TREE!r}], stdin=subprocess.PIPE); p.wait()"
    )
    launcher = subprocess.Popen(
        [PY, "-c", code], stdout=subprocess.PIPE, text=True, env=_env(**{ENV_JOB: tag}), cwd=ROOT
    )
    r, _, _ = select.select([launcher.stdout], [], [], 30)
    assert r
    grandchild = int(launcher.stdout.readline())
    launcher.kill()
    launcher.wait(timeout=10)
    assert _gone([grandchild]), "the command outlived its launcher"
    assert _gone(processes_of_job(tag)) and processes_of_job(tag) == []


def test_guard_passes_the_exit_status_and_kill_job():
    p = subprocess.Popen(
        [PY, "-m", "dgl_grappa.cluster.guard", "--", PY, "-c", "raise SystemExit(7)"],
        stdin=subprocess.PIPE,
        env=_env(),
        cwd=ROOT,
    )  # stdin held open, as the launcher does
    assert p.wait(timeout=30) == 7
    p.stdin.close()
    tag = uuid.uuid4().hex
    p, grandchild = _guarded(tag, "--no-stdin")
    out = subprocess.run(
        [PY, "-m", "dgl_grappa.cluster.guard", "--kill-job", tag],
        capture_output=True,
        text=True,
        timeout=30,
        env=_env(),
        cwd=ROOT,
    ).stdout
    assert "killed 3 processes" in out
    p.wait(timeout=30)
    assert _gone([grandchild])


# ---------------------------------------------------------------------------------------
# A worker joining from a torchrun environment, no launcher
# ---------------------------------------------------------------------------------------


def _start_workers(
    cfg: Path, n: int, master: str, port: int, popen=subprocess.Popen, logs: Path | None = None, **extra_env
):
    procs = []
    for r in range(n):
        env = _env(
            RANK=str(r),
            WORLD_SIZE=str(n),
            LOCAL_RANK="0",
            LOCAL_WORLD_SIZE="1",
            MASTER_ADDR=master,
            MASTER_PORT=str(port),
            OMP_NUM_THREADS="1",
            **extra_env,
        )
        argv = [PY, "-m", "dgl_grappa", "worker", "--config", str(cfg)]
        f = open(logs / f"worker{r}.log", "w") if logs else subprocess.DEVNULL
        procs.append(popen(r, argv, env, f))
    return procs


def _wait(procs, logs: Path, timeout=240):
    deadline = time.monotonic() + timeout
    try:
        for r, p in enumerate(procs):
            rc = p.wait(timeout=max(1.0, deadline - time.monotonic()))
            assert rc == 0, f"worker {r} exited {rc}:\n" + (logs / f"worker{r}.log").read_text()[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)


def test_worker_joins_from_a_torchrun_environment_on_localhost(tmp_path):
    from dgl_grappa.cluster.launch import free_port

    out = tmp_path / "out"
    cfg = _config(tmp_path, out)
    logs = tmp_path
    procs = _start_workers(
        cfg,
        2,
        "127.0.0.1",
        free_port(),
        logs=logs,
        popen=lambda r, argv, env, f: subprocess.Popen(argv, env=env, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT),
    )
    _wait(procs, logs)
    s = json.loads((out / "summary.json").read_text())
    assert s["num_parts"] == 2 and s["epochs"] == 2 and s["val_acc"] > 0.3
    assert (out / "partitions" / "0" / "grappa.json").is_file()  # made by rank 0, with nobody's help
    assert "wire_hosts" not in s  # one machine, no DGL_GRAPPA_WIRE: no interface counting
    log0 = (logs / "worker0.log").read_text()
    assert "worker 0 of 2 (torchrun)" in log0 and "master 127.0.0.1" in log0


def test_a_schedulers_sigterm_stops_torchrun_workers_at_a_step_and_their_restart_goes_on(tmp_path):
    # What srun or torchrun does on a cancel or a time limit: SIGTERM to every task (here each worker sends it to
    # itself at step 3 of epoch 1). The workers stop together at step 16, with a checkpoint of that step, and
    # exit 143; started again, they go on from it.
    from dgl_grappa.cluster.launch import free_port

    out = tmp_path / "out"
    cfg = _config(tmp_path, out, epochs=3, extra="checkpoint: {every: 1}\n")
    fault = json.dumps({"point": "step", "epoch": 1, "step": 3, "signal": "SIGTERM"})
    logs = tmp_path

    def popen(r, argv, env, f):
        return subprocess.Popen([*argv, "--train.batch_size=32"], env=env, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)

    procs = _start_workers(cfg, 2, "127.0.0.1", free_port(), logs=logs, popen=popen, DGL_GRAPPA_FAULT=fault)
    try:
        rcs = [p.wait(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    texts = [(logs / f"worker{r}.log").read_text() for r in range(2)]
    assert rcs == [143, 143], texts[0][-3000:]
    for text in texts:
        last = text.rstrip().splitlines()[-1]
        assert last.startswith("dgl_grappa: stopped by SIGTERM in epoch 1 after step 16; checkpoint "), text[-2000:]
    procs = _start_workers(cfg, 2, "127.0.0.1", free_port(), logs=logs, popen=popen)
    _wait(procs, logs)
    recs = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in recs] == [0, 1, 2] and recs[1].get("resumed_at_step") == 16


def test_worker_environment_errors_are_one_line(tmp_path):
    from dgl_grappa.config import ConfigError, load_config
    from dgl_grappa.native.worker import run_started_worker

    cfg = _config(tmp_path, tmp_path / "out")
    with pytest.raises(ConfigError, match="WORLD_SIZE=3 but partition.num_parts=2"):
        run_started_worker(
            load_config(cfg), env={"RANK": "0", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"}
        )
    p = _cli("worker", "--config", str(cfg), timeout=120)
    assert p.returncode == 2 and "no torchrun or Slurm environment" in p.stderr and p.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()


@needs_hosts
def test_worker_joins_from_a_torchrun_environment_across_test_hosts(tmp_path):
    out = tmp_path / "out"
    cfg = _config(tmp_path, out)
    with TestHosts(2, bandwidth="1gbit") as hosts:
        procs = _start_workers(
            cfg,
            2,
            hosts[0].address,
            29400,
            logs=tmp_path,
            DGL_GRAPPA_WIRE="nic",
            popen=lambda r, argv, env, f: hosts[r].popen(argv, env=env, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT),
        )
        _wait(procs, tmp_path)
    s = json.loads((out / "summary.json").read_text())
    assert [w["part"] for w in s["workers"]] == [0, 1]
    assert [h["hostname"] for h in s["wire_hosts"]] == ["h0", "h1"]
    for h in s["wire_hosts"]:
        h["address"] = f"10.77.0.{h['host'] + 1}"
    _check_grappa_wire(s, 2, one_worker_per_host=True)


# ---------------------------------------------------------------------------------------
# The launcher across namespace test hosts
# ---------------------------------------------------------------------------------------


@needs_hosts
@pytest.mark.parametrize("n", [2, 4])
def test_grappa_across_test_hosts_per_host_links(tmp_path, n):
    out = tmp_path / "out"
    before = _netns()
    p = _cli(
        "train",
        "--config",
        str(_config(tmp_path, out, parts=n)),
        "--launch.remote=netns",
        "--network.bandwidth=1gbit",
        timeout=400,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    s = json.loads((out / "summary.json").read_text())
    c = s["cluster"]
    assert c["remote"] == "netns" and c["link"] == {"mode": "per_host", "bandwidth": "1gbit", "latency_ms": 0.0}
    assert [h["ranks"] for h in c["hosts"]] == [[i] for i in range(n)]
    _check_grappa_wire(s, n, one_worker_per_host=True)
    assert s["val_acc"] > 0.3
    assert f"across {n} hosts (netns, link per_host 1gbit)" in p.stdout
    _check_dilation(s, n)
    assert not _ours_left(before)


def _check_dilation(s: dict, n: int) -> None:
    """network.dilation=auto: each host its share of the cores, D to match, both in summary.json."""
    from dgl_grappa.cluster.testhosts import cgroups
    from dgl_grappa.cluster.testhosts.dilation import dilation_factor, host_cpu_share

    if cgroups.problem() is None:
        cores = len(cgroups.usable_cpus())
        assert (s["network_dilation"], s["host_cpu_share"]) == (
            dilation_factor("auto", n, cores),
            host_cpu_share(n, cores),
        )
        assert all("cpus" in h for h in s["cluster"]["hosts"])
    else:
        assert (s["network_dilation"], s["host_cpu_share"]) == (1.0, None)


@needs_hosts
def test_distdgl_across_test_hosts_needs_no_machine_id_override(tmp_path):
    from dgl_grappa.config import load_config
    from dgl_grappa.distdgl import ENV_MACHINE_ID, run_distdgl

    out = tmp_path / "out"
    before = _netns()
    cfg = load_config(_config(tmp_path, out), ["--launch.remote=netns", "--network.bandwidth=1gbit"])
    assert ENV_MACHINE_ID not in os.environ
    s = run_distdgl(cfg, quiet=True)
    # DGL found each trainer's machine from its own address (no override): trainer i is machine i, on host i
    assert [(w["rank"], w["machine_id"], w["hostname"], w["machine_id_override"]) for w in s["workers"]] == [
        (0, 0, "h0", None),
        (1, 1, "h1", None),
    ]
    text = (out / "ip_config.txt").read_text()
    assert text == "10.77.0.1 30050\n10.77.0.2 30050\n"  # DGL's own format, the hosts' addresses
    # remote features cross the links: both hosts send, and the links carry at least what DGL pulled
    hosts = s["wire_hosts"]
    assert [h["address"] for h in hosts] == ["10.77.0.1", "10.77.0.2"]
    assert all(h["tx_bytes"] > 0 and h["rx_bytes"] > 0 for h in hosts)
    assert s["feature_bytes_per_epoch"] > 0
    assert s["wire_bytes_per_epoch"] >= s["app_bytes_per_epoch"] * 0.95
    assert s["val_acc"] > 0.3
    _check_dilation(s, 2)
    assert not _ours_left(before)


@needs_hosts
def test_killed_launcher_leaves_nothing_on_the_hosts(tmp_path):
    out = tmp_path / "out"
    cfg = _config(tmp_path, out, epochs=200)
    tag = uuid.uuid4().hex
    launcher = subprocess.Popen(
        [
            PY,
            "-m",
            "dgl_grappa",
            "train",
            "--config",
            str(cfg),
            "--launch.remote=netns",
            "--network.bandwidth=500mbit",
            "--network.link=shared",
        ],
        cwd=ROOT,
        env=_env(**{ENV_JOB: tag}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and launcher.poll() is None:  # until both workers train
            if (out / "metrics.jsonl").is_file() and (out / "metrics.jsonl").read_text().count("\n") >= 1:
                break
            time.sleep(0.5)
        assert launcher.poll() is None and (out / "metrics.jsonl").is_file(), "the workers never trained"
        from dgl_grappa.cluster.testhosts import STATE_DIR

        (job,) = [
            d.name
            for d in STATE_DIR.iterdir()
            if (d / "owner").is_file() and (d / "owner").read_text().split()[0] == str(launcher.pid)
        ]
        # network.link=shared: every frame entering the bridge goes through one shaped ifb device
        qd = subprocess.run(
            ["tc", "-n", f"dgh-{job}", "qdisc", "show", "dev", "ifb0"], capture_output=True, text=True, timeout=10
        ).stdout
        assert "tbf" in qd and "500Mbit" in qd, qd
        workers = [p for p in processes_of_job(tag) if p != launcher.pid]
        assert len(workers) >= 4  # two guards and two workers (and their helpers)
        launcher.kill()  # SIGKILL: none of its cleanup runs
        launcher.wait(timeout=10)
        assert _gone(workers, timeout=30), "workers outlived their launcher"
        assert processes_of_job(tag) == []
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert any(n.startswith(f"dgh-{job}") for n in _netns())  # a dead owner's hosts remain until a sweep ...
    assert job in sweep_stale()
    assert not any(n.startswith(f"dgh-{job}") for n in _netns())  # ... which removes them


# ---------------------------------------------------------------------------------------
# The ssh path, and hosts without shared storage
# ---------------------------------------------------------------------------------------


@needs_hosts
def test_ssh_launch_with_copied_partitions_and_repartitioning(tmp_path):
    # The output folder is in /dev/shm, which each test host has privately: storage not shared.
    out = Path("/dev/shm") / f"grappa-ssh-{uuid.uuid4().hex[:8]}"
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ssh").symlink_to(ROOT / "tests" / "fake_ssh.py")
    os.chmod(ROOT / "tests" / "fake_ssh.py", 0o755)
    ip_config = tmp_path / "ip_config.txt"
    ip_config.write_text("# two machines\n10.77.0.1\n10.77.0.2 30050\n")
    cfg = _config(tmp_path, out, parts=4, epochs=2, extra="schedule: {k: 1, method: metis-perm, keep_last: 1}\n")
    try:
        with TestHosts(2) as hosts:
            (tmp_path / "hosts.json").write_text(json.dumps({h.address: h.prefix() for h in hosts}))
            env = _env(
                PATH=f"{fake}:{os.environ['PATH']}",
                FAKE_SSH_HOSTS=str(tmp_path / "hosts.json"),
                FAKE_SSH_LOG=str(tmp_path / "ssh.log"),
            )
            p = _cli(
                "train",
                "--config",
                str(cfg),
                "--launch.remote=ssh",
                f"--launch.ip_config={ip_config}",
                "--launch.workers_per_host=2",
                "--train.halo=drop",  # keep would copy every part's features
                "--launch.ssh_user=grappa",
                "--launch.ssh_port=2222",
                "--launch.copy_partitions=true",
                "--launch.ssh_options=[StrictHostKeyChecking=no]",
                "--launch.env=[GRAPPA_PROBE=1]",
                env=env,
                timeout=400,
            )
            assert p.returncode == 0, p.stderr[-4000:]

            def ls(i, d):
                cmd = ["sh", "-c", f"cd {d} 2>/dev/null && ls"]
                return hosts[i].run(cmd, timeout=10, capture_output=True, text=True).stdout.split()

            # host 1 got its own parts only (partitioning 0 from the launcher, 1 from rank 0), and
            # dropped partitioning 0 at the switch (keep_last=1), as rank 0 did on host 0
            assert ls(1, out / "partitions" / "1") == ["grappa.json", "part2", "part3"]
            assert ls(1, out / "partitions" / "0") == [] and ls(0, out / "partitions" / "0") == []
            assert "worker 3 of 4 (torchrun): host 1 (h1), local rank 1" in (out / "logs" / "worker3.log").read_text()
            assert "part0" in ls(0, out / "partitions" / "1") and "summary.json" in ls(0, out)
            assert "summary.json" not in ls(1, out)  # rank 0 is the only writer
        s = json.loads((out / "summary.json").read_text())  # fetched back from host 0
        assert s["cluster"]["remote"] == "ssh" and [(h["address"], h["ranks"]) for h in s["cluster"]["hosts"]] == [
            ("10.77.0.1", [0, 1]),
            ("10.77.0.2", [2, 3]),
        ]
        assert len(s["switches"]) == 1 and s["epochs"] == 2
        _check_grappa_wire(s, 2, one_worker_per_host=False)  # the switch's file transfer is outside the epochs
        calls = [json.loads(line) for line in (tmp_path / "ssh.log").read_text().splitlines()]
        assert all(c[:5] == ["-o", "BatchMode=yes", "-p", "2222", "-o"] for c in calls), calls[0]
        assert {c[6] for c in calls} == {"grappa@10.77.0.1", "grappa@10.77.0.2"}
        worker_calls = [c[-1] for c in calls if "dgl_grappa worker" in c[-1]]
        assert len(worker_calls) == 4 and all(
            "GRAPPA_PROBE=1" in w and "MASTER_ADDR=10.77.0.1" in w for w in worker_calls
        )
        assert any("--kill-job" in c[-1] for c in calls)  # the last-resort sweep ran on the hosts
    finally:
        subprocess.run(["rm", "-rf", str(out)], timeout=60)


def test_hosts_config_errors_are_one_line(tmp_path):
    from dgl_grappa.cluster.remote import Cluster
    from dgl_grappa.config import ConfigError, load_config

    cfg = _config(tmp_path, tmp_path / "out")
    cases = [
        (["--launch.remote=ssh"], "launch.remote=ssh needs the machines"),
        (["--launch.hosts=[10.0.0.1]"], "launch.remote=none runs on this machine only"),
        (["--launch.remote=ssh", "--launch.hosts=[a,b,c]"], "use only 2"),
        (["--launch.remote=ssh", "--launch.hosts=[a]", "--launch.workers_per_host=1"], "do not fit on 1 hosts"),
        (["--launch.remote=ssh", "--launch.hosts=[a,a]"], "lists a twice"),
        (["--launch.remote=ssh", "--launch.hosts=[a]", "--launch.ip_config=x.txt"], "both set"),
        (["--launch.remote=netns", "--launch.hosts=[h1,h0]"], "list the test hosts by name in order"),
        (["--launch.remote=ssh", "--launch.hosts=[a,b]", "--network.bandwidth=1gbit"], "real network is used"),
        (["--network.latency_ms=5"], "needs test hosts"),
        (["--launch.env=[NOEQUALS]"], "is not KEY=VALUE"),
        (["--launch.ssh_port=0"], "launch.ssh_port=0"),
        (["--network.link=star"], "network.link='star' is not allowed"),
        (["--run.device=tpu"], "run.device='tpu' is not allowed"),
    ]
    for args, match in cases:
        with pytest.raises(ConfigError, match=match) as e:
            load_config(cfg, args)
        assert "\n" not in str(e.value), args
    # files are read when the launcher starts (a worker's host need not have the launcher's ip_config)
    c = load_config(cfg, ["--launch.remote=ssh", f"--launch.ip_config={tmp_path / 'missing.txt'}"])
    with pytest.raises(ConfigError, match="cannot read ip_config"):
        Cluster(c, 2, "job")
    (tmp_path / "ip3.txt").write_text("10.0.0.1\n10.0.0.2\n10.0.0.3\n")
    c = load_config(cfg, ["--launch.remote=ssh", f"--launch.ip_config={tmp_path / 'ip3.txt'}"])
    with pytest.raises(ConfigError, match="3 hosts listed but 2 workers at 1 per host use only 2"):
        Cluster(c, 2, "job")
    # ... and the command line says it in one line, with status 2, before touching anything
    p = _cli(
        "train",
        "--config",
        str(cfg),
        "--launch.remote=ssh",
        f"--launch.ip_config={tmp_path / 'missing.txt'}",
        timeout=120,
    )
    assert p.returncode == 2 and "cannot read ip_config" in p.stderr and p.stderr.count("\n") == 1, p.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.unit
def test_device_selection_and_backend():
    import torch

    from dgl_grappa.cluster.launch import backend_for, gpus_shared, select_device
    from dgl_grappa.config import ConfigError, load_config

    assert backend_for("cpu") == "gloo" and backend_for("cuda") == "cpu:gloo,cuda:nccl"
    assert backend_for("cuda", shared=True) == "gloo"  # NCCL refuses two ranks on one GPU
    assert select_device("cpu", 3) == torch.device("cpu")
    assert load_config(None).run.device == "cpu"  # the default needs no GPU
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="run.device=cuda but torch sees no CUDA device") as e:
            select_device("cuda", 0)
        assert "\n" not in str(e.value)
    else:  # more workers than GPUs share them
        n = torch.cuda.device_count()
        assert select_device("cuda", n) == torch.device("cuda", 0) and not gpus_shared(n) and gpus_shared(n + 1)


@needs_hosts
def test_latency_needs_netem_and_is_refused_cleanly_without_it(tmp_path):
    from dgl_grappa.cluster.testhosts import netem_available

    before = _netns()
    p = _cli(
        "train",
        "--config",
        str(_config(tmp_path, tmp_path / "out")),
        "--launch.remote=netns",
        "--network.latency_ms=5",
        timeout=300,
    )
    if netem_available():  # a kernel with netem: the job runs with the delay
        assert p.returncode == 0, p.stderr[-3000:]
        assert json.loads((tmp_path / "out" / "summary.json").read_text())["cluster"]["link"]["latency_ms"] == 5.0
    else:
        assert p.returncode == 2 and "needs the netem qdisc" in p.stderr and p.stderr.count("\n") == 1, p.stderr
        assert not (tmp_path / "out").exists()  # refused before anything was built
    assert not _ours_left(before)
