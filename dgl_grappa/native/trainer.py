"""Gradient-only training: each worker trains on its own partition; only gradients travel.

``train_worker`` is the body of one spawned worker; it runs a :class:`Trainer`, which asks the
run's kind of job (:mod:`dgl_grappa.kinds`: node classification, link prediction, a heterogeneous
graph) for everything that differs between them: the worker's part (read with
``dgl.distributed.load_partition``'s layout, no servers), its data side (a
:class:`~dgl_grappa.kinds.LocalRuntime`: coverage, batches, input rows, the loss), its learnable
input rows if any (kept and trained by the worker that owns them, outside DDP, so the all-reduce
carries the dense weights alone), its model and what it holds. The trainer wraps the model in DDP
with the coverage-corrected communication hook and runs the same number of steps as every other
worker. Rank 0 evaluates the model on the whole graph with full neighbourhoods (not training: timed
apart, :mod:`dgl_grappa.runtime.evaluation`) and writes metrics and the summary.
"""

from __future__ import annotations

import gc
import logging
import math
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
import torch.distributed as dist
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

from ..cluster import faults
from ..cluster.launch import (
    Identity,
    UserError,
    init_distributed,
    select_device,
    set_threads,
    setup_logging,
    shutdown_distributed,
    threads_per_worker,
)
from ..cluster.liveness import fence_exit
from ..cluster.membership import (
    Generation,
    fenced_by,
    folded_change,
    join_generation,
    mark_formed,
    membership_dir,
    newer_generations,
    wait_generation,
)
from ..cluster.signals import Stopped, stop_requested
from ..config import Config, ConfigError
from ..kinds import Batch, JobKind, LocalRuntime, resolve
from ..kinds.base import LoadedPart
from ..method.embedding import LearnableRows, NoEmbedding, NoOptimizer
from ..method.kernels import place_blocks, resolve_kernels
from ..method.reducers import Correction, TimedComm, make_correction
from ..runtime.agreement import agree_resume, save_on_rank0
from ..runtime.checkpoint import (
    CheckpointError,
    CheckpointStore,
    checkpoint_dir,
    checkpoint_due,
    fingerprint,
    set_rng_state,
)
from ..runtime.evaluation import GlobalEvaluator, LayerwiseEvaluator, make_evaluator
from ..runtime.meter import EpochMeter
from ..runtime.metrics import ANON_PEAK, PhaseTimes, memory_stats
from ..runtime.repartition import RepartitionDriver
from .floor import FloorProbe
from .position import EpochPosition, PartialEpoch
from .summary import write_summary

log = logging.getLogger("dgl_grappa")

STOP_CHECK_STEPS = 16
"""Within an epoch the workers ask each other whether one was asked to stop every this many steps (one
8-byte all-reduce): a stop waits for at most this many steps, not for the end of a long epoch."""

LOSS_SYNC_STEPS = STOP_CHECK_STEPS
"""On a GPU the steps' losses stay on the device and are read by the host every this many steps (and at the
epoch's end): reading one waits for the step's kernels, which would stall the queue of the next one. On the
CPU every step's loss is read at once (it costs nothing there)."""


class _StopWithin(Exception):
    """Every rank agreed to stop (on signal ``signum``) inside the epoch after its first ``steps`` steps."""

    def __init__(self, steps: int, signum: int):
        super().__init__(f"stop after step {steps}")
        self.steps, self.signum = steps, signum


class JoinFailed(RuntimeError):
    """A worker taking a lost part over lost its new group before it had the survivors' state (a further
    loss while the group formed): it joins the next generation afresh."""


class Trainer:
    """One worker's gradient-only training: model, DDP hook, optimizer and the epoch loop.

    The parts, torchtitan-style: :meth:`train_step` (one batch), :meth:`train_epoch` (the
    steps of one epoch, measured by :class:`~dgl_grappa.runtime.meter.EpochMeter`), :meth:`evaluate`
    (the global evaluation when due), :meth:`fit` (every epoch, checkpoints, then the summary
    of :mod:`.summary`), :meth:`state_dict` / :meth:`load_state_dict` and :meth:`close`
    (teardown, the repartition driver included; safe twice). The data side of the current
    partitioning is a separate object, the kind's :class:`~dgl_grappa.kinds.LocalRuntime` in :attr:`rt`, swapped at
    repartitioning boundaries (:meth:`_switch`) while the model, its DDP wrapper, the reducer
    and the optimizer carry over. With ``run.floor`` a :class:`~.floor.FloorProbe` follows
    every epoch.

    Args:
        ident: this worker (process group already initialised).
        cfg: the run's config.
        part_config: json of the (first) partitioning.
        num_classes: number of label classes.
        out_dir: where rank 0 writes metrics.jsonl and summary.json.
        hooks: optional object with ``epoch_start(epoch, ddp, opt, rt)`` and
            ``epoch_end(epoch, ddp, opt, rt)``, called with exactly the objects an epoch
            trains with (tests use it to check state across a repartition).
        builder_channel: with schedule.k > 0, the launcher's partition builder
            (repartition.BackgroundBuilder.channel); None = rank 0 starts its own.

    Example:
        >>> trainer = Trainer(ident, cfg, part_config, num_classes, out_dir)   # doctest: +SKIP
        >>> try:                                                               # doctest: +SKIP
        ...     summary = trainer.fit()
        ... finally:
        ...     trainer.close()
    """

    # What a trainer holds, set by __init__ and its stages in this order (the class-level values are the ones
    # close() may meet in a trainer whose set-up failed half way).
    ident: Identity
    cfg: Config
    out_dir: Path
    hooks: object | None  # epoch_start / epoch_end callbacks (tests)
    kind: JobKind  # what this job trains on, its model, loss and what it holds
    part_config: str
    store: CheckpointStore
    fingerprint: dict  # the settings a checkpoint must agree with
    gen: int  # launch.on_failure: continue: the group's generation ...
    since: int  # ... the one this worker was started for (a later one naming its rank lost fences it) ...
    gen_joined: bool  # ... whether this worker joined a running group (until it took the state) ...
    membership: list[dict]  # ... and the changes of membership so far
    _at: EpochPosition  # where a stop, a resume and a new group go on from
    _partial: PartialEpoch  # the epoch in progress's losses and batch weights so far
    stopped: tuple[int, str] | None = None  # (signal, where the job stopped) once the ranks agreed to stop
    epoch: int = 0  # the next epoch to train
    step: int = 0  # training steps taken so far
    resumed_from: str | None = None  # the checkpoint this run started from
    evaluator: GlobalEvaluator | LayerwiseEvaluator  # its group bounds every wait on rank 0's own work
    driver: RepartitionDriver | None = None  # schedule.k > 0: the partitionings' schedule
    _backend: str  # the process group's backend
    kernels: str  # the layers' kernels: dgl or torch
    device: torch.device
    one_time_bytes: int  # summed over every partitioning this worker loads
    rt: LocalRuntime  # the data side of the current partitioning
    embedding: LearnableRows | NoEmbedding  # learnable input rows (a no-op without them) ...
    emb_optimizer: torch.optim.Optimizer | NoOptimizer  # ... and their sparse optimizer
    setup: dict  # set-up stages of this worker (summary.json workers[].setup)
    model: torch.nn.Module
    correction: Correction  # the reducer's state
    comm: TimedComm  # the correction's hook, timed (and a no-op for the floor)
    ddp: DDP
    optimizer: torch.optim.Optimizer
    meter: EpochMeter | None = None
    floor: FloorProbe | None = None  # run.floor
    bar: tqdm | None = None  # rank 0's progress bar
    _last_record_t: float = 0.0  # when the previous epoch record was made (its wall_s)
    _pool: ThreadPoolExecutor | None = None  # helper thread of train.prefetch (the backward pass)
    prefetched: Batch | None = None  # train.prefetch: the next step's batch

    def __init__(
        self,
        ident: Identity,
        cfg: Config,
        part_config: str,
        num_classes: int,
        out_dir: str,
        hooks=None,
        builder_channel: tuple | None = None,
        resume: str | None = None,
        join: Generation | None = None,
        beacon=None,
        since: int = 0,
    ):
        self.ident, self.cfg, self.out_dir, self.hooks = ident, cfg, Path(out_dir), hooks
        self.gen = join.gen if join is not None else 0
        self.since = since  # the generation this worker was started for: a later one that names its rank lost fences it
        self.gen_joined = join is not None
        self.membership = []
        self._at, self._partial = EpochPosition(), PartialEpoch()
        self.kind = resolve(cfg)
        self.part_config = part_config
        self.store = CheckpointStore(checkpoint_dir(cfg, out_dir), cfg.checkpoint.keep_last)
        self.fingerprint = fingerprint(cfg)
        try:
            ck, part_config = self._agree_start(resume, join, builder_channel, part_config)
            lp = self._load_part(part_config)
            self._build(lp, num_classes, join)
            self._describe(lp)
            if self.driver is not None:
                self.driver.record(self.rt, 0.0, lp.load_seconds)  # the first partitioning; asks for the next
            if ck is not None:
                self.load_state_dict(ck)  # last: nothing after it may draw from the restored RNGs
            if join is not None:
                self._sync_state(join, time.perf_counter())  # the survivors' model, optimizer and position
                self._wrap()
            elif beacon is not None and ident.is_main:  # from now on a lost worker is taken over, not restarted
                mark_formed(membership_dir(out_dir))
        except BaseException as exc:
            self.close()
            if join is not None and self.gen_joined and isinstance(exc, RuntimeError):
                raise JoinFailed(
                    f"generation {join.gen} broke before this worker had the survivors' state: "
                    f"{' '.join(str(exc).split())[-200:]}"
                ) from exc
            raise

    def _agree_start(
        self, resume: str | None, join: Generation | None, builder_channel: tuple | None, part_config: str
    ) -> tuple[dict | None, str]:
        """The evaluator, where every worker starts (the agreed checkpoint, or none) and, with repartitioning, the
        schedule's driver; the checkpoint and the partitioning to load."""
        cfg, ident = self.cfg, self.ident
        # First: its group bounds every wait on rank 0's own work (resume choice, evaluation, checkpoints).
        self.evaluator = make_evaluator(
            cfg, ident.rank, ident.world_size, part_config, self.out_dir, self.kind.scorer(cfg)
        )
        # a new member of a running group takes the survivors' state (_sync_state), not a checkpoint
        agreed = (
            None
            if join is not None
            else agree_resume(
                cfg,
                cfg.checkpoint.resume if resume is None else resume,
                self.out_dir,
                self.fingerprint,
                self.evaluator.wait_for_rank0,
            )
        )
        ck, self.resumed_from = agreed if agreed is not None else (None, None)
        start = int(ck["epoch"]) if ck is not None else 0
        if cfg.schedule.k > 0:
            # first, so that a builder starts while this worker loads its part
            self.driver = RepartitionDriver(cfg, ident, self.out_dir, builder_channel, start_epoch=start)
            if ck is not None and "schedule" in ck:
                self.driver.load_state_dict(ck["schedule"])
            if start > 0:
                part_config = self.driver.resumed_part_config(self.evaluator.wait_for_rank0)
        return ck, part_config

    def _load_part(self, part_config: str) -> LoadedPart:
        """The device, this worker's part, its data side and its learnable rows; the part."""
        cfg, ident = self.cfg, self.ident
        self._backend = dist.get_backend() if dist.is_initialized() else "gloo"
        torch.manual_seed(cfg.train.seed)
        # the layers' kernels: with torch's, DGL only samples (on the CPU), so a GPU needs no CUDA build of it
        self.kernels = resolve_kernels(cfg.train.kernels, cfg.run.device)
        self.device = select_device(cfg.run.device, ident.gpu_index, check_dgl=self.kernels == "dgl")
        if cfg.train.first_hop != cfg.first_hop and ident.is_main:
            log.info(
                "train.first_hop=%s: %s, so it is sampled",
                cfg.train.first_hop,
                "the input rows are learnable (model.embed) and precomputed aggregates of them would go stale"
                if cfg.model.embed
                else "GAT's first layer cannot be precomputed (its attention depends on learned projections)",
            )
        lp = self.kind.load_part(cfg, part_config, ident.part)
        self.one_time_bytes = lp.one_time_bytes
        t_rt = time.perf_counter()
        self.rt = self.kind.make_runtime(cfg, ident, lp)
        # Own rows trained here by a sparse optimizer; the halo's rows as the kind keeps them (frozen initial
        # rows, or on a heterogeneous graph copies trained here and synced: the runtime's epoch_start).
        # (launch.on_failure=continue refuses them: config/rules.py; none: a NoEmbedding, a no-op)
        self.embedding = self.kind.make_embedding(cfg, lp)
        self.emb_optimizer = self.embedding.optimizer(cfg.model.embed_lr)
        self.setup = {
            "load_s": lp.load_seconds,
            "runtime_s": time.perf_counter() - t_rt,
            "memory_after_setup": memory_stats(),
        }
        ANON_PEAK.sample()
        return lp

    def _build(self, lp: LoadedPart, num_classes: int, join: Generation | None) -> None:
        """The model, the reducer and its hook (DDP: a new member wraps after taking the survivors' state), the
        optimizer, the epoch meter (what this worker holds) and the floor probe."""
        cfg, ident = self.cfg, self.ident
        self.model = self.kind.build_model(cfg, lp, num_classes).to(self.device)
        self.correction = make_correction(cfg.grappa.correction, cfg.grappa.lam, cfg.grappa.shrink_target)
        self.comm = TimedComm(self.correction, cfg.grappa.grad_dtype)
        if join is None:  # a new member wraps after taking the survivors' state (DDP broadcasts rank 0's)
            self._wrap()
        opt_cls = torch.optim.Adam if cfg.train.optimizer == "adam" else torch.optim.SGD
        self.optimizer = opt_cls(self.model.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
        self.meter = EpochMeter(
            ident.is_main,
            ident.host_index,
            ident.local_rank,
            self.out_dir,
            cfg.run.tensorboard,
            keep_log=join is not None,
        )
        self._holding(lp)
        self.floor = (
            FloorProbe(self.model, self.optimizer, self.comm, self.correction, self.meter.clock)
            if cfg.run.floor
            else None
        )

    def _describe(self, lp: LoadedPart) -> None:
        """The set-up's log lines: the config (rank 0), this worker's part, data side and learnable rows."""
        cfg, ident = self.cfg, self.ident
        if ident.is_main:  # the whole tree is config.resolved.yaml's (and summary.json's): one short line here
            resolved = self.out_dir / "config.resolved.yaml"
            log.info(
                "config %s: %s, %s x%d, %d parts, %d epochs; every key: %s",
                cfg.name,
                cfg.data.name,
                cfg.model.name,
                cfg.model.num_layers,
                cfg.partition.num_parts,
                cfg.train.epochs,
                resolved if resolved.is_file() else "summary.json",
            )
        log.info(
            "part %d: %d inner nodes, %d local nodes, %d train seeds, %d steps/epoch, "
            "train coverage mean %.3f, halo %s (%d of %d reachable kept), first hop %s, tables in %s: "
            "%.2f x its own fp32 feature rows (%d one-time bytes)",
            ident.part,
            lp.num_inner,
            lp.graph.num_nodes(),
            lp.train_ids.numel(),
            self.rt.steps,
            self.rt.coverage_stats()["mean"],
            cfg.train.halo,
            lp.keep["halo_kept"],
            lp.keep["halo_reach"],
            cfg.first_hop,
            lp.keep["precision"],
            lp.resident_bytes / max(lp.own_fp32_bytes, 1),
            lp.one_time_bytes,
        )
        for line in self.rt.describe() + self.embedding.describe(ident.part):
            log.info("%s", line)

    def _wrap(self) -> None:
        """The model in DDP with the correction's hook (again in each new process group).

        DDP broadcasts rank 0's parameters: every worker starts from the same model. On a GPU the
        buckets are CUDA tensors, so the all-reduce (and the hook's) is NCCL's.
        """
        self.ddp = DDP(self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        _fix_buckets(self.ddp)
        self.comm.register(self.ddp)
        self.correction.set_contributors(self.rt.contributors)

    def train_step(self, batch: Batch, times: PhaseTimes | None = None, during_backward=None) -> tuple[float, float]:
        """One step: forward, the kind's loss corrected by the reducer (which primes the hook), backward, update.

        Args:
            batch: the step's :class:`~dgl_grappa.kinds.Batch` (blocks, what the loss reads, input rows;
                with learnable rows the input nodes' local ids, whose rows are looked up here, after the
                previous step's update, counted as ``gather``).
            times: if given, forward / backward / allreduce / optimizer seconds are added to it
                (see :data:`dgl_grappa.runtime.metrics.PHASES` for what each one covers).
            during_backward: optional callable run in this thread while the backward pass
                (and with it the gradient all-reduce) runs in a helper thread; its result is
                left in :attr:`prefetched`. ``train.prefetch`` samples the next batch this
                way: sampling stays in the training thread, whose DGL random stream it
                needs, and the step's arithmetic is the same.

        Returns:
            (mean loss of the batch as a 0-d tensor on the device, detached: reading it waits for the step;
            its batch weight).
        """
        graph, x, extra = batch.graph, batch.inputs, batch.extra or {}
        clock = time.perf_counter
        if self.embedding.learnable:  # the rows of the input ids, looked up after the previous step's update
            t_emb = clock()
            x = self.embedding(x)
            if times is not None:
                times.add("gather", clock() - t_emb)
        t0 = clock()
        dev = self.device
        # the blocks as the kernels read them (torch: plain tensors), on this worker's device
        graph = place_blocks(graph, dev, self.kernels, hetero=self.kind.heterogeneous)
        if dev.type != "cpu":  # features to this worker's GPU (sampling stays on the CPU)
            # a heterogeneous batch's inputs are a dict (per node type)
            x = (
                {k: v.to(dev, non_blocking=True) for k, v in x.items()}
                if isinstance(x, dict)
                else x.to(dev, non_blocking=True)
            )
            extra = {
                k: (
                    {r: a.to(dev, non_blocking=True) for r, a in v.items()}
                    if isinstance(v, dict)
                    else v.to(dev, non_blocking=True)
                )
                for k, v in extra.items()
            }
        out = self.ddp(graph, x, **extra)
        per_item, weights = self.rt.losses(out, batch, dev)
        loss = self.correction.loss(per_item, weights)
        t1 = clock()
        self.comm.start_step()
        self.optimizer.zero_grad(set_to_none=True)
        self.emb_optimizer.zero_grad(set_to_none=True)
        if during_backward is None:
            loss.backward()
            t2 = t_bwd = clock()
        else:
            job = self._backward_pool().submit(_timed_backward, loss)
            try:
                self.prefetched = during_backward()
                t_main = clock()
            finally:
                t_bwd = job.result()  # the backward's end; re-raises its exception
            t2 = clock()
        self.optimizer.step()
        self.emb_optimizer.step()  # this worker's own rows, locally (none: a no-op)
        t3 = clock()
        if times is not None:
            ready = self.comm.last_ready if self.comm.last_ready > t1 else t_bwd  # no bucket: all backward
            times.add("forward", t1 - t0)
            times.add("backward", ready - t1)
            times.add("allreduce", t_bwd - ready)
            times.add("optimizer", t3 - t2)
            if during_backward is not None:  # both threads' busy time beyond the wall time
                times.overlap += max(0.0, (t_bwd - t1) + (t_main - t1) - (t2 - t1))
        return per_item.detach().mean(), self.correction.last_weight

    def _backward_pool(self):
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dgl_grappa-backward")
        return self._pool

    def train_epoch(self, epoch: int, start: int = 0) -> dict:
        """Train one epoch (switching partitionings first when one starts here); its record.

        ``start``: the steps of the epoch already taken (by a group that lost a member): the
        epoch goes on from there.

        The record's ``epoch_time_s`` is the epoch's slowest worker, measured by
        :class:`~dgl_grappa.runtime.meter.EpochMeter` (the same meter as the DistDGL trainer's);
        ``worker_epoch_time_s`` is this worker's own; ``wire_bytes`` (rank 0, in a private
        network namespace) the loopback bytes of that window.
        """
        if self.driver is not None and self.driver.due(epoch):
            self._switch(epoch)
        if self.hooks is not None:
            self.hooks.epoch_start(epoch, self.ddp, self.optimizer, self.rt)
        rec = self._run_epoch(epoch, start)
        if self.hooks is not None:
            self.hooks.epoch_end(epoch, self.ddp, self.optimizer, self.rt)
        if self.driver is not None:
            rec["partitioning"] = self.driver.current
        self.epoch = epoch + 1
        self.step += self.rt.steps
        if self.floor is not None:
            rec.update(self.floor.measure(lambda: self._run_epoch(epoch), self.rt.steps))
        return rec

    def _run_epoch(self, epoch: int, start: int = 0) -> dict:
        """The steps ``start``.. of one epoch under the epoch meter; its record (time, phases, bytes, loss)."""
        self.ddp.train()
        rt = self.rt
        if not start:  # a resumed epoch keeps the losses it had
            self._partial = PartialEpoch()
        losses, weights = self._partial.losses, self._partial.weights
        # train.prefetch: the next batch is sampled while this step's backward and all-reduce run.
        prefetch = rt.prefetch and rt.steps - start > 1
        self.comm.take_inflight()
        times = self.meter.start()  # the barrier
        if not start:
            rt.epoch_start(epoch, self.embedding)  # the kind's own work at an epoch's start (a hetero halo's sync)
        inputs = rt.epoch_inputs(epoch, times, start)
        self.prefetched = next(inputs) if prefetch else None
        sync_every = 1 if self.device.type == "cpu" else LOSS_SYNC_STEPS
        pending: list[Tensor] = []  # losses still on the device
        for step in range(start, rt.steps):
            faults.hit("step", rank=self.ident.rank, epoch=epoch, step=step)  # tests: a worker dies here
            # sampling and the feature gather, timed inside epoch_inputs
            batch = self.prefetched if prefetch else next(inputs)
            during = (lambda: next(inputs)) if prefetch and step + 1 < rt.steps else None
            loss, weight = self.train_step(batch, times, during)
            pending.append(loss)
            weights.append(weight)
            if (step + 1) % sync_every == 0 or step + 1 == rt.steps:
                losses.extend(torch.stack(pending).tolist())  # one host read for the pending steps
                pending.clear()
            self._at = EpochPosition(epoch, step + 1, self._at.before)
            signum = self._stops_within() if (step + 1) % STOP_CHECK_STEPS == 0 and step + 1 < rt.steps else 0
            if signum:
                self.prefetched = None
                inputs.close()
                raise _StopWithin(step + 1, signum)
        self.prefetched = None
        self.meter.stop()
        inputs.close()
        common = self.meter.end()
        remote, local = rt.features.take_bytes()
        rec = {
            "epoch": epoch,
            **common,
            "allreduce_inflight_s": self.comm.take_inflight(),
            "loss": sum(losses) / len(losses) if losses else math.nan,
            "mean_batch_weight": sum(weights) / len(weights) if weights else 0.0,
            "grad_bytes": self.correction.take_bytes(),
            "feature_bytes": remote,
            "local_feature_bytes": local,
        }
        # the embedding's rows served locally, and the rows that crossed the network (a heterogeneous halo's
        # syncs; 0 otherwise: there is no remote path); no fields without learnable rows
        rec.update(self.embedding.record_bytes())
        if start:
            rec["resumed_at_step"] = start  # a new group took the epoch over here; the time is of the rest
        return rec

    def evaluate(self, epoch: int) -> dict:
        """The global evaluation after ``epoch`` when due (a collective; rank 0 evaluates), else {}."""
        # learnable rows: every worker's own rows, on rank 0 in the graph's node order (a collective, outside the
        # epoch's window: evaluation bytes, like DistDGL's evaluation pulls); without them the graph's features
        return self.evaluator.after_epoch(self.model, epoch, self.embedding.eval_inputs(self.part_config))

    def fit(self) -> dict | None:
        """Train every remaining epoch, log each, checkpoint when due, and write the summary.

        When the launcher asks the workers to stop (a signal, :mod:`dgl_grappa.cluster.signals`), every
        rank stops at the same point, with a checkpoint of it, and no summary is written: inside the epoch
        at the next multiple of :data:`STOP_CHECK_STEPS` steps (the checkpoint then holds the epoch's
        position, and ``--resume`` goes on from that step), or after the epoch where none comes first.

        Returns:
            summary.json's content on rank 0, None on the other ranks (and after a stop).
        """
        cfg, ident = self.cfg, self.ident
        # tqdm's default lock is a multiprocessing semaphore, which a worker killed on an interrupt never
        # releases ("leaked semaphore objects" at shutdown); a spawned worker shares its bar with no other
        # process, so a thread lock does the same job.
        tqdm.set_lock(threading.RLock())
        self.bar = tqdm(
            total=cfg.train.epochs,
            initial=self.epoch,
            desc="train",
            unit="epoch",
            disable=not (ident.is_main and cfg.run.progress),
        )
        t_loop = self._last_record_t = time.perf_counter()
        restored = len(self.meter.records)
        while self._at.epoch < cfg.train.epochs:
            epoch, start = self._at.epoch, self._at.done
            try:
                stopped = self._epoch(epoch, start)
            except Exception as exc:  # noqa: BLE001 - a lost peer's collective error takes any RuntimeError's shape
                if not self._continues_after(exc):
                    raise
                continue
            if stopped:
                self.bar.close()
                return None
        self.bar.close()
        evals = sum(r.get("eval_time_s", 0.0) for r in self.meter.records[restored:])
        return write_summary(self, time.perf_counter() - t_loop - evals)

    def _epoch(self, epoch: int, start: int) -> bool:
        """Epoch ``epoch`` from step ``start``: its steps, evaluation, record, checkpoint; whether the job stops."""
        cfg, ident = self.cfg, self.ident
        try:
            rec = self.train_epoch(epoch, start)
        except _StopWithin as stop:
            self._stop(
                stop.signum,
                f"in epoch {epoch} after step {stop.steps}",
                f" of {self.rt.steps}",
                self.save_checkpoint(within=stop.steps),
            )
            return True
        # a worker without seeds takes its steps with weight 0 and an empty (NaN) mean loss: not a failure
        if not math.isfinite(rec["loss"]) and rec["mean_batch_weight"] > 0:
            raise ConfigError(
                f"the training loss became {rec['loss']} in epoch {epoch} (worker {ident.rank}); "
                "lower --train.lr, or look for extreme values in the features"
            )
        rec.update(self.evaluate(epoch))
        # wall seconds since the previous record: a stall outside the measured steps (a peer that stopped
        # answering, a membership change, a slow checkpoint) shows here, not only in the job's total
        now = time.perf_counter()
        rec["wall_s"], self._last_record_t = round(now - self._last_record_t, 3), now
        self.meter.record(rec)
        self._at, self._partial = self._at.next_epoch(self.step), PartialEpoch()
        if ident.is_main:
            # the last evaluation's figure (accuracy, or link prediction's MRR), kept between evaluations
            key = self.kind.metric.val_key
            if rec.get(key) is not None:
                self._bar_val = {"val" if key == "val_acc" else key: f"{rec[key]:.3f}"}
            self.bar.set_postfix(
                loss=f"{rec['loss']:.3f}", t=f"{rec['epoch_time_s']:.2f}s", **getattr(self, "_bar_val", {"val": "-"})
            )
            self.bar.update(1)
        saved = checkpoint_due(cfg, epoch)
        if saved:
            self.save_checkpoint()
        signum = self._stop_agreed() if epoch + 1 < cfg.train.epochs else 0
        if signum:
            self._stop(signum, f"after epoch {epoch}", "", None if saved else self.save_checkpoint())
            return True
        return False

    def _stop(self, signum: int, where: str, detail: str, path: str | None) -> None:
        """Record and log where the ranks agreed to stop (``detail``: said in the log only)."""
        tail = f"; checkpoint {path}" if path else ""
        self.stopped = (signum, where + tail)
        if self.ident.is_main:
            log.warning("stopped on request %s%s%s", where, detail, tail)

    # -- launch.on_failure: continue ----------------------------------------------------------
    def _continues_after(self, exc: Exception) -> bool:
        """After a failed collective: join the launcher's new group and take the survivors' state (True),
        or not (False: the error stands): the job does not continue on failures, the error is not a
        collective's, or no new group came within ``run.peer_timeout_s`` + 30 s. A worker that a new
        generation replaced (its host was judged lost) is fenced: it stops at once and writes nothing."""
        if (
            self.cfg.launch.on_failure != "continue"
            or not isinstance(exc, RuntimeError)
            or isinstance(exc, (ConfigError, CheckpointError))
        ):
            return False
        t0 = time.perf_counter()
        bound = self.cfg.run.peer_timeout_s + 30.0
        log.warning(
            "a collective failed (%s): waiting up to %.0f s for the group without the lost worker", _short(exc), bound
        )
        folder = membership_dir(self.out_dir)
        g = wait_generation(folder, self.gen, bound)
        while g is not None:
            self._fence(folder)
            try:
                self._reform(g, t0)
                return True
            except RuntimeError as failed:  # a further loss while it formed: the launcher writes the next one
                if isinstance(failed, (ConfigError, CheckpointError)):
                    raise
                log.warning("generation %d broke while it formed (%s): waiting for the next one", g.gen, _short(failed))
                g = wait_generation(folder, g.gen, bound)
        log.error("no new group came within %.0f s; this worker stops", bound)
        return False

    def _fence(self, folder: Path) -> None:
        """Stop this process, writing nothing, if a generation replaced it."""
        g = fenced_by(folder, self.ident.rank, self.since)
        if g is not None:
            fence_exit(self.ident.rank, g)

    def _reform(self, g: Generation, t0: float) -> None:
        """Leave the broken group, join generation ``g`` (or a newer one written meanwhile) and make again, in the
        order a new member makes them in its set-up, everything bound to the group: the evaluator's waiting
        group, the data side (its agreed steps), the survivors' state (:meth:`_sync_state`), then DDP with the
        hook (after the state: DDP starts every member from rank 0's parameters, and rank 0 may be the new member)."""
        self.prefetched = None
        self.ddp = None
        gc.collect()  # the old DDP's reducer and its autograd hooks go before the next backward
        shutdown_distributed(clean=False)  # closes its connections: a peer still waiting in it errors out too
        g = join_generation(
            g,
            self.ident.rank,
            self.ident.world_size,
            self.cfg.run.collective_timeout_s,
            self._backend,
            folder=membership_dir(self.out_dir),
            form_s=self.cfg.run.timeout_s,
        )
        self.evaluator.regroup()
        self.rt = self.kind.make_runtime(self.cfg, self.ident, self.rt.lp)
        self._sync_state(g, t0)
        self._wrap()

    def _sync_state(self, g: Generation, t0: float) -> None:
        """Every member of generation ``g`` (a collective): the model, optimizer, position, epoch records and
        membership of the survivor furthest on (ties: the lowest rank), and ``g``'s change recorded."""
        rank = self.ident.rank
        everyone: list = [None] * self.ident.world_size
        dist.all_gather_object(everyone, (self.gen_joined, self._at))
        survivors = [r for r, (joined, _) in enumerate(everyone) if not joined]
        if not survivors:
            raise RuntimeError(f"generation {g.gen} has no surviving worker to take the state from")
        source = max(survivors, key=lambda r: everyone[r][1].furthest_key(r))
        box: list = [None]
        if rank == source:
            # the change since the last generation that formed: generations given up while forming are part of it
            gens = [x for x in newer_generations(membership_dir(self.out_dir), self.gen) if x.gen <= g.gen] or [g]
            box = [
                {
                    "model": self.model.state_dict(),
                    "optimizer": self.optimizer.state_dict(),
                    "at": self._at,
                    "partial": self._partial,
                    "records": self.meter.records,
                    "membership": self.membership,
                    "seconds": time.perf_counter() - t0,
                    "change": folded_change(gens),
                }
            ]
        dist.broadcast_object_list(box, src=source)
        st = box[0]
        if rank != source:
            self.model.load_state_dict(st["model"])
            self.optimizer.load_state_dict(st["optimizer"])
            self._at, self._partial = st["at"], st["partial"].copy()
            if self.gen_joined:
                self.meter.take_over(st["records"])
            else:
                for rec in st["records"][len(self.meter.records) :]:
                    self.meter.record(dict(rec))
        epoch, done, before = self._at.epoch, self._at.done, self._at.before
        self.epoch, self.step, self.gen_joined, self.gen = epoch, before, False, g.gen
        folded = st["change"]
        change = {
            "gen": g.gen,
            "epoch": epoch,
            "step": before + done,
            "step_in_epoch": done,
            "lost": folded["lost"],
            "joined": folded["joined"],
            "reason": folded["reason"],
            "seconds": round(st["seconds"], 3),
            "lost_part": "; ".join(
                f"part {j['rank']} loaded from its files by a new worker on host {j['host']}, "
                f"trained from epoch {epoch} step {done} on"
                for j in folded["joined"]
            ),
        }
        if folded["folded"]:
            change["folded"] = folded["folded"]  # generations given up while they formed (a further loss came)
        if folded["unreachable"]:
            change["unreachable"] = folded["unreachable"]
        self.membership = list(st["membership"]) + [change]
        if self.ident.is_main:
            log.warning(
                "generation %d: %s; %d workers go on from epoch %d step %d (%.1f s after the loss); %s",
                g.gen,
                change["reason"],
                self.ident.world_size,
                epoch,
                done,
                st["seconds"],
                change["lost_part"],
            )

    def _stops_within(self) -> int:
        """:meth:`_stop_agreed` inside an epoch (at the same steps on every rank); 0 with repartitioning (a switch
        is planned per epoch) or while the floor probe repeats an epoch."""
        return self._stop_agreed() if self.cfg.schedule.k == 0 and self.floor is None else 0

    def _stop_agreed(self) -> int:
        """The stop signal any rank received, 0 for none (a collective: every rank learns it, also one that got
        none itself, and they stop at the same point)."""
        flag = torch.tensor([stop_requested()], dtype=torch.int64)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)  # a CPU tensor: gloo, also beside NCCL
        return int(flag[0])

    def save_checkpoint(self, within: int = 0) -> str:
        """Write a checkpoint of the state after the last trained epoch, or (``within`` > 0) after that many
        steps of the epoch in progress (a collective; rank 0 writes,
        :func:`~dgl_grappa.runtime.agreement.save_on_rank0`); its path.

        Raises:
            CheckpointError: on every rank, when rank 0 could not write it (disk full, ...).
        """
        # model.embed: each worker's rows and their sparse optimizer's state are its own shard of the checkpoint
        rows = self.embedding.shard_state(self.emb_optimizer)
        shard = {"embedding": rows} if rows is not None else None
        state = self.state_dict()
        if within:  # the epoch's position: its steps taken and their losses (its record's mean loss at the end)
            state["within"] = {
                "steps": within,
                "losses": list(self._partial.losses),
                "weights": list(self._partial.weights),
            }
        path = save_on_rank0(
            self.store,
            lambda ranks: dict(state, ranks=ranks),
            self.meter.records,
            self.epoch,
            self.fingerprint,
            self.step + within,
            self.evaluator.wait_for_rank0,
            shard=shard,
        )
        if self.ident.is_main:  # the first one and a stop's are news; one a line every epoch is noise
            where = f"{within} steps into epoch {self.epoch}" if within else f"after epoch {self.epoch - 1}"
            first = not getattr(self, "_checkpointed", False)
            self._checkpointed = True
            (log.info if first or within else log.debug)(
                "checkpoint %s (step %d): %s%s",
                where,
                self.step + within,
                path,
                "; the later ones go to the same folder without a line" if first and not within else "",
            )
        return path

    def state_dict(self) -> dict:
        """What a checkpoint holds besides every rank's RNG states, records and (``model.embed``) embedding
        shard (added by :meth:`save_checkpoint`): model, optimizer, next epoch, steps taken, and the
        schedule's position and records (which partitioning trained last, which comes next, the switches)."""
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "epoch": self.epoch,
            "step": self.step,
        }
        if self.driver is not None:
            state["schedule"] = self.driver.state_dict(self.epoch)
        return state

    def load_state_dict(self, ck: dict) -> None:
        """Continue from checkpoint ``ck``: model, optimizer, position, records, this rank's RNG states and
        (``model.embed``) its embedding rows with their optimizer's state (the schedule's records were
        restored with the repartition driver).

        Call it last in the set-up: the RNG states are the ones the checkpointed run had
        when it was about to train epoch ``ck["epoch"]``.
        """
        self.model.load_state_dict(ck["model"])
        self.optimizer.load_state_dict(ck["optimizer"])
        within = ck.get("within") or {}  # a checkpoint taken inside an epoch (a stop) goes on from its step
        done = int(within.get("steps", 0))
        self.epoch, self.step = int(ck["epoch"]), int(ck.get("step", 0)) - done
        self._at = EpochPosition(self.epoch, done, self.step)
        self._partial = PartialEpoch(list(within.get("losses", [])), list(within.get("weights", [])))
        ranks = ck.get("ranks") or []
        mine = ranks[self.ident.rank] if self.ident.rank < len(ranks) else None
        rows = ((mine or {}).get("shard") or {}).get("embedding")
        if rows is None and self.embedding.learnable:
            raise CheckpointError(
                f"checkpoint {self.resumed_from} holds no embedding rows for rank "
                f"{self.ident.rank}; resume from a checkpoint of this run, or start afresh"
            )
        self.embedding.load_shard(rows, self.emb_optimizer)
        if mine is not None:
            # metrics.jsonl restarts with the epochs the checkpoint covers
            self.meter.preload(r for r in mine["records"] if r["epoch"] < self.epoch)
            set_rng_state(mine["rng"])
        if self.ident.is_main:
            log.info(
                "resumed from %s: epoch %d%s, step %d",
                self.resumed_from,
                self.epoch,
                f" from its step {done}" if done else "",
                self.step + done,
            )

    def close(self) -> None:
        """Teardown: the progress bar, the log, the helper thread, the evaluator and the repartition
        driver (its builder). Safe twice."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self.meter is not None:
            self.meter.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if hasattr(getattr(self, "evaluator", None), "close"):
            self.evaluator.close()
        if self.driver is not None:
            self.driver.close()

    def _switch(self, epoch: int) -> None:
        """Move this worker to the partitioning that starts at ``epoch`` (schedule.k > 0).

        Only the data side is rebuilt (local part, coverage, sampler, equal step count); the
        model, its DDP wrapper, the reducer and the optimizer state carry over untouched.
        """
        part_config, stall = self.driver.agree(epoch)  # bounded wait for the background build
        t0 = time.perf_counter()
        faults.hit("switch", rank=self.ident.rank, epoch=epoch)  # tests: a worker dies mid-switch
        lp = self.kind.load_part(self.cfg, part_config, self.ident.part)
        self.one_time_bytes += lp.one_time_bytes
        self.rt = self.kind.make_runtime(self.cfg, self.ident, lp)
        self._holding(lp)
        self.correction.set_contributors(self.rt.contributors)
        self.driver.record(self.rt, stall, time.perf_counter() - t0, epoch)

    def _holding(self, lp) -> None:
        """Tell the meter what this worker holds of its part (records and summary.json show it); the kind
        says what counts (with learnable rows, the embedding's own and halo rows and their moments)."""
        self.meter.holding(**self.kind.holding(self.cfg, lp, self.embedding))


def run_worker(
    ident: Identity,
    cfg: Config,
    part_config: str,
    num_classes: int,
    out_dir: str,
    hooks=None,
    builder_channel: tuple | None = None,
    resume: str | None = None,
    join: Generation | None = None,
    stop_raises: bool = False,
    beacon=None,
    since: int = 0,
) -> dict | None:
    """The training of one worker (process group already initialised): a :class:`Trainer`, fit, closed.

    This is also the entry of a worker that an external starter (torchrun, Slurm) started:
    call it with ``resume="auto"`` and a restarted worker continues from the newest intact
    checkpoint of the run (every rank must use the same ``resume``; rank 0 chooses the
    file, and with ``schedule.k > 0`` makes sure the partitioning of the resumed epoch is
    on disk, building it when missing).

    Args: as for :class:`Trainer`; ``resume``: "" (fresh), "auto", a checkpoint file, or None
        (``checkpoint.resume``); ``join``: the generation a new worker joins (it takes a lost part over,
        ``launch.on_failure: continue``; ``since``: the generation it was started for, after which a generation
        naming its rank lost fences it); ``beacon``: its liveness beacon on hosts
        (:class:`~dgl_grappa.cluster.liveness.Beacon`; rank 0 then marks the group formed); ``stop_raises``: a stop
        the ranks agreed on raises
        :class:`~dgl_grappa.cluster.signals.Stopped` (a worker of an external starter: its exit status says so).

    Returns:
        summary.json's content on rank 0, None on the other ranks (and after a stop).
    """
    trainer = Trainer(
        ident, cfg, part_config, num_classes, out_dir, hooks, builder_channel, resume, join, beacon, since
    )
    try:
        summary = trainer.fit()
    finally:
        trainer.close()
    if stop_raises and trainer.stopped is not None:
        signum, where = trainer.stopped
        raise Stopped(
            f"stopped by {signal.Signals(signum).name} {where}; a restart of the workers continues from "
            "it (--resume auto, the default)",
            signum,
        )
    return summary


def _fix_buckets(ddp: DDP) -> None:
    """Lay DDP's gradient buckets out now, once, in the parameters' order (a collective: rank 0's layout).

    DDP otherwise lays them out again after its first backward pass, in the order the gradients came
    ready. Gloo's ring all-reduce adds an element's contributions in an order set by where the element
    sits in its bucket, so with more than two workers the one step a process takes before that second
    layout rounds differently: a run resumed from a checkpoint (a new process, a new DDP) would drift
    from the run that never stopped (by about 1e-7 in the loss a few epochs on, at 4 workers). With one
    layout from the first step, every process of every run adds in the same order. This is what DDP's own
    ``Join`` does for uneven inputs (the same two calls).
    """
    ddp.reducer._push_all_rebuilt_params()
    ddp.reducer._rebuild_buckets()


def _short(exc: BaseException) -> str:
    """An error in one line of at most 160 characters (its end names the peer: gloo's own words)."""
    said = " ".join(str(exc).split()) or type(exc).__name__
    return said if len(said) <= 160 else "..." + said[-157:]


def _timed_backward(loss: Tensor) -> float:
    """``loss.backward()`` (in train.prefetch's helper thread); returns the time it ended."""
    loss.backward()
    return time.perf_counter()


def train_worker(
    rank: int,
    cfg: Config,
    part_config: str,
    num_classes: int,
    port: int,
    out_dir: str,
    builder_channel: tuple | None = None,
    resume: str | None = None,
) -> None:
    """Entry point of a spawned worker: distributed setup, the loop, teardown.

    A user error (ConfigError, e.g. a checkpoint that cannot be written) leaves as
    :class:`~dgl_grappa.cluster.launch.UserError`, which the launcher reports in one line and does
    not retry.
    """
    setup_logging(rank)
    set_threads(threads_per_worker(cfg.partition.num_parts, cfg.run.num_threads))
    ident = init_distributed(rank, cfg.partition.num_parts, port, cfg.run.collective_timeout_s, cfg.run.device)
    clean = False
    try:
        run_worker(ident, cfg, part_config, num_classes, out_dir, builder_channel=builder_channel, resume=resume)
        clean = True
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    finally:
        shutdown_distributed(clean)
