"""Gradient-only training: each worker trains on its own partition; only gradients travel.

``train_worker`` is the body of one spawned worker: it loads its part with
``dgl.distributed.load_partition`` (no servers), computes the coverage of its nodes once,
wraps the model in DDP with the coverage-corrected communication hook, and runs the same
number of steps as every other worker. Rank 0 evaluates the model on the whole graph
with full neighbourhoods (not training: timed apart) and writes metrics and the summary.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

from . import coverage as cov
from .config import Config
from .evaluation import GlobalEvaluator
from .launch import (Identity, init_distributed, set_threads, setup_logging, shutdown_distributed,
                     threads_per_worker)
from .metrics import JsonlLog, WireMeter, median, ring_allreduce_wire_bytes, wire_per_epoch, write_json
from .models import build_model, gradient_bytes
from .partition import LocalPartition, load_local
from .reducers import make_correction
from .sampler import LocalBatches, LocalFeatures, equal_steps

log = logging.getLogger("dgl_grappa")


class LocalRuntime:
    """Everything a worker derives from one loaded partition (rebuilt when it changes)."""

    def __init__(self, cfg: Config, ident: Identity, lp: LocalPartition):
        self.lp = lp
        c = cov.coverage(lp.src, lp.dst, lp.graph.num_nodes(), lp.in_degree, cfg.hops, cfg.grappa.self_loops)
        self.coverage = c
        self.weights = cov.node_weights(c, cfg.grappa.w_min)
        self.features = LocalFeatures(lp.feat)
        if cfg.train.mode == "minibatch":
            self.steps = equal_steps(lp.train_ids.numel(), cfg.train.batch_size)
            self.batches = LocalBatches(lp.graph, lp.train_ids, cfg.train.fanouts, self.steps,
                                        seed=cfg.train.seed * 1000 + ident.rank)
        else:
            if lp.train_ids.numel() == 0:
                raise ValueError("this worker's part has no training nodes; use fewer parts")
            self.steps = 1
            self.batches = None

    def epoch_inputs(self, epoch: int):
        """Yield (graph or blocks, seeds, input features, output rows of the seeds) per step.

        Mini-batch: sampled blocks, whose output rows are the seeds already (rows None).
        Full graph: one step over the whole local graph; the seeds are rows of its output.
        """
        if self.batches is None:
            lp = self.lp
            yield lp.graph, lp.train_ids, self.features.gather(torch.arange(lp.graph.num_nodes())), lp.train_ids
            return
        for input_nodes, seeds, blocks in self.batches.epoch(epoch):
            yield blocks, seeds, self.features.gather(input_nodes), None

    def coverage_stats(self) -> dict[str, float]:
        return cov.summarize(self.coverage[self.lp.train_ids])


def _train_epoch(rt: LocalRuntime, ddp: DDP, corr, opt, epoch: int) -> dict:
    lp = rt.lp
    losses, weights = [], []
    t_sample = 0.0
    t0 = time.perf_counter()
    inputs = rt.epoch_inputs(epoch)
    for _ in range(rt.steps):
        ts = time.perf_counter()
        graph, seeds, x, rows = next(inputs)  # sampling and feature reads count as "sample"
        t_sample += time.perf_counter() - ts
        out = ddp(graph, x)
        if rows is not None:
            out = out[rows]
        per_node = F.cross_entropy(out, lp.label[seeds], reduction="none")
        loss = corr.loss(per_node, rt.weights[seeds])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(per_node.mean()))
        weights.append(corr.last_weight)
    epoch_time = time.perf_counter() - t0
    remote, local = rt.features.take_bytes()
    return {"epoch_time_s": epoch_time, "sample_s": t_sample, "compute_s": epoch_time - t_sample,
            "loss": sum(losses) / len(losses), "mean_batch_weight": sum(weights) / len(weights),
            "grad_bytes": corr.take_bytes(), "feature_bytes": remote, "local_feature_bytes": local}


def _switch(driver, cfg: Config, ident: Identity, epoch: int) -> LocalRuntime:
    """Move this worker to the partitioning that starts at ``epoch`` (schedule.k > 0).

    Only the data side is rebuilt (local part, coverage, sampler, equal step count); the
    model, its DDP wrapper, the reducer and the optimizer state carry over untouched.
    """
    part_config, stall = driver.agree(epoch)  # bounded wait for the background build
    t0 = time.perf_counter()
    rt = LocalRuntime(cfg, ident, load_local(part_config, ident.part, cfg.train.halo))
    driver.record(rt, stall, time.perf_counter() - t0, epoch)
    return rt


def run_worker(ident: Identity, cfg: Config, part_config: str, num_classes: int, out_dir: str,
               hooks=None, builder_channel: tuple | None = None) -> None:
    """The training loop of one worker (process group already initialised).

    Args:
        ident: this worker.
        cfg: the run's config.
        part_config: json of the (first) partitioning.
        num_classes: number of label classes.
        out_dir: where rank 0 writes metrics.jsonl and summary.json.
        hooks: optional object with ``epoch_start(epoch, ddp, opt, rt)`` and
            ``epoch_end(epoch, ddp, opt, rt)``, called with exactly the objects an epoch
            trains with (tests use it to check state across a repartition).
        builder_channel: with schedule.k > 0, the launcher's partition builder
            (repartition.BackgroundBuilder.channel); None = rank 0 starts its own.
    """
    driver = None
    if cfg.schedule.k > 0:
        from .repartition import RepartitionDriver  # first, so a builder starts while we load
        driver = RepartitionDriver(cfg, ident, out_dir, builder_channel)
    torch.manual_seed(cfg.train.seed)
    lp = load_local(part_config, ident.part, cfg.train.halo)
    rt = LocalRuntime(cfg, ident, lp)
    model = build_model(cfg.model, lp.feat.shape[1], num_classes)
    ddp = DDP(model)  # broadcasts rank 0's parameters: every worker starts from the same model
    corr = make_correction(cfg.grappa.correction, cfg.grappa.lam, cfg.grappa.shrink_target)
    corr.register(ddp)
    opt_cls = torch.optim.Adam if cfg.train.optimizer == "adam" else torch.optim.SGD
    opt = opt_cls(ddp.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)

    evaluator = GlobalEvaluator(cfg, ident.is_main)
    mlog = None
    if ident.is_main:
        mlog = JsonlLog(Path(out_dir) / "metrics.jsonl")
        log.info("config: %s", asdict(cfg))
    log.info("part %d: %d inner nodes, %d local nodes, %d train seeds, %d steps/epoch, "
             "train coverage mean %.3f, halo %s (%d bytes read at load)", ident.part, lp.num_inner,
             lp.graph.num_nodes(), lp.train_ids.numel(), rt.steps, rt.coverage_stats()["mean"],
             cfg.train.halo, lp.halo_bytes_loaded)

    if driver is not None:
        driver.record(rt, 0.0, lp.load_seconds)  # partitioning 0; asks for partitioning 1

    records = []
    wire = WireMeter(main=ident.is_main)  # loopback bytes of the job's private netns, training only
    t_loop = time.perf_counter()
    bar = tqdm(total=cfg.train.epochs, desc="train", unit="epoch", disable=not (ident.is_main and cfg.run.progress))
    for epoch in range(cfg.train.epochs):
        if driver is not None and driver.due(epoch):
            rt = _switch(driver, cfg, ident, epoch)
        if hooks is not None:
            hooks.epoch_start(epoch, ddp, opt, rt)
        ddp.train()
        wire.start()
        rec = {"epoch": epoch, **_train_epoch(rt, ddp, corr, opt, epoch)}
        rec["wire_bytes"] = wire.stop()
        if hooks is not None:
            hooks.epoch_end(epoch, ddp, opt, rt)
        if driver is not None:
            rec["partitioning"] = driver.current
        rec.update(evaluator.after_epoch(model, epoch))
        records.append(rec)
        if ident.is_main:
            mlog.write(rec)
            bar.set_postfix(loss=f"{rec['loss']:.3f}", t=f"{rec['epoch_time_s']:.2f}s",
                            val=f"{rec['val_acc']:.3f}" if "val_acc" in rec else "-")
            bar.update(1)
    bar.close()
    train_wall = time.perf_counter() - t_loop - sum(r.get("eval_time_s", 0.0) for r in records)
    lp = rt.lp

    # Per-worker figures travel once, after training (not counted in any epoch).
    mine = {"rank": ident.rank, "part": ident.part, "inner_nodes": lp.num_inner, "local_nodes": lp.graph.num_nodes(),
            "train_seeds": int(lp.train_ids.numel()), "load_s": lp.load_seconds,
            "halo_bytes_loaded": lp.halo_bytes_loaded, "coverage_train": rt.coverage_stats(),
            "epoch_time_s": median([r["epoch_time_s"] for r in records]),
            "grad_bytes_per_epoch": median([r["grad_bytes"] for r in records]),
            "feature_bytes_per_epoch": median([r["feature_bytes"] for r in records]),
            "feature_bytes_total": sum(r["feature_bytes"] for r in records)}
    per_worker: list = [None] * ident.world_size
    dist.all_gather_object(per_worker, mine)
    if ident.is_main:
        summary = build_summary(cfg, records, per_worker, rt.steps, gradient_bytes(model))
        if driver is not None:
            summary.update(driver.summary(train_wall))
        write_json(Path(out_dir) / "summary.json", summary)
    if driver is not None:
        driver.close()


def build_summary(cfg: Config, records: list[dict], per_worker: list[dict], steps: int, model_grad_bytes: int) -> dict:
    """The run's summary.json (see the README for every field)."""
    final = next(r for r in reversed(records) if "val_acc" in r)
    evals = [r for r in records if "val_acc" in r]
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
        "correction": cfg.grappa.correction,
        "hops": cfg.hops,
        "epochs": cfg.train.epochs,
        "steps_per_epoch": steps,
        # an epoch lasts as long as its slowest worker: median over epochs of the max over workers
        "epoch_time_s": max(w["epoch_time_s"] for w in per_worker),
        "epoch_time_s_rank0": median([r["epoch_time_s"] for r in records]),
        "val_acc": final["val_acc"],
        "test_acc": final["test_acc"],
        "best_val_acc": max(r["val_acc"] for r in evals),
        "eval_time_s": sum(r.get("eval_time_s", 0.0) for r in records),
        "train_time_s": sum(r["epoch_time_s"] for r in records),
        "grad_bytes_per_epoch": max(w["grad_bytes_per_epoch"] for w in per_worker),
        "model_grad_bytes": model_grad_bytes,
        "feature_bytes_per_epoch": max(w["feature_bytes_per_epoch"] for w in per_worker),
        "feature_bytes_total": sum(w["feature_bytes_total"] for w in per_worker),
        # all workers together: measured on the job's loopback, and what the app handed over
        "wire_bytes_per_epoch": wire_per_epoch(records),
        "app_bytes_per_epoch": ring_allreduce_wire_bytes([w["grad_bytes_per_epoch"] for w in per_worker])
        + sum(w["feature_bytes_per_epoch"] for w in per_worker),
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
