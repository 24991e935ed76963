"""Link prediction's data: held-out edges and the evaluation's negatives, the same for every system.

``train.task: link`` trains on the graph without its held-out edges and scores them in
evaluation. The split is made here, before partitioning, so every system partitions and
trains on the same graph; it is a pure function of the graph and ``link.seed``, so rank 0 of
any runtime recomputes the same held-out edges and the same negatives for its evaluation.

* **Pairs, not directed edges.** An undirected pair u-v is held out whole: both u->v and
  v->u leave the training graph (otherwise the reverse edge would hand the answer to the
  encoder). Self-loops are never held out. A directed edge without its reverse is a pair of
  its own. A held-out pair is scored as (u, v) with u < v.
* **Counts.** ``ceil(frac x pairs)`` pairs for validation and for the test, drawn by one
  seeded permutation of the sorted pairs: a graph with a pair to spare always gets one.
* **Negatives.** Each held-out pair (u, v) gets ``link.eval_negatives`` corrupted pairs
  (u, v'), v' uniform over every node (seeded; not filtered against true edges, as sampled
  MRR usually is: a negative is a true edge with probability about deg(u) / N).

Example:
    >>> import dgl, torch
    >>> from dgl_grappa.config import LinkConfig
    >>> g = dgl.to_bidirected(dgl.graph((torch.arange(9), torch.arange(1, 10))))   # a path of 10 nodes
    >>> split = link_split(g, LinkConfig(val_frac=0.2, test_frac=0.2, eval_negatives=5))
    >>> split.graph.num_edges(), split.val[0].numel(), split.test[0].numel(), tuple(split.test_neg.shape)
    (10, 2, 2, (2, 5))
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import dgl
import torch
from torch import Tensor

from ..config import ConfigError, LinkConfig
from .common import HoldOut


@dataclass
class LinkSplit:
    """The training graph and the held-out edges of link prediction.

    Attributes:
        graph: the graph without the held-out pairs (both directions), every node and its
            ndata kept: what is partitioned and trained on, and what evaluation encodes on.
        val, test: held-out pairs ``(u, v)`` (two int64 tensors, u < v).
        val_neg, test_neg: ``[pairs, link.eval_negatives]`` destinations of their negatives.
        num_pairs: undirected pairs of the whole graph (self-loops excluded).
    """

    graph: dgl.DGLGraph
    val: tuple[Tensor, Tensor]
    test: tuple[Tensor, Tensor]
    val_neg: Tensor
    test_neg: Tensor
    num_pairs: int

    def stats(self) -> dict:
        """Counts for logs and the partitioning's statistics."""
        return {
            "pairs": self.num_pairs,
            "val_pairs": int(self.val[0].numel()),
            "test_pairs": int(self.test[0].numel()),
            "train_edges": int(self.graph.num_edges()),
        }


def hold_out_edges(g: dgl.DGLGraph, val_frac: float, test_frac: float, seed: int = 0):
    """Remove ``val_frac`` and ``test_frac`` of ``g``'s undirected pairs (both directions); deterministic by ``seed``.

    Args:
        g: the whole graph (homogeneous).
        val_frac, test_frac: shares of the pairs held out (each ``ceil`` of its share; > 0 gives >= 1).
        seed: seed of the permutation that chooses them.

    Returns:
        ``(training graph, val pairs, test pairs, number of pairs)``; pairs as ``(u, v)``, u < v.

    Raises:
        ConfigError: the graph has no pair to hold out, or too few to leave any for training.

    Example:
        >>> g = dgl.graph((torch.tensor([0, 1, 1, 2]), torch.tensor([1, 0, 2, 1])))   # 0-1, 1-2
        >>> train, val, test, pairs = hold_out_edges(g, 0.0, 0.5)
        >>> pairs, train.num_edges(), val[0].numel(), test[0].numel()
        (2, 2, 0, 1)
    """
    src, dst = (t.to(torch.int64) for t in g.edges())
    n = g.num_nodes()
    lo, hi = torch.minimum(src, dst), torch.maximum(src, dst)
    key = lo * n + hi  # one id per undirected pair (n^2 fits in int64 for any graph DGL can hold)
    pairs = torch.unique(key[lo != hi])  # sorted: the permutation below sees the same order every time
    total = int(pairs.numel())
    if total == 0:
        why = "it has none" if g.num_edges() == 0 else f"its {g.num_edges()} edges are self-loops"
        raise ConfigError(
            f"train.task=link: the graph has no edge to hold out ({why}); link prediction needs a graph "
            "with edges between its nodes"
        )
    # round first: 0.1 x 30 is 3.0000000000000004 in floating point, and 3 pairs are meant
    n_val, n_test = math.ceil(round(val_frac * total, 9)), math.ceil(round(test_frac * total, 9))
    if n_val + n_test >= total:
        raise ConfigError(
            f"train.task=link: the graph's {total} undirected edges are too few: "
            f"link.val_frac={val_frac} and link.test_frac={test_frac} hold out {n_val} and {n_test}, "
            "leaving none to train on; use a graph with more edges"
        )
    perm = torch.randperm(total, generator=torch.Generator().manual_seed(seed))
    val_keys, test_keys = pairs[perm[:n_val]], pairs[perm[n_val : n_val + n_test]]
    held = torch.isin(key, torch.cat([val_keys, test_keys])) & (lo != hi)
    train = dgl.remove_edges(g, held.nonzero(as_tuple=True)[0].to(g.idtype))
    return train, (val_keys // n, val_keys % n), (test_keys // n, test_keys % n), total


def eval_negatives(num_nodes: int, num_pairs: int, k: int, seed: int, which: int) -> Tensor:
    """``[num_pairs, k]`` uniform destinations of the evaluation's negatives (``which``: 0 val, 1 test).

    Example:
        >>> torch.equal(eval_negatives(100, 3, 4, seed=0, which=1), eval_negatives(100, 3, 4, seed=0, which=1))
        True
    """
    gen = torch.Generator().manual_seed(seed * 1_000_003 + 7 + which)
    return torch.randint(0, num_nodes, (num_pairs, k), generator=gen, dtype=torch.int64)


def link_split(g: dgl.DGLGraph, cfg: LinkConfig) -> LinkSplit:
    """The held-out edges and evaluation negatives of ``g`` under ``cfg`` (``link`` section).

    Raises:
        ConfigError: as :func:`hold_out_edges`.
    """
    train, val, test, total = hold_out_edges(g, cfg.val_frac, cfg.test_frac, cfg.seed)
    n = g.num_nodes()
    return LinkSplit(
        graph=train,
        val=val,
        test=test,
        num_pairs=total,
        val_neg=eval_negatives(n, val[0].numel(), cfg.eval_negatives, cfg.seed, 0),
        test_neg=eval_negatives(n, test[0].numel(), cfg.eval_negatives, cfg.seed, 1),
    )


def edge_hold_out(cfg: LinkConfig) -> HoldOut:
    """Link prediction's :class:`~.common.HoldOut`: the graph is cut and trained on without its held-out edges
    (:func:`hold_out_edges` with the ``link`` section's fractions and seed).

    Example:
        >>> from dgl_grappa.config import LinkConfig
        >>> edge_hold_out(LinkConfig()).settings
        {'val_frac': 0.05, 'test_frac': 0.1, 'seed': 0}
    """
    return HoldOut(
        "link",
        {"val_frac": cfg.val_frac, "test_frac": cfg.test_frac, "seed": cfg.seed},
        cut=lambda g: hold_out_edges(g, cfg.val_frac, cfg.test_frac, cfg.seed)[0],
    )
