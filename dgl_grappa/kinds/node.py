"""Node classification on a homogeneous graph (``train.task: node``): the package's first kind of job.

A worker trains on its own training nodes: seeds drawn from its part, neighbours sampled inside its
local graph (the kept halo included), the first hop complete from the precomputed aggregates, the
loss the seeds' cross-entropy weighted by the reducer's correction. Evaluation: accuracy on the
whole graph. In a DistDGL trainer: DGL's ``DistNodeDataLoader`` over the trainer's ``node_split``
(the baseline, DGL's ``train_dist.py``), or the drop-in :class:`~dgl_grappa.method.dropin.GrappaLoader`.

Example:
    >>> from dgl_grappa.kinds import kind_of
    >>> from dgl_grappa.config import load_config
    >>> kind_of(load_config(None, [])).name
    'node'
"""

from __future__ import annotations

import time

import dgl
import torch
import torch.nn.functional as F
from torch import Tensor

from ..config import Config, ConfigError
from ..method.dropin import GrappaLoader
from ..method.reducers import make_correction
from ..method.sampler import LocalBatches, seeded_workers
from .base import Batch
from .homogeneous import HomogeneousDistJob, HomogeneousKind, HomogeneousRuntime, sampled_layers


class NodeRuntime(HomogeneousRuntime):
    """The data side of node classification on one worker: coverage, weights, batches of its seeds, input rows.

    Mini-batch: ``steps`` batches of the worker's training seeds per epoch, sampled inside its local
    graph (layers 1..L-1 under first-hop completion). Full graph: one step over the whole local graph.
    Coverage, weights and batches come from the same functions as the drop-in loader
    (:mod:`dgl_grappa.method.dropin`).

    Args:
        cfg: the run's config (``train.mode``, batch size, fan-outs, ``grappa``).
        ident: this worker (its rank seeds the sampling).
        lp: the loaded part.
    """

    def __init__(self, cfg: Config, ident, lp):
        super().__init__(cfg, lp)
        n_seeds = lp.train_ids.numel()
        nothing = "no partition holds a training node (train_mask is empty); give the graph training nodes"
        if cfg.train.mode == "minibatch":
            # Workers without training seeds take every agreed step with weight 0 (see LocalBatches).
            full = self.agree_steps(cfg, n_seeds, nothing)
            self.batches = LocalBatches(
                lp.graph,
                lp.train_ids,
                self.layer_sampler(cfg),
                full,
                seed=cfg.train.seed * 1000 + ident.rank,
                limit=self.steps,
            )
        else:
            self.contributors = seeded_workers(n_seeds)
            if self.contributors == 0:
                raise ConfigError(nothing)
            self.steps = 1
            self.batches = None
        self.warn_idle(n_seeds, ident.world_size, "has no training nodes", "seeds")

    def epoch_inputs(self, epoch: int, times=None, start: int = 0):
        """Yield one :class:`~.base.Batch` per step: sampled blocks whose output rows are the seeds
        (mini-batch), or the whole local graph once with the seeds as rows of its output (full graph).

        Extra: ``deg`` (full-graph in-degrees of the input rows) and, with first-hop completion, ``agg``
        (their precomputed first-hop aggregates): keyword arguments of the model's forward.
        """
        if self.batches is not None:
            yield from super().epoch_inputs(epoch, times, start)
            return
        if start:  # the one full-graph step was taken
            return
        lp = self.lp
        t0 = time.perf_counter()
        every = torch.arange(lp.graph.num_nodes())
        x, extra = self.rows(every), self.extra(every)
        if times is not None:
            times.add("gather", time.perf_counter() - t0)
        yield Batch(lp.graph, lp.train_ids, x, lp.train_ids, extra)

    def assemble(self, sample) -> Batch:
        input_nodes, seeds, blocks = sample
        return Batch(blocks, seeds, self.rows(input_nodes), None, self.extra(input_nodes))

    def train_coverage(self) -> Tensor:
        return self.coverage[self.lp.train_ids]


class NodeKind(HomogeneousKind):
    """Node classification on a homogeneous graph."""

    name = "node"
    task = "node"

    def reach(self, cfg: Config) -> int | None:
        # the coverage recurrence's hops, where a correction reads the weights
        sampled = sampled_layers(cfg)
        return max(sampled, cfg.hops) if cfg.grappa.correction != "none" else sampled

    def make_runtime(self, cfg: Config, ident, lp) -> NodeRuntime:
        return NodeRuntime(cfg, ident, lp)

    def dist_job(self, cfg: Config, g, grappa: bool, device: torch.device, part_config: str) -> "NodeDistJob":
        return NodeDistJob(cfg, g, grappa, device, part_config)


class NodeDistJob(HomogeneousDistJob):
    """Node classification in a DistDGL trainer: DGL's ``train_dist.py`` flow, or the drop-in's loader."""

    def make_loader(self, sampler):
        cfg, g = self.cfg, self.g
        if self.grappa:
            # Grappa change 1 of 2: sample only inside this machine's partition (and, with
            # first-hop completion, only layers 1..L-1: layer 0 reads the precomputed aggregates).
            self.correction = make_correction(cfg.grappa.correction, cfg.grappa.lam, cfg.grappa.shrink_target)
            return GrappaLoader(g, sampler, cfg.train.batch_size, self.correction, options=self.dropin_options())
        self.train_nid = dgl.distributed.node_split(g.ndata["train_mask"], g.get_partition_book(), force_even=True)
        return dgl.dataloading.DistNodeDataLoader(
            g, self.train_nid, sampler, batch_size=cfg.train.batch_size, shuffle=True, drop_last=False
        )

    def baseline_batches(self) -> int:
        return -(-len(self.train_nid) // self.cfg.train.batch_size)  # its batches (no drop_last)

    def step_inputs(self, batch):
        input_nodes, seeds, blocks = batch
        x, extra = self.inputs(input_nodes)
        y = self.g.ndata["label"][seeds].long().to(self.device)
        return self.blocks(blocks), x, extra, y

    def loss(self, out: Tensor, target) -> Tensor:
        return F.cross_entropy(out, target)
