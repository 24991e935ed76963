"""The data side of one partitioning on one worker: coverage, weights, batches, feature reads.

:class:`LocalRuntime` is what the native trainer steps through; the drop-in loader
(:mod:`.dropin`) is built from the same functions (coverage, weights, the local sampler).
"""
from __future__ import annotations

import logging
import time

import torch
from torch import Tensor

from ..cluster.launch import Identity
from ..config import Config, ConfigError
from . import coverage as cov
from .link import LocalEdgeRuntime
from .local_part import LocalPartition
from .sampler import LocalBatches, LocalFeatures, equal_steps, layer_sampler, seeded_workers

log = logging.getLogger("dgl_grappa")


class LocalRuntime:
    """The data side of one partitioning on one worker: coverage, weights, batches, feature reads.

    Rebuilt at every repartitioning boundary, while the :class:`Trainer`'s model, DDP
    wrapper, reducer and optimizer carry over. Coverage, weights and batches come from the
    same functions the drop-in loader uses (:mod:`dgl_grappa.method.dropin`).

    Args:
        cfg: the run's config (``train.mode``, batch size, fan-outs, ``grappa``).
        ident: this worker (its rank seeds the sampling).
        lp: the loaded part (:func:`dgl_grappa.method.local_part.load_local`).
    """

    def __init__(self, cfg: Config, ident: Identity, lp: LocalPartition):
        self.lp = lp
        self.coverage, self.weights = cov.partition_weights(lp.src, lp.dst, lp.graph.num_nodes(), lp.in_degree,
                                                            cfg.hops, cfg.grappa.self_loops, cfg.grappa.w_min)
        self.features = LocalFeatures(lp.feat)
        # model.embed: the input rows are learnable (the trainer's LocalEmbedding); a batch yields the
        # input nodes' local ids, looked up at the step itself, after the previous step's update (so
        # train.prefetch, which draws the next batch during the backward pass, reads no stale row).
        self.embed = bool(cfg.model.embed)
        n_seeds = lp.train_ids.numel()
        # Workers without training seeds take every agreed step with weight 0 (see LocalBatches).
        self.contributors = seeded_workers(n_seeds)
        if self.contributors == 0:
            raise ConfigError("no partition holds a training node (train_mask is empty); give the graph training nodes")
        # First-hop completion: the precomputed aggregates are read like features (all local).
        if cfg.first_hop == "exact" and lp.agg is None:
            raise ValueError("train.first_hop=exact needs the part loaded with its aggregates: "
                             "load_local(..., first_hop='exact')")
        self.aggregates = LocalFeatures(lp.agg) if cfg.first_hop == "exact" else None
        # train.prefetch: sample the next batch while a step's backward and all-reduce run
        self.prefetch = cfg.train.prefetch
        if cfg.train.mode == "minibatch":
            full = equal_steps(n_seeds, cfg.train.batch_size)
            cap = cfg.train.steps_per_epoch
            self.steps = min(full, cap) if cap > 0 else full
            self.batches = LocalBatches(lp.graph, lp.train_ids, layer_sampler(cfg.train.fanouts, cfg.first_hop),
                                        full, seed=cfg.train.seed * 1000 + ident.rank, limit=self.steps)
        else:
            self.steps = 1
            self.batches = None
        if n_seeds == 0:
            log.warning("part %d has no training nodes: it takes the %d agreed steps per epoch with weight 0 (the "
                        "average is over the %d of %d workers that have seeds)", lp.part_id, self.steps,
                        self.contributors, ident.world_size)

    def epoch_inputs(self, epoch: int, times=None):
        """Yield (graph or blocks, seeds, input features, output rows of the seeds, extra model inputs) per step.

        With ``model.embed`` the input features are the input nodes' local ids (the trainer
        looks their rows up in its embedding at the step).

        Mini-batch: sampled blocks, whose output rows are the seeds already (rows None).
        Full graph: one step over the whole local graph; the seeds are rows of its output.
        Extra: ``deg`` (full-graph in-degrees of the input rows) and, with first-hop
        completion, ``agg`` (their precomputed first-hop aggregates): keyword arguments of
        the model's forward.

        Args:
            epoch: which epoch's batches.
            times: if given, the seconds of sampling and of the feature gather (aggregates
                included) are added to it.
        """
        clock = time.perf_counter
        if self.batches is None:
            lp = self.lp
            t0 = clock()
            every = torch.arange(lp.graph.num_nodes())
            x, extra = self._rows(every), self._extra(every)
            if times is not None:
                times.add("gather", clock() - t0)
            yield lp.graph, lp.train_ids, x, lp.train_ids, extra
            return
        batches = self.batches.epoch(epoch)
        while True:
            t0 = clock()
            try:
                input_nodes, seeds, blocks = next(batches)
            except StopIteration:
                return
            t1 = clock()
            x, extra = self._rows(input_nodes), self._extra(input_nodes)
            if times is not None:
                times.add("sample", t1 - t0)
                times.add("gather", clock() - t1)
            yield blocks, seeds, x, None, extra

    def _rows(self, input_nodes: Tensor) -> Tensor:
        return input_nodes.to(torch.int64) if self.embed else self.features.gather(input_nodes)

    def _extra(self, input_nodes: Tensor) -> dict:
        extra = {"deg": self.lp.in_degree[input_nodes]}
        if self.aggregates is not None:
            extra["agg"] = self.aggregates.gather(input_nodes)
        return extra

    def coverage_stats(self) -> dict[str, float]:
        return cov.summarize(self.coverage[self.lp.train_ids])


def make_runtime(cfg: Config, ident: Identity, lp: LocalPartition):
    """The data side a run of ``cfg`` steps through: :class:`LocalRuntime`, for link prediction
    (``train.task: link``) :class:`~.link.LocalEdgeRuntime`, for a heterogeneous graph
    :class:`~.hetero.HeteroLocalRuntime`."""
    if cfg.hetero:
        from .hetero import HeteroLocalRuntime

        return HeteroLocalRuntime(cfg, ident, lp)
    if cfg.train.task == "link":
        return LocalEdgeRuntime(cfg, ident, lp)
    return LocalRuntime(cfg, ident, lp)
