"""Repartitioning at run time: the background builder and the switch protocol of the workers.

The schedule itself (which partitioning serves which epoch, how partitioning j is computed
and written) is :mod:`dgl_grappa.partition.schedule`. Here:

* :class:`BackgroundBuilder` is a spawned process (``spawn`` context) that loads the graph
  once and writes partitioning j on request. The launcher starts it before the workers and
  hands its :attr:`~BackgroundBuilder.channel` (two queues, a pid) to rank 0.
* :class:`RepartitionDriver` is one worker's side: rank 0 asks for partitioning j+1 as soon
  as every worker has loaded j; at the boundary it waits for the build (bounded) and
  broadcasts the outcome, every worker loads its part, and rank 0 removes folders beyond
  ``schedule.keep_last`` and records the switch for summary.json.

Every wait is bounded: the builder answers within ``0.8 * run.collective_timeout_s`` or the
switch fails on every worker at once; the builder exits when its parent is gone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import queue
import time
import traceback
from pathlib import Path

import numpy as np
import psutil
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ..cluster.launch import set_threads
from ..cluster.signals import die_with_parent
from ..config import Config
from ..data import load_dataset
from ..method import coverage as cov
from ..partition.layout import STATS_FILE, part_config_path
from ..partition.schedule import (
    AssignmentSpec,
    LocalityTracker,
    build_partitioning,
    is_switch_epoch,
    num_partitionings,
    partition_root,
    partitioning_index,
    remove_old,
    resume_partitioning,
    resume_schedule,
)
from ..partition.share import share_partition

log = logging.getLogger("dgl_grappa")

EVER_LOCAL_FILE = "ever_local.npy"
"""In partitioning j's folder: which edges were local in partitionings 0..j (bit-packed), so
that a resumed run's builder continues the ``ever_local_edges`` statistic."""


class BuildError(RuntimeError):
    """A background build failed, the builder died, or a build was not ready in time."""


def _builder_main(cfg: Config, root: str, log_path: str, requests, results, parent_pid: int) -> None:
    """Body of the builder process: load the graph once, then build partitionings on request.

    Messages in: ("build", j) or ("stop",). Out: ("ready", wall clock, seconds to load the
    graph), ("done", j, stats) or ("error", j, traceback); j = -1 for a start-up error. DGL and METIS
    print to the C-level stdout/stderr, so both go to ``log_path`` instead of the training terminal.
    """
    die_with_parent(parent_pid)  # never outlives the launcher, even one killed by SIGKILL
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    # One thread: the builder shares the machine with the training workers.
    set_threads(1)
    try:
        t0 = time.perf_counter()
        g = load_dataset(cfg.data)
        spec = AssignmentSpec.from_config(cfg)
        src, dst = (t.numpy() for t in g.edges())
        tracker, prev = LocalityTracker(src, dst), None
        results.put(("ready", time.time(), time.perf_counter() - t0))
    except Exception:  # noqa: BLE001 - everything goes back to rank 0
        results.put(("error", -1, traceback.format_exc()))
        return
    while True:
        try:
            msg = requests.get(timeout=1.0)
        except queue.Empty:
            if os.getppid() != parent_pid:  # our parent (launcher or rank 0) is gone: nobody will ask
                return
            continue
        if msg[0] == "stop":
            return
        j = msg[1]
        try:
            if prev is None:  # first request: j-1 is the active partitioning, still on disk
                prev = np.load(Path(root) / str(j - 1) / "assignment.npy")
                ever = Path(root) / str(j - 1) / EVER_LOCAL_FILE
                if ever.is_file():  # a resumed run: the edges ever local before the restart
                    tracker.ever = np.unpackbits(np.load(ever), count=tracker.ever.shape[0]).astype(bool)
                tracker.add(prev)
            stats, prev = build_partitioning(g, spec, j, root, prev)
            stats["ever_local_edges"] = tracker.add(prev)
            np.save(Path(root) / str(j) / EVER_LOCAL_FILE, np.packbits(tracker.ever))
            (Path(root) / str(j) / STATS_FILE).write_text(json.dumps(stats, indent=1))
            results.put(("done", j, stats))
        except Exception:  # noqa: BLE001
            results.put(("error", j, traceback.format_exc()))


class BuilderClient:
    """Rank 0's handle on a builder process: ask for builds, wait for them (bounded).

    Args:
        channel: ``(requests, results, pid, started_at)`` of a :class:`BackgroundBuilder`,
            usually started by the launcher and handed to rank 0 (the queues travel with
            the spawn arguments).
    """

    def __init__(self, channel: tuple):
        self.requests, self.results, self.pid, self.started_at = channel
        self.requested: dict[int, float] = {}
        self.startup_s: float | None = None  # spawn + imports + loading the graph

    def alive(self) -> bool:
        """Whether the builder process still runs (a zombie counts as dead)."""
        try:
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def request(self, j: int) -> None:
        """Ask for partitioning j (returns at once; asking twice builds once)."""
        if j in self.requested:  # a rebuild would replace the folder while workers read it
            return
        self.requested[j] = time.perf_counter()
        self.requests.put(("build", j))

    def wait(self, j: int, timeout_s: float) -> dict:
        """Block until partitioning j is written, at most ``timeout_s``; its statistics.

        Raises:
            BuildError: the build failed (with the builder's traceback), the builder died,
                or the time ran out.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BuildError(
                    f"partitioning {j} was not ready after {timeout_s:.0f} s "
                    "(raise run.collective_timeout_s or schedule.k)"
                )
            try:
                msg = self.results.get(timeout=min(1.0, remaining))
            except queue.Empty:
                if not self.alive():
                    raise BuildError(f"the partition builder (pid {self.pid}) died") from None
                continue
            if msg[0] == "ready":
                self.startup_s = msg[1] - self.started_at
            elif msg[0] == "error" and msg[1] in (j, -1):
                raise BuildError(f"building partitioning {j} failed:\n{msg[2]}")
            elif msg[0] == "done" and msg[1] == j:
                return msg[2]


class BackgroundBuilder(BuilderClient):
    """A spawned process that writes partitionings ahead of time.

    The launcher starts it before the workers (so its start-up, seconds of imports, overlaps
    theirs) and hands :attr:`channel` to rank 0; a worker started without one (tests,
    embedding code) starts its own from rank 0. The process exits when asked, when its
    parent is gone, or is killed by PID in :meth:`close`.

    Args:
        cfg: the run's config (the builder loads ``cfg.data`` itself: nothing big is pickled).
        root: ``<output dir>/partitions``.
        log_path: file that receives the builder's output.

    Example:
        >>> b = BackgroundBuilder(cfg, root, "builder.log"); b.request(1)   # doctest: +SKIP
        >>> stats = b.wait(1, timeout_s=240)                               # doctest: +SKIP
        >>> b.close()                                                      # doctest: +SKIP
    """

    def __init__(self, cfg: Config, root: str | Path, log_path: str | Path):
        ctx = mp.get_context("spawn")
        requests, results = ctx.Queue(), ctx.Queue()
        started_at = time.time()
        self.proc = ctx.Process(
            target=_builder_main,
            name="grappa-builder",
            daemon=True,
            args=(cfg, str(root), str(log_path), requests, results, os.getpid()),
        )
        self.proc.start()
        super().__init__((requests, results, self.proc.pid, started_at))

    @property
    def channel(self) -> tuple:
        """What a :class:`BuilderClient` in another process needs (pass it as a spawn argument)."""
        return (self.requests, self.results, self.pid, self.started_at)

    def alive(self) -> bool:
        return self.proc.is_alive()

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the builder (bounded: killed by PID past ``timeout_s``)."""
        if self.proc.is_alive():
            with contextlib.suppress(Exception):
                self.requests.put(("stop",))
            self.proc.join(timeout_s)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5.0)


def start_builder(cfg: Config, start_epoch: int = 0) -> BackgroundBuilder | None:
    """Launcher side: the builder for a run starting at ``start_epoch``, or None when no later partitioning is
    needed."""
    k, epochs = cfg.schedule.k, cfg.train.epochs
    if k <= 0 or resume_partitioning(start_epoch, epochs, k) + 1 >= num_partitionings(epochs, k):
        return None
    return BackgroundBuilder(cfg, partition_root(cfg.run.output_dir), Path(cfg.run.output_dir) / "builder.log")


def k_for_stall(build_s: float, load_s: float, epoch_s: float, budget: float = 0.02) -> int | None:
    """The smallest ``schedule.k`` whose switches cost at most ``budget`` of the training time.

    Partitioning j+1 is built in the background while j trains for k epochs, so a switch
    stalls ``max(0, build_s - k * epoch_s)`` and then loads for ``load_s``; both are paid
    once per k epochs: ``k >= build_s / epoch_s`` (no stall) and ``k >= load_s / (budget *
    epoch_s)``. (``schedule.k`` is not chosen automatically at run time: the switch
    epochs are fixed before training, for Grappa and for DistDGL's restart segments
    alike. summary.json reports this value from the measured times instead.)

    Returns:
        k (>= 1), or None without a measured epoch.
    """
    if epoch_s <= 0:
        return None
    return max(1, math.ceil(build_s / epoch_s), math.ceil(load_s / (budget * epoch_s)))


class RepartitionDriver:
    """One worker's side of the schedule: when to switch, agreeing on it, cleaning up.

    Rank 0 drives the builder (the launcher's, or one it starts itself) and asks for
    partitioning j+1 as soon as every worker has loaded j. At a boundary rank 0 waits for the build (bounded by 80% of
    ``run.collective_timeout_s``, so that it answers before the others' broadcast times
    out) and broadcasts the outcome: every worker switches, or every worker raises.
    Only scalars and one coverage vector per switch travel, never during a training step.

    Args:
        cfg: the run's config (``schedule.k > 0``).
        ident: this worker.
        out_dir: the run's output folder (partitionings under ``partitions/<j>``).
        builder_channel: the launcher's builder (:attr:`BackgroundBuilder.channel`); None
            makes rank 0 start and own one.
    """

    def __init__(
        self, cfg: Config, ident, out_dir: str | Path, builder_channel: tuple | None = None, start_epoch: int = 0
    ):
        self.cfg, self.ident = cfg, ident
        self.k = cfg.schedule.k
        self.root = partition_root(out_dir)
        self.count = num_partitionings(cfg.train.epochs, self.k)
        self.current = resume_partitioning(start_epoch, cfg.train.epochs, self.k)  # > 0 when resuming
        self.resumed = start_epoch > 0
        self.wait_bound_s = 0.8 * cfg.run.collective_timeout_s
        self.switches: list[dict] = []
        self.initial: dict = {}
        self._pending: dict = {}
        self.builder: BuilderClient | None = None
        self.builder_startup_s: float | None = None
        if ident.is_main and self.current + 1 < self.count:
            # Partitioning 1 is requested by record() of partitioning 0, right after this.
            if builder_channel is not None:
                self.builder = BuilderClient(builder_channel)
            else:
                self.builder = BackgroundBuilder(cfg, self.root, Path(out_dir) / "builder.log")

    def due(self, epoch: int) -> bool:
        """True when ``epoch`` starts a partitioning that this worker has not loaded yet."""
        return is_switch_epoch(epoch, self.k) and partitioning_index(epoch, self.k) != self.current

    def part_config(self, j: int | None = None) -> str:
        """The json of partitioning ``j`` (default: the current one)."""
        return str(part_config_path(self.root / str(self.current if j is None else j)))

    def resumed_part_config(self, wait_for_rank0) -> str:
        """Every worker: the json of the partitioning a resumed run starts on (rank 0 rebuilds it when missing).

        Args:
            wait_for_rank0: the evaluator's bounded wait (``run.eval_timeout_s``) for rank 0's check.
        """
        if self.ident.is_main:
            # Started by the launcher, this is a check (the launcher ensured it already); started
            # by an external starter (torchrun, Slurm), rank 0 builds it here when missing.
            resume_schedule(self.cfg, self.current)
        wait_for_rank0()
        return self.part_config()

    def state_dict(self, next_epoch: int) -> dict:
        """What a checkpoint keeps of the schedule: position, switch records, what was asked of the builder,
        and ``next``, the partitioning of ``next_epoch`` (the epoch the checkpoint resumes at)."""
        return {
            "k": self.k,
            "current": self.current,
            "initial": self.initial,
            "switches": self.switches,
            "requested": sorted(self.builder.requested) if self.builder is not None else [],
            "next": partitioning_index(next_epoch, self.k),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore the records of a checkpoint (the position comes from the resumed epoch)."""
        self.initial = dict(state.get("initial") or {})
        self.switches = [s for s in state.get("switches", []) if s.get("index", 0) <= self.current]

    def agree(self, epoch: int) -> tuple[str, float]:
        """Every worker: the next partitioning's json once it is ready, and the stall (s).

        With ``launch.copy_partitions`` (hosts without shared storage) rank 0 then sends the
        new parts to the other hosts, whose first worker removes their old copies.
        """
        j = partitioning_index(epoch, self.k)
        t0 = time.perf_counter()
        payload: list = [None]
        if self.ident.is_main:
            try:
                payload = [("ok", self.builder.wait(j, self.wait_bound_s))]
            except BuildError as exc:
                payload = [("error", str(exc))]
        dist.broadcast_object_list(payload, src=0)
        stall = time.perf_counter() - t0
        status, body = payload[0]
        if status != "ok":
            raise BuildError(f"rank {self.ident.rank}: repartition at epoch {epoch} failed: {body}")
        self._pending = body
        self.current = j
        ident = self.ident
        if self.cfg.launch.copy_partitions:
            share_partition(body["part_config"], ident.rank, ident.host_index, self.cfg.train.halo)
            if ident.host_index != 0 and ident.local_rank == 0:  # host 0's are rank 0's to remove (record())
                remove_old(self.root, self.current, self.cfg.schedule.keep_last)
        return body["part_config"], stall

    def record(self, rt, stall_s: float, load_s: float, epoch: int | None = None) -> dict | None:
        """After this worker loaded the current partitioning: gather, log, clean up, build ahead.

        Args:
            rt: the new LocalRuntime (the coverage of what it trains on is summarised).
            stall_s: this worker's wait at the boundary (0 for partitioning 0).
            load_s: this worker's load + rebuild time.
            epoch: first epoch on the partitioning (None for partitioning 0).

        Returns:
            On rank 0 the switch record (also kept in ``self.switches``), else None.
        """
        train_cov = rt.train_coverage()
        mine = cov.summarize(train_cov)
        log.info(
            "partitioning %d: part %d loaded in %.2f s after a %.2f s wait; %d train seeds, "
            "%d steps/epoch, train coverage mean %.3f p10 %.3f",
            self.current,
            self.ident.part,
            load_s,
            stall_s,
            rt.lp.train_ids.numel(),
            rt.steps,
            mine["mean"],
            mine["p10"],
        )
        gathered = [None] * self.ident.world_size if self.ident.is_main else None
        # Also the point where rank 0 knows that nobody reads an older folder any more.
        dist.gather_object((stall_s, load_s, train_cov), gathered, dst=0)
        if not self.ident.is_main:
            return None
        remove_old(self.root, self.current, self.cfg.schedule.keep_last)
        if self.builder is not None and self.current + 1 < self.count:
            self.builder.request(self.current + 1)
        all_cov = torch.cat([c for _, _, c in gathered])
        rec = {
            "index": self.current,
            "epoch": epoch,
            "stall_s": max(s for s, _, _ in gathered),
            "load_s": max(s for _, s, _ in gathered),
            "load_s_per_worker": [s for _, s, _ in gathered],
            "coverage_train": cov.summarize(all_cov),
        }
        if epoch is None:  # the first partitioning, built by the launcher before the workers started
            stats = json.loads((self.root / str(self.current) / STATS_FILE).read_text())
            rec.update({"build_s": stats.get("build_s"), "edge_cut": stats["edge_cut"]})
            if not self.resumed:
                self.initial = rec
            else:
                log.info("resumed on partitioning %d (edge cut %.4f)", self.current, stats["edge_cut"])
                if self.current > 0 and not any(s["index"] == self.current for s in self.switches):
                    # The switch itself happened in the attempt that died after its checkpoint:
                    # record it from this load (no stall: the folder was on disk already).
                    rec.update(
                        {
                            "epoch": self.current * self.k,
                            "resumed": True,
                            "build_s": stats.get("build_s"),
                            "overlap_prev": stats.get("overlap_prev"),
                            "part_config": stats.get("part_config"),
                            "ever_local_edges": stats.get("ever_local_edges"),
                        }
                    )
                    self.switches.append(rec)
        else:
            b = self._pending
            rec.update(
                {
                    "build_s": b["build_s"],
                    "overlap_prev": b.get("overlap_prev"),
                    "edge_cut": b["edge_cut"],
                    "ever_local_edges": b.get("ever_local_edges"),
                    "part_config": b["part_config"],
                }
            )
            self.switches.append(rec)
            c = rec["coverage_train"]
            log.info(
                "switch to partitioning %d at epoch %d: build %.2f s (background), stall %.2f s, "
                "load %.2f s, overlap %.3f, edge cut %.4f, edges ever local %.4f, "
                "train coverage mean %.3f p10/p50/p90 %.3f/%.3f/%.3f",
                self.current,
                epoch,
                rec["build_s"],
                rec["stall_s"],
                rec["load_s"],
                rec["overlap_prev"],
                rec["edge_cut"],
                rec["ever_local_edges"],
                c["mean"],
                c["p10"],
                c["p50"],
                c["p90"],
            )
        return rec

    def summary(self, train_wall_s: float) -> dict:
        """The ``schedule`` and ``switches`` entries of summary.json (rank 0).

        Args:
            train_wall_s: wall time of the epoch loop without evaluation (epochs + switches).
        """
        stall = sum(s["stall_s"] for s in self.switches)
        load = sum(s["load_s"] for s in self.switches)
        epoch_s = max(train_wall_s - stall - load, 0.0) / max(self.cfg.train.epochs, 1)
        builds = [s["build_s"] for s in self.switches if s.get("build_s")]
        loads = [s["load_s"] for s in self.switches]
        return {
            "schedule": {
                "k": self.k,
                "k_for_2pct": k_for_stall(max(builds, default=0.0), max(loads, default=0.0), epoch_s),
                "method": self.cfg.schedule.method,
                "seed": self.cfg.schedule.seed,
                "keep_last": self.cfg.schedule.keep_last,
                "num_partitionings": self.count,
                "initial": self.initial,
                "stall_s_total": stall,
                "load_s_total": load,
                "train_wall_s": train_wall_s,
                "stall_fraction": stall / train_wall_s if train_wall_s > 0 else 0.0,
                "switch_fraction": (stall + load) / train_wall_s if train_wall_s > 0 else 0.0,
                "builder_startup_s": self.builder.startup_s if self.builder else self.builder_startup_s,
            },
            "switches": self.switches,
        }

    def close(self) -> None:
        """Stop the builder if this worker owns it (the launcher closes its own); safe twice."""
        if self.builder is not None:
            self.builder_startup_s = self.builder.startup_s
            if isinstance(self.builder, BackgroundBuilder):
                self.builder.close()
            self.builder = None
