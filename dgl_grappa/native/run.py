"""``python -m dgl_grappa train``'s launcher on one machine: checks, partitions, workers, restarts.

1. Every input is checked before anything is written (output folder, port, checkpoint to
   resume from, the graph against ``partition.num_parts``, a reused partition folder file
   by file); a user error is one line (ConfigError) and leaves no folder behind.
2. The partitioning the run starts on is made or verified: ``partitions/0`` for a fresh
   run, the partitioning of the resumed epoch for a resumed one (rebuilt when missing).
3. One spawned worker per part (:func:`dgl_grappa.native.trainer.train_worker`). When a worker
   dies (any signal, any exit status) the others are killed by PID at once, and the whole
   group starts again from the newest intact checkpoint, up to ``launch.max_restarts``
   times (:class:`~dgl_grappa.runtime.restarts.RestartBudget`); each restart is logged and listed in
   summary.json's ``restarts``. A deadline, a user error or a worker that stopped answering
   (``run.peer_timeout_s``) is not retried.
4. One job per folder: ``run.output_dir`` and ``checkpoint.dir`` are locked for the job's whole life
   (:class:`~dgl_grappa.runtime.folders.FolderLock`); a second job on them is refused in one line.
5. SIGTERM, SIGHUP or SIGINT stop the job as a whole: the workers stop within a few steps, with a
   checkpoint (``--resume`` continues from it), bounded (:mod:`dgl_grappa.cluster.signals`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import time
from pathlib import Path

from ..cluster.launch import WorkerFailed, check_dgl_cuda, check_port_free, free_port, select_device, spawn_workers
from ..cluster.procs import JobFailed
from ..cluster.signals import Stopped, StopSignals
from ..config import Config, ConfigError
from ..data import load_dataset, num_classes
from ..method.kernels import resolve_kernels
from ..partition.prebuilt import prebuilt_num_classes, prebuilt_stats
from ..partition.schedule import prepare_schedule, resume_partitioning, resume_schedule
from ..partition.store import ensure_partitions, format_stats
from ..runtime.checkpoint import (
    CheckpointStore,
    ResumePoint,
    checkpoint_dir,
    fingerprint,
    resolve_resume,
)
from ..runtime.folders import check_output_dir, lock_job_folders
from ..runtime.repartition import start_builder
from ..runtime.restarts import restart_budget
from .trainer import train_worker

log = logging.getLogger("dgl_grappa")


@contextlib.contextmanager
def removed_on_user_error(path: Path, failures: tuple = (ConfigError,), keep=None):
    """Remove ``path`` (and the parents created for it) again if one of ``failures`` leaves the block.

    Args:
        path: a folder this command may create (nothing happens to one that existed before).
        failures: the exceptions that undo it (default: a user error).
        keep: a callable; when it returns True the folder stays (e.g. a checkpoint was written: what
            ``--resume`` continues from).
    """
    top = None
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        top, p = p, p.parent
    try:
        yield
    except failures:
        if top is not None and top.exists() and not (keep is not None and keep()):
            shutil.rmtree(top, ignore_errors=True)
        raise


_FAILURES = (ConfigError, WorkerFailed, JobFailed)
"""What ends a job as failed (a stop by a signal is not a failure: its folder stays, as it says)."""


def check_inputs(cfg: Config) -> ResumePoint | None:
    """The checks that need no graph: output folders, the rendezvous port, the checkpoint to resume from.

    Returns:
        The checkpoint the run resumes from (``checkpoint.resume``), or None.

    Raises:
        ConfigError: one line naming the problem and the fix.
    """
    check_output_dir(cfg.run.output_dir, "run.output_dir")
    if cfg.checkpoint.dir:
        check_output_dir(cfg.checkpoint.dir, "checkpoint.dir")
    if cfg.launch.master_port:
        check_port_free(cfg.launch.master_port, "launch.master_port")
    if cfg.run.device == "cuda" and resolve_kernels(cfg.train.kernels, cfg.run.device) == "dgl":
        check_dgl_cuda(select_device("cuda"))  # DGL's layers on a GPU need DGL's CUDA build: say so before spawning
    return resolve_resume(cfg)


def _train_nodes_check(stats: dict) -> None:
    train = stats.get("train_nodes")
    if train is not None and sum(train) == 0:
        raise ConfigError("the graph has no training nodes (train_mask is all false); give it a training split")


def prepare_partitions(cfg: Config, g, start_epoch: int, fresh: bool) -> dict:
    """The partitioning the run starts on; its statistics (``part_config`` is what the workers load).

    Args:
        cfg: the run's config.
        g: the graph (or None: loaded when a build needs it).
        start_epoch: the first epoch to train (a resumed run's checkpoint epoch).
        fresh: a new run (old partitionings are cleared) rather than a resumed one.
    """
    if cfg.schedule.k > 0:
        if fresh:
            return prepare_schedule(cfg, g)
        return resume_schedule(cfg, resume_partitioning(start_epoch, cfg.train.epochs, cfg.schedule.k), g)

    stats, _ = ensure_partitions(cfg, g)
    return stats


def run_native(cfg: Config) -> tuple[dict, dict]:
    """Train with spawned workers on this machine, restarting from checkpoints when a worker dies.

    Args:
        cfg: the validated config.

    Returns:
        (summary.json's content with ``restarts`` and ``job_wall_s`` added, the starting
        partitioning's statistics).

    Raises:
        ConfigError: a user error (before the run, or reported by a worker); nothing is restarted.
        WorkerFailed: a worker died and no restart was left, or the deadline passed.
    """
    out = Path(cfg.run.output_dir)
    point = check_inputs(cfg)
    locks: list = []
    ck_dir = checkpoint_dir(cfg)

    def checkpointed() -> bool:  # what --resume continues from is kept, with the folder that holds it
        return CheckpointStore(ck_dir).newest_valid() is not None

    # SIGTERM, SIGHUP, SIGINT: before the workers run, the command stops at once; while they run, they
    # stop within a few steps with a checkpoint, then every one of them is gone (bounded).
    with StopSignals() as stop:
        try:
            # A job that fails before its first checkpoint leaves no folder it created (its lock, partitions/).
            with (
                removed_on_user_error(out, _FAILURES, checkpointed),
                removed_on_user_error(ck_dir, _FAILURES, checkpointed),
            ):
                # One job per folder, before anything in them is read for writing or removed.
                locks = lock_job_folders(out, ck_dir)
                g, stats, n_classes, builder = _load_and_partition(cfg, point)
                del g  # the workers load their own parts; rank 0 reloads the graph for evaluation
                return _train(cfg, point, stats, n_classes, builder, stop)
        finally:
            for lock in locks:
                lock.release()


def _load_and_partition(cfg: Config, point: ResumePoint | None):
    """The graph (None with prebuilt parts), the starting partitioning's statistics, the number of classes
    and the background builder of the next partitioning (None when not started here)."""
    start = point.epoch if point is not None else 0
    builder = None
    if cfg.partition.prebuilt:
        # Parts made beforehand (e.g. by bigpart): the whole graph is never loaded here.
        g, stats = None, prebuilt_stats(cfg)
        n_classes = prebuilt_num_classes(cfg, stats)
        _train_nodes_check(stats)
        return g, stats, n_classes, builder
    g = load_dataset(cfg.data)
    n_classes = num_classes(g)
    if point is None:
        builder = start_builder(cfg, 0)  # first: its seconds of imports overlap partitioning 0
    try:
        stats = prepare_partitions(cfg, g, start, fresh=point is None)
        _train_nodes_check(stats)
    except BaseException:
        if builder is not None:
            builder.close()
        raise
    return g, stats, n_classes, builder


def _train(
    cfg: Config, point: ResumePoint | None, stats: dict, n_classes: int, builder, stop: StopSignals
) -> tuple[dict, dict]:
    """The workers on the prepared partitioning, restarted from checkpoints when one dies (see run_native)."""
    out = Path(cfg.run.output_dir)
    start = point.epoch if point is not None else 0

    print(
        format_stats(stats)
        if stats.get("edge_cut") is not None
        else f"prebuilt partitioning: {stats['num_parts']} parts ({stats['part_config']})",
        flush=True,
    )
    out.mkdir(parents=True, exist_ok=True)
    store = CheckpointStore(checkpoint_dir(cfg), cfg.checkpoint.keep_last)
    if point is None:
        n = store.clear()
        if n:
            log.warning(
                "removed %d checkpoint(s) of an earlier run in %s (pass --resume to continue from them)", n, store.root
            )
    else:
        log.info("resuming from %s (epoch %d, step %d)", point.path, point.epoch, point.step)
    budget = restart_budget(cfg.launch, "Grappa job")
    resume = point.path if point is not None else ""
    part_config = stats["part_config"]
    first_stats, first_point = stats, point
    t0 = time.perf_counter()
    while True:
        if builder is None:
            builder = start_builder(cfg, start)
        port = cfg.launch.master_port or free_port()
        extra = (builder.channel if builder is not None else None, resume)
        try:
            spawn_workers(
                train_worker,
                cfg.partition.num_parts,
                (cfg, part_config, n_classes, port, str(out), *extra),
                timeout_s=cfg.run.timeout_s,
                stop=stop,
                peer_timeout_s=cfg.run.peer_timeout_s,
            )
            break
        except Stopped as exc:
            last = store.newest_valid(fingerprint(cfg))
            where = (
                f"the newest checkpoint is {last.path} (epoch {last.epoch}); continue with --resume"
                if last is not None
                else "no checkpoint was written; a new run starts from epoch 0"
            )
            raise Stopped(f"{exc}: every worker has ended; {where}", exc.signum) from None
        except WorkerFailed as exc:
            if exc.user_error is not None:
                raise ConfigError(exc.user_error) from None
            if exc.timed_out or exc.stalled or budget.left <= 0:
                raise
            point = store.newest_valid(fingerprint(cfg))  # a corrupt newest one falls back, with a log line
            start = point.epoch if point is not None else 0
            budget.restart(exc.reason, point.path if point is not None else None, start)
            resume = point.path if point is not None else ""
            if cfg.schedule.k > 0:
                part_config = prepare_partitions(cfg, None, start, fresh=False)["part_config"]
        finally:
            if builder is not None:
                builder.close()
                builder = None
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary["edge_cut"] = first_stats["edge_cut"]
    summary["job_wall_s"] = time.perf_counter() - t0
    summary["restarts"] = budget.taken
    if first_point is not None:
        summary["resumed_from"] = {"path": first_point.path, "epoch": first_point.epoch}
    summary_path.write_text(json.dumps(summary, indent=1))
    return summary, first_stats
