"""GNN models (GraphSAGE, GCN, GAT, GIN) that run on sampled blocks and on whole graphs.

Every model is a :class:`GNN`: a stack of ``num_layers`` DGL conv layers with ReLU and
dropout between them. One ``forward(graph_or_blocks, x)`` serves both training modes:

* mini-batch: a list of message-flow graphs (blocks) from ``dgl.dataloading.NeighborSampler``,
  input layer first; layer ``i`` runs on ``blocks[i]`` and the result has one row per
  destination node of the last block (the seeds);
* full graph: one ``DGLGraph``; every layer runs on it and the result has one row per node.

Each layer aggregates over in-neighbours with a rule that does not depend on anything
outside a node's in-edges (mean / sum over in-neighbours, attention softmax over in-edges),
so a block sampled with full fan-out (``-1`` on every layer) gives exactly the whole-graph
output on its seeds. That is why GCN uses in-degree ("right") normalisation rather than
the symmetric one: the symmetric one reads source out-degrees, which in a block only count
the edges into that block's destination nodes.

Nodes with zero in-degree (left behind when halo nodes are dropped) never crash and never
give NaN: every model keeps a path from a node's own features to its output (SAGE's self
weight, GCN's implicit self-loop, GAT's residual, GIN's ``(1 + eps) x`` term), and empty
aggregations are 0. GraphSAGE with ``empty="self"`` (the default) goes one step further
when it is given the full-graph in-degrees (``deg``): a node whose *sampled* neighbourhood is
empty although its full one is not takes its own input as the neighbour mean (an unbiased
guess under homophily, where 0 is a biased one); nodes without any in-neighbour still get 0,
so a whole-graph forward is unchanged.

**First-hop completion** (``forward(..., agg=A, deg=d)``): the first layer of GraphSAGE, GCN
and GIN is a fixed function of a node's features x_v, the mean of its in-neighbours'
features A_v (precomputed once on the whole graph: ``partition.neighbour_mean``) and its
in-degree d_v:

* SAGE: ``fc_self(x_v) + fc_neigh(A_v)``;
* GCN: ``W (x_v + d_v A_v) / (d_v + 1) + b`` (with ``model.gcn_norm: both``, DGL's
  ``GraphConv(norm='both')``: ``W S_v + b``, S_v the symmetric-normalised neighbour sum);
* GIN: ``mlp((1 + eps) x_v + A_v)``.

With ``agg`` the model computes layer 0 from these rows for every node of the computation
tree (no sampling, no graph) and runs layers 1..L-1 on the graph or on ``L - 1`` blocks
(the input rows are the source nodes of the first of them). Dropout acts on x_v only, not
on A_v (dropout before a mean averages out over the neighbours; on the precomputed mean it
would be a much stronger noise). In evaluation mode, ``model(g, x, agg=neighbour_mean(g, x),
deg=g.in_degrees())`` equals ``model(g, x)`` up to float rounding (a test checks it), so the
global evaluation needs no aggregate. GAT cannot: its attention depends on learned
projections of both ends of an edge.

:func:`gradient_bytes` gives the byte count of the trainable parameters, which is what one
gradient all-reduce moves.
"""

from __future__ import annotations

from typing import Sequence, Union

import dgl
import torch
from dgl.nn import GATConv, GINConv, GraphConv, SAGEConv
from torch import nn

from ..config import ConfigError, ModelConfig

__all__ = ["GNN", "build_model", "gradient_bytes", "MODEL_NAMES"]

MODEL_NAMES = ("sage", "gcn", "gat", "gin")

GraphOrBlocks = Union[dgl.DGLGraph, Sequence[dgl.DGLGraph]]


EMPTY_RULES = ("self", "zero")


def _dst(graph: dgl.DGLGraph, x: torch.Tensor) -> torch.Tensor:
    # In a block the destination nodes are the first num_dst_nodes source nodes (DGL's
    # to_block / NeighborSampler guarantee this); in a plain graph they are all nodes.
    return x[: graph.num_dst_nodes()] if graph.is_block else x


class GCNLayer(nn.Module):
    """GCN layer with an implicit self-loop and in-degree normalisation.

    ``h_v = W * (x_v + sum_{u -> v} x_u) / (d_in(v) + 1) + b``, i.e. Kipf & Welling's GCN on
    ``A + I`` with random-walk ("right") normalisation. The self-loop is added here rather
    than to the graph so that it is never lost to sampling (a sampled block need not keep a
    self-loop edge) and so that a node with zero in-degree still sees its own features.
    Do not also add self-loops to the graph: a real self-loop edge counts once more.
    """

    def __init__(self, in_feats: int, out_feats: int):
        super().__init__()
        # norm="none": the normalisation comes in as edge weights below, so that the self
        # term shares the same 1 / (d + 1) factor. allow_zero_in_degree: those nodes are
        # expected (see the module docstring) and handled by the self term.
        self.conv = GraphConv(in_feats, out_feats, norm="none", weight=True, bias=True, allow_zero_in_degree=True)

    def forward(self, graph: dgl.DGLGraph, x: torch.Tensor) -> torch.Tensor:
        inv = 1.0 / (graph.in_degrees().to(x) + 1.0)  # one per destination node
        _, dst = graph.edges(order="eid")  # edge_weight is eid-ordered
        out = self.conv(graph, x, edge_weight=inv[dst.long()])  # (sum_u x_u W) / (d+1) + b
        self_term = (_dst(graph, x) @ self.conv.weight) * inv.unsqueeze(-1)
        return out + self_term

    def first_hop(self, x: torch.Tensor, agg: torch.Tensor, deg: torch.Tensor) -> torch.Tensor:
        """Layer 0 from precomputed rows: ``W (x + d * agg) / (d + 1) + b`` (agg = neighbour mean)."""
        d = deg.to(x.dtype).unsqueeze(-1)
        return ((x + agg * d) / (d + 1.0)) @ self.conv.weight + self.conv.bias


class GCNSymLayer(GraphConv):
    """DGL's ``GraphConv(norm='both')``, as DGL's examples build GCN, plus the first-hop entry point.

    ``h_v = W * sum_{u -> v} x_u / sqrt(d_out(u) d_in(v)) + b`` with no self-loop
    (``model.gcn_norm: both``). In a sampled block the degrees are the block's, as in any
    script that uses this layer. Its first hop needs the partition folder's ``gcn`` table,
    the same sum over the whole graph.
    """

    def __init__(self, in_feats: int, out_feats: int):
        super().__init__(in_feats, out_feats, norm="both", weight=True, bias=True, allow_zero_in_degree=True)

    def first_hop(self, x: torch.Tensor, agg: torch.Tensor, deg: torch.Tensor) -> torch.Tensor:
        """Layer 0 from precomputed rows: ``W agg + b`` (agg = the symmetric-normalised sum; x is not used)."""
        return agg @ self.weight + self.bias


class SAGELayer(SAGEConv):
    """DGL's SAGEConv (mean) plus the empty-neighbourhood rule (parameter names unchanged).

    Args:
        in_feats, out_feats: widths.
        empty: "self" (a node whose sampled neighbourhood is empty but whose full-graph
            in-degree is not takes its own input as the neighbour mean) or "zero" (DGL's 0).
    """

    def __init__(self, in_feats: int, out_feats: int, empty: str = "self"):
        super().__init__(in_feats, out_feats, aggregator_type="mean")
        if empty not in EMPTY_RULES:
            raise ConfigError(f"model.empty={empty!r} is not allowed; use one of {', '.join(EMPTY_RULES)}")
        self.empty = empty

    def forward(self, graph: dgl.DGLGraph, feat: torch.Tensor, deg: torch.Tensor | None = None) -> torch.Tensor:
        """``deg``: full-graph in-degree of the source rows (the destination rows are their
        first ``num_dst_nodes``); None = DGL's rule (an empty mean is 0)."""
        out = super().forward(graph, feat)
        if self.empty == "self" and deg is not None:
            n_dst = graph.num_dst_nodes()
            imputed = ((graph.in_degrees() == 0) & (deg[:n_dst] > 0)).nonzero(as_tuple=True)[0]
            if imputed.numel():
                out = out.index_add(0, imputed, self.fc_neigh(_dst(graph, feat)[imputed]))
        return out

    def first_hop(self, x: torch.Tensor, agg: torch.Tensor, deg: torch.Tensor) -> torch.Tensor:
        """Layer 0 from precomputed rows: ``fc_self(x) + fc_neigh(agg)``."""
        return self.fc_self(x) + self.fc_neigh(agg)


class GINLayer(GINConv):
    """DGL's GINConv with the first-hop entry point (parameter names unchanged)."""

    def first_hop(self, x: torch.Tensor, agg: torch.Tensor, deg: torch.Tensor) -> torch.Tensor:
        """Layer 0 from precomputed rows: ``mlp((1 + eps) x + agg)`` (agg = neighbour mean)."""
        return self.apply_func((1 + self.eps) * x + agg)


class GNN(nn.Module):
    """A stack of DGL conv layers; see the module docstring for the two forward modes.

    Attributes:
        name: one of ``MODEL_NAMES``.
        num_layers: number of conv layers (= number of blocks a mini-batch forward needs).
        layers: the conv layers, input layer first.
    """

    def __init__(self, name: str, layers: list[nn.Module], dropout: float):
        super().__init__()
        self.name = name
        self.num_layers = len(layers)
        self.layers = nn.ModuleList(layers)
        self.dropout = nn.Dropout(dropout)
        self.act = nn.ReLU()

    def _conv(self, i: int, graph: dgl.DGLGraph, h: torch.Tensor, deg: torch.Tensor | None = None) -> torch.Tensor:
        if isinstance(self.layers[i], SAGELayer):
            return self.layers[i](graph, h, deg)
        h = self.layers[i](graph, h)
        if self.name == "gat":
            # GATConv returns [N, heads, out]. Hidden layers concatenate the heads (hidden
            # is split over them); the output layer averages them (GAT paper, sec. 2.2),
            # which keeps num_classes logits without an extra projection.
            h = h.flatten(1) if i < self.num_layers - 1 else h.mean(1)
        return h

    def forward(
        self,
        graph_or_blocks: GraphOrBlocks,
        x: torch.Tensor,
        agg: torch.Tensor | None = None,
        deg: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits for the seeds (blocks) or for every node (whole graph).

        Args:
            graph_or_blocks: a list of ``num_layers`` blocks (input layer first; ``num_layers
                - 1`` with ``agg``), or one ``DGLGraph`` on which every layer (every layer but
                the first, with ``agg``) runs. A single block counts as a list of one.
            x: input features, one row per source node of ``blocks[0]`` (or per node; with
                ``agg`` and a 1-layer model, one per seed).
            agg: first-hop completion: the full-graph mean of each input row's in-neighbours'
                features (same rows as ``x``); layer 0 is then computed from (x, agg, deg).
            deg: full-graph in-degree of each input row. Needed with ``agg`` (GCN), and
                used by GraphSAGE's empty-neighbourhood rule (``model.empty``).

        Returns:
            ``[num dst nodes of the last block, num_classes]`` or ``[N, num_classes]``.

        Raises:
            ValueError: the number of blocks does not match, or ``agg`` without ``deg`` or
                with GAT.
            TypeError: ``graph_or_blocks`` is neither a DGLGraph nor a list of them.
        """
        exact = agg is not None
        if exact and self.name == "gat":
            raise ValueError(
                "GAT's first layer cannot be precomputed (its attention depends on learned projections); "
                "use train.first_hop=sampled"
            )
        if exact and deg is None:
            raise ValueError("first-hop completion (agg) needs deg, the full-graph in-degree of every input row")
        n_graph_layers = self.num_layers - (1 if exact else 0)
        # a DGLGraph, or the torch kernels' plain structure of one (method/kernels/plain.py): both say is_block
        one = not isinstance(graph_or_blocks, (list, tuple)) and hasattr(graph_or_blocks, "is_block")
        if one and not graph_or_blocks.is_block:
            graphs = [graph_or_blocks] * n_graph_layers
        elif one:
            graphs = [graph_or_blocks]  # a lone block: only valid for a 1-layer model (2 with agg)
        elif isinstance(graph_or_blocks, (list, tuple)):
            graphs = list(graph_or_blocks)
        else:
            raise TypeError(f"expected a DGLGraph or a list of blocks, got {type(graph_or_blocks).__name__}")
        if len(graphs) != n_graph_layers:
            hint = " minus the exact first layer" if exact else ""
            raise ValueError(
                f"got {len(graphs)} blocks but the model has num_layers={self.num_layers}{hint}; "
                f"sample one block per sampled layer ({n_graph_layers})"
            )

        if not exact:
            h = x
            for i, g in enumerate(graphs):
                h = self.layer(i, g, h, deg)
            return h
        # First-hop completion: layer 0 from (x, agg, deg); dropout on x only (not on agg:
        # see the module docstring).
        h = self.layers[0].first_hop(self.dropout(x), agg, deg)
        if self.num_layers > 1:
            h = self.dropout(self.act(h))
        for j, g in enumerate(graphs):
            h = self.layer(1 + j, g, h, deg)
        return h

    def layer(self, i: int, graph: dgl.DGLGraph, h: torch.Tensor, deg: torch.Tensor | None = None) -> torch.Tensor:
        """Layer ``i`` alone, exactly as :meth:`forward` applies it (layer-wise inference uses it).

        Layer 0 starts with dropout on its input, and every layer but the last ends with ReLU
        and dropout (both identities in eval mode).

        Args:
            i: layer index, 0 = input layer.
            graph: a block (or whole graph) whose source nodes are the rows of ``h``.
            h: the previous layer's output (the input features for layer 0).
            deg: full-graph in-degree of each source row (GraphSAGE's empty-neighbourhood
                rule); None = the graph's own in-degrees.
        """
        if i == 0:
            # Dropout on the input too: the input features are the widest layer and the
            # easiest to overfit on small graphs.
            h = self.dropout(h)
        h = self._conv(i, graph, h, deg)
        if i < self.num_layers - 1:
            h = self.dropout(self.act(h))
        return h


def _make_layer(cfg: ModelConfig, in_dim: int, out_dim: int, last: bool, classes: dict | None = None) -> nn.Module:
    name = cfg.name
    # classes: another implementation of a layer class (same parameters; the torch kernels' map)
    pick = (lambda cls: classes.get(cls, cls)) if classes else (lambda cls: cls)
    if name == "sage":
        # SAGE keeps a separate self weight, so zero-in-degree nodes (empty mean = 0) still
        # carry their own features.
        return pick(SAGELayer)(in_dim, out_dim, empty=cfg.empty)
    if name == "gcn":
        return pick(GCNSymLayer)(in_dim, out_dim) if cfg.gcn_norm == "both" else pick(GCNLayer)(in_dim, out_dim)
    if name == "gat":
        heads = cfg.heads
        per_head = out_dim if last else out_dim // heads
        # residual=True: a zero-in-degree node has no attention inputs, so without the
        # residual its output would be the bias alone. Attention dropout is off so that
        # dropout means one thing (between layers) for every model.
        return pick(GATConv)(
            in_dim, per_head, num_heads=heads, feat_drop=0.0, attn_drop=0.0, residual=True, allow_zero_in_degree=True
        )
    if name == "gin":
        # A small 2-layer MLP per layer, as in the GIN paper; no batch norm, because its
        # statistics would differ between sampled blocks and the whole graph.
        hidden = cfg.hidden
        mlp = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, out_dim))
        # "mean", not "sum": with neighbour sampling and halo dropping a node sees a
        # varying subset of its neighbours; the sampled mean estimates the full mean without
        # bias, whereas a sum shrinks by fanout / degree, so training (sampled) and
        # evaluation (full) would see differently scaled inputs. It also keeps hubs of the
        # power-law synthetic graphs from blowing up activations. The price is GIN's
        # multiset-injectivity argument, which needs a sum.
        return pick(GINLayer)(mlp, aggregator_type="mean", learn_eps=False)
    raise ConfigError(f"model.name={name!r} is not allowed; use one of {', '.join(MODEL_NAMES)}")


def build_model(cfg: ModelConfig, in_feats: int, num_classes: int, classes: dict | None = None) -> GNN:
    """Build the GNN that ``cfg`` describes.

    Layer widths are ``in_feats -> hidden -> ... -> hidden -> num_classes``; one layer is a
    single conv from ``in_feats`` to ``num_classes``. ReLU and dropout follow every layer
    but the last, and dropout is also applied to the input. For GAT, ``hidden`` is the
    total width: each of ``cfg.heads`` heads has ``hidden // heads`` outputs, concatenated;
    the output layer has ``cfg.heads`` heads of ``num_classes`` outputs, averaged.

    Args:
        cfg: the model section of the config (name, num_layers, hidden, dropout, heads).
        in_feats: input feature dimension.
        num_classes: number of output logits per node.
        classes: layer class -> the class to build instead (same parameters), e.g. the torch
            kernels' :data:`~dgl_grappa.method.kernels.TORCH_LAYERS`; None = the DGL layers.

    Returns:
        A :class:`GNN`; call it as ``model(blocks, x)`` or ``model(graph, x)``.

    Raises:
        ConfigError: unknown name, num_layers outside 1..6, hidden < 1, dropout outside
            [0, 1), heads < 1 or (GAT) hidden not divisible by heads.

    Example:
        >>> import dgl, torch
        >>> g = dgl.rand_graph(50, 200)
        >>> model = build_model(ModelConfig(name="sage", num_layers=2, hidden=16), 8, 3)
        >>> model(g, torch.randn(50, 8)).shape
        torch.Size([50, 3])
    """
    if cfg.name not in MODEL_NAMES:
        raise ConfigError(f"model.name={cfg.name!r} is not allowed; use one of {', '.join(MODEL_NAMES)}")
    if not 1 <= cfg.num_layers <= 6:
        raise ConfigError(f"model.num_layers={cfg.num_layers} must be in 1..6")
    if cfg.hidden < 1:
        raise ConfigError(f"model.hidden={cfg.hidden} must be >= 1")
    if not 0.0 <= cfg.dropout < 1.0:
        raise ConfigError(f"model.dropout={cfg.dropout} must be in [0, 1)")
    if cfg.heads < 1:
        raise ConfigError(f"model.heads={cfg.heads} must be >= 1")
    if cfg.name == "gat" and cfg.hidden % cfg.heads != 0:
        raise ConfigError(
            f"model.hidden={cfg.hidden} is not divisible by model.heads={cfg.heads}; pick a multiple of heads"
        )
    if in_feats < 1 or num_classes < 1:
        raise ValueError(f"in_feats={in_feats} and num_classes={num_classes} must be >= 1")

    dims = [in_feats] + [cfg.hidden] * (cfg.num_layers - 1) + [num_classes]
    layers = [
        _make_layer(cfg, dims[i], dims[i + 1], last=(i == cfg.num_layers - 1), classes=classes)
        for i in range(cfg.num_layers)
    ]
    return GNN(cfg.name, layers, cfg.dropout)


def gradient_bytes(model: nn.Module) -> int:
    """Total bytes of the parameters that require grad (``numel * element_size``).

    This is the payload of one gradient all-reduce. Shared parameters count once, as
    ``model.parameters()`` yields them once.

    Args:
        model: any module.

    Returns:
        The byte count, an int.
    """
    return int(sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad))
