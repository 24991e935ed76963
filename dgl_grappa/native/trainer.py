"""Gradient-only training: each worker trains on its own partition; only gradients travel.

``train_worker`` is the body of one spawned worker; it runs a :class:`Trainer`, which
loads its part with ``dgl.distributed.load_partition`` (no servers), computes the coverage
of its nodes once (:class:`LocalRuntime`, the data side), wraps the model in DDP with the
coverage-corrected communication hook, and runs the same number of steps as every other
worker. Rank 0 evaluates the model on the whole graph with full neighbourhoods (not
training: timed apart, :mod:`dgl_grappa.runtime.evaluation`) and writes metrics and the summary.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
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
from ..config import Config, ConfigError
from ..method.local_part import load_local, load_local_lean
from ..method.local_runtime import LocalRuntime
from ..method.models import build_model, gradient_bytes
from ..method.reducers import TimedComm, make_correction
from ..partition.share import share_partition
from ..runtime.checkpoint import (
    CheckpointError,
    CheckpointStore,
    checkpoint_dir,
    fingerprint,
    load_checkpoint,
    resolve_resume,
    rng_state,
    set_rng_state,
)
from ..runtime.evaluation import make_evaluator
from ..runtime.metrics import (
    ANON_PEAK,
    EpochClock,
    EpochLog,
    HostWireMeter,
    PhaseTimes,
    WireMeter,
    epoch_summary,
    hosts_wire_summary,
    median,
    memory_stats,
    ring_allreduce_wire_bytes,
    write_json,
)

log = logging.getLogger("dgl_grappa")


class Trainer:
    """One worker's gradient-only training: model, DDP hook, optimizer and the epoch loop.

    The parts, torchtitan-style: :meth:`train_step` (one batch), :meth:`train_epoch` (the
    steps of one epoch, timed by :class:`~dgl_grappa.runtime.metrics.EpochClock`), :meth:`evaluate`
    (the global evaluation when due), :meth:`fit` (every epoch, then the summary),
    :meth:`state_dict` and :meth:`close` (teardown, the repartition driver included; safe
    twice). The data side of the current partitioning is a separate object,
    :class:`LocalRuntime` in :attr:`rt`, swapped at repartitioning boundaries while the
    model, its DDP wrapper, the reducer and the optimizer carry over.

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

    def __init__(self, ident: Identity, cfg: Config, part_config: str, num_classes: int, out_dir: str,
                 hooks=None, builder_channel: tuple | None = None, resume: str | None = None):
        self.ident, self.cfg, self.out_dir, self.hooks = ident, cfg, Path(out_dir), hooks
        self.driver = None
        self.bar = None
        self._pool = None  # helper thread of train.prefetch (the backward pass)
        self.prefetched = None
        self.records: list[dict] = []
        self.epoch = 0  # the next epoch to train
        self.step = 0   # training steps taken so far
        self.resumed_from: str | None = None
        self.store = CheckpointStore(checkpoint_dir(cfg, out_dir), cfg.checkpoint.keep_last)
        self.fingerprint = fingerprint(cfg)
        try:
            # First: its group bounds every wait on rank 0's own work (resume choice, evaluation, checkpoints).
            self.evaluator = make_evaluator(cfg, ident.rank, ident.world_size, part_config, out_dir)
            ck = self._agree_resume(cfg.checkpoint.resume if resume is None else resume)
            start = int(ck["epoch"]) if ck is not None else 0
            if cfg.schedule.k > 0:
                from ..runtime.repartition import RepartitionDriver  # first, so a builder starts while we load
                self.driver = RepartitionDriver(cfg, ident, out_dir, builder_channel, start_epoch=start)
                if ck is not None and "schedule" in ck:
                    self.driver.load_state_dict(ck["schedule"])
                if start > 0:
                    part_config = self._resume_partitioning()
            torch.manual_seed(cfg.train.seed)
            self.device = select_device(cfg.run.device, ident.local_rank)  # cuda: checks DGL's build too
            if cfg.train.first_hop != cfg.first_hop and ident.is_main:
                log.info("train.first_hop=%s: GAT's first layer cannot be precomputed (its attention depends on "
                         "learned projections), so it is sampled", cfg.train.first_hop)
            # A prebuilt partitioning (possibly of a graph no process can hold) is read lean.
            load = load_local_lean if cfg.partition.prebuilt else load_local
            lp = load(part_config, ident.part, cfg.train.halo, cfg.first_hop)
            self.one_time_bytes = lp.one_time_bytes  # summed over every partitioning this worker loads
            t_rt = time.perf_counter()
            self.rt = LocalRuntime(cfg, ident, lp)
            # set-up stages of this worker (summary.json workers[].setup)
            self.setup = {"load_s": lp.load_seconds, "runtime_s": time.perf_counter() - t_rt,
                          "memory_after_setup": memory_stats()}
            ANON_PEAK.sample()
            self.model = build_model(cfg.model, lp.feat.shape[1], num_classes).to(self.device)
            # Broadcasts rank 0's parameters: every worker starts from the same model. On a
            # GPU the buckets are CUDA tensors, so the all-reduce (and the hook's) is NCCL's.
            self.ddp = DDP(self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
            self.correction = make_correction(cfg.grappa.correction, cfg.grappa.lam, cfg.grappa.shrink_target)
            self.comm = TimedComm(self.correction)  # the correction's hook, timed (and a no-op for the floor)
            self.comm.register(self.ddp)
            self.correction.set_contributors(self.rt.contributors)
            opt_cls = torch.optim.Adam if cfg.train.optimizer == "adam" else torch.optim.SGD
            self.optimizer = opt_cls(self.ddp.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
            self.clock = EpochClock()
            self.wire = WireMeter(main=ident.is_main)  # loopback bytes of the job's private netns, training only
            self.host_wire = HostWireMeter(ident.host_index, ident.local_rank)  # across hosts: each host's NIC
            self.mlog = EpochLog(self.out_dir, cfg.run.tensorboard) if ident.is_main else None
            if ident.is_main:
                log.info("config: %s", asdict(cfg))
            log.info("part %d: %d inner nodes, %d local nodes, %d train seeds, %d steps/epoch, "
                     "train coverage mean %.3f, halo %s, first hop %s (%d one-time bytes)", ident.part, lp.num_inner,
                     lp.graph.num_nodes(), lp.train_ids.numel(), self.rt.steps, self.rt.coverage_stats()["mean"],
                     cfg.train.halo, cfg.first_hop, lp.one_time_bytes)
            if self.driver is not None:
                self.driver.record(self.rt, 0.0, lp.load_seconds)  # the first partitioning; asks for the next
            if ck is not None:
                self.load_state_dict(ck)  # last: nothing after it may draw from the restored RNGs
        except BaseException:
            self.close()
            raise

    def train_step(self, graph, seeds: Tensor, x: Tensor, rows: Tensor | None,
                   extra: dict | None = None, times: PhaseTimes | None = None,
                   during_backward=None) -> tuple[float, float]:
        """One step: forward, the corrected loss (which primes the hook), backward, update.

        Args:
            graph: sampled blocks, or the whole local graph (full-graph mode).
            seeds: local ids of the batch's training nodes.
            x: input features.
            rows: output rows of the seeds (full graph), or None (blocks end at the seeds).
            extra: more keyword inputs of the model (``deg``, ``agg``: :meth:`LocalRuntime.epoch_inputs`).
            times: if given, forward / backward / allreduce / optimizer seconds are added to it
                (see :data:`dgl_grappa.runtime.metrics.PHASES` for what each one covers).
            during_backward: optional callable run in this thread while the backward pass
                (and with it the gradient all-reduce) runs in a helper thread; its result is
                left in :attr:`prefetched`. ``train.prefetch`` samples the next batch this
                way: sampling stays in the training thread, whose DGL random stream it
                needs, and the step's arithmetic is the same.

        Returns:
            (mean loss of the batch, its batch weight).
        """
        clock = time.perf_counter
        t0 = clock()
        dev = self.device
        extra = extra or {}
        if dev.type != "cpu":  # blocks and features to this worker's GPU (sampling stays on the CPU)
            graph = [b.to(dev) for b in graph] if isinstance(graph, list) else graph.to(dev)
            x = x.to(dev, non_blocking=True)
            extra = {k: v.to(dev, non_blocking=True) for k, v in extra.items()}
        out = self.ddp(graph, x, **extra)
        # Blocks end at the seeds; with no seeds (a part without training nodes) they end at
        # a placeholder, whose row is not trained on: the step counts with weight 0.
        out = out[rows] if rows is not None else out[: seeds.numel()]
        per_node = F.cross_entropy(out, self.rt.lp.label[seeds].to(dev), reduction="none")
        loss = self.correction.loss(per_node, self.rt.weights[seeds].to(dev))
        t1 = clock()
        self.comm.start_step()
        self.optimizer.zero_grad(set_to_none=True)
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
        t3 = clock()
        if times is not None:
            ready = self.comm.last_ready if self.comm.last_ready > t1 else t_bwd  # no bucket: all backward
            times.add("forward", t1 - t0)
            times.add("backward", ready - t1)
            times.add("allreduce", t_bwd - ready)
            times.add("optimizer", t3 - t2)
            if during_backward is not None:  # both threads' busy time beyond the wall time
                times.overlap += max(0.0, (t_bwd - t1) + (t_main - t1) - (t2 - t1))
        return float(per_node.mean()), self.correction.last_weight

    def _backward_pool(self):
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dgl_grappa-backward")
        return self._pool

    def train_epoch(self, epoch: int) -> dict:
        """Train one epoch (switching partitionings first when one starts here); its record.

        The record's ``epoch_time_s`` is the epoch's slowest worker, measured by
        :class:`~dgl_grappa.runtime.metrics.EpochClock` (the same clock as the DistDGL trainer's);
        ``worker_epoch_time_s`` is this worker's own; ``wire_bytes`` (rank 0, in a private
        network namespace) the loopback bytes of that window.
        """
        if self.driver is not None and self.driver.due(epoch):
            self._switch(epoch)
        if self.hooks is not None:
            self.hooks.epoch_start(epoch, self.ddp, self.optimizer, self.rt)
        rec = self._run_epoch(epoch)
        if self.hooks is not None:
            self.hooks.epoch_end(epoch, self.ddp, self.optimizer, self.rt)
        if self.driver is not None:
            rec["partitioning"] = self.driver.current
        self.epoch = epoch + 1
        self.step += self.rt.steps
        if self.cfg.run.floor:
            rec.update(self.floor_epoch(epoch))
        return rec

    def _run_epoch(self, epoch: int) -> dict:
        """The steps of one epoch under the epoch clock; its record (time, phases, bytes, loss)."""
        self.ddp.train()
        rt = self.rt
        losses, weights = [], []
        times = PhaseTimes()
        inputs = rt.epoch_inputs(epoch, times)
        # train.prefetch: the next batch is sampled while this step's backward and all-reduce run.
        prefetch = rt.prefetch and rt.steps > 1
        self.comm.take_inflight()
        self.wire.start()   # rank 0, before the barrier: nobody sends before it
        self.host_wire.start()
        self.clock.start()  # the barrier
        self.prefetched = next(inputs) if prefetch else None
        for step in range(rt.steps):
            faults.hit("step", rank=self.ident.rank, epoch=epoch, step=step)  # tests: a worker dies here
            # sampling and the feature gather, timed inside epoch_inputs
            graph, seeds, x, rows, extra = self.prefetched if prefetch else next(inputs)
            during = (lambda: next(inputs)) if prefetch and step + 1 < rt.steps else None
            loss, weight = self.train_step(graph, seeds, x, rows, extra, times, during)
            losses.append(loss)
            weights.append(weight)
        self.prefetched = None
        mine = self.clock.stop()
        inputs.close()
        ANON_PEAK.sample()  # after the timed region: /proc reads stay out of the epoch
        # After the timed region; also the point where every worker has finished its steps.
        slowest = self.clock.slowest(mine)
        wire = self.wire.stop()
        hosts = self.host_wire.gather(self.host_wire.stop())  # across hosts only (a collective then)
        if hosts:
            wire = sum(h["tx_bytes"] for h in hosts)  # every byte leaves exactly one host's interface
        remote, local = rt.features.take_bytes()
        rec = {"epoch": epoch, "epoch_time_s": slowest, "worker_epoch_time_s": mine,
               **times.breakdown(mine, slowest), "allreduce_inflight_s": self.comm.take_inflight(),
               "loss": sum(losses) / len(losses),
               "mean_batch_weight": sum(weights) / len(weights), "grad_bytes": self.correction.take_bytes(),
               "feature_bytes": remote, "local_feature_bytes": local, "wire_bytes": wire}
        if hosts is not None:
            rec["wire_hosts"] = hosts
        return rec

    def floor_epoch(self, epoch: int) -> dict:
        """Measure the floor of ``epoch`` in this run (``run.floor``): what the epoch cannot beat.

        Two timed passes right after the real epoch, by the same epoch clock, neither of which
        changes the training: (1) the same steps (same batches, same model, loss and
        optimizer) with the no-op hook, i.e. local compute on this worker's part without any
        communication (model, optimizer and RNG state are restored afterwards, so the run's
        trajectory is bit-identical with and without the floor); (2) the all-reduce alone:
        the same number of steps, each all-reducing buffers of the sizes the hook all-reduced
        in the real epoch's last step (same count, same bytes), nothing else.

        Returns:
            ``floor_epoch_time_s`` (1), ``allreduce_only_s`` (2), ``floor_grad_bytes`` (bytes
            the hook handed to collectives during (1): 0, but for the shrinkage-to-mean
            scalar all-reduced before each backward), ``floor_wire_bytes`` (rank 0, in a
            private network namespace: the loopback bytes of (1)), and pass (1)'s phases
            as ``floor_<phase>_s``.
        """
        import copy

        payload = list(self.comm.step_payload)
        # DGL's sampling RNG needs no saving: every epoch's batches reseed it (LocalBatches.epoch).
        snap = (copy.deepcopy(self.model.state_dict()), copy.deepcopy(self.optimizer.state_dict()),
                torch.get_rng_state())
        self.correction.take_bytes()
        self.comm.noop = True
        try:
            floor = self._run_epoch(epoch)
        finally:
            self.comm.noop = False
            self.model.load_state_dict(snap[0])
            self.optimizer.load_state_dict(snap[1])
            torch.set_rng_state(snap[2])
        out = {"floor_epoch_time_s": floor["epoch_time_s"], "floor_grad_bytes": floor["grad_bytes"],
               "floor_wire_bytes": floor["wire_bytes"]}
        out.update({f"floor_{k}": floor[k] for k in floor if k.endswith("_s") and k not in
                    ("epoch_time_s", "worker_epoch_time_s", "allreduce_inflight_s")})
        out["allreduce_only_s"] = self.allreduce_only_epoch(self.rt.steps, payload)
        return out

    def allreduce_only_epoch(self, steps: int, payload_bytes: list[int]) -> float:
        """The epoch clock around ``steps`` x one all-reduce per bucket of ``payload_bytes`` (float32).

        Buckets are launched asynchronously and then waited for, as DDP does at the end of
        backward; the group is the correction's.
        """
        group = self.correction.state.group
        bufs = [torch.zeros(max(1, b // 4), dtype=torch.float32) for b in payload_bytes]
        self.clock.start()
        for _ in range(steps):
            works = [dist.all_reduce(b, group=group, async_op=True) for b in bufs]
            for w in works:
                w.wait()
        return self.clock.slowest(self.clock.stop())

    def evaluate(self, epoch: int) -> dict:
        """The global evaluation after ``epoch`` when due (a collective; rank 0 evaluates), else {}."""
        return self.evaluator.after_epoch(self.model, epoch)

    def fit(self) -> dict | None:
        """Train every remaining epoch, log each, and write the summary.

        Returns:
            summary.json's content on rank 0, None on the other ranks.
        """
        cfg, ident = self.cfg, self.ident
        self.bar = tqdm(total=cfg.train.epochs, initial=self.epoch, desc="train", unit="epoch",
                        disable=not (ident.is_main and cfg.run.progress))
        t_loop = time.perf_counter()
        restored = len(self.records)
        for epoch in range(self.epoch, cfg.train.epochs):
            rec = self.train_epoch(epoch)
            rec.update(self.evaluate(epoch))
            self.records.append(rec)
            if ident.is_main:
                self.mlog.write(rec)
                self.bar.set_postfix(loss=f"{rec['loss']:.3f}", t=f"{rec['epoch_time_s']:.2f}s",
                                     val=f"{rec['val_acc']:.3f}" if "val_acc" in rec else "-")
                self.bar.update(1)
            if self.checkpoint_due(epoch):
                self.save_checkpoint()
        self.bar.close()
        train_wall = time.perf_counter() - t_loop - sum(r.get("eval_time_s", 0.0) for r in self.records[restored:])
        return self.summary(train_wall)

    def checkpoint_due(self, epoch: int) -> bool:
        """Whether a checkpoint follows ``epoch``: every ``checkpoint.every`` epochs, before a
        repartition boundary and after the last epoch."""
        nxt = epoch + 1
        every = self.cfg.checkpoint.every
        boundary = self.cfg.schedule.k > 0 and nxt % self.cfg.schedule.k == 0
        return nxt == self.cfg.train.epochs or boundary or (every > 0 and nxt % every == 0)

    def save_checkpoint(self) -> str | None:
        """Write a checkpoint of the state after the last trained epoch (a collective; rank 0 writes).

        Every rank's RNG states and records are gathered to rank 0, which writes the file
        atomically (:class:`~dgl_grappa.runtime.checkpoint.CheckpointStore`); the others wait on the
        evaluation group (bounded by ``run.eval_timeout_s``) for the outcome.

        Returns:
            The checkpoint's path.

        Raises:
            CheckpointError: on every rank, when rank 0 could not write it (disk full, ...).
        """
        mine = {"rng": rng_state(), "records": self.records}
        gathered = [None] * self.ident.world_size if self.ident.is_main else None
        dist.gather_object(mine, gathered, dst=0)
        outcome = None
        if self.ident.is_main:
            state = self.state_dict()
            state["ranks"] = gathered
            try:
                outcome = ("ok", str(self.store.save(state, self.epoch, self.fingerprint, self.step)))
            except CheckpointError as exc:
                outcome = ("error", str(exc))
        status, body = self.evaluator.wait_for_rank0(outcome)
        if status != "ok":
            raise CheckpointError(body)
        if self.ident.is_main:
            log.info("checkpoint after epoch %d (step %d): %s", self.epoch - 1, self.step, body)
        return body

    def _agree_resume(self, resume: str) -> dict | None:
        """Every rank: the checkpoint to resume from (rank 0 chooses; ``resume`` = "", "auto" or a file).

        Rank 0 picks the checkpoint (the newest intact one for "auto", with a log line for
        every corrupt one it passes) and tells the others; every rank then reads that file.
        A rank that cannot read it (storage not shared) gets its bytes from rank 0.
        """
        choice = None
        if self.ident.is_main and resume:  # reads and hashes files: the others wait on the evaluation group
            try:
                point = resolve_resume(self.cfg, resume, self.out_dir)
                choice = ("ok", point.path if point is not None else None)
            except CheckpointError as exc:
                choice = ("error", str(exc))
        choice = self.evaluator.wait_for_rank0(choice)
        if choice is None:
            return None
        status, path = choice
        if status != "ok":
            raise CheckpointError(path)
        if path is None:
            if self.ident.is_main:
                log.info("resume=auto: no checkpoint in %s; starting from epoch 0", self.store.root)
            return None
        ck, why = None, None
        try:
            ck = load_checkpoint(path, self.fingerprint)
        except CheckpointError as exc:
            why = str(exc)
        ok = torch.tensor([0 if ck is None else 1])
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        if int(ok[0]) == 0:  # somebody cannot read the file: rank 0 sends it
            if self.ident.is_main and ck is None:
                raise CheckpointError(why)
            data = [Path(path).read_bytes() if self.ident.is_main else None]
            dist.broadcast_object_list(data, src=0)
            if ck is None:
                import io

                ck = torch.load(io.BytesIO(data[0]), map_location="cpu", weights_only=True)
        self.resumed_from = path
        return ck

    def _resume_partitioning(self) -> str:
        """The json of the partitioning a resumed run starts on (rank 0 rebuilds it when missing)."""
        j = self.driver.current
        if self.ident.is_main:
            from ..partition.schedule import resume_schedule

            # Started by the launcher, this is a check (the launcher ensured it already); started
            # by an external starter (torchrun, Slurm), rank 0 builds it here when missing.
            resume_schedule(self.cfg, j)
        self.evaluator.wait_for_rank0()  # bounded by run.eval_timeout_s
        return self.driver.part_config(j)

    def summary(self, train_wall_s: float) -> dict | None:
        """Gather the per-worker figures (once, after training) and, on rank 0, write summary.json.

        Args:
            train_wall_s: wall time of the epoch loop without evaluation (epochs + switches).
        """
        lp, rt, records = self.rt.lp, self.rt, self.records
        mine = {"rank": self.ident.rank, "part": self.ident.part, "inner_nodes": lp.num_inner,
                "local_nodes": lp.graph.num_nodes(), "train_seeds": int(lp.train_ids.numel()),
                "load_s": lp.load_seconds, "halo_bytes_loaded": lp.halo_bytes_loaded,
                "setup": self.setup, "memory_end": memory_stats(), "peak_anon_gb": ANON_PEAK.sample(),
                "one_time_bytes": self.one_time_bytes, "rows_held": lp.rows_held,
                "coverage_train": rt.coverage_stats(),
                "epoch_time_s": median([r["worker_epoch_time_s"] for r in records]),
                "grad_bytes_per_epoch": median([r["grad_bytes"] for r in records]),
                "feature_bytes_per_epoch": median([r["feature_bytes"] for r in records]),
                "feature_bytes_total": sum(r["feature_bytes"] for r in records)}
        per_worker: list = [None] * self.ident.world_size
        dist.all_gather_object(per_worker, mine)
        if not self.ident.is_main:
            return None
        summary = build_summary(self.cfg, records, per_worker, rt.steps, gradient_bytes(self.model))
        summary["device"] = str(self.device)
        if (wh := hosts_wire_summary(records)) is not None:
            summary["wire_hosts"] = wh
        if self.driver is not None:
            summary.update(self.driver.summary(train_wall_s))
        write_json(self.out_dir / "summary.json", summary)
        return summary

    def state_dict(self) -> dict:
        """What a checkpoint holds besides every rank's RNG states and records (added by
        :meth:`save_checkpoint`): model, optimizer, next epoch, steps taken, and the schedule's
        position and records (which partitioning trained last, which comes next, the switches)."""
        state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "epoch": self.epoch,
                 "step": self.step}
        if self.driver is not None:
            from ..partition.schedule import partitioning_index

            state["schedule"] = dict(self.driver.state_dict(),
                                     next=partitioning_index(self.epoch, self.cfg.schedule.k))
        return state

    def load_state_dict(self, ck: dict) -> None:
        """Continue from checkpoint ``ck``: model, optimizer, position, records and this rank's RNG states
        (the schedule's records were restored with the repartition driver).

        Call it last in the set-up: the RNG states are the ones the checkpointed run had
        when it was about to train epoch ``ck["epoch"]``.
        """
        self.model.load_state_dict(ck["model"])
        self.optimizer.load_state_dict(ck["optimizer"])
        self.epoch, self.step = int(ck["epoch"]), int(ck.get("step", 0))
        ranks = ck.get("ranks") or []
        mine = ranks[self.ident.rank] if self.ident.rank < len(ranks) else None
        if mine is not None:
            self.records = [dict(r) for r in mine["records"] if r["epoch"] < self.epoch]
            set_rng_state(mine["rng"])
        if self.mlog is not None:
            for rec in self.records:  # metrics.jsonl restarts with the epochs the checkpoint covers
                self.mlog.write(rec)
        if self.ident.is_main:
            log.info("resumed from %s: epoch %d, step %d", self.resumed_from, self.epoch, self.step)

    def close(self) -> None:
        """Teardown: the progress bar and the repartition driver (its builder). Safe twice."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if getattr(self, "mlog", None) is not None:
            self.mlog.close()
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
        if self.cfg.launch.copy_partitions:  # hosts without shared storage: rank 0 sends the new parts
            share_partition(part_config, self.ident.rank, self.ident.host_index, self.cfg.train.halo)
            if self.ident.host_index != 0 and self.ident.local_rank == 0:  # host 0's are rank 0's to remove
                from ..partition.schedule import partition_root, remove_old

                remove_old(partition_root(self.out_dir), self.driver.current, self.cfg.schedule.keep_last)
        t0 = time.perf_counter()
        faults.hit("switch", rank=self.ident.rank, epoch=epoch)  # tests: a worker dies mid-switch
        lp = load_local(part_config, self.ident.part, self.cfg.train.halo, self.cfg.first_hop)
        self.one_time_bytes += lp.one_time_bytes
        self.rt = LocalRuntime(self.cfg, self.ident, lp)
        self.correction.set_contributors(self.rt.contributors)
        self.driver.record(self.rt, stall, time.perf_counter() - t0, epoch)


def run_worker(ident: Identity, cfg: Config, part_config: str, num_classes: int, out_dir: str,
               hooks=None, builder_channel: tuple | None = None, resume: str | None = None) -> dict | None:
    """The training of one worker (process group already initialised): a :class:`Trainer`, fit, closed.

    This is also the entry of a worker that an external starter (torchrun, Slurm) started:
    call it with ``resume="auto"`` and a restarted worker continues from the newest intact
    checkpoint of the run (every rank must use the same ``resume``; rank 0 chooses the
    file, and with ``schedule.k > 0`` makes sure the partitioning of the resumed epoch is
    on disk, building it when missing).

    Args: as for :class:`Trainer`; ``resume``: "" (fresh), "auto", a checkpoint file, or None
        (``checkpoint.resume``).

    Returns:
        summary.json's content on rank 0, None on the other ranks.
    """
    trainer = Trainer(ident, cfg, part_config, num_classes, out_dir, hooks, builder_channel, resume)
    try:
        summary = trainer.fit()
    finally:
        trainer.close()
    return summary


def build_summary(cfg: Config, records: list[dict], per_worker: list[dict], steps: int, model_grad_bytes: int) -> dict:
    """The run's summary.json (see the README for every field)."""
    return {
        "system": "grappa",
        "name": cfg.name,
        "dataset": cfg.data.name,
        "model": cfg.model.name,
        "num_layers": cfg.model.num_layers,
        "num_parts": cfg.partition.num_parts,
        "partition_method": cfg.partition.method,
        "mode": cfg.train.mode,
        "halo": cfg.train.halo,
        "first_hop": cfg.first_hop,
        "empty": cfg.model.empty if cfg.model.name == "sage" else None,
        "correction": cfg.grappa.correction,
        "hops": cfg.hops,
        "steps_per_epoch": steps,
        # epochs, epoch/train/eval time (one clock and one rule for every system: the median
        # over epochs of each epoch's slowest worker), accuracies and wire bytes
        **epoch_summary(records),
        **floor_summary(records),
        "grad_bytes_per_epoch": max(w["grad_bytes_per_epoch"] for w in per_worker),
        "model_grad_bytes": model_grad_bytes,
        "feature_bytes_per_epoch": max(w["feature_bytes_per_epoch"] for w in per_worker),
        "feature_bytes_total": sum(w["feature_bytes_total"] for w in per_worker),
        # all workers together: what the app handed over (wire bytes: measured, above)
        "app_bytes_per_epoch": ring_allreduce_wire_bytes([w["grad_bytes_per_epoch"] for w in per_worker])
        + sum(w["feature_bytes_per_epoch"] for w in per_worker),
        # One-time bytes (halo rows and first-hop aggregates, read once per partitioning, all
        # workers and partitionings together) and what they add to every epoch they serve.
        "one_time_bytes_total": sum(w["one_time_bytes"] for w in per_worker),
        "one_time_bytes_per_epoch": sum(w["one_time_bytes"] for w in per_worker) / max(len(records), 1),
        # Memory: feature-width rows a worker holds (features, + aggregates with exact) per inner node.
        "rows_held_max": max(w["rows_held"] for w in per_worker),
        "rows_per_inner_max": max(w["rows_held"] / max(w["inner_nodes"], 1) for w in per_worker),
        "workers": per_worker,
        "config": asdict(cfg),
    }


def _timed_backward(loss: Tensor) -> float:
    """``loss.backward()`` (in train.prefetch's helper thread); returns the time it ended."""
    loss.backward()
    return time.perf_counter()


def floor_summary(records: list[dict]) -> dict:
    """The floor's summary fields (``run.floor``; all None when it was not measured).

    ``floor_epoch_s``: median over epochs of the no-op-reducer epoch (local compute only);
    ``allreduce_only_s``: median of the all-reduce-alone epoch; ``floor_s``: their sum, the
    time an epoch cannot beat; ``epoch_over_floor``: ``epoch_time_s / floor_s`` (medians of
    epochs measured in the same run, interleaved epoch by epoch); ``floor_grad_bytes_per_epoch``.
    """
    fl = [r for r in records if "floor_epoch_time_s" in r]
    if not fl:
        return {"floor_epoch_s": None, "allreduce_only_s": None, "floor_s": None, "epoch_over_floor": None}
    f = median([r["floor_epoch_time_s"] for r in fl])
    a = median([r["allreduce_only_s"] for r in fl])
    e = median([r["epoch_time_s"] for r in fl])
    return {"floor_epoch_s": f, "allreduce_only_s": a, "floor_s": f + a, "epoch_over_floor": e / (f + a),
            "floor_grad_bytes_per_epoch": median([r["floor_grad_bytes"] for r in fl]),
            "floor_phases": {k[len("floor_"):]: median([r[k] for r in fl]) for k in fl[0]
                             if k.startswith("floor_") and k.endswith("_s") and k != "floor_epoch_time_s"}}


def train_worker(rank: int, cfg: Config, part_config: str, num_classes: int, port: int, out_dir: str,
                 builder_channel: tuple | None = None, resume: str | None = None) -> None:
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
