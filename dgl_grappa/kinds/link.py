"""Link prediction on a homogeneous graph (``train.task: link``), as DGL's ``train_dist_unsupervised.py``.

The model is an encoder of ``model.hidden`` outputs whose dot products score node pairs, trained
with binary cross-entropy on positive edges against sampled negatives and evaluated by MRR and
hits@k of held-out edges (removed before partitioning, so every system trains on the same graph).
A worker trains on what its partition holds (:mod:`dgl_grappa.method.link`): its positives are the
edges it owns whose source it holds (the memory budget never samples their sources away), its
negatives follow the global draw over its own nodes and a pool of other parts' nodes read once
(``link.negative_pool``), or come from the nodes it holds. In a DistDGL
trainer: ``DistEdgeDataLoader`` over the trainer's ``edge_split`` with negatives from every node (the
baseline), or the drop-in :class:`~dgl_grappa.method.dropin.GrappaEdgeLoader`.

Example:
    >>> from dgl_grappa.kinds import kind_of
    >>> from dgl_grappa.config import load_config
    >>> kind = kind_of(load_config(None, ["--train.task=link"]))
    >>> kind.name, kind.task
    ('link', 'link')
"""

from __future__ import annotations

import dataclasses

import dgl
import torch
from torch import Tensor

from ..config import Config, require
from ..data.common import HoldOut
from ..data.links import edge_hold_out
from ..method.dropin import GrappaEdgeLoader
from ..method.link import (
    LocalEdgeBatches,
    LocalNegativeSampler,
    NegativePool,
    edge_usability,
    link_loss,
    link_losses,
    positive_edges,
)
from ..method.local_part import Keep, first_hop_table, load_local
from ..method.reducers import make_correction
from ..runtime.evaluation import RankingScorer, Scorer
from ..runtime.grading import RANKING
from .base import Batch
from .homogeneous import HomogeneousDistJob, HomogeneousKind, HomogeneousRuntime


class EdgeRuntime(HomogeneousRuntime):
    """The data side of link prediction on one worker: positives, negatives, edge batches, input rows.

    Batches are ``(blocks, (pair_graph, neg_pair_graph), inputs, None, extra)``; ``edges`` has this
    worker's usable-edge counts (:func:`~dgl_grappa.method.link.edge_usability`). The coverage is
    reported (summary.json's ``coverage_train``), not used: link prediction averages plainly.

    Args:
        cfg: the run's config (``train``, ``link``).
        ident: this worker (its rank seeds the sampling).
        lp: the loaded part (every node kept: any held node may be a negative).
    """

    def __init__(self, cfg: Config, ident, lp):
        super().__init__(cfg, lp)
        self.positives = positive_edges(lp.src, lp.dst, lp.num_inner)
        owned = int(lp.in_degree[: lp.num_inner].sum()) if lp.num_inner == lp.part_inner else None
        self.edges = edge_usability(
            lp.src, lp.dst, lp.num_inner, owned if owned is not None else self.positives.numel()
        )
        n_pos = int(self.positives.numel())
        full = self.agree_steps(
            cfg,
            n_pos,
            "train.task=link: no worker holds a positive edge (an edge into one of "
            "its nodes whose source it holds); use --train.halo=keep or fewer parts",
        )
        degree = lp.in_degree if cfg.link.negative_dist == "degree" else None
        pool = None
        if lp.pool is not None and lp.pool.numel():  # the global draw: own nodes, and the pool for the others
            pool = NegativePool(own=lp.num_inner, pool=lp.pool, remote=lp.num_nodes_total - lp.part_inner)
        self.negatives = LocalNegativeSampler(cfg.link.negatives, cfg.link.negative_dist, degree, pool=pool)
        self.batches = LocalEdgeBatches(
            lp.graph,
            self.positives,
            self.layer_sampler(cfg),
            self.negatives,
            full,
            seed=cfg.train.seed * 1000 + ident.rank,
            limit=self.steps,
        )
        self.warn_idle(n_pos, ident.world_size, "holds no positive edge", "edges")

    def assemble(self, sample) -> Batch:
        input_nodes, pair_graph, neg_pair_graph, blocks = sample
        return Batch(blocks, (pair_graph, neg_pair_graph), self.rows(input_nodes), None, self.extra(input_nodes))

    def losses(self, out: Tensor, batch: Batch, device: torch.device) -> tuple[Tensor, Tensor]:
        # One loss per positive and negative pair; a worker without positives has pair graphs without
        # an edge (a placeholder batch), so the step counts with weight 0.
        # the pair graphs stay on the CPU (their ends' indices move to the rows' device in edge_scores):
        # DGL's registry build cannot put a graph on a GPU
        per_pair = link_losses(out, *batch.target)
        return per_pair, torch.ones_like(per_pair)

    def train_coverage(self) -> Tensor:
        """Coverage of the inner nodes (the ends of the edges a worker owns)."""
        return self.coverage[: self.lp.num_inner]

    def summary(self) -> dict:
        pool = self.negatives.pool
        return {
            **super().summary(),
            "link_edges": self.edges,
            "negatives": {
                "pool": 0 if pool is None else int(pool.pool.numel()),
                "own_share": self.negatives.own_share if pool is not None else None,
            },
        }

    def describe(self) -> list[str]:
        e, lp, neg = self.edges, self.lp, self.negatives
        where = (
            f"its {lp.num_inner} own nodes (p = {neg.own_share:.3f}) and a pool of {neg.pool.pool.numel()} "
            f"other parts' nodes, as a global draw"
            if neg.pool is not None
            else f"its {lp.graph.num_nodes()} local nodes"
        )
        return super().describe() + [
            f"part {lp.part_id}: link prediction on {e['positives']} of the {e['owned']} edges it owns "
            f"({100 * e['usable_fraction']:.1f} %; {100 * e['usable_fraction_halo_drop']:.1f} % with the halo "
            f"dropped), {neg.k} negative(s) each from {where} ({neg.distribution})"
        ]


class LinkKind(HomogeneousKind):
    """Link prediction on a homogeneous graph."""

    name = "link"
    task = "link"
    metric = RANKING

    def check(self, cfg: Config) -> None:
        """The held-out fractions, the negatives and their pool, and the settings link prediction cannot serve."""
        super().check(cfg)
        lk, t = cfg.link, cfg.train
        require(
            0.0 < lk.val_frac < 1.0, f"link.val_frac={lk.val_frac} must be in (0, 1): validation scores held-out edges"
        )
        require(
            0.0 < lk.test_frac < 1.0, f"link.test_frac={lk.test_frac} must be in (0, 1): the test scores held-out edges"
        )
        require(
            lk.val_frac + lk.test_frac < 1.0,
            f"link.val_frac={lk.val_frac} and link.test_frac={lk.test_frac} hold out "
            f"{lk.val_frac + lk.test_frac:g} of the edges, leaving none to train on; make their sum < 1, e.g. "
            "--link.val_frac=0.05 --link.test_frac=0.1",
        )
        require(lk.negatives >= 1, f"link.negatives={lk.negatives} must be >= 1 (negative pairs per positive edge)")
        require(
            lk.negative_pool >= 0,
            f"link.negative_pool={lk.negative_pool} must be >= 0 (remote nodes per own "
            "node held as negatives; 0: none)",
        )
        require(lk.pool_fanout >= 0, f"link.pool_fanout={lk.pool_fanout} must be >= 0 (in-neighbours per pool node)")
        require(lk.eval_negatives >= 1, f"link.eval_negatives={lk.eval_negatives} must be >= 1")
        require(
            1 <= lk.hits_k <= lk.eval_negatives,
            f"link.hits_k={lk.hits_k} must be in 1..link.eval_negatives={lk.eval_negatives} (with more, every "
            f"held-out edge ranks in the top k); e.g. --link.hits_k={min(10, lk.eval_negatives)}",
        )
        require(
            cfg.grappa.correction == "none",
            f"train.task=link with grappa.correction={cfg.grappa.correction}: the corrections weight nodes by "
            "their coverage, and the link loss is a mean over edges; use --grappa.correction=none",
        )
        require(
            t.mode == "minibatch",
            "train.task=link with train.mode=fullgraph: link prediction trains on "
            "minibatches of edges and their sampled negatives; use --train.mode=minibatch",
        )
        require(
            not cfg.model.embed,
            "train.task=link with model.embed=true: learnable rows are not wired into link "
            "prediction; train on the features (--model.embed=false)",
        )
        require(
            cfg.schedule.k == 0,
            f"train.task=link with schedule.k={cfg.schedule.k}: a new partitioning would have to be cut from the "
            "same training graph (held-out edges removed), which repartitioning does not do; use --schedule.k=0",
        )
        require(
            not cfg.partition.prebuilt and t.eval_mode != "layerwise",
            "train.task=link scores held-out edges on the whole graph in rank 0's memory; layer-wise evaluation "
            "(train.eval_mode=layerwise, partition.prebuilt) is not available with it: use "
            "--train.eval_mode=whole without partition.prebuilt",
        )

    def scorer(self, cfg: Config) -> Scorer:
        """MRR and hits@k of the held-out edges against sampled negatives, on the graph without them."""
        return RankingScorer(cfg.link)

    def hold_out(self, cfg: Config) -> HoldOut:
        """The held-out edges (``link.val_frac``, ``link.test_frac``, ``link.seed``): every system cuts and trains
        on the graph without them."""
        return edge_hold_out(cfg.link)

    def reach(self, cfg: Config) -> int | None:
        return None  # any node a worker holds can be the end of a positive or negative pair

    def keep(self, cfg: Config) -> Keep:
        """The budget's choice, never at the cost of a positive edge: every halo node that is the source of an
        edge into an own node is kept (over the budget, with a warning, where int4 cannot hold them)."""
        return dataclasses.replace(super().keep(cfg), positives=True)

    def load_part(self, cfg: Config, part_config: str, part: int):
        # the part as for node classification, and the negative pool (link.negative_pool), read once
        return load_local(
            part_config,
            part,
            cfg.train.halo,
            cfg.first_hop,
            keep=self.keep(cfg),
            aggregate=first_hop_table(cfg.model),
            pool=cfg.link.negative_pool,
            pool_fanout=cfg.link.pool_fanout,
        )

    def make_runtime(self, cfg: Config, ident, lp) -> EdgeRuntime:
        return EdgeRuntime(cfg, ident, lp)

    def out_dim(self, cfg: Config, num_classes: int) -> int:
        # an encoder of model.hidden outputs whose dot products score pairs (DGL's example)
        return cfg.model.hidden

    def run_summary(self, cfg: Config, per_worker: list[dict] | None) -> dict:
        """Link prediction's own summary.json fields (every system): the negatives, and the share of the
        training graph's edges that some worker trains on, with the run's halo and with the halo dropped.

        Args:
            cfg: the run's config.
            per_worker: every worker's figures (their ``link_edges``); None, or a worker without them,
                for DistDGL, whose loader trains on every edge (it pulls what its machine lacks).
        """
        out = {
            "task": "link",
            "negatives": cfg.link.negatives,
            "negative_dist": cfg.link.negative_dist,
            "hits_k": cfg.link.hits_k,
            "eval_negatives": cfg.link.eval_negatives,
        }
        edges = [w.get("link_edges") for w in per_worker or []]
        if not edges or any(e is None for e in edges):
            return {
                **out,
                "usable_edge_fraction": 1.0,
                "usable_edge_fraction_halo_drop": None,
                "usable_edge_fraction_min": 1.0,
                "usable_edge_fraction_halo_drop_min": None,
            }
        owned = sum(e["owned"] for e in edges)
        return {
            **out,
            "usable_edge_fraction": sum(e["positives"] for e in edges) / max(owned, 1),
            "usable_edge_fraction_halo_drop": sum(e["positives_halo_drop"] for e in edges) / max(owned, 1),
            "usable_edge_fraction_min": min(e["usable_fraction"] for e in edges),
            "usable_edge_fraction_halo_drop_min": min(e["usable_fraction_halo_drop"] for e in edges),
        }

    def summary_lines(self, summary: dict) -> list[str]:
        """The share of the training graph's edges some worker trained on."""
        return [
            f"edges trained on: {summary['usable_edge_fraction']:.1%} of the training graph's (halo "
            f"{summary['halo']}; {summary['usable_edge_fraction_halo_drop']:.1%} with the halo dropped)"
        ]

    def dist_job(self, cfg: Config, g, grappa: bool, device: torch.device, part_config: str) -> "LinkDistJob":
        return LinkDistJob(cfg, g, grappa, device, part_config)


def global_negatives(g, cfg: Config):
    """The baseline's negative sampler and what it read once: DGL's uniform draw over every node (the
    example's), or in proportion to in-degree^0.75 over every node (every node's in-degree pulled once)."""
    k = cfg.link.negatives
    if cfg.link.negative_dist == "uniform":
        return dgl.dataloading.negative_sampler.Uniform(k), 0
    every = torch.arange(g.num_nodes())
    degree = g.ndata["in_degree"][every]
    pb = g.get_partition_book()
    remote = int((pb.nid2partid(every) != pb.partid).sum())
    sampler = LocalNegativeSampler(k, "degree", degree, seed=cfg.train.seed * 1000 + torch.distributed.get_rank())
    return sampler, remote * (8 + 8)  # a row and its id per remote in-degree


class LinkDistJob(HomogeneousDistJob):
    """Link prediction in a DistDGL trainer: DGL's ``train_dist_unsupervised.py`` flow, or the drop-in's loader."""

    def make_loader(self, sampler):
        cfg, g = self.cfg, self.g
        if self.grappa:  # this machine's positive edges; negatives from the nodes it holds
            self.correction = make_correction(cfg.grappa.correction, cfg.grappa.lam, cfg.grappa.shrink_target)
            negatives = LocalNegativeSampler(cfg.link.negatives, cfg.link.negative_dist)
            return GrappaEdgeLoader(
                g,
                sampler,
                cfg.train.batch_size,
                self.correction,
                negative_sampler=negatives,
                negative_pool=cfg.link.negative_pool,
                pool_fanout=cfg.link.pool_fanout,
                options=self.dropin_options(),
            )
        # DGL's example: every edge, split evenly over the trainers; negatives from every node
        self.train_eids = dgl.distributed.edge_split(
            torch.ones((g.num_edges(),), dtype=torch.bool), g.get_partition_book(), force_even=True
        )
        negatives, self.read_once = global_negatives(g, cfg)
        return dgl.dataloading.DistEdgeDataLoader(
            g,
            self.train_eids,
            sampler,
            negative_sampler=negatives,
            batch_size=cfg.train.batch_size,
            shuffle=True,
            drop_last=False,
        )

    def baseline_batches(self) -> int:
        return -(-len(self.train_eids) // self.cfg.train.batch_size)

    def out_dim(self) -> int:
        return self.cfg.model.hidden  # the encoder's rows, scored by dot products

    def step_inputs(self, batch):
        input_nodes, pair_graph, neg_pair_graph, blocks = batch
        x, extra = self.inputs(input_nodes)
        return self.blocks(blocks), x, extra, (pair_graph, neg_pair_graph)  # on the CPU: see LinkRuntime.losses

    def loss(self, out: Tensor, target) -> Tensor:
        # the example's CrossEntropyLoss: dot-product scores, positives 1, negatives 0
        return link_loss(out, *target)
