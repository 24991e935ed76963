"""Gradient-only training: each worker trains on its own partition; only gradients travel.

``train_worker`` is the body of one spawned worker; it runs a :class:`Trainer`, which
loads its part with ``dgl.distributed.load_partition`` (no servers), computes the coverage
of its nodes once (:class:`LocalRuntime`, the data side), wraps the model in DDP with the
coverage-corrected communication hook, and runs the same number of steps as every other
worker. Rank 0 evaluates the model on the whole graph with full neighbourhoods (not
training: timed apart, :mod:`dgl_grappa.evaluation`) and writes metrics and the summary.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path

import dgl
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

from . import coverage as cov
from .config import Config
from .evaluation import GlobalEvaluator
from .launch import (Identity, init_distributed, set_threads, setup_logging, shutdown_distributed,
                     threads_per_worker)
from .metrics import EpochClock, JsonlLog, WireMeter, epoch_summary, median, ring_allreduce_wire_bytes, write_json
from .models import build_model, gradient_bytes
from .partition import LocalPartition, load_local
from .reducers import make_correction
from .sampler import LocalBatches, LocalFeatures, equal_steps, layer_sampler

log = logging.getLogger("dgl_grappa")


class LocalRuntime:
    """The data side of one partitioning on one worker: coverage, weights, batches, feature reads.

    Rebuilt at every repartitioning boundary, while the :class:`Trainer`'s model, DDP
    wrapper, reducer and optimizer carry over. Coverage, weights and batches come from the
    same functions the drop-in loader uses (:mod:`dgl_grappa.dropin`).

    Args:
        cfg: the run's config (``train.mode``, batch size, fan-outs, ``grappa``).
        ident: this worker (its rank seeds the sampling).
        lp: the loaded part (:func:`dgl_grappa.partition.load_local`).
    """

    def __init__(self, cfg: Config, ident: Identity, lp: LocalPartition):
        self.lp = lp
        self.coverage, self.weights = cov.partition_weights(lp.src, lp.dst, lp.graph.num_nodes(), lp.in_degree,
                                                            cfg.hops, cfg.grappa.self_loops, cfg.grappa.w_min)
        self.features = LocalFeatures(lp.feat)
        # First-hop completion: the precomputed aggregates are read like features (all local).
        if cfg.first_hop == "exact" and lp.agg is None:
            raise ValueError("train.first_hop=exact needs the part loaded with its aggregates: "
                             "load_local(..., first_hop='exact')")
        self.aggregates = LocalFeatures(lp.agg) if cfg.first_hop == "exact" else None
        if cfg.train.mode == "minibatch":
            self.steps = equal_steps(lp.train_ids.numel(), cfg.train.batch_size)
            self.batches = LocalBatches(lp.graph, lp.train_ids, layer_sampler(cfg.train.fanouts, cfg.first_hop),
                                        self.steps, seed=cfg.train.seed * 1000 + ident.rank)
        else:
            if lp.train_ids.numel() == 0:
                raise ValueError("this worker's part has no training nodes; use fewer parts")
            self.steps = 1
            self.batches = None

    def epoch_inputs(self, epoch: int):
        """Yield (graph or blocks, seeds, input features, output rows of the seeds, extra model inputs) per step.

        Mini-batch: sampled blocks, whose output rows are the seeds already (rows None).
        Full graph: one step over the whole local graph; the seeds are rows of its output.
        Extra: ``deg`` (full-graph in-degrees of the input rows) and, with first-hop
        completion, ``agg`` (their precomputed first-hop aggregates): keyword arguments of
        the model's forward.
        """
        if self.batches is None:
            lp = self.lp
            every = torch.arange(lp.graph.num_nodes())
            yield lp.graph, lp.train_ids, self.features.gather(every), lp.train_ids, self._extra(every)
            return
        for input_nodes, seeds, blocks in self.batches.epoch(epoch):
            yield blocks, seeds, self.features.gather(input_nodes), None, self._extra(input_nodes)

    def _extra(self, input_nodes: Tensor) -> dict:
        extra = {"deg": self.lp.in_degree[input_nodes]}
        if self.aggregates is not None:
            extra["agg"] = self.aggregates.gather(input_nodes)
        return extra

    def coverage_stats(self) -> dict[str, float]:
        return cov.summarize(self.coverage[self.lp.train_ids])


class Trainer:
    """One worker's gradient-only training: model, DDP hook, optimizer and the epoch loop.

    The parts, torchtitan-style: :meth:`train_step` (one batch), :meth:`train_epoch` (the
    steps of one epoch, timed by :class:`~dgl_grappa.metrics.EpochClock`), :meth:`evaluate`
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
                 hooks=None, builder_channel: tuple | None = None):
        self.ident, self.cfg, self.out_dir, self.hooks = ident, cfg, Path(out_dir), hooks
        self.driver = None
        self.bar = None
        self.records: list[dict] = []
        self.epoch = 0  # the next epoch to train
        try:
            if cfg.schedule.k > 0:
                from .repartition import RepartitionDriver  # first, so a builder starts while we load
                self.driver = RepartitionDriver(cfg, ident, out_dir, builder_channel)
            torch.manual_seed(cfg.train.seed)
            if cfg.train.first_hop != cfg.first_hop and ident.is_main:
                log.info("train.first_hop=%s: GAT's first layer cannot be precomputed (its attention depends on "
                         "learned projections), so it is sampled", cfg.train.first_hop)
            lp = load_local(part_config, ident.part, cfg.train.halo, cfg.first_hop)
            self.one_time_bytes = lp.one_time_bytes  # summed over every partitioning this worker loads
            self.rt = LocalRuntime(cfg, ident, lp)
            self.model = build_model(cfg.model, lp.feat.shape[1], num_classes)
            self.ddp = DDP(self.model)  # broadcasts rank 0's parameters: every worker starts from the same model
            self.correction = make_correction(cfg.grappa.correction, cfg.grappa.lam, cfg.grappa.shrink_target)
            self.correction.register(self.ddp)
            opt_cls = torch.optim.Adam if cfg.train.optimizer == "adam" else torch.optim.SGD
            self.optimizer = opt_cls(self.ddp.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
            self.evaluator = GlobalEvaluator(cfg, ident.is_main)
            self.clock = EpochClock()
            self.wire = WireMeter(main=ident.is_main)  # loopback bytes of the job's private netns, training only
            self.mlog = JsonlLog(self.out_dir / "metrics.jsonl") if ident.is_main else None
            if ident.is_main:
                log.info("config: %s", asdict(cfg))
            log.info("part %d: %d inner nodes, %d local nodes, %d train seeds, %d steps/epoch, "
                     "train coverage mean %.3f, halo %s, first hop %s (%d one-time bytes)", ident.part, lp.num_inner,
                     lp.graph.num_nodes(), lp.train_ids.numel(), self.rt.steps, self.rt.coverage_stats()["mean"],
                     cfg.train.halo, cfg.first_hop, lp.one_time_bytes)
            if self.driver is not None:
                self.driver.record(self.rt, 0.0, lp.load_seconds)  # partitioning 0; asks for partitioning 1
        except BaseException:
            self.close()
            raise

    def train_step(self, graph, seeds: Tensor, x: Tensor, rows: Tensor | None,
                   extra: dict | None = None) -> tuple[float, float]:
        """One step: forward, the corrected loss (which primes the hook), backward, update.

        Args:
            graph: sampled blocks, or the whole local graph (full-graph mode).
            seeds: local ids of the batch's training nodes.
            x: input features.
            rows: output rows of the seeds (full graph), or None (blocks end at the seeds).
            extra: more keyword inputs of the model (``deg``, ``agg``: :meth:`LocalRuntime.epoch_inputs`).

        Returns:
            (mean loss of the batch, its batch weight).
        """
        out = self.ddp(graph, x, **(extra or {}))
        if rows is not None:
            out = out[rows]
        per_node = F.cross_entropy(out, self.rt.lp.label[seeds], reduction="none")
        loss = self.correction.loss(per_node, self.rt.weights[seeds])
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return float(per_node.mean()), self.correction.last_weight

    def train_epoch(self, epoch: int) -> dict:
        """Train one epoch (switching partitionings first when one starts here); its record.

        The record's ``epoch_time_s`` is the epoch's slowest worker, measured by
        :class:`~dgl_grappa.metrics.EpochClock` (the same clock as the DistDGL trainer's);
        ``worker_epoch_time_s`` is this worker's own; ``wire_bytes`` (rank 0, in a private
        network namespace) the loopback bytes of that window.
        """
        if self.driver is not None and self.driver.due(epoch):
            self._switch(epoch)
        if self.hooks is not None:
            self.hooks.epoch_start(epoch, self.ddp, self.optimizer, self.rt)
        self.ddp.train()
        rt = self.rt
        losses, weights = [], []
        t_sample = 0.0
        inputs = rt.epoch_inputs(epoch)
        self.wire.start()   # rank 0, before the barrier: nobody sends before it
        self.clock.start()  # the barrier
        for _ in range(rt.steps):
            ts = time.perf_counter()
            graph, seeds, x, rows, extra = next(inputs)  # sampling and feature reads count as "sample"
            t_sample += time.perf_counter() - ts
            loss, weight = self.train_step(graph, seeds, x, rows, extra)
            losses.append(loss)
            weights.append(weight)
        mine = self.clock.stop()
        # After the timed region; also the point where every worker has finished its steps.
        slowest = self.clock.slowest(mine)
        wire = self.wire.stop()
        remote, local = rt.features.take_bytes()
        rec = {"epoch": epoch, "epoch_time_s": slowest, "worker_epoch_time_s": mine, "sample_s": t_sample,
               "compute_s": mine - t_sample, "loss": sum(losses) / len(losses),
               "mean_batch_weight": sum(weights) / len(weights), "grad_bytes": self.correction.take_bytes(),
               "feature_bytes": remote, "local_feature_bytes": local, "wire_bytes": wire}
        if self.hooks is not None:
            self.hooks.epoch_end(epoch, self.ddp, self.optimizer, rt)
        if self.driver is not None:
            rec["partitioning"] = self.driver.current
        self.epoch = epoch + 1
        return rec

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
        for epoch in range(self.epoch, cfg.train.epochs):
            rec = self.train_epoch(epoch)
            rec.update(self.evaluate(epoch))
            self.records.append(rec)
            if ident.is_main:
                self.mlog.write(rec)
                self.bar.set_postfix(loss=f"{rec['loss']:.3f}", t=f"{rec['epoch_time_s']:.2f}s",
                                     val=f"{rec['val_acc']:.3f}" if "val_acc" in rec else "-")
                self.bar.update(1)
        self.bar.close()
        train_wall = time.perf_counter() - t_loop - sum(r.get("eval_time_s", 0.0) for r in self.records)
        return self.summary(train_wall)

    def summary(self, train_wall_s: float) -> dict | None:
        """Gather the per-worker figures (once, after training) and, on rank 0, write summary.json.

        Args:
            train_wall_s: wall time of the epoch loop without evaluation (epochs + switches).
        """
        lp, rt, records = self.rt.lp, self.rt, self.records
        mine = {"rank": self.ident.rank, "part": self.ident.part, "inner_nodes": lp.num_inner,
                "local_nodes": lp.graph.num_nodes(), "train_seeds": int(lp.train_ids.numel()),
                "load_s": lp.load_seconds, "halo_bytes_loaded": lp.halo_bytes_loaded,
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
        if self.driver is not None:
            summary.update(self.driver.summary(train_wall_s))
        write_json(self.out_dir / "summary.json", summary)
        return summary

    def state_dict(self) -> dict:
        """What a checkpoint holds: model, optimizer and the next epoch to train."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "epoch": self.epoch}

    def close(self) -> None:
        """Teardown: the progress bar and the repartition driver (its builder). Safe twice."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self.driver is not None:
            self.driver.close()

    def _switch(self, epoch: int) -> None:
        """Move this worker to the partitioning that starts at ``epoch`` (schedule.k > 0).

        Only the data side is rebuilt (local part, coverage, sampler, equal step count); the
        model, its DDP wrapper, the reducer and the optimizer state carry over untouched.
        """
        part_config, stall = self.driver.agree(epoch)  # bounded wait for the background build
        t0 = time.perf_counter()
        lp = load_local(part_config, self.ident.part, self.cfg.train.halo, self.cfg.first_hop)
        self.one_time_bytes += lp.one_time_bytes
        self.rt = LocalRuntime(self.cfg, self.ident, lp)
        self.driver.record(self.rt, stall, time.perf_counter() - t0, epoch)


def run_worker(ident: Identity, cfg: Config, part_config: str, num_classes: int, out_dir: str,
               hooks=None, builder_channel: tuple | None = None) -> None:
    """The training of one worker (process group already initialised): a :class:`Trainer`, fit, closed.

    Args: as for :class:`Trainer`.
    """
    trainer = Trainer(ident, cfg, part_config, num_classes, out_dir, hooks, builder_channel)
    try:
        trainer.fit()
    finally:
        trainer.close()


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


def train_worker(rank: int, cfg: Config, part_config: str, num_classes: int, port: int, out_dir: str,
                 builder_channel: tuple | None = None) -> None:
    """Entry point of a spawned worker: distributed setup, the loop, teardown."""
    setup_logging(rank)
    set_threads(threads_per_worker(cfg.partition.num_parts, cfg.run.num_threads))
    ident = init_distributed(rank, cfg.partition.num_parts, port, cfg.run.collective_timeout_s)
    clean = False
    try:
        run_worker(ident, cfg, part_config, num_classes, out_dir, builder_channel=builder_channel)
        clean = True
    finally:
        shutdown_distributed(clean)
