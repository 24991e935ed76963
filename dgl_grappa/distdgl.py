"""The DistDGL side: a real DistDGL job (servers + trainers) on the partitions Grappa uses.

Three layers, outermost first:

1. :func:`run_distdgl` (the caller: ``compare``, tests, ``python -m dgl_grappa.distdgl``).
   Makes sure the partitions exist, writes the resolved config, and runs the launcher as
   one child process, inside a private network namespace when the machine allows it (so
   the job's loopback bytes are measured and can be shaped, see :mod:`dgl_grappa.netns`).
   The wait is bounded; on a timeout the whole process group and tree are killed by PID.
2. :func:`launch` (the launcher process, ``python -m dgl_grappa.distdgl _launch``). One
   DistDGL server and one trainer per partition ("machine"). With more than one machine
   each machine gets its own mount namespace with a private /dev/shm tmpfs (DistDGL's
   segment names depend only on graph and tensor names, so two servers on one host would
   overwrite each other's), and the trainer gets its machine id from an environment
   variable (DGL would derive it from the IP, which is 127.0.0.1 for everyone). The
   launcher is a child subreaper, bounds every wait (startup, training, shutdown) and, on
   any failure or at the end, kills every process it started, orphans included; the
   tmpfs goes away with the last process of its namespace.
3. The trainer program: ``scripts/distdgl_train.py`` (DGL's example flow, with the
   ``--grappa`` flag), which uses :class:`TrainerMeter` for timing, byte counts, the
   global evaluation and summary.json.

Byte accounting of a trainer (:class:`TrafficCounter`, application level): every
``rpc.fast_pull`` (KVStore pulls: rows owned by another machine x (row bytes + 8-byte id))
and every Python RPC payload (neighbour sampling requests and responses, serialised by
``rpc.serialize_to_payload`` / ``deserialize_from_payload``), plus the DDP gradient
payload. Next to it, rank 0 reads the loopback counter of the job's namespace at epoch
boundaries (``wire_bytes``: all processes together, measured).

Importing this module applies the machine-id override when ``DGL_GRAPPA_MACHINE_ID`` is
set; a trainer script must import it before ``dgl.distributed.initialize`` (DGL's sampler
processes are spawned and re-import the script, so the override must sit at import time).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from .launch import WorkerFailed

ENV_MACHINE_ID = "DGL_GRAPPA_MACHINE_ID"
ENV_JOB = "DGL_GRAPPA_JOB"
"""Every process of a job carries this tag (a fresh id per job): tests use it to prove that
nothing outlived the job."""


def _override_machine_id() -> None:
    mid = os.environ.get(ENV_MACHINE_ID)
    if mid is None:
        return
    # DGL finds "its" machine as the first ip_config line with a local IP; on one host all
    # lines are 127.0.0.1, so every trainer would be machine 0 and pull from the wrong server.
    import dgl.distributed.rpc_client as _rc

    _rc.get_local_machine_id = lambda server_namebook, _m=int(mid): _m


_override_machine_id()

log = logging.getLogger("dgl_grappa")

DEFAULT_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "distdgl_train.py"


# ---------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------

def kill_tree(pid: int, include_self: bool = True, timeout_s: float = 10.0) -> int:
    """SIGKILL a process and all its descendants, by PID, and reap them.

    The descendants are listed first (while their parents still exist), then everybody
    is killed at once, so no child escapes by being re-parented mid-way.

    Args:
        pid: root of the tree.
        include_self: kill ``pid`` itself too (False: only its descendants).
        timeout_s: bound on waiting for them to disappear.

    Returns:
        Number of processes signalled.
    """
    import psutil

    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    if include_self:
        procs.append(root)
    for p in procs:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=timeout_s)
    return len(procs)


def kill_group_and_tree(proc: subprocess.Popen) -> None:
    """Kill a child started with ``start_new_session=True``: its tree and its process group.

    The tree is walked only while the child is alive (after it has been reaped its PID
    could belong to someone else); the group (id = the child's PID) catches whatever is
    left, e.g. processes re-parented away from the tree.
    """
    if proc.poll() is None:
        kill_tree(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def processes_of_job(job: str) -> list[int]:
    """PIDs of live processes whose environment carries ``DGL_GRAPPA_JOB=job``."""
    import psutil

    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            if p.environ().get(ENV_JOB) == job:
                out.append(p.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return out


def _set_subreaper() -> None:
    # Orphans of our children (e.g. DGL sampler processes of a killed trainer) are then
    # re-parented to us, so kill_tree(os.getpid()) still finds them.
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _tail(path: Path, n: int = 15) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join("    " + ln for ln in lines[-n:])


def _rc_text(rc: int) -> str:
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited with status {rc}"


# ---------------------------------------------------------------------------------------
# The launcher (runs inside the job's network namespace)
# ---------------------------------------------------------------------------------------

class JobFailed(WorkerFailed):
    """A job failed (a process died, a wait ran past its bound); the CLI prints it in one line."""


def _free_ports(n: int, base: int) -> list[int]:
    from .launch import free_port

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


def _wait_exec(pid: int, marker: str, deadline: float) -> None:
    """Wait until the namespace helper ``pid`` has exec'd its command (namespace ready)."""
    while time.monotonic() < deadline:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            raise JobFailed(f"process {pid} ended while its namespace was being set up") from None
        if b"dgl_grappa.netns" not in cmd and any(marker.encode() in c for c in cmd):
            return
        time.sleep(0.02)
    raise JobFailed("a server's namespace was not ready in time")


def launch(cfg, part_config: str, out_dir: str | Path, trainer_argv: list[str]) -> None:
    """Run one DistDGL job: a server and a trainer per partition, all bounded, all cleaned up.

    Args:
        cfg: the validated Config (partition.num_parts machines; distdgl.* and run.* limits).
        part_config: the partitioning's json (the same folder Grappa trains on).
        out_dir: logs go to ``out_dir/logs``; the trainers write metrics and summary here.
        trainer_argv: the trainer command (e.g. ``[python, scripts/distdgl_train.py, ...]``);
            ``--ip_config``, ``--part_config`` and ``--out_dir`` are appended.

    Raises:
        JobFailed: a process died or a bound was exceeded (the message names which, with
            the tail of its log). Every process of the job is gone when this returns or raises.
    """
    from .launch import threads_per_worker
    from .netns import check_isolation, isolate_argv

    n = cfg.partition.num_parts
    dd = cfg.distdgl
    out = Path(out_dir).resolve()
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    _set_subreaper()
    # A private /dev/shm per machine: required with several machines on one host, and with
    # one it still guarantees that a killed server leaves no segment behind.
    why_not = check_isolation(net=False, shm=dd.shm_size)
    isolate = why_not is None
    if not isolate and n > 1:
        raise JobFailed(f"{n} DistDGL machines on one host need a private /dev/shm each: {why_not}")
    if not isolate:
        log.warning("no private /dev/shm (%s): a killed server may leave segments in /dev/shm", why_not)
    ports = _free_ports(n + 1, dd.base_port)
    ip_config = out / "ip_config.txt"
    ip_config.write_text("".join(f"127.0.0.1 {p}\n" for p in ports[:n]))
    master_port = ports[n]
    num_clients = n * (1 + dd.num_samplers)
    threads = threads_per_worker(n, cfg.run.num_threads)
    base_env = dict(os.environ)
    base_env.setdefault(ENV_JOB, uuid.uuid4().hex)
    base_env.update({
        "DGL_IP_CONFIG": str(ip_config), "DGL_NUM_SERVER": "1", "DGL_NUM_CLIENT": str(num_clients),
        "DGL_CONF_PATH": str(Path(part_config).resolve()), "DGL_NUM_SAMPLER": str(dd.num_samplers),
        "DGL_GRAPH_FORMAT": "csc", "DGLBACKEND": "pytorch", "PYTHONUNBUFFERED": "1",
    })
    procs: dict[str, subprocess.Popen] = {}
    files = []
    t0 = time.monotonic()
    startup_deadline = t0 + dd.startup_timeout_s
    deadline = t0 + dd.startup_timeout_s + cfg.run.timeout_s

    def start(name: str, argv: list[str], env: dict) -> subprocess.Popen:
        f = open(logs / f"{name}.log", "w")
        files.append(f)
        p = subprocess.Popen(argv, env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             cwd=os.getcwd())
        procs[name] = p
        return p

    def fail(msg: str, name: str | None = None) -> None:
        detail = f"\n  last lines of {logs / (name + '.log')}:\n{_tail(logs / (name + '.log'))}" if name else ""
        raise JobFailed(msg + detail)

    try:
        servers = []
        for i in range(n):
            env = dict(base_env, DGL_ROLE="server", DGL_SERVER_ID=str(i), OMP_NUM_THREADS="1")
            argv = [sys.executable, "-m", "dgl_grappa.distdgl", "_server"]
            servers.append(start(f"server{i}", isolate_argv(argv, net=False, shm=dd.shm_size) if isolate else argv, env))
        trainers = []
        for i in range(n):
            env = dict(base_env, DGL_ROLE="client", DGL_DIST_MODE="distributed", DGL_GROUP_ID="0",
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master_port), WORLD_SIZE=str(n), RANK=str(i),
                       OMP_NUM_THREADS=str(threads), **{ENV_MACHINE_ID: str(i)})
            argv = list(trainer_argv) + ["--ip_config", str(ip_config), "--part_config",
                                         str(Path(part_config).resolve()), "--out_dir", str(out)]
            if isolate:
                # The trainer joins its server's mount namespace: same private /dev/shm.
                _wait_exec(servers[i].pid, "_server", startup_deadline)
                argv = isolate_argv(argv, net=False)
                argv.insert(argv.index("--"), "--join-mnt")
                argv.insert(argv.index("--"), str(servers[i].pid))
            trainers.append(start(f"trainer{i}", argv, env))
        log.info("DistDGL: %d machines (server + trainer each%s), servers on ports %s, logs in %s", n,
                 ", private /dev/shm" if isolate else "", ports[:n], logs)

        ready_logged = False
        while True:
            rcs = [t.poll() for t in trainers]
            for i, rc in enumerate(rcs):
                if rc is not None and rc != 0:
                    fail(f"DistDGL trainer {i} {_rc_text(rc)}; the job was stopped", f"trainer{i}")
            if all(rc == 0 for rc in rcs):
                break
            for i, s in enumerate(servers):
                # Status 0 is the normal shutdown that rank 0's exiting client asks for; it can
                # come while the other trainers are still tearing down.
                if s.poll() is not None and s.returncode != 0:
                    fail(f"DistDGL server {i} {_rc_text(s.returncode)} before the trainers finished", f"server{i}")
            now = time.monotonic()
            ready = sum(_connected(logs / f"trainer{i}.log") for i in range(n))
            if ready == n and not ready_logged:
                log.info("DistDGL: all %d trainers connected after %.1f s", n, now - t0)
                ready_logged = True
            if ready < n and now > startup_deadline:
                fail(f"only {ready} of {n} DistDGL trainers connected within distdgl.startup_timeout_s="
                     f"{dd.startup_timeout_s:.0f}s", "trainer0")
            if now > deadline:
                fail(f"the DistDGL job ran past run.timeout_s={cfg.run.timeout_s:.0f}s (+ startup); all "
                     "processes were killed", "trainer0")
            time.sleep(0.2)
        # Rank 0's client shuts the servers down at exit; give them a bounded time to go.
        shutdown_deadline = time.monotonic() + dd.shutdown_timeout_s
        while any(s.poll() is None for s in servers) and time.monotonic() < shutdown_deadline:
            time.sleep(0.1)
        late = [i for i, s in enumerate(servers) if s.poll() is None]
        if late:
            log.warning("DistDGL servers %s did not exit within %.0f s after training; killed", late,
                        dd.shutdown_timeout_s)
    finally:
        kill_tree(os.getpid(), include_self=False)
        for p in procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for f in files:
            f.close()


def _server_main() -> None:
    import dgl

    # DGL_ROLE=server: builds a DistGraphServer from DGL_* variables and never returns.
    dgl.distributed.initialize(os.environ["DGL_IP_CONFIG"])


# ---------------------------------------------------------------------------------------
# The caller side
# ---------------------------------------------------------------------------------------

def write_resolved_config(cfg, path: Path) -> Path:
    """Write the whole (validated) config to YAML so that child processes see exactly it."""
    import yaml

    from .config import to_dict

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    return path


def script_path(cfg) -> Path:
    """The trainer script: compare.script, or this checkout's scripts/distdgl_train.py."""
    from .config import ConfigError

    p = Path(cfg.compare.script) if cfg.compare.script else DEFAULT_SCRIPT
    if not p.is_file():
        raise ConfigError(f"DistDGL trainer script {p} does not exist; set --compare.script=<path to "
                          "scripts/distdgl_train.py or your own DistDGL script>")
    return p


def isolation_plan(cfg, force: bool | None = None) -> bool:
    """Whether a job runs in its own network namespace.

    Args:
        cfg: network.bandwidth set -> required (an error if impossible).
        force: True -> required; False -> never (unless bandwidth); None -> when possible.

    Returns:
        True when the job will run in a private network namespace.

    Raises:
        IsolationError: shaping or isolation was required but cannot be done here.
    """
    from .netns import check_isolation, require_isolation

    if cfg.network.bandwidth:
        require_isolation(bandwidth=cfg.network.bandwidth)
        return True
    if force:
        require_isolation(net=True)
        return True
    if force is False:
        return False
    return check_isolation(net=True) is None


def run_isolated(argv: list[str], cfg, isolate: bool, timeout_s: float, *, shm: str = "",
                 label: str = "job", log_path: Path | None = None) -> None:
    """Run ``argv`` (in private namespaces when ``isolate``), bounded, killed as a tree at the end.

    Args:
        argv: the command.
        cfg: its Config (network.bandwidth shapes the namespace's loopback).
        isolate: private network namespace (and, with ``shm``, a private /dev/shm).
        timeout_s: bound on the whole command.
        shm: size of a private /dev/shm ("" = keep the host's).
        label: name of the job in messages.
        log_path: the command's stdout and stderr go to this file (None: to ours).

    Raises:
        JobFailed: non-zero exit (with the last lines of its log) or timeout. Whatever
            the outcome, no process of the command is left when this returns.
    """
    from .netns import EXIT_ISOLATION, isolate_argv

    if isolate:
        argv = isolate_argv(argv, net=True, bandwidth=cfg.network.bandwidth, shm=shm)
    env = dict(os.environ, DGLBACKEND="pytorch", PYTHONUNBUFFERED="1")
    env.setdefault(ENV_JOB, uuid.uuid4().hex)
    sink = None
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        sink = open(log_path, "w")
    try:
        # Own session: the whole job is one process group, killable at once.
        proc = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT if sink else None,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise JobFailed(f"{label} ran past {timeout_s:.0f}s and was killed"
                            + (f" (log: {log_path})" if log_path else "")) from None
        finally:
            # Nothing of the job may outlive it: on success, failure, timeout or Ctrl+C.
            kill_group_and_tree(proc)
    finally:
        if sink is not None:
            sink.close()
    if rc != 0:
        if log_path is None:
            raise JobFailed(f"{label} {_rc_text(rc)}")
        lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
        if rc == EXIT_ISOLATION and lines:
            raise JobFailed(lines[-1])
        tail = "\n".join("    " + ln for ln in lines[-20:])
        raise JobFailed(f"{label} {_rc_text(rc)} (full log: {log_path}):\n{tail}")


def run_distdgl(cfg, out_dir: str | Path | None = None, *, grappa: bool = False, script: str | None = None,
                extra_args: list[str] | None = None, isolate: bool | None = None, quiet: bool = False) -> dict:
    """Run the DistDGL job (baseline, or the drop-in script with ``--grappa``) and return its summary.

    Args:
        cfg: validated Config; the partitions of ``cfg.partition`` are made if missing.
        out_dir: where logs, metrics.jsonl and summary.json go (default: run.output_dir).
        grappa: pass ``--grappa`` to the trainer script (local-only loader + corrected hook).
        script: trainer script (default: compare.script or scripts/distdgl_train.py).
        extra_args: more arguments for the script (e.g. config overrides).
        isolate: private network namespace: None = when possible (needed to measure
            wire bytes), True = required, False = no (not allowed with a bandwidth).
        quiet: the job's output goes to ``out_dir/<system>.log`` instead of the terminal.

    With ``schedule.k > 0`` the run is one job per partitioning, each resumed from the
    previous one's checkpoint (:func:`_run_segments`); the summary then has ``switches``
    and ``restart_s_total``.

    Returns:
        The summary dict (also in ``out_dir/summary.json``).

    Raises:
        JobFailed, IsolationError, ConfigError.
    """
    import dataclasses

    from .cli import ensure_partitions

    out = Path(out_dir or cfg.run.output_dir).resolve()
    cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, output_dir=str(out)))
    in_ns = isolation_plan(cfg, isolate)
    if cfg.schedule.k > 0:
        return _run_segments(cfg, out, grappa=grappa, script=script, extra_args=extra_args, in_ns=in_ns, quiet=quiet)
    stats, _ = ensure_partitions(cfg)
    cfg = dataclasses.replace(cfg, partition=dataclasses.replace(
        cfg.partition, out_dir=str(Path(stats["part_config"]).resolve().parent)))
    summary = _run_job(cfg, out, grappa=grappa, script=script, extra_args=extra_args, in_ns=in_ns, quiet=quiet)
    summary["edge_cut"] = stats["edge_cut"]
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def _run_job(cfg, out: Path, *, grappa: bool, script: str | None, extra_args: list[str] | None, in_ns: bool,
             quiet: bool) -> dict:
    """One DistDGL job (servers + trainers) on ``cfg.partition.out_dir``; its summary.json."""
    resolved = write_resolved_config(cfg, out / "config.resolved.yaml")
    (out / "summary.json").unlink(missing_ok=True)
    trainer = [sys.executable, str(Path(script).resolve() if script else script_path(cfg).resolve()),
               "--config", str(resolved)] + (["--grappa"] if grappa else []) + list(extra_args or [])
    argv = [sys.executable, "-m", "dgl_grappa.distdgl", "_launch", "--config", str(resolved), "--out", str(out),
            "--"] + trainer
    bound = cfg.distdgl.startup_timeout_s + cfg.run.timeout_s + cfg.distdgl.shutdown_timeout_s + 60
    label = "distdgl-grappa" if grappa else "distdgl"
    run_isolated(argv, cfg, in_ns, bound, label=label, log_path=out / f"{label}.log" if quiet else None)
    summary_path = out / "summary.json"
    if not summary_path.is_file():
        raise JobFailed(f"the DistDGL job ended without writing {summary_path}")
    return json.loads(summary_path.read_text())


def _run_segments(cfg, out: Path, *, grappa: bool, script: str | None, extra_args: list[str] | None, in_ns: bool,
                  quiet: bool) -> dict:
    """Repartitioning with DistDGL: one job per partitioning, resumed from a checkpoint.

    DGL servers cannot reload partitions, so segment j (epochs [j*k, min((j+1)*k, epochs)))
    is a fresh job (servers + trainers) on partitioning j that resumes from the checkpoint
    segment j-1's rank 0 wrote at its end (model, optimizer, next epoch, RNG states).
    Partitioning 0 is built synchronously; partitioning j+1 is built by a
    :class:`~dgl_grappa.repartition.BackgroundBuilder` process while segment j trains
    (it competes with the job for the CPUs). Each segment writes into ``out/segments/<j>``;
    the run's metrics.jsonl and summary.json merge them and add ``switches`` (restart
    cost and its parts per switch) and ``restart_s_total``.
    """
    import dataclasses

    from .data import load_dataset
    from .metrics import read_jsonl, write_json
    from .repartition import start_builder
    from .scheduler import num_partitionings, partition_root, prepare_schedule, remove_old

    k, epochs = cfg.schedule.k, cfg.train.epochs
    n_seg = num_partitionings(epochs, k)
    root = partition_root(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").unlink(missing_ok=True)
    stats = [prepare_schedule(cfg, load_dataset(cfg.data))]  # partitioning 0: synchronous
    builder = start_builder(cfg)
    segs: list[dict] = []
    try:
        for j in range(n_seg):
            seg_out = out / "segments" / str(j)
            seg = {"index": j, "out": seg_out}
            if j > 0:
                t = time.time()
                st = builder.wait(j, cfg.run.collective_timeout_s)
                seg["build_wait_s"] = time.time() - t
                stats.append(st)
                remove_old(root, j, cfg.schedule.keep_last)
            if builder is not None and j + 1 < n_seg:
                builder.request(j + 1)  # built while segment j trains
            start, stop = j * k, min((j + 1) * k, epochs)
            args = list(extra_args or []) + ["--start_epoch", str(start), "--stop_epoch", str(stop)]
            if j > 0:
                args += ["--resume", str(segs[-1]["checkpoint"])]
            if j + 1 < n_seg:
                seg["checkpoint"] = seg_out / "checkpoint.pt"
                args += ["--checkpoint", str(seg["checkpoint"])]
            seg_cfg = dataclasses.replace(cfg, partition=dataclasses.replace(
                cfg.partition, out_dir=str(Path(stats[j]["part_config"]).resolve().parent)),
                run=dataclasses.replace(cfg.run, output_dir=str(seg_out)))
            log.info("DistDGL segment %d/%d: epochs [%d, %d) on partitioning %d", j + 1, n_seg, start, stop, j)
            seg["job_start"] = time.time()
            seg["summary"] = _run_job(seg_cfg, seg_out, grappa=grappa, script=script, extra_args=args, in_ns=in_ns,
                                      quiet=quiet)
            seg["job_end"] = time.time()
            seg["records"] = read_jsonl(seg_out / "metrics.jsonl")
            segs.append(seg)
    finally:
        if builder is not None:
            builder.close()
    switches = []
    for j in range(1, n_seg):
        a, b = segs[j - 1], segs[j]
        ra, rb = a["summary"]["restart"], b["summary"]["restart"]
        st = stats[j]
        switches.append({
            "epoch": j * k, "partitioning": j,
            # End of segment j-1's last epoch -> start of segment j's first epoch.
            "restart_s": rb["first_epoch_start"] - ra["last_epoch_end"],
            "checkpoint_save_s": ra["save_s"],
            "teardown_s": a["job_end"] - ra["last_epoch_end"],     # save + summary + trainer/server exit
            "between_jobs_s": b["job_start"] - a["job_end"],       # mostly waiting for the build
            "build_wait_s": b["build_wait_s"],
            "launch_s": rb["process_start"] - b["job_start"],      # launcher + namespaces until the trainer runs
            "trainer_init_s": rb["init_done"] - rb["process_start"],  # the next four together
            "imports_s": rb["imports_done"] - rb["process_start"],
            "connect_s": rb["connected"] - rb["imports_done"],      # servers up + RPC connect + process group
            "distgraph_s": rb["graph_ready"] - rb["connected"],
            "setup_s": rb["init_done"] - rb["graph_ready"],         # loader, model, checkpoint load, meter
            "checkpoint_load_s": rb["load_s"],
            "first_barrier_s": rb["first_epoch_start"] - rb["init_done"],
            "build_s": st["build_s"], "build_in_background": True,
            "overlap_prev": st.get("overlap_prev"), "edge_cut": st["edge_cut"],
            "checksum_saved": ra["checksum_saved"], "checksum_loaded": rb["checksum_loaded"],
        })
    summary = _merge_segment_summaries(segs)
    train_s = summary["train_time_s"]
    total = sum(s["restart_s"] for s in switches)
    summary.update({"edge_cut": sum(s["edge_cut"] for s in stats) / len(stats),
                    "edge_cuts": [s["edge_cut"] for s in stats], "schedule": dataclasses.asdict(cfg.schedule),
                    "segments": n_seg, "switches": switches, "restart_s_total": total,
                    "restart_fraction_of_train": total / train_s if train_s else None,
                    "config": dataclasses.asdict(cfg)})
    summary.pop("restart", None)
    with (out / "metrics.jsonl").open("w") as f:
        for seg in segs:
            for r in seg["records"]:
                f.write(json.dumps(dict(r, partitioning=seg["index"])) + "\n")
    write_json(out / "summary.json", summary)
    return summary


def _merge_segment_summaries(segs: list[dict]) -> dict:
    """One summary for a run made of segments (per-epoch figures: median over segments)."""
    from .metrics import median
    from .netns import wire_per_epoch

    sums = [s["summary"] for s in segs]
    recs = [r for s in segs for r in s["records"]]
    merged = dict(sums[-1])  # last segment: final accuracy, names, model
    for key in ("epoch_time_s", "epoch_time_s_rank0", "grad_bytes_per_epoch", "feature_bytes_per_epoch",
                "rpc_bytes_per_epoch"):
        merged[key] = median([s[key] for s in sums])
    for key in ("epochs", "eval_time_s", "train_time_s", "remote_rows_total", "pull_rows_total"):
        merged[key] = sum(s[key] for s in sums)
    merged["steps_per_epoch"] = max(s["steps_per_epoch"] for s in sums)
    vals = [s["best_val_acc"] for s in sums if s.get("best_val_acc") is not None]
    merged["best_val_acc"] = max(vals) if vals else None
    merged["wire_bytes_per_epoch"] = wire_per_epoch(recs)
    merged["app_bytes_per_epoch"] = wire_per_epoch(recs, "app_bytes")
    merged["workers"] = [s["workers"] for s in sums]  # per segment
    return merged


# ---------------------------------------------------------------------------------------
# Inside a trainer: byte counters, the epoch meter, evaluation and the summary
# ---------------------------------------------------------------------------------------

class TrafficCounter:
    """Application-level bytes of one DistDGL client process (installed by patching ``rpc``).

    Counts, since the last :meth:`take`:

    * KVStore pulls through ``rpc.fast_pull``: ids asked for, ids owned by another machine
      (``remote_rows``), and their bytes (row bytes + the 8-byte id), split into the
      feature tensor (name ending in ``feat``) and everything else;
    * Python RPC payloads: pickled bytes + tensor bytes of every request sent
      (``serialize_to_payload``) and response received (``deserialize_from_payload``),
      which in a training epoch is neighbour sampling on other machines;
    * seconds spent in pulls (``fetch_s``).
    """

    _installed: "TrafficCounter | None" = None

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.pull_rows = 0
        self.remote_rows = 0
        self.feature_bytes = 0
        self.other_pull_bytes = 0
        self.rpc_sent = 0
        self.rpc_recv = 0
        self.fetch_s = 0.0

    def take(self) -> dict:
        """The counts since the last call, as a dict; resets them."""
        out = {"pull_rows": self.pull_rows, "remote_rows": self.remote_rows, "feature_bytes": self.feature_bytes,
               "other_pull_bytes": self.other_pull_bytes, "rpc_bytes": self.rpc_sent + self.rpc_recv,
               "rpc_sent": self.rpc_sent, "rpc_recv": self.rpc_recv, "fetch_s": self.fetch_s}
        self.reset()
        return out

    @classmethod
    def install(cls) -> "TrafficCounter":
        """Patch ``dgl.distributed.rpc`` once per process and return the counter."""
        if cls._installed is not None:
            return cls._installed
        from dgl.distributed import rpc

        counter = cls()
        fast_pull, ser, deser = rpc.fast_pull, rpc.serialize_to_payload, rpc.deserialize_from_payload

        def counted_fast_pull(name, id_tensor, part_id, service_id, machine_count, group_count, machine_id,
                              client_id, local_data, policy):
            t = time.perf_counter()
            remote = int((part_id != machine_id).sum())
            row_bytes = (local_data.numel() // max(local_data.shape[0], 1)) * local_data.element_size() \
                if local_data.dim() else local_data.element_size()
            out = fast_pull(name, id_tensor, part_id, service_id, machine_count, group_count, machine_id,
                            client_id, local_data, policy)
            counter.pull_rows += int(id_tensor.numel())
            counter.remote_rows += remote
            nbytes = remote * (row_bytes + 8)
            if str(name).endswith("feat"):
                counter.feature_bytes += nbytes
            else:
                counter.other_pull_bytes += nbytes
            counter.fetch_s += time.perf_counter() - t
            return out

        def counted_ser(serializable):
            data, tensors = ser(serializable)
            counter.rpc_sent += len(data) + sum(t.numel() * t.element_size() for t in tensors)
            return data, tensors

        def counted_deser(c, data, tensors):
            counter.rpc_recv += len(data) + sum(t.numel() * t.element_size() for t in tensors)
            return deser(c, data, tensors)

        rpc.fast_pull = counted_fast_pull
        rpc.serialize_to_payload = counted_ser
        rpc.deserialize_from_payload = counted_deser
        cls._installed = counter
        return counter


def num_classes(g) -> int:
    """Number of label classes of a DistGraph: max label over all machines + 1 (one all-reduce)."""
    import torch
    import torch.distributed as dist

    local = g.ndata["label"].local_partition
    m = torch.tensor([int(local.max()) if local.numel() else -1], dtype=torch.int64)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    return int(m[0]) + 1


class TrainerMeter:
    """Everything a DistDGL trainer script needs besides training itself.

    Per epoch: training time (from a barrier to the end of this rank's last step),
    sampling and pull time, the gradient, feature and RPC bytes of this rank, and on
    rank 0 the loopback bytes of the whole job (read before the starting barrier and
    after the closing one, evaluation excluded). Rank 0 also evaluates the model on the
    whole graph (``dgl_grappa.data.load_dataset``, full neighbourhoods, timed apart) and
    writes ``metrics.jsonl`` and ``summary.json``.

    Args:
        cfg: the Config (model, train, data, grappa sections).
        g: the DistGraph.
        out_dir: output folder (rank 0 writes there).
        correction: the Grappa correction whose hook counts gradient bytes, or None for
            plain DDP (then bytes = steps x parameter bytes, which is what DDP all-reduces).
        system: "distdgl" or "distdgl-grappa" (the summary's ``system``).

    Example (the loop of scripts/distdgl_train.py):
        >>> for epoch in range(cfg.train.epochs):                      # doctest: +SKIP
        ...     with model.join():
        ...         for input_nodes, seeds, blocks in meter.epoch(loader, epoch):
        ...             ...; meter.step(loss)
        ...     meter.end_epoch(epoch, model.module)
        >>> meter.finish(model.module)                                 # doctest: +SKIP
    """

    def __init__(self, cfg, g, out_dir: str | Path, correction=None, system: str = "distdgl"):
        import torch.distributed as dist

        from .metrics import JsonlLog
        from .netns import WireMeter

        self.cfg, self.g, self.out = cfg, g, Path(out_dir)
        self.correction = correction
        self.system = system
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.traffic = TrafficCounter.install()
        self.wire = WireMeter(main=self.rank == 0)
        self.records: list[dict] = []
        self._cur: dict = {}
        self._losses: list[float] = []
        self.eval_graph, self.mlog = None, None
        if self.rank == 0:
            from .data import load_dataset

            self.out.mkdir(parents=True, exist_ok=True)
            self.eval_graph = load_dataset(cfg.data)
            self.mlog = JsonlLog(self.out / "metrics.jsonl")

    def epoch(self, loader, epoch: int):
        """Iterate over ``loader`` for one epoch, measuring it (a generator of its batches)."""
        import torch.distributed as dist

        self.wire.start()      # rank 0, before the barrier: nobody can send before it
        dist.barrier()
        self.traffic.take()    # drop whatever happened between epochs
        if self.correction is not None:
            self.correction.take_bytes()
        self._losses = []
        steps, sample_s = 0, 0.0
        self.epoch_started = time.time()  # wall clock (restart accounting across processes)
        t0 = time.perf_counter()
        it = iter(loader)
        while True:
            ts = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            sample_s += time.perf_counter() - ts
            steps += 1
            yield batch
        t = time.perf_counter() - t0
        traffic = self.traffic.take()
        self._cur = {"epoch": epoch, "epoch_time_s": t, "steps": steps, "sample_s": sample_s, **traffic,
                     "compute_s": t - sample_s - traffic["fetch_s"]}

    def step(self, loss) -> None:
        """Record one step's loss (optional)."""
        self._losses.append(float(loss))

    def end_epoch(self, epoch: int, model) -> dict:
        """Close the epoch: wire bytes, gathered counts, evaluation when due. Returns the record."""
        import torch.distributed as dist

        from .models import gradient_bytes
        from .netns import ring_allreduce_wire_bytes
        from .trainer import eval_due, evaluate

        cur = self._cur
        cur["grad_bytes"] = (self.correction.take_bytes() if self.correction is not None
                             else cur["steps"] * gradient_bytes(model))
        cur["loss"] = sum(self._losses) / len(self._losses) if self._losses else float("nan")
        dist.barrier()         # every rank has finished its steps (uneven ones included)
        wire = self.wire.stop()
        everyone: list = [None] * self.world
        dist.all_gather_object(everyone, cur)
        rec = dict(cur, epoch_time_s=max(w["epoch_time_s"] for w in everyone),
                   epoch_time_s_rank0=cur["epoch_time_s"], wire_bytes=wire)
        for k in ("feature_bytes", "other_pull_bytes", "rpc_bytes", "remote_rows", "pull_rows", "grad_bytes"):
            rec[f"{k}_all"] = sum(w[k] for w in everyone)
        rec["app_bytes"] = (rec["feature_bytes_all"] + rec["other_pull_bytes_all"] + rec["rpc_bytes_all"]
                            + ring_allreduce_wire_bytes([w["grad_bytes"] for w in everyone]))
        if eval_due(self.cfg, epoch):
            te = time.perf_counter()
            if self.rank == 0:
                rec.update({f"{k}_acc": v for k, v in evaluate(model, self.eval_graph).items()})
            dist.barrier()
            rec["eval_time_s"] = time.perf_counter() - te
        self.records.append(rec)
        if self.rank == 0:
            self.mlog.write(rec)
            acc = f" val {rec['val_acc']:.4f}" if "val_acc" in rec else ""
            print(f"epoch {epoch}: {rec['epoch_time_s']:.2f} s, loss {rec['loss']:.3f}, remote features "
                  f"{rec['feature_bytes_all'] / 1e6:.2f} MB, wire "
                  f"{'-' if wire is None else f'{wire / 1e6:.2f} MB'}{acc}", flush=True)
        return rec

    def finish(self, model, extra: dict | None = None) -> dict | None:
        """Write summary.json (rank 0, with ``extra`` merged in) and return it; None on other ranks."""
        import torch.distributed as dist

        from .metrics import median, write_json
        from .models import gradient_bytes
        from .netns import wire_per_epoch

        mine = {"rank": self.rank, "epoch_time_s": median([r["epoch_time_s_rank0"] for r in self.records]),
                "grad_bytes_per_epoch": median([r["grad_bytes"] for r in self.records]),
                "feature_bytes_per_epoch": median([r["feature_bytes"] for r in self.records]),
                "rpc_bytes_per_epoch": median([r["rpc_bytes"] for r in self.records]),
                "remote_rows_total": sum(r["remote_rows"] for r in self.records),
                "pull_rows_total": sum(r["pull_rows"] for r in self.records),
                "steps_per_epoch": median([r["steps"] for r in self.records])}
        per_worker: list = [None] * self.world
        dist.all_gather_object(per_worker, mine)
        if self.rank != 0:
            return None
        recs = self.records
        # A segment of a restarted run may end before any evaluation was due.
        final = next((r for r in reversed(recs) if "val_acc" in r), {"val_acc": None, "test_acc": None})
        c = self.cfg
        summary = {
            "system": self.system, "name": c.name, "dataset": c.data.name, "model": c.model.name,
            "num_layers": c.model.num_layers, "num_parts": self.world, "partition_method": c.partition.method,
            "mode": "minibatch", "halo": "drop" if self.system != "distdgl" else "remote",
            "correction": c.grappa.correction if self.correction is not None else "none (DDP)",
            "hops": c.hops, "epochs": len(recs), "steps_per_epoch": max(w["steps_per_epoch"] for w in per_worker),
            "epoch_time_s": max(w["epoch_time_s"] for w in per_worker),
            "epoch_time_s_rank0": per_worker[0]["epoch_time_s"],
            "val_acc": final["val_acc"], "test_acc": final["test_acc"],
            "best_val_acc": max((r["val_acc"] for r in recs if "val_acc" in r), default=None),
            "eval_time_s": sum(r.get("eval_time_s", 0.0) for r in recs),
            "train_time_s": sum(r["epoch_time_s"] for r in recs),
            "grad_bytes_per_epoch": max(w["grad_bytes_per_epoch"] for w in per_worker),
            "model_grad_bytes": gradient_bytes(model),
            "feature_bytes_per_epoch": max(w["feature_bytes_per_epoch"] for w in per_worker),
            "rpc_bytes_per_epoch": max(w["rpc_bytes_per_epoch"] for w in per_worker),
            "remote_rows_total": sum(w["remote_rows_total"] for w in per_worker),
            "pull_rows_total": sum(w["pull_rows_total"] for w in per_worker),
            "wire_bytes_per_epoch": wire_per_epoch(recs),
            "app_bytes_per_epoch": wire_per_epoch(recs, "app_bytes"),
            "network_bandwidth": c.network.bandwidth or None,
            "workers": per_worker,
            "config": __import__("dataclasses").asdict(c),
            **(extra or {}),
        }
        write_json(self.out / "summary.json", summary)
        return summary


# ---------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    """``python -m dgl_grappa.distdgl --config C [--grappa] [--section.key=value ...]``.

    Runs the DistDGL job (servers + trainers, scripts/distdgl_train.py) on the config's
    partitions and prints its summary line. ``_launch`` and ``_server`` are internal.
    """
    from .config import ConfigError, load_config
    from .launch import setup_logging
    from .netns import IsolationError

    argv = list(sys.argv[1:] if argv is None else argv)
    setup_logging(None)
    if argv[:1] == ["_server"]:
        _server_main()
        return 0
    if argv[:1] == ["_launch"]:
        i = argv.index("--")
        ap = argparse.ArgumentParser(prog="python -m dgl_grappa.distdgl _launch")
        ap.add_argument("--config", required=True)
        ap.add_argument("--out", required=True)
        a = ap.parse_args(argv[1:i])
        cfg = load_config(a.config)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanup in launch()
        try:
            launch(cfg, str(Path(cfg.partition.out_dir) / "grappa.json"), a.out, argv[i + 1:])
        except JobFailed as exc:
            print(f"dgl_grappa.distdgl: error: {exc}", file=sys.stderr, flush=True)
            return 1
        return 0
    ap = argparse.ArgumentParser(prog="python -m dgl_grappa.distdgl",
                                 description="run the DistDGL job (servers + trainers) on the config's partitions")
    ap.add_argument("--config", default=None, help="YAML config")
    ap.add_argument("--grappa", action="store_true", help="drop-in Grappa: local-only loader + corrected hook")
    ap.add_argument("--script", default=None, help="trainer script (default: scripts/distdgl_train.py)")
    a, rest = ap.parse_known_args(argv)
    try:
        cfg = load_config(a.config, rest)
        s = run_distdgl(cfg, grappa=a.grappa, script=a.script)
    except (ConfigError, IsolationError, JobFailed) as exc:
        print(f"dgl_grappa.distdgl: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ConfigError) else 1
    wire = s.get("wire_bytes_per_epoch")
    print(f"{s['system']}: val acc {s['val_acc']:.4f} test acc {s['test_acc']:.4f} epoch {s['epoch_time_s']:.3f} s; "
          f"per epoch: wire {'-' if wire is None else f'{wire / 1e6:.2f} MB'}, app "
          f"{s['app_bytes_per_epoch'] / 1e6:.2f} MB, remote features/worker {s['feature_bytes_per_epoch'] / 1e6:.2f} MB; "
          + (f"{len(s['switches'])} restarts {s['restart_s_total']:.1f} s "
             f"({s['restart_fraction_of_train']:.2f}x training time); " if s.get("switches") else "")
          + f"wrote {Path(cfg.run.output_dir) / 'summary.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
