"""Grappa beyond one host: a worker that joins from its environment, and the launcher that starts them on hosts.

* :func:`run_started_worker` is ``python -m dgl_grappa worker --config C``: one worker started by
  torchrun, srun, or the launcher below. Its identity comes from the environment
  (:func:`dgl_grappa.cluster.hosts.worker_identity`: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
  MASTER_PORT, or SLURM_PROCID, SLURM_NTASKS, SLURM_NODELIST ...), it joins the process
  group with ``init_method="env://"``, trains partition = rank, on the GPU of its
  LOCAL_RANK with ``run.device=cuda``, and resumes from the newest checkpoint when there is
  one (``resume="auto"``: torchrun and Slurm restart whole worker groups themselves).
  Rank 0 makes the partitions if they are not there yet (the others wait, bounded by
  ``run.collective_timeout_s``), loads the whole graph for evaluation, and is the only
  writer of metrics.jsonl and summary.json.
* :func:`train_on_hosts` is ``python -m dgl_grappa train`` with ``launch.remote: ssh`` or
  ``netns``: it partitions here, writes the resolved config, (with
  ``launch.copy_partitions``) copies each host its parts, starts ``worker`` on every host
  with the torchrun variables (MASTER_ADDR = host 0), waits (bounded), and stops every
  worker on every host whatever happens (:class:`dgl_grappa.cluster.remote.Cluster`).

Storage: as in DistDGL, every host is assumed to see the partitions, the config and the
output folder at the same paths (shared storage). Where it does not, ``launch.copy_partitions``
copies them (and rank 0 sends each later partitioning over the process group).
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import json
import logging
import os
import signal
import sys
import time
import uuid
from pathlib import Path

import torch.distributed as dist

from ..cluster import faults
from ..cluster.hosts import WorkerIdentity, torchrun_env, worker_identity
from ..cluster.launch import (
    Identity,
    backend_for,
    free_port,
    gpu_place,
    gpus_shared,
    init_distributed_env,
    select_device,
    set_threads,
    setup_logging,
    shutdown_distributed,
    threads_per_worker,
)
from ..cluster.liveness import Beacon, beat_every, clear_reports, fence_exit
from ..cluster.membership import (
    fenced_by,
    join_generation,
    membership_dir,
    newest_generation,
    read_generation,
    wait_generation,
)
from ..cluster.procs import ENV_JOB, JobFailed
from ..cluster.remote import DILATION_KEYS, Cluster
from ..cluster.signals import Stopped, StopSignals, catch_scheduler_stop
from ..config import Config, ConfigError, write_resolved_config
from ..data import load_dataset, num_classes
from ..env import ENV_BEAT, ENV_HOST_ADDR, ENV_JOIN, ENV_WIRE
from ..partition.layout import has_part, part_files
from ..partition.schedule import prepare_schedule
from ..partition.share import share_partition
from ..partition.store import ensure_partitions, format_stats
from ..runtime.checkpoint import CheckpointStore, checkpoint_dir, fingerprint, resolve_resume
from ..runtime.folders import check_output_dir, lock_job_folders
from ..runtime.metrics import write_json
from .supervise import supervise
from .trainer import JoinFailed, run_worker

log = logging.getLogger("dgl_grappa")


# ---------------------------------------------------------------------------------------
# One worker, joining from its environment
# ---------------------------------------------------------------------------------------


def _prepare(cfg: Config, ident, part_config: str | None, n_classes: int | None) -> tuple[str, int]:
    """Every rank: the first partitioning's json and the number of classes (rank 0 makes them if needed).

    Raises:
        JobFailed: rank 0 could not make the partitions (every rank raises it).
        ConfigError: a worker's part is missing on its host (every rank raises it).
    """
    payload: list = [None]
    if ident.is_main:
        try:
            if part_config is None or n_classes is None:
                g = load_dataset(cfg.data)
                n_classes = num_classes(g)
                if part_config is None:
                    if cfg.schedule.k > 0:
                        stats = prepare_schedule(cfg, g)
                    else:
                        stats, _ = ensure_partitions(cfg, g)
                    part_config = stats["part_config"]
                del g
            payload = [("ok", str(Path(part_config).resolve()), int(n_classes))]
        except Exception as exc:  # noqa: BLE001 - every rank must hear of it, not wait for a timeout
            payload = [("error", f"{type(exc).__name__}: {exc}", 0)]
    dist.broadcast_object_list(payload, src=0)  # the others wait here while rank 0 partitions
    status, part_config, n_classes = payload[0]
    if status != "ok":
        raise JobFailed(f"rank 0 could not prepare the partitions: {part_config}")
    halo = cfg.train.halo
    if cfg.launch.copy_partitions:
        share_partition(part_config, ident.rank, ident.host_index, halo)
    else:
        have: list = [None] * ident.world_size
        dist.all_gather_object(have, (ident.host_index, has_part(Path(part_config).parent, ident.part, halo)))
        missing = [(r, h) for r, (h, ok) in enumerate(have) if not ok]
        if missing:
            raise ConfigError(
                f"{part_config}: the files of part(s) {[r for r, _ in missing]} are missing on host(s) "
                f"{sorted({h for _, h in missing})}; put the partitions on storage every host shares, "
                "or set --launch.copy_partitions=true"
            )
    return part_config, n_classes


def run_started_worker(
    cfg: Config, part_config: str | None = None, num_classes: int | None = None, resume: str | None = "auto", env=None
) -> int:
    """``python -m dgl_grappa worker``: one worker of a job started by torchrun, srun or the launcher.

    Args:
        cfg: the run's config (the same file on every host).
        part_config: the first partitioning's json, when the launcher made it (else rank 0 does).
        num_classes: likewise.
        resume: passed to :func:`dgl_grappa.native.trainer.run_worker` ("auto": the newest checkpoint).
        env: the environment to read the identity from (default: ``os.environ``).

    Returns:
        0; failures raise (ConfigError: exit 2, JobFailed and others: exit 1).
    """
    who = worker_identity(os.environ if env is None else env)
    if who.world_size != cfg.partition.num_parts:
        raise ConfigError(
            f"WORLD_SIZE={who.world_size} but partition.num_parts={cfg.partition.num_parts}: one "
            f"worker trains one part; start {cfg.partition.num_parts} workers or set "
            f"--partition.num_parts={who.world_size}"
        )
    setup_logging(who.rank)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 PID`: every thread's stack, to its log
    # torchrun sets OMP_NUM_THREADS (1 with several workers per node); the launcher sets it for test hosts.
    threads = (
        cfg.run.num_threads or int(os.environ.get("OMP_NUM_THREADS") or 0) or threads_per_worker(who.local_world_size)
    )
    set_threads(threads)
    log.info(
        "worker %d of %d (%s): host %d (%s), local rank %d, master %s:%d, %d threads, device %s",
        who.rank,
        who.world_size,
        who.source,
        who.host_index,
        os.uname().nodename,
        who.local_rank,
        who.master_addr,
        who.master_port,
        threads,
        cfg.run.device,
    )
    out = Path(cfg.run.output_dir)
    environ = env if env is not None else os.environ
    joining = environ.get(ENV_JOIN)
    beacon = None
    if environ.get(ENV_BEAT):  # the multi-host launcher judges the workers' liveness over the network
        beacon = Beacon(
            membership_dir(out),
            who.rank,
            environ.get(ENV_HOST_ADDR) or who.master_addr,
            float(environ[ENV_BEAT]),
            since=int(joining or 0),
        ).start()
    # Started by torchrun or srun (the multi-host launcher stops its own workers): a scheduler's SIGTERM or
    # SIGHUP reaches every task; the workers then stop together at the next agreed step, with a checkpoint.
    external = ENV_BEAT not in environ
    if external:
        catch_scheduler_stop()
    if joining:  # a take-over: join the generation the launcher wrote, then take the survivors' state
        return _join_running_group(cfg, who, int(joining), out, part_config, num_classes, beacon)
    ident = init_distributed_env(who, cfg.run.collective_timeout_s, cfg.run.device, cfg.launch.remote)
    clean = False
    try:
        part_config, n_classes = _prepare(cfg, ident, part_config, num_classes)
        if ident.is_main:
            out.mkdir(parents=True, exist_ok=True)
        run_worker(ident, cfg, part_config, n_classes, str(out), resume=resume, stop_raises=external, beacon=beacon)
        clean = True
    finally:
        shutdown_distributed(clean)
    return 0


def _join_running_group(
    cfg: Config,
    who: WorkerIdentity,
    gen: int,
    out: Path,
    part_config: str | None,
    num_classes: int | None,
    beacon: Beacon | None = None,
) -> int:
    """A worker started to take a lost part over (``launch.on_failure: continue``): it joins generation
    ``gen`` of the running group (or the newer one a further loss made meanwhile) as the lost rank and
    trains that rank's part from the survivors' state."""
    folder = membership_dir(out)
    g = read_generation(folder, gen)
    if g is None or part_config is None or num_classes is None:
        raise ConfigError(
            f"{ENV_JOIN}={gen}: the launcher starts take-over workers with the generation written in "
            f"{folder} and --part-config/--num-classes; do not set it by hand"
        )
    slot, sharing = gpu_place(who, cfg.launch.remote)
    select_device(cfg.run.device, slot)
    backend = backend_for(cfg.run.device, cfg.run.device == "cuda" and gpus_shared(sharing))
    ident = Identity(
        rank=who.rank,
        world_size=who.world_size,
        part=who.rank,
        local_rank=who.local_rank,
        host_index=who.host_index,
        gpu_slot=slot,
    )
    bound = cfg.run.peer_timeout_s + 30.0
    while True:
        g = join_generation(
            newest_generation(folder, g.gen) or g,
            who.rank,
            who.world_size,
            cfg.run.collective_timeout_s,
            backend,
            folder=folder,
            form_s=cfg.run.timeout_s,
        )
        faults.hit("join", rank=who.rank, gen=g.gen)  # tests: a loss while a generation forms
        log.info(
            "worker %d joins generation %d on host %d (%s): it takes part %d over",
            who.rank,
            g.gen,
            who.host_index,
            g.reason,
            who.rank,
        )
        clean = False
        try:
            run_worker(ident, cfg, part_config, num_classes, str(out), resume="", join=g, beacon=beacon, since=gen)
            clean = True
            return 0
        except JoinFailed as exc:  # a further loss while the group formed: the launcher writes the next generation
            log.warning("%s; waiting up to %.0f s for the next generation", exc, bound)
            nxt = wait_generation(folder, g.gen, bound)
            if nxt is None:
                raise
            fenced = fenced_by(folder, who.rank, gen)
            if fenced is not None:
                fence_exit(who.rank, fenced)
            g = nxt
        finally:
            shutdown_distributed(clean)


# ---------------------------------------------------------------------------------------
# The launcher: workers on hosts (ssh, or the project's test hosts)
# ---------------------------------------------------------------------------------------


def train_on_hosts(cfg: Config) -> dict:
    """``train`` across hosts: partitions here, one ``worker`` per part on its host, bounded, stopped.

    Returns:
        summary.json's content (rank 0's, with ``cluster``, ``edge_cut`` and ``job_wall_s``
        added, and each host's address in ``wire_hosts``).

    Raises:
        ConfigError: bad hosts (one line). JobFailed: a worker failed (the tail of its log)
            or the job ran past ``run.timeout_s``; no process is left on any host.
    """
    n = cfg.partition.num_parts
    out = Path(cfg.run.output_dir).resolve()
    cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, output_dir=str(out), progress=False))

    check_output_dir(cfg.run.output_dir, "run.output_dir")
    if cfg.checkpoint.dir:
        check_output_dir(cfg.checkpoint.dir, "checkpoint.dir")
    resolve_resume(cfg)  # a checkpoint to resume from that is missing, broken or of another model: one line now
    job = os.environ.get(ENV_JOB) or uuid.uuid4().hex  # every process on every host carries it
    cluster = Cluster(cfg, n, job, spares=True)  # validates the hosts before anything is built
    # One job per folder; SIGTERM, SIGHUP, SIGINT stop the job at once: leaving the cluster's block stops
    # every worker on every host (the workers' own checkpoints are what --resume continues from).
    with StopSignals(), contextlib.ExitStack() as held:
        for lock in lock_job_folders(out, checkpoint_dir(cfg)):
            held.callback(lock.release)
        try:
            return _train_on_hosts(cfg, cluster, out)
        except Stopped as exc:
            last = CheckpointStore(checkpoint_dir(cfg)).newest_valid(fingerprint(cfg))
            where = (
                f"the newest checkpoint is {last.path} (epoch {last.epoch}); continue with --resume"
                if last is not None
                else "no checkpoint was written; a new run starts from epoch 0"
            )
            raise Stopped(f"{exc}: every worker on every host was stopped; {where}", exc.signum) from None


def _train_on_hosts(cfg: Config, cluster: Cluster, out: Path) -> dict:
    """The body of :func:`train_on_hosts`, its folders locked."""
    n = cfg.partition.num_parts
    out.mkdir(parents=True, exist_ok=True)
    g = load_dataset(cfg.data)
    n_classes = num_classes(g)
    if cfg.schedule.k > 0:
        stats = prepare_schedule(cfg, g)
    else:
        stats, _ = ensure_partitions(cfg, g)
    del g
    print(format_stats(stats), flush=True)
    part_config = str(Path(stats["part_config"]).resolve())
    part_dir = Path(part_config).parent
    if cfg.schedule.k == 0:
        cfg = dataclasses.replace(cfg, partition=dataclasses.replace(cfg.partition, out_dir=str(part_dir)))
    if not cfg.checkpoint.resume:  # a fresh run: an earlier run's checkpoints must not be resumed by the workers
        cleared = CheckpointStore(checkpoint_dir(cfg)).clear()
        if cleared:
            log.warning(
                "removed %d checkpoint(s) of an earlier run in %s (pass --resume to continue from them)",
                cleared,
                checkpoint_dir(cfg),
            )
    resolved = write_resolved_config(cfg, out / "config.resolved.yaml")
    (out / "summary.json").unlink(missing_ok=True)
    logs = out / "logs"
    t0 = time.perf_counter()
    with cluster:
        if cfg.launch.copy_partitions:
            for h in range(len(cluster.entries)):
                cluster.copy_to(h, out, [resolved.name])
                cluster.copy_to(h, part_dir, part_files(part_dir, cluster.ranks_on(h), cfg.train.halo, metadata=h == 0))
            log.info("copied the config and each host's parts of %s to %d hosts", part_dir, len(cluster.entries))
        port = cfg.launch.master_port or (29500 if cluster.kind == "netns" else free_port())
        # Test hosts share this machine's cores (or have their CPU shares); real machines divide their own.
        threads = cluster.threads_per_worker(cfg.run.num_threads)
        argv = [
            sys.executable,
            "-m",
            "dgl_grappa",
            "worker",
            "--config",
            str(resolved),
            "--part-config",
            part_config,
            "--num-classes",
            str(n_classes),
        ]
        starts = [0] * n

        def start(rank: int, host: int, local_rank: int, gen: int, at_port: int):
            """Rank's worker on a host: a whole group's member (gen 0), or a take-over joining generation gen."""
            who = WorkerIdentity(
                rank,
                n,
                local_rank,
                max(len(cluster.ranks_on(host)), local_rank + 1),
                host,
                cluster.addresses[0],
                at_port,
                "torchrun",
            )
            env = dict(
                torchrun_env(who),
                DGLBACKEND="pytorch",
                **{ENV_WIRE: "nic"},
                **{ENV_BEAT: str(beat_every(cfg.run.peer_timeout_s)), ENV_HOST_ADDR: cluster.addresses[host]},
            )
            if gen:
                env[ENV_JOIN] = str(gen)
            if threads:
                env["OMP_NUM_THREADS"] = str(threads)
            starts[rank] += 1
            name = f"worker{rank}" + (f".{starts[rank] - 1}" if starts[rank] > 1 else "")
            return cluster.start(host, argv, env, logs / f"{name}.log", name)

        def prepare_host(host: int, rank: int) -> None:
            if cfg.launch.copy_partitions:  # the take-over host reads the lost part from its own disk
                cluster.copy_to(host, part_dir, part_files(part_dir, [rank], cfg.train.halo, metadata=True))

        clear_reports(membership_dir(out))  # an earlier run's (a resumed job's) would be judged as these workers'
        procs = [start(s.rank, s.host_index, s.local_rank, 0, port) for s in cluster.slots]
        log.info(
            "%d workers on %d hosts (%s), master %s:%d, logs in %s",
            n,
            len(cluster.entries),
            cluster.kind,
            cluster.addresses[0],
            port,
            logs,
        )
        handled = supervise(cfg, procs, start, cluster.addresses, port, out, t0, prepare_host)
        if cfg.launch.copy_partitions:  # rank 0 wrote them on host 0
            cluster.fetch_from(0, out, ["summary.json", "metrics.jsonl"])
        described = cluster.describe()
    summary_path = out / "summary.json"
    if not summary_path.is_file():
        raise JobFailed(f"the workers ended without writing {summary_path}")
    summary = json.loads(summary_path.read_text())
    for h in summary.get("wire_hosts") or []:
        h["address"] = described["hosts"][h["host"]]["address"]
    summary.update(
        {
            "edge_cut": stats["edge_cut"],
            "job_wall_s": time.perf_counter() - t0,
            "cluster": described,
            "restarts": handled["restarts"],
            "on_failure": cfg.launch.on_failure,
        }
    )
    summary.update({k: described[k] for k in DILATION_KEYS if k in described})
    write_json(summary_path, summary)
    return summary
