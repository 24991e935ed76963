"""Link prediction, the Grappa way: local edge batches, local negatives, the dot-product loss.

``train.task: link`` trains an encoder (the package's models, ``model.hidden`` outputs) so
that the dot product of two nodes' output rows scores their edge, as DGL's
``train_dist_unsupervised.py`` does. A worker trains only on what its partition holds:

* **Positives: the edges it owns, with both ends held.** DGL's layout gives part p every
  in-edge of its inner nodes, and an edge belongs to the part that owns its destination. A
  worker's positives are those edges whose source it holds: an inner node, or with
  ``train.halo: keep`` a kept halo node (:func:`positive_edges`). Every directed edge of the
  training graph is so a positive of at most one worker, and with the whole halo kept of
  exactly one. A cut edge (its ends in two parts) is a positive for nobody when the halo is
  dropped (:func:`edge_usability` measures the share).
* **Negatives: the global draw, from what it holds.** Each positive (u, v) gets ``link.negatives``
  pairs (u, v'). DistDGL draws v' from every node. A worker holds, besides its own nodes and
  halo, a **negative pool**: a uniform sample of the other parts' nodes whose rows it read once
  (``link.negative_pool``, :func:`~.local_part.remote_sample`). It draws v' from its own nodes
  with the probability a global draw lands there (their share of the graph, or of its
  in-degree^0.75) and from the pool otherwise, each pool node standing for ``remote / pool`` of the
  other parts' nodes (:class:`LocalNegativeSampler`): the global distribution, without a byte
  during a step. Without a pool, v' is drawn from every node it holds (own and kept halo): on
  METIS parts those are one region of the graph, and the encoder never learns to tell it from
  the rest (measured: docs/method.md, link prediction).
* **The encoder's blocks: DGL's samplers on the local graph.** The batch's positive and
  negative pairs become one seed set, sampled by ``dgl.dataloading.as_edge_prediction_sampler``
  around the script's (or the config's) ``NeighborSampler`` inside the local graph; the
  first hop is completed and the halo kept as for node classification (:mod:`.sampler`).
  As in DGL's example (``--remove_edge`` off), a batch's own edges are not excluded from its
  message passing, in every system alike.
* **Equal steps.** Every worker takes ``max_i ceil(positives_i / batch_size)`` steps (one
  all-reduce, :func:`~.sampler.equal_steps`); a worker without positives takes them with
  weight 0, as a node-classification worker without seeds.

The same functions serve the native runtime (the link kind's data side,
:class:`dgl_grappa.kinds.link.EdgeRuntime`) and the drop-in loader
(:class:`dgl_grappa.method.dropin.GrappaEdgeLoader`); the loss (:func:`link_loss`) is the DistDGL
baseline's too, and the evaluation (MRR, hits@k) is one function of :mod:`dgl_grappa.runtime.evaluation`.

Example:
    >>> g = dgl.graph((torch.tensor([1, 2, 0]), torch.tensor([0, 0, 3])))   # inner 0, 1; halo 2, 3
    >>> positive_edges(*g.edges(), num_inner=2).tolist()                    # edges into an inner node
    [0, 1]
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Iterator

import dgl
import torch
import torch.nn.functional as F
from dgl.dataloading.negative_sampler import _BaseNegativeSampler
from torch import Tensor

from ..config import ConfigError
from .sampler import seed_sampling

log = logging.getLogger("dgl_grappa")

NEGATIVE_DISTS = ("uniform", "degree")


def positive_edges(src: Tensor, dst: Tensor, num_inner: int) -> Tensor:
    """Local ids of the edges a worker trains on: those into its inner nodes (the edges it owns)
    whose source its local graph holds (every edge of the local graph has both ends held).

    Args:
        src, dst: the local graph's edges (inner nodes first, then the kept halo).
        num_inner: inner nodes of the local graph.
    """
    return (dst.long() < num_inner).nonzero(as_tuple=True)[0]


def edge_usability(src: Tensor, dst: Tensor, num_inner: int, owned: int) -> dict:
    """How many of the edges a worker owns it can train on, in its local graph and with the halo dropped.

    Args:
        src, dst: the local graph's edges.
        num_inner: inner nodes of the local graph.
        owned: the edges the worker owns: the full-graph in-degrees of its inner nodes, summed.

    Returns:
        ``owned``, ``positives`` (both ends held here), ``positives_halo_drop`` (both ends inner) and
        their shares of ``owned``: ``usable_fraction``, ``usable_fraction_halo_drop``.

    Example:
        >>> edge_usability(torch.tensor([1, 2, 0]), torch.tensor([0, 0, 3]), 2, owned=3)["usable_fraction_halo_drop"]
        0.3333333333333333
    """
    into = dst.long() < num_inner
    n_pos = int(into.sum())
    n_drop = int((into & (src.long() < num_inner)).sum())
    return {
        "owned": int(owned),
        "positives": n_pos,
        "positives_halo_drop": n_drop,
        "usable_fraction": n_pos / owned if owned else 1.0,
        "usable_fraction_halo_drop": n_drop / owned if owned else 1.0,
    }


@dataclass(frozen=True)
class NegativePool:
    """Where a worker's negatives come from besides its own nodes: a pool standing for the other parts.

    Attributes:
        own: the worker's own nodes: local ids ``0..own-1``.
        pool: local ids of the pool's nodes (a uniform sample of the other parts' nodes).
        remote: how many nodes the other parts own (each pool node stands for ``remote / len(pool)`` of them).

    Example:
        >>> NegativePool(own=2, pool=torch.tensor([5]), remote=8).own_share(None)   # 2 of 10 nodes
        0.2
    """

    own: int
    pool: Tensor
    remote: int

    def own_share(self, weights: Tensor | None) -> float:
        """The probability that a global draw (uniform, or by ``weights`` per local node) lands on an own node."""
        if weights is None:
            total_own, total_pool = float(self.own), float(self.pool.numel())
        else:
            total_own, total_pool = float(weights[: self.own].sum()), float(weights[self.pool.long()].sum())
        if total_pool == 0:
            return 1.0
        total_remote = total_pool * self.remote / self.pool.numel()  # the pool's sum, scaled to every remote node
        return total_own / (total_own + total_remote)


class LocalNegativeSampler(_BaseNegativeSampler):
    """``k`` negative pairs (u, v') per positive (u, v): v' drawn from the nodes of the graph it is called on.

    On a worker's local graph that is the nodes it holds: a negative never needs a remote row.
    With a :class:`NegativePool` the draw is the global one: an own node with the probability a
    draw over the whole graph lands on one (:meth:`NegativePool.own_share`), else a pool node, each
    drawn as the distribution says within its group. Without one, every node of the graph (own and
    kept halo) can be drawn. Seeded by its own generator (:meth:`reseed`, per epoch), so a resumed
    run and the drop-in draw the same negatives as the native runtime.

    Args:
        k: negatives per positive edge (``link.negatives``).
        distribution: "uniform", or "degree": in proportion to ``degree ** 0.75`` (nodes of
            degree 0 are never drawn).
        degree: with "degree", one full-graph in-degree per node of the graph it is called on
            (or None, and :meth:`bind` them later: the drop-in loader binds its local degrees).
        seed: the generator's first seed.
        pool: the worker's :class:`NegativePool`, or None.

    Example:
        >>> g = dgl.graph((torch.tensor([0, 1]), torch.tensor([1, 2])))
        >>> src, dst = LocalNegativeSampler(3)(g, torch.tensor([1]))
        >>> src.tolist(), bool((dst < 3).all())
        ([1, 1, 1], True)
    """

    def __init__(
        self,
        k: int,
        distribution: str = "uniform",
        degree: Tensor | None = None,
        seed: int = 0,
        pool: NegativePool | None = None,
    ):
        if distribution not in NEGATIVE_DISTS:
            raise ConfigError(f"link.negative_dist={distribution!r} is not allowed; use uniform or degree")
        if k < 1:
            raise ConfigError(f"link.negatives={k} must be >= 1 (negative pairs per positive edge)")
        self.k = k
        self.distribution = distribution
        self.seed = seed
        self.weights = None
        if distribution == "degree" and degree is not None:
            w = degree.to(torch.float64).clamp(min=0) ** 0.75
            self.weights = w if float(w.sum()) > 0 else torch.ones_like(w)  # no degree anywhere: uniform
        self.pool = pool if pool is not None and pool.pool.numel() else None
        self.own_share = 1.0
        if self.pool is not None and (distribution == "uniform" or self.weights is not None):
            self.own_share = self.pool.own_share(self.weights)
        self.generator = torch.Generator().manual_seed(seed)

    def bind(self, degree: Tensor) -> "LocalNegativeSampler":
        """The same sampler over a graph whose nodes have full-graph in-degrees ``degree`` (for "degree")."""
        return LocalNegativeSampler(self.k, self.distribution, degree, self.seed, self.pool)

    def reseed(self, seed: int) -> None:
        """Restart the draws from ``seed`` (every epoch: a function of the run's seed and the epoch)."""
        self.generator.manual_seed(seed)

    def _draw(self, nodes: Tensor | None, n: int, count: int) -> Tensor:
        """``count`` draws from ``nodes`` (local ids; None: 0..n-1), uniform or by the degree weights."""
        if self.weights is None:
            idx = torch.randint(
                0, n if nodes is None else nodes.numel(), (count,), generator=self.generator, dtype=torch.int64
            )
        else:
            w = self.weights[:n] if nodes is None else self.weights[nodes.long()]
            if float(w.sum()) == 0:
                w = torch.ones_like(w)  # a group without degree: uniform within it
            idx = torch.multinomial(w, count, replacement=True, generator=self.generator)
        return idx if nodes is None else nodes.long()[idx]

    def _generate(self, g, eids, canonical_etype):
        src, _ = g.find_edges(eids, etype=canonical_etype)
        src = src.repeat_interleave(self.k)
        n = g.num_nodes(canonical_etype[2])
        if self.distribution == "degree" and self.weights is None:
            raise ValueError("a degree-weighted negative sampler needs the nodes' degrees: bind(degree) first")
        if self.weights is not None and self.weights.numel() != n:
            raise ValueError(f"the degree weights cover {self.weights.numel()} nodes, the graph has {n}")
        if self.pool is None:
            return src, self._draw(None, n, src.numel()).to(src.dtype)
        # the global draw: own or remote first (Bernoulli of the own share), then a node of that group
        own = torch.rand(src.numel(), generator=self.generator, dtype=torch.float64) < self.own_share
        dst = torch.empty(src.numel(), dtype=torch.int64)
        n_own = int(own.sum())
        dst[own] = self._draw(None, self.pool.own, n_own)
        dst[~own] = self._draw(self.pool.pool, n, src.numel() - n_own)
        return src, dst.to(src.dtype)


class LocalEdgeBatches:
    """Exactly ``steps`` link-prediction batches per epoch over a worker's local graph.

    Args:
        graph: the local graph (COO and CSC).
        positives: local ids of the edges to train on (:func:`positive_edges`); may be empty.
        sampler: the node-wise block sampler of the encoder (``NeighborSampler``, or
            :func:`~.sampler.layer_sampler`'s), applied to ``graph``.
        negatives: a negative sampler called on ``graph`` (:class:`LocalNegativeSampler`).
        steps: batches per epoch (the same on every worker).
        seed: seed of shuffling, sampling and (when it has :meth:`~LocalNegativeSampler.reseed`) the negatives.
        limit: yield only the first ``limit`` batches of an epoch (``train.steps_per_epoch``).

    A worker without positives still yields ``steps`` batches, so its collectives stay matched:
    the blocks of one placeholder node (local node 0) and pair graphs without an edge, which
    give a loss of weight 0.

    Example:
        >>> batches = LocalEdgeBatches(lp.graph, positive_edges(lp.src, lp.dst, lp.num_inner),   # doctest: +SKIP
        ...                            dgl.dataloading.NeighborSampler([10, 25]), LocalNegativeSampler(1), steps=30)
        >>> for input_nodes, pair_graph, neg_pair_graph, blocks in batches.epoch(0): ...          # doctest: +SKIP
    """

    def __init__(
        self,
        graph: dgl.DGLGraph,
        positives: Tensor,
        sampler,
        negatives,
        steps: int,
        seed: int = 0,
        limit: int | None = None,
    ):
        if graph.num_nodes() == 0:
            raise ValueError("this worker's part has no nodes; use fewer parts")
        self.graph = graph
        self.positives = positives.to(graph.idtype)
        self.sampler = sampler
        self.negatives = negatives
        # As DGL's example: no exclusion of the batch's own edges from the blocks (--remove_edge off).
        self.edge_sampler = dgl.dataloading.as_edge_prediction_sampler(sampler, negative_sampler=negatives)
        self.steps = steps
        self.seed = seed
        self.limit = steps if limit is None else max(1, min(limit, steps))

    def epoch(self, epoch: int) -> Iterator[tuple[Tensor, dgl.DGLGraph, dgl.DGLGraph, list]]:
        """Yield ``(input_nodes, pair_graph, neg_pair_graph, blocks)`` (local ids) ``limit`` times.

        The pair graphs are compact: their nodes are the blocks' output rows in order, and
        ``ndata[dgl.NID]`` holds the nodes' local ids.
        """
        seed_sampling(self.sampler, self.seed * 7919 + epoch)  # DGL's global RNG, or the torch sampler's own
        if hasattr(self.negatives, "reseed"):
            self.negatives.reseed(self.seed * 7919 + epoch)
        if self.positives.numel() == 0:
            yield from self._placeholder_epoch()
            return
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        perm = self.positives[torch.randperm(self.positives.numel(), generator=gen)]
        if perm.numel() < self.steps:
            perm = perm.repeat(math.ceil(self.steps / perm.numel()))[: self.steps]  # no batch is empty
        for chunk in torch.tensor_split(perm, self.steps)[: self.limit]:
            yield self.edge_sampler.sample(self.graph, chunk)

    def _placeholder_epoch(self):
        seed = torch.zeros(1, dtype=self.graph.idtype)
        for _ in range(self.limit):
            input_nodes, output_nodes, blocks = self.sampler.sample(self.graph, seed)
            empty = dgl.graph((seed[:0], seed[:0]), num_nodes=1)
            empty.ndata[dgl.NID] = output_nodes
            yield input_nodes, empty, empty, blocks


def as_local_negatives(negative_sampler, degree: Tensor, pool: NegativePool | None = None):
    """The negative sampler a worker draws with, from a script's (the drop-in) or the config's.

    DGL's ``negative_sampler.Uniform(k)`` (what ``DistEdgeDataLoader`` scripts pass) becomes
    :class:`LocalNegativeSampler` ``(k)``: with a ``pool``, the global uniform draw that DGL makes over
    every node (own nodes with their share of the graph, the pool standing for the others), else a
    uniform draw over the graph it is called on; seeded per epoch. A :class:`LocalNegativeSampler` of
    the script's gets the pool when it has none, and a degree-weighted one is bound to ``degree`` (the
    local nodes' full-graph in-degrees). Any other sampler is called on the local graph as it is, so
    it draws local nodes.
    """
    if isinstance(negative_sampler, LocalNegativeSampler):
        unbound = negative_sampler.distribution == "degree" and negative_sampler.weights is None
        if unbound or (pool is not None and negative_sampler.pool is None):
            return LocalNegativeSampler(
                negative_sampler.k,
                negative_sampler.distribution,
                degree if negative_sampler.distribution == "degree" else None,
                negative_sampler.seed,
                negative_sampler.pool or pool,
            )
        return negative_sampler
    if isinstance(negative_sampler, dgl.dataloading.negative_sampler.PerSourceUniform):
        return LocalNegativeSampler(negative_sampler.k, pool=pool)
    return negative_sampler


def edge_scores(h: Tensor, pairs: dgl.DGLGraph) -> Tensor:
    """The dot product of the two ends' rows of every edge of ``pairs`` (``h``: one row per node of it).

    Example:
        >>> edge_scores(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), dgl.graph(([0], [1]))).tolist()
        [11.0]
    """
    u, v = pairs.edges()
    # the pairs may stay on the CPU while the rows are on a GPU (the registry's DGL is CPU-only)
    u, v = u.long().to(h.device), v.long().to(h.device)
    return (h[u] * h[v]).sum(-1)


def link_losses(h: Tensor, pair_graph: dgl.DGLGraph, neg_pair_graph: dgl.DGLGraph) -> Tensor:
    """Binary cross-entropy with logits of every positive (label 1) and negative (label 0) pair, one per pair.

    Args:
        h: the encoder's output rows, one per node of the (compact) pair graphs.
        pair_graph, neg_pair_graph: the batch's positive and negative pairs.
    """
    pos, neg = edge_scores(h, pair_graph), edge_scores(h, neg_pair_graph)
    score = torch.cat([pos, neg])
    label = torch.cat([torch.ones_like(pos), torch.zeros_like(neg)])
    return F.binary_cross_entropy_with_logits(score, label, reduction="none")


def link_loss(h: Tensor, pair_graph: dgl.DGLGraph, neg_pair_graph: dgl.DGLGraph) -> Tensor:
    """The loss of DGL's ``train_dist_unsupervised.py``: the mean of :func:`link_losses` (every system's).

    Example:
        >>> pairs, neg = dgl.graph(([0], [1])), dgl.graph(([0], [0]))
        >>> round(float(link_loss(torch.zeros(2, 4), pairs, neg)), 4)   # score 0: log 2
        0.6931
    """
    return link_losses(h, pair_graph, neg_pair_graph).mean()
