"""Helpers shared by the loaders: one place that fixes the output contract.

Every loader returns a homogeneous int64 DGLGraph whose ndata holds exactly the standard
keys below, with fixed dtypes, so the rest of the package never has to guess.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import dgl
import torch


@dataclass(frozen=True)
class HoldOut:
    """What a kind of job keeps out of the graph it trains on (link prediction: its held-out edges), decided
    before partitioning so that every system cuts and trains on the same graph.

    A kind that holds nothing out has none (``JobKind.hold_out`` returns None); the partitioning
    (``partition.store.ensure_partitions``) cuts :attr:`cut`'s graph, and the partitioning's and checkpoints'
    fingerprints name :attr:`settings`, so that another split never reuses them.

    Attributes:
        section: the config section the settings come from (a checkpoint names them ``<section>.<key>``).
        settings: what decides the split (fractions, seed).
        cut: the training graph from the whole one.

    Example:
        >>> h = HoldOut("link", {"seed": 0}, cut=lambda g: g)
        >>> h.settings, h.cut("the graph")
        ({'seed': 0}, 'the graph')
    """

    section: str
    settings: dict
    cut: Callable[[dgl.DGLGraph], dgl.DGLGraph]


_hold_out_of: Callable | None = None


def install_hold_outs(resolve: Callable) -> None:
    """Install ``resolve(cfg) -> HoldOut | None``, what a run of a config holds out (the kinds of job's registry
    installs it when it is imported: the kinds decide, the layers below them ask :func:`hold_out_of`)."""
    global _hold_out_of
    _hold_out_of = resolve


def hold_out_of(cfg) -> HoldOut | None:
    """What a run of ``cfg`` keeps out of the graph it trains on (its kind of job's :class:`HoldOut`), or None.

    Raises:
        RuntimeError: no kinds of job are installed (:mod:`dgl_grappa.kinds` was not imported).
    """
    if _hold_out_of is None:
        raise RuntimeError(
            "what a run holds out is its kind of job's, and no kind is installed: import "
            "dgl_grappa.kinds before partitioning, evaluating or checkpointing a run"
        )
    return _hold_out_of(cfg)


#: The ndata keys every loaded graph carries (and only these; a featureless graph,
#: ``data.synthetic.featureless``, has no ``feat``).
STANDARD_KEYS = ("feat", "label", "train_mask", "val_mask", "test_mask")


def make_graph(
    src: torch.Tensor,
    dst: torch.Tensor,
    num_nodes: int,
    *,
    feat: torch.Tensor | None,
    label: torch.Tensor,
    train_mask: torch.Tensor,
    val_mask: torch.Tensor,
    test_mask: torch.Tensor,
) -> dgl.DGLGraph:
    """Build the standard output graph.

    Args:
        src, dst: edge endpoints (any integer dtype).
        num_nodes: number of nodes (isolated nodes are kept).
        feat: [N, F] features, cast to float32; None for a featureless graph (no ``feat``).
        label: [N] labels, cast to int64.
        train_mask, val_mask, test_mask: [N] masks, cast to bool.

    Returns:
        A homogeneous DGLGraph (idtype int64) with ndata ``feat`` (float32 [N, F]),
        ``label`` (int64 [N]) and the three bool masks.
    """
    g = dgl.graph((src.to(torch.int64), dst.to(torch.int64)), num_nodes=int(num_nodes), idtype=torch.int64)
    if feat is not None:
        g.ndata["feat"] = feat.to(torch.float32).contiguous()
    g.ndata["label"] = label.to(torch.int64).contiguous()
    g.ndata["train_mask"] = train_mask.to(torch.bool).contiguous()
    g.ndata["val_mask"] = val_mask.to(torch.bool).contiguous()
    g.ndata["test_mask"] = test_mask.to(torch.bool).contiguous()
    return g


def target_type(g: dgl.DGLGraph, target: str = "") -> str | None:
    """The node type of a heterogeneous graph whose labels are trained on: ``target`` (``data.target``) or,
    when empty, the one type with ``label``; None for a homogeneous graph.

    Example:
        >>> target_type(dgl.heterograph({("a", "r", "b"): ([0], [0])}))   # no labels anywhere: None
    """
    if g.is_homogeneous:
        return None
    if target:
        return target
    labelled = [t for t in g.ntypes if "label" in g.nodes[t].data]
    return labelled[0] if len(labelled) == 1 else None


def num_classes(g: dgl.DGLGraph) -> int:
    """Number of label classes of a loaded graph.

    Args:
        g: a graph returned by :func:`dgl_grappa.data.load_dataset` (heterogeneous: its labelled type's).

    Returns:
        ``int(label.max()) + 1`` (0 for a graph without nodes).
    """
    label = g.ndata["label"] if g.is_homogeneous else g.nodes[target_type(g)].data["label"]
    if label.numel() == 0:
        return 0
    return int(label.max()) + 1
