"""The launcher (runs inside the job's network namespace): one DistDGL server and trainer per partition."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil

from ..cluster.basics import free_port, threads_per_worker
from ..cluster.hosts import IpConfigEntry, WorkerIdentity, format_ip_config, torchrun_env
from ..cluster.netns import check_isolation, isolate_argv
from ..cluster.procs import ENV_JOB, EXIT_USER_ERROR, JobFailed, rc_text, set_subreaper, tail
from ..cluster.ptree import kill_tree
from ..cluster.remote import DILATION_KEYS, Cluster
from ..config import ConfigError, uses_hosts
from ..env import ENV_EPOCHS, ENV_WIRE
from ..runtime.metrics import peak_rss_bytes, write_json
from .machine_id import ENV_MACHINE_ID

# Nothing here imports torch or DGL at module level (the server imports DGL when it starts): the launcher process,
# which starts and supervises the job's processes, starts without them, seconds sooner.
log = logging.getLogger("dgl_grappa")

RECORDS_DIR = "epochs"
"""In a script job's output folder: the per-trainer files of its loaders' passes (:mod:`.loader_meter`)."""


def records_path(folder: str | Path, rank: int) -> Path:
    """Trainer ``rank``'s file of passes in a records folder."""
    return Path(folder) / f"trainer{rank}.jsonl"


FAILURE_FILE = "launch_failure.txt"
"""In a job's output folder: the first line of the launcher's error when the job failed."""

JOB_FILE = "job.json"
"""In a job's output folder: the launcher's record of a finished job (wall time, every process's
exit status and log), written whatever the trainers write themselves."""


def ip_config_path(out_dir: str | Path) -> Path:
    """DGL's ip_config.txt of a job: the launcher writes it into the job's output folder."""
    return Path(out_dir).resolve() / "ip_config.txt"


def server_command() -> list[str]:
    """A bare DGL server (``DGL_ROLE=server``, from DGL_* variables): the package trainer's servers."""
    return [sys.executable, "-m", "dgl_grappa.distdgl", "_server"]


def _records_env(out: Path, server_argv: list[str] | None) -> dict[str, str]:
    """The trainers' ``DGL_GRAPPA_EPOCHS`` for a script's job (its servers run the script): where they record
    their loaders' passes; nothing for the package's trainer, which meters itself."""
    return {ENV_EPOCHS: str(out / RECORDS_DIR)} if server_argv is not None else {}


def _free_ports(n: int, base: int) -> list[int]:
    if base:
        return [base + 10 * i for i in range(n)]
    ports: list[int] = []
    while len(ports) < n:
        p = free_port()
        if p not in ports:
            ports.append(p)
    return ports


def _connected(log_path: Path) -> bool:
    # DGL's client prints this (sic) once it is registered with every server.
    try:
        return "connect to server successfuly" in log_path.read_text(errors="replace")
    except OSError:
        return False


def _wait_exec(proc: subprocess.Popen, argv: list[str], deadline: float, logs: Path, name: str) -> None:
    """Wait until the namespace helper ``proc`` has exec'd ``argv`` (namespace ready)."""
    want = [a.encode() for a in argv]
    while time.monotonic() < deadline:
        if proc.poll() is not None:  # e.g. a script that rejected its arguments
            raise _failure(f"DistDGL {name} {rc_text(proc.returncode)} while starting", logs / f"{name}.log")
        try:
            cmd = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            raise JobFailed(f"process {proc.pid} ended while its namespace was being set up") from None
        if cmd == want:  # before the exec it reads as the launcher's or the helper's command line
            return
        time.sleep(0.02)
    raise JobFailed("a server's namespace was not ready in time")


def _failure(msg: str, path: Path) -> JobFailed:
    """A process of the job failed: ``msg`` with the tail of its log; a script that rejected its
    arguments (argparse's line) is a user error, in one line."""
    rejected = [ln for ln in tail(path, 5).splitlines() if "error: unrecognized arguments" in ln]
    if rejected:
        return JobFailed(
            f"DistDGL {path.stem}: {rejected[-1].strip()}; a script with arguments of its own gets "
            'exactly those from --script-args="..." (compare.script_args), with {ip_config}, '
            "{part_config} and {graph_name} for what the launcher knows",
            user_error=True,
        )
    return JobFailed(f"{msg}\n  last lines of {path}:\n{tail(path)}")


def launch(
    cfg, part_config: str, out_dir: str | Path, trainer_argv: list[str], server_argv: list[str] | None = None
) -> None:
    """Run one DistDGL job: a server and a trainer per partition, all bounded, all cleaned up.

    Every process of machine i (server, trainer, and the trainer's sampler processes) gets
    DGL's variables and ``DGL_GRAPPA_MACHINE_ID=i`` (on one host; :mod:`.machine_id`).

    Args:
        cfg: the validated Config (partition.num_parts machines; distdgl.* and run.* limits).
        part_config: the partitioning's json (the same folder Grappa trains on).
        out_dir: logs go to ``out_dir/logs``, DGL's ip_config to :func:`ip_config_path`, the
            launcher's record to ``job.json``; the trainers write their own files here.
        trainer_argv: the trainers' whole command, run as it is (see
            :func:`dgl_grappa.distdgl.job.job_command`).
        server_argv: the servers' command; None = :func:`server_command`. DGL's
            ``tools/launch.py`` runs the user's script there too (with ``DGL_ROLE=server``); a
            script's trainers record their loaders' passes into ``out_dir/epochs``
            (:mod:`.loader_meter`).

    Raises:
        JobFailed: a process died or a bound was exceeded (the message names which, with
            the tail of its log). Every process of the job is gone when this returns or raises.
    """
    if uses_hosts(cfg):
        return launch_on_hosts(cfg, part_config, out_dir, trainer_argv, server_argv)
    n = cfg.partition.num_parts
    dd = cfg.distdgl
    out = Path(out_dir).resolve()
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    set_subreaper()
    # A private /dev/shm per machine: required with several machines on one host, and with
    # one it still guarantees that a killed server leaves no segment behind.
    why_not = check_isolation(net=False, shm=dd.shm_size)
    isolate = why_not is None
    if not isolate and n > 1:
        raise JobFailed(f"{n} DistDGL machines on one host need a private /dev/shm each: {why_not}")
    if not isolate:
        log.warning("no private /dev/shm (%s): a killed server may leave segments in /dev/shm", why_not)
    ports = _free_ports(n + 1, dd.base_port)
    ip_config = ip_config_path(out)
    ip_config.write_text("".join(f"127.0.0.1 {p}\n" for p in ports[:n]))
    master_port = ports[n]
    num_clients = n * (1 + dd.num_samplers)
    threads = threads_per_worker(n, cfg.run.num_threads)
    base_env = dict(os.environ)
    base_env.setdefault(ENV_JOB, uuid.uuid4().hex)
    base_env.update(
        {
            "DGL_IP_CONFIG": str(ip_config),
            "DGL_NUM_SERVER": "1",
            "DGL_NUM_CLIENT": str(num_clients),
            "DGL_CONF_PATH": str(Path(part_config).resolve()),
            "DGL_NUM_SAMPLER": str(dd.num_samplers),
            "DGL_GRAPH_FORMAT": "csc",
            "DGLBACKEND": "pytorch",
            "PYTHONUNBUFFERED": "1",
        }
    )
    records = _records_env(out, server_argv)
    procs: dict[str, subprocess.Popen] = {}
    files = []
    t0 = time.monotonic()
    startup_deadline = t0 + dd.startup_timeout_s

    def start(name: str, argv: list[str], env: dict) -> subprocess.Popen:
        f = open(logs / f"{name}.log", "w")
        files.append(f)
        p = subprocess.Popen(
            argv, env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=os.getcwd()
        )
        procs[name] = p
        return p

    try:
        servers = []
        server_argv = list(server_argv or server_command())
        for i in range(n):
            env = dict(
                base_env, DGL_ROLE="server", DGL_SERVER_ID=str(i), OMP_NUM_THREADS="1", **{ENV_MACHINE_ID: str(i)}
            )
            argv = server_argv
            servers.append(
                start(f"server{i}", isolate_argv(argv, net=False, shm=dd.shm_size) if isolate else argv, env)
            )
        trainers = []
        for i in range(n):
            env = dict(
                base_env,
                DGL_ROLE="client",
                DGL_DIST_MODE="distributed",
                DGL_GROUP_ID="0",
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(master_port),
                WORLD_SIZE=str(n),
                RANK=str(i),
                OMP_NUM_THREADS=str(threads),
                **{ENV_MACHINE_ID: str(i)},
                **records,
            )
            argv = list(trainer_argv)
            if isolate:
                # The trainer joins its server's mount namespace: same private /dev/shm.
                _wait_exec(servers[i], server_argv, startup_deadline, logs, f"server{i}")
                argv = isolate_argv(argv, net=False)
                argv.insert(argv.index("--"), "--join-mnt")
                argv.insert(argv.index("--"), str(servers[i].pid))
            trainers.append(start(f"trainer{i}", argv, env))
        log.info(
            "DistDGL: %d machines (server + trainer each%s), servers on ports %s, logs in %s",
            n,
            ", private /dev/shm" if isolate else "",
            ports[:n],
            logs,
        )

        supervise(cfg, trainers, servers, logs, t0)
    finally:
        kill_tree(os.getpid(), include_self=False)
        for p in procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for f in files:
            f.close()


def launch_on_hosts(
    cfg, part_config: str, out_dir: str | Path, trainer_argv: list[str], server_argv: list[str] | None = None
) -> None:
    """One DistDGL job across hosts (``launch.remote: ssh | netns``): a server and a trainer on each.

    Host i is DGL machine i: its server serves partition i and its trainer, rank i, trains
    on it; both share that host's /dev/shm (on test hosts a private one per host). DGL's
    ip_config holds the hosts' addresses (:func:`dgl_grappa.cluster.hosts.format_ip_config`), so
    every trainer finds its own machine id from its own address, as on real machines: no
    machine-id override. The trainers get torchrun's variables (MASTER_ADDR = host 0) and
    count their host's interface bytes per epoch (``DGL_GRAPPA_WIRE=nic``). With
    ``launch.copy_partitions`` each host first gets the config, the ip_config and its part,
    and rank 0's summary is fetched back from host 0.

    Args, Raises: as for :func:`launch`.
    """
    n = cfg.partition.num_parts
    dd = cfg.distdgl
    out = Path(out_dir).resolve()
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    part_config = str(Path(part_config).resolve())
    cluster = Cluster(cfg, n, os.environ.get(ENV_JOB) or uuid.uuid4().hex)
    if cluster.workers_per_host != 1:
        raise ConfigError(
            f"DistDGL serves one partition per machine: partition.num_parts={n} needs {n} hosts "
            f"(launch.workers_per_host=1), not {len(cluster.entries)}"
        )
    records = _records_env(out, server_argv)
    with cluster:
        ip_config = ip_config_path(out)
        ports = cluster.server_ports(dd.base_port)
        ip_config.write_text(format_ip_config([IpConfigEntry(a, p) for a, p in zip(cluster.addresses, ports)]))
        if cfg.launch.copy_partitions:
            from ..partition.layout import part_files  # why: it imports DGL; only here

            part_dir = Path(part_config).parent
            job_files = [f.name for f in (ip_config, out / "config.resolved.yaml") if f.is_file()]
            for i in range(n):
                cluster.copy_to(i, out, job_files)
                cluster.copy_to(i, part_dir, part_files(part_dir, [i], cfg.train.halo, metadata=False))
        master_port = cfg.launch.master_port or (29500 if cluster.kind == "netns" else free_port())
        threads = cluster.threads_per_worker(cfg.run.num_threads)
        dgl_env = {
            "DGL_IP_CONFIG": str(ip_config),
            "DGL_NUM_SERVER": "1",
            "DGL_NUM_CLIENT": str(n * (1 + dd.num_samplers)),
            "DGL_CONF_PATH": part_config,
            "DGL_NUM_SAMPLER": str(dd.num_samplers),
            "DGL_GRAPH_FORMAT": "csc",
            "DGLBACKEND": "pytorch",
        }
        t0 = time.monotonic()
        servers, trainers = [], []
        for i in range(n):
            env = dict(dgl_env, DGL_ROLE="server", DGL_SERVER_ID=str(i), OMP_NUM_THREADS="1")
            servers.append(
                cluster.start(i, list(server_argv or server_command()), env, logs / f"server{i}.log", f"server{i}")
            )
        for i in range(n):
            who = WorkerIdentity(i, n, 0, 1, i, cluster.addresses[0], master_port, "torchrun")
            env = dict(
                dgl_env,
                DGL_ROLE="client",
                DGL_DIST_MODE="distributed",
                DGL_GROUP_ID="0",
                **torchrun_env(who),
                **{ENV_WIRE: "nic"},
                **records,
            )
            if threads:
                env["OMP_NUM_THREADS"] = str(threads)
            trainers.append(cluster.start(i, list(trainer_argv), env, logs / f"trainer{i}.log", f"trainer{i}"))
        log.info(
            "DistDGL: %d machines on %s hosts %s (server + trainer each, the host's own /dev/shm), servers on "
            "ports %s, logs in %s",
            n,
            cluster.kind,
            " ".join(cluster.addresses),
            ports,
            logs,
        )
        supervise(cfg, trainers, servers, logs, t0)
        described = cluster.describe()
        if records and (out / JOB_FILE).is_file():  # a script's job: its record says where it ran
            job = json.loads((out / JOB_FILE).read_text())
            job.update(cluster=described, **{k: described[k] for k in DILATION_KEYS if k in described})
            (out / JOB_FILE).write_text(json.dumps(job, indent=1))
        if cfg.launch.copy_partitions:
            for i in range(n if records else 0):  # a script's trainers recorded their passes on their hosts
                cluster.fetch_from(i, out, [str(records_path(RECORDS_DIR, i))])
            try:
                cluster.fetch_from(0, out, ["summary.json", "metrics.jsonl"])
            except JobFailed:
                if not records:  # the package's trainer always writes them; a script may not
                    raise
    summary_path = out / "summary.json"
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text())
        for h in summary.get("wire_hosts") or []:
            h["address"] = described["hosts"][h["host"]]["address"]
        summary["cluster"] = described
        summary.update({k: described[k] for k in DILATION_KEYS if k in described})
        write_json(summary_path, summary)


def supervise(cfg, trainers: list, servers: list, logs: Path, t0: float) -> None:
    """Wait for a DistDGL job's trainers to finish and its servers to exit, every wait bounded.

    Args:
        cfg: the Config (distdgl.startup_timeout_s, run.timeout_s, distdgl.shutdown_timeout_s).
        trainers, servers: their processes (Popen-like: ``poll()``, ``returncode``), trainer i
            logging to ``logs/trainer<i>.log``, server i to ``logs/server<i>.log``.
        t0: time.monotonic() when the first process started.

    Writes ``job.json`` (:data:`JOB_FILE`) next to ``logs``: the wall time until the last
    trainer ended, and each process's exit status (None: a server still running at the
    shutdown bound, then killed), log and, for a server, peak resident memory.

    Raises:
        JobFailed: a trainer or server died, the trainers did not all connect within the
            startup bound, or the job ran past run.timeout_s (+ startup); a script that
            rejected its arguments is a user error. The caller stops every process.
    """
    dd, n = cfg.distdgl, len(trainers)
    startup_deadline = t0 + dd.startup_timeout_s
    deadline = t0 + dd.startup_timeout_s + cfg.run.timeout_s

    def fail(msg: str, name: str) -> None:
        raise _failure(msg, logs / f"{name}.log")

    ready_logged = False
    peaks = [None] * len(servers)  # each server's peak resident memory (VmHWM only grows, the largest read is it)
    while True:
        for i, s in enumerate(servers):
            if s.poll() is None:
                # the largest: a server that has exited leaves its wrapper's tree (a test host's guard) much smaller
                peaks[i] = max(peaks[i] or 0, _tree_peak_rss(s.pid) or 0) or None
        rcs = [t.poll() for t in trainers]
        for i, rc in enumerate(rcs):
            if rc == EXIT_USER_ERROR:  # the trainer's last line names the problem and the fix
                lines = [ln for ln in tail(logs / f"trainer{i}.log", 5).splitlines() if "error: " in ln]
                raise JobFailed(
                    lines[-1].split("error: ", 1)[-1] if lines else f"DistDGL trainer {i} stopped on a user error",
                    user_error=True,
                )
            if rc is not None and rc != 0:
                fail(f"DistDGL trainer {i} {rc_text(rc)}; the job was stopped", f"trainer{i}")
        if all(rc == 0 for rc in rcs):
            wall = time.monotonic() - t0
            break
        for i, s in enumerate(servers):
            # Status 0 is the normal shutdown that rank 0's exiting client asks for; it can
            # come while the other trainers are still tearing down.
            if s.poll() is not None and s.returncode != 0:
                fail(f"DistDGL server {i} {rc_text(s.returncode)} before the trainers finished", f"server{i}")
        now = time.monotonic()
        ready = sum(_connected(logs / f"trainer{i}.log") for i in range(n))
        if ready == n and not ready_logged:
            log.info("DistDGL: all %d trainers connected after %.1f s", n, now - t0)
            ready_logged = True
        if ready < n and now > startup_deadline:
            fail(
                f"only {ready} of {n} DistDGL trainers connected within distdgl.startup_timeout_s="
                f"{dd.startup_timeout_s:.0f}s",
                "trainer0",
            )
        if now > deadline:
            fail(
                f"the DistDGL job ran past run.timeout_s={cfg.run.timeout_s:.0f}s (+ startup); all "
                "processes were killed",
                "trainer0",
            )
        time.sleep(0.2)
    # Rank 0's client shuts the servers down at exit; give them a bounded time to go.
    shutdown_deadline = time.monotonic() + dd.shutdown_timeout_s
    while any(s.poll() is None for s in servers) and time.monotonic() < shutdown_deadline:
        time.sleep(0.1)
    late = [i for i, s in enumerate(servers) if s.poll() is None]
    if late:
        log.warning("DistDGL servers %s did not exit within %.0f s after training; killed", late, dd.shutdown_timeout_s)
    # The machines' memory, next to what the trainers report (distdgl.run merges it into the summary).
    (logs.parent / SERVERS_FILE).write_text(json.dumps({"peak_rss_bytes": peaks}))
    record = {
        "wall_time_s": round(wall, 3),
        "machines": n,
        "trainers": [
            {"rank": i, "exit_code": t.returncode, "log": str(logs / f"trainer{i}.log")} for i, t in enumerate(trainers)
        ],
        "servers": [
            {"id": i, "exit_code": s.poll(), "log": str(logs / f"server{i}.log"), "peak_rss_bytes": peaks[i]}
            for i, s in enumerate(servers)
        ],
    }
    (logs.parent / JOB_FILE).write_text(json.dumps(record, indent=1))


SERVERS_FILE = "servers_memory.json"


def _tree_peak_rss(pid: int) -> int | None:
    """Peak resident bytes of a process and its descendants (a server behind its namespace wrappers)."""
    try:
        procs = [psutil.Process(pid)]
        procs += procs[0].children(recursive=True)
    except psutil.Error:
        return None
    vals = [peak_rss_bytes(p.pid) for p in procs]
    return sum(v for v in vals if v) or None


def _server_main() -> None:
    # DGL_ROLE=server: builds a DistGraphServer from DGL_* variables and never returns.
    import dgl

    dgl.distributed.initialize(os.environ["DGL_IP_CONFIG"])
