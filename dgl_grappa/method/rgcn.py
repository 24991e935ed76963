"""RGCN for heterogeneous graphs, built from DGL's ``HeteroGraphConv``: the model of ``model.name: rgcn``.

A layer, as DGL's RGCN example (``examples/pytorch/rgcn/experimental``) builds it: for every
relation r = (s, name, d) a ``GraphConv(norm="right")`` with its own weight (the mean of the
relation's in-neighbours' rows, times W_r), summed over the relations that end in a node type by
``HeteroGraphConv(aggregate="sum")``, plus a self-loop weight and a bias per node type:

    h_v = W_self[t(v)] x_v + b[t(v)] + sum_r W_r mean_{u in N_r(v)} x_u

with ReLU and dropout between layers. Node types may have inputs of different widths (features
of their own width, learnable rows of ``model.embed_dim``): every weight reads its source type's
width. The same ``forward`` serves sampled blocks (a list of heterogeneous blocks, input layer
first) and the whole heterograph (evaluation); a block sampled with full fan-out gives the whole
graph's output on its seeds (the mean is over the block's in-edges, as over the graph's). The
model returns the rows of the target type only (the blocks end at its seeds).

Example:
    >>> import torch
    >>> g = dgl.heterograph({("a", "r", "b"): ([0, 1], [0, 0]), ("b", "rev", "a"): ([0, 0], [0, 1])})
    >>> m = RGCN({"a": 3, "b": 4}, 8, 2, g.canonical_etypes, target="b")
    >>> m(g, {"a": torch.randn(2, 3), "b": torch.randn(1, 4)}).shape
    torch.Size([1, 2])
"""

from __future__ import annotations

import dgl
import torch.nn.functional as F
from dgl.nn import GraphConv, HeteroGraphConv
from torch import Tensor, nn

__all__ = ["RGCN", "RelGraphLayer", "build_rgcn"]


class RelGraphLayer(nn.Module):
    """One RGCN layer: a ``GraphConv`` per relation (summed by ``HeteroGraphConv``), a self-loop and a bias
    per node type.

    Args:
        in_dims: input width of every node type.
        out_dim: output width (the same for every type).
        etypes: the canonical relations (source type, name, destination type).
    """

    def __init__(self, in_dims: dict[str, int], out_dim: int, etypes: list[tuple]):
        super().__init__()
        self.conv = HeteroGraphConv(
            {
                tuple(e): GraphConv(
                    in_dims[e[0]], out_dim, norm="right", weight=True, bias=False, allow_zero_in_degree=True
                )
                for e in etypes
            },
            aggregate="sum",
        )
        # the self-loop keeps a node's own row (a node whose sampled relations are all empty still has one)
        self.loop = nn.ModuleDict({t: nn.Linear(d, out_dim, bias=True) for t, d in in_dims.items()})

    def forward(self, g: dgl.DGLGraph, x: dict[str, Tensor], agg: dict | None = None) -> dict[str, Tensor]:
        """Rows of every destination type of ``g`` (a block, or the whole graph) from the rows ``x`` of its sources.

        ``agg`` (first-hop completion): per relation, the destinations' precomputed means of the relation's
        in-neighbours' rows over the whole graph; such a relation's term is ``agg @ W_r`` instead of its
        ``GraphConv`` over ``g`` (where it has no edge), which is the same function of the whole neighbourhood.
        """
        if g.is_block:
            x_dst = {t: x[t][: g.num_dst_nodes(t)] for t in g.dsttypes if t in x}
        else:
            x_dst = x
        h = self.conv(g, x)
        out = {}
        for t, xd in x_dst.items():
            o = self.loop[t](xd)
            out[t] = o + h[t] if t in h else o
        for e, rows in (agg or {}).items():
            # GraphConv(norm="right", bias=False): the mean of the sources' rows times W_r, in either order
            out[e[2]] = out[e[2]] + rows @ self.conv.mods[str(tuple(e))].weight
        return out

    def idle(self, g: dgl.DGLGraph, x: dict[str, Tensor]) -> list[Tensor]:
        """The weights :meth:`forward` did not use on ``g``: relations without an edge (HeteroGraphConv skips them;
        the last block has none into the other types) and the self-loops of types without input rows."""
        dst = set(g.dsttypes) if g.is_block else set(g.ntypes)
        rels = set(g.canonical_etypes)
        out = [
            p
            for e, m in self.conv.mods.items()
            for p in m.parameters()
            if _etype(e) not in rels or g.num_edges(_etype(e)) == 0 or _etype(e)[0] not in x or _etype(e)[2] not in dst
        ]
        return out + [p for t, m in self.loop.items() if t not in x or t not in dst for p in m.parameters()]


def _etype(key: str) -> tuple:
    """A canonical relation from its ``HeteroGraphConv`` key (``str`` of the tuple)."""
    return tuple(part.strip(" '") for part in key.strip("()").split(","))


class RGCN(nn.Module):
    """A stack of :class:`RelGraphLayer` (ReLU and dropout between layers) whose output is the target type's rows.

    Args:
        in_dims: input width of every node type (features: their width; learnable rows: ``model.embed_dim``).
        hidden: hidden width.
        out_dim: output width (classes).
        etypes: the canonical relations the layers pass messages over.
        num_layers: layers (one per block).
        dropout: dropout on the hidden rows.
        target: the node type whose rows are returned.
        layer_cls: the layer class (None = :class:`RelGraphLayer`; the torch kernels' has the same parameters).
    """

    def __init__(
        self,
        in_dims: dict[str, int],
        hidden: int,
        out_dim: int,
        etypes: list[tuple],
        num_layers: int = 2,
        dropout: float = 0.0,
        target: str = "paper",
        layer_cls: type | None = None,
    ):
        super().__init__()
        layer_cls = layer_cls or RelGraphLayer  # or the torch kernels' (method/kernels/rgcn.py): same parameters
        self.target = target
        self.ntypes = sorted(in_dims)
        dims = [dict(in_dims)] + [{t: hidden for t in in_dims} for _ in range(num_layers - 1)]
        outs = [hidden] * (num_layers - 1) + [out_dim]
        self.layers = nn.ModuleList([layer_cls(d, o, etypes) for d, o in zip(dims, outs)])
        self.dropout = nn.Dropout(dropout)

    def forward(self, graph, x: dict[str, Tensor], agg: dict | None = None, **_) -> Tensor:
        """Target rows of ``graph``: a list of blocks (input layer first) or the whole heterograph.

        ``agg``: first-hop completion, per relation the first block's destinations' precomputed means
        (:meth:`RelGraphLayer.forward`); the homogeneous models' ``deg`` is accepted and not used.
        """
        blocks = graph if isinstance(graph, (list, tuple)) else [graph] * len(self.layers)
        if len(blocks) != len(self.layers):
            raise ValueError(f"RGCN of {len(self.layers)} layers got {len(blocks)} blocks")
        h = x
        idle = []
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            idle += layer.idle(block, h)
            h = layer(block, h, agg if i == 0 else None)
            if i < len(self.layers) - 1:
                h = {t: self.dropout(F.relu(v)) for t, v in h.items()}
        # A weight a batch did not use (a relation it sampled no edge of, a type without rows) and the other types'
        # last rows join the target's rows with a zero term: every worker's gradient all-reduce then carries every
        # parameter, as DDP's buckets expect, without its unused-parameter search (a collective of its own per step).
        rest = [v.sum() for t, v in h.items() if t != self.target] + [p.sum() for p in idle]
        return h[self.target] + 0.0 * sum(rest) if rest else h[self.target]


def build_rgcn(
    cfg, in_dims: dict[str, int], out_dim: int, etypes: list[tuple], target: str, layer_cls: type | None = None
) -> RGCN:
    """The RGCN of ``cfg`` (the ``model`` section: ``num_layers``, ``hidden``, ``dropout``); ``layer_cls``: see
    :class:`RGCN`.

    Example:
        >>> from dgl_grappa.config import ModelConfig
        >>> build_rgcn(ModelConfig(name="rgcn"), {"paper": 32}, 8, [("paper", "cites", "paper")], "paper").target
        'paper'
    """
    return RGCN(
        in_dims, cfg.hidden, out_dim, [tuple(e) for e in etypes], cfg.num_layers, cfg.dropout, target, layer_cls
    )
