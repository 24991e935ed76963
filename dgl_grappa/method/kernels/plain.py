"""A sampled block's (or a whole graph's) structure as plain tensors, and the message passing the torch kernels need.

DGL's message passing runs only where DGL was built for the device: the wheel the package registry gives
(``pip install dgl``) is CPU-only. A :class:`PlainGraph` keeps what a layer reads of a block, its edges as two
int64 index tensors (source and destination row, in DGL's edge-id order) and the node counts, so it moves to
any torch device with ``.to(device)``; the functions below aggregate over it with PyTorch operations
(``index_add_`` for sums and means, ``scatter_reduce`` for the softmax's maximum), which run on every device
torch runs on. :class:`PlainHetero` is the same per relation, for heterogeneous blocks.

Example:
    >>> import dgl, torch
    >>> g = to_plain(dgl.graph(([0, 1, 2], [1, 2, 2])))
    >>> mean_src(g, torch.tensor([[1.0], [2.0], [4.0]])).squeeze(-1).tolist()
    [0.0, 1.0, 3.0]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import dgl
import torch
from torch import Tensor

__all__ = ["PlainGraph", "PlainHetero", "to_plain", "sum_src", "mean_src", "edge_softmax", "dst_rows"]


@dataclass
class PlainGraph:
    """One homogeneous block (or whole graph) as tensors.

    Attributes:
        src, dst: int64 row indices of every edge's source (into the source rows) and destination
            (into the destination rows), in DGL's edge-id order.
        num_src, num_dst: row counts; in a block the destinations are the first ``num_dst`` sources.
        is_block: a block (sources and destinations differ) or a whole graph (they are the same rows).
    """

    src: Tensor
    dst: Tensor
    num_src: int
    num_dst: int
    is_block: bool = True
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dgl(cls, g: dgl.DGLGraph) -> "PlainGraph":
        """The structure of a homogeneous DGL block or graph (on any device DGL holds it)."""
        src, dst = g.edges(order="eid")
        return cls(src.long(), dst.long(), g.num_src_nodes(), g.num_dst_nodes(), bool(g.is_block))

    def to(self, device, non_blocking: bool = False) -> "PlainGraph":
        """The same structure on ``device``."""
        nb = non_blocking
        return PlainGraph(
            self.src.to(device, non_blocking=nb),
            self.dst.to(device, non_blocking=nb),
            self.num_src,
            self.num_dst,
            self.is_block,
        )

    @property
    def device(self) -> torch.device:
        return self.src.device

    def num_edges(self) -> int:
        return int(self.src.numel())

    def num_src_nodes(self) -> int:
        return self.num_src

    def num_dst_nodes(self) -> int:
        return self.num_dst

    def in_degrees(self) -> Tensor:
        """In-degree of every destination row (int64), computed once."""
        if "in" not in self._cache:
            self._cache["in"] = torch.bincount(self.dst, minlength=self.num_dst)
        return self._cache["in"]

    def out_degrees(self) -> Tensor:
        """Out-degree of every source row (int64; in a block, the edges into its destinations), computed once."""
        if "out" not in self._cache:
            self._cache["out"] = torch.bincount(self.src, minlength=self.num_src)
        return self._cache["out"]


@dataclass
class PlainHetero:
    """One heterogeneous block (or whole heterograph) as tensors: a :class:`PlainGraph` per relation.

    It answers the questions :class:`~dgl_grappa.method.rgcn.RelGraphLayer` asks a DGL graph
    (``canonical_etypes``, ``dsttypes``, ``ntypes``, ``num_edges``, ``num_dst_nodes``), so the same
    bookkeeping serves both.
    """

    rels: dict
    num_src: dict
    num_dst: dict
    is_block: bool = True

    @classmethod
    def from_dgl(cls, g: dgl.DGLGraph) -> "PlainHetero":
        """The structure of a heterogeneous DGL block or graph."""
        rels = {}
        for e in g.canonical_etypes:
            src, dst = g.edges(etype=e, order="eid")
            rels[tuple(e)] = PlainGraph(
                src.long(), dst.long(), g.num_src_nodes(e[0]), g.num_dst_nodes(e[2]), bool(g.is_block)
            )
        return cls(
            rels,
            {t: g.num_src_nodes(t) for t in g.srctypes},
            {t: g.num_dst_nodes(t) for t in g.dsttypes},
            bool(g.is_block),
        )

    def to(self, device, non_blocking: bool = False) -> "PlainHetero":
        return PlainHetero(
            {e: r.to(device, non_blocking) for e, r in self.rels.items()},
            dict(self.num_src),
            dict(self.num_dst),
            self.is_block,
        )

    @property
    def canonical_etypes(self) -> list:
        return list(self.rels)

    @property
    def dsttypes(self) -> list:
        return list(self.num_dst)

    @property
    def srctypes(self) -> list:
        return list(self.num_src)

    @property
    def ntypes(self) -> list:
        return list(self.num_src)

    def num_edges(self, etype) -> int:
        return self.rels[tuple(etype)].num_edges()

    def num_dst_nodes(self, ntype: str) -> int:
        return self.num_dst[ntype]


def to_plain(g, hetero: bool | None = None):
    """A :class:`PlainGraph` or :class:`PlainHetero` of ``g`` (a DGL graph or block, a plain one as it is,
    or a list of them, element by element).

    ``hetero``: True = always a :class:`PlainHetero` (an RGCN's blocks, even of one relation); None = a
    :class:`PlainGraph` for a graph of one node type and one relation, else a :class:`PlainHetero`."""
    if isinstance(g, (list, tuple)):
        return [to_plain(b, hetero) for b in g]
    if isinstance(g, (PlainGraph, PlainHetero)):
        return g
    if not isinstance(g, dgl.DGLGraph):
        raise TypeError(f"expected a DGLGraph, a plain graph or a list of them, got {type(g).__name__}")
    if hetero is None:
        hetero = len(g.srctypes) > 1 or len(g.dsttypes) > 1 or len(g.canonical_etypes) > 1
    return PlainHetero.from_dgl(g) if hetero else PlainGraph.from_dgl(g)


def dst_rows(g: PlainGraph, x: Tensor) -> Tensor:
    """The destination rows of ``x`` (the first ``num_dst`` source rows of a block; all rows of a graph)."""
    return x[: g.num_dst] if g.is_block else x


def sum_src(g: PlainGraph, h: Tensor, weight: Tensor | None = None) -> Tensor:
    """``out[v] = sum_{e: u -> v} weight[e] * h[u]`` (weight None = 1): one row per destination, 0 where none."""
    msg = h.index_select(0, g.src)
    if weight is not None:
        msg = msg * weight.view(-1, *([1] * (msg.dim() - 1)))
    return h.new_zeros((g.num_dst,) + tuple(h.shape[1:])).index_add_(0, g.dst, msg)


def mean_src(g: PlainGraph, h: Tensor) -> Tensor:
    """The mean of every destination's in-neighbours' rows (0 where it has none), as DGL's ``fn.mean``."""
    deg = g.in_degrees().clamp(min=1).to(h.dtype)
    return sum_src(g, h) / deg.view(-1, *([1] * (h.dim() - 1)))


def edge_softmax(g: PlainGraph, e: Tensor) -> Tensor:
    """Softmax of the edge scores ``e`` (``[E, ...]``) over the in-edges of each destination, as DGL's
    ``edge_softmax``: the per-destination maximum is subtracted first, so large scores do not overflow."""
    shape = (g.num_dst,) + tuple(e.shape[1:])
    idx = g.dst.view(-1, *([1] * (e.dim() - 1))).expand_as(e)
    # the maximum only steadies exp(); it is a constant of the softmax, so no gradient flows through it
    top = e.new_full(shape, float("-inf")).scatter_reduce_(0, idx, e.detach(), reduce="amax", include_self=True)
    z = torch.exp(e - top.index_select(0, g.dst))
    den = e.new_zeros(shape).index_add_(0, g.dst, z)
    return z / den.index_select(0, g.dst)
