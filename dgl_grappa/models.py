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
aggregations are 0.

:func:`gradient_bytes` gives the byte count of the trainable parameters, which is what one
gradient all-reduce moves.
"""
from __future__ import annotations

from typing import Sequence, Union

import dgl
import torch
from dgl.nn import GATConv, GINConv, GraphConv, SAGEConv
from torch import nn

from .config import ConfigError, ModelConfig

__all__ = ["GNN", "build_model", "gradient_bytes", "MODEL_NAMES"]

MODEL_NAMES = ("sage", "gcn", "gat", "gin")

GraphOrBlocks = Union[dgl.DGLGraph, Sequence[dgl.DGLGraph]]


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
        self.conv = GraphConv(in_feats, out_feats, norm="none", weight=True, bias=True,
                              allow_zero_in_degree=True)

    def forward(self, graph: dgl.DGLGraph, x: torch.Tensor) -> torch.Tensor:
        inv = 1.0 / (graph.in_degrees().to(x) + 1.0)          # one per destination node
        _, dst = graph.edges(order="eid")                      # edge_weight is eid-ordered
        out = self.conv(graph, x, edge_weight=inv[dst.long()])  # (sum_u x_u W) / (d+1) + b
        self_term = (_dst(graph, x) @ self.conv.weight) * inv.unsqueeze(-1)
        return out + self_term


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

    def _conv(self, i: int, graph: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        h = self.layers[i](graph, h)
        if self.name == "gat":
            # GATConv returns [N, heads, out]. Hidden layers concatenate the heads (hidden
            # is split over them); the output layer averages them (GAT paper, sec. 2.2),
            # which keeps num_classes logits without an extra projection.
            h = h.flatten(1) if i < self.num_layers - 1 else h.mean(1)
        return h

    def forward(self, graph_or_blocks: GraphOrBlocks, x: torch.Tensor) -> torch.Tensor:
        """Logits for the seeds (blocks) or for every node (whole graph).

        Args:
            graph_or_blocks: a list of ``num_layers`` blocks (input layer first), or one
                ``DGLGraph`` on which every layer runs. A single block counts as a list of
                one.
            x: input features, one row per source node of ``blocks[0]`` (or per node).

        Returns:
            ``[num dst nodes of the last block, num_classes]`` or ``[N, num_classes]``.

        Raises:
            ValueError: the number of blocks differs from ``num_layers``.
            TypeError: ``graph_or_blocks`` is neither a DGLGraph nor a list of them.
        """
        if isinstance(graph_or_blocks, dgl.DGLGraph) and not graph_or_blocks.is_block:
            graphs = [graph_or_blocks] * self.num_layers
        elif isinstance(graph_or_blocks, dgl.DGLGraph):
            graphs = [graph_or_blocks]  # a lone block: only valid for a 1-layer model
        elif isinstance(graph_or_blocks, (list, tuple)):
            graphs = list(graph_or_blocks)
        else:
            raise TypeError(f"expected a DGLGraph or a list of blocks, got {type(graph_or_blocks).__name__}")
        if len(graphs) != self.num_layers:
            raise ValueError(
                f"got {len(graphs)} blocks but the model has num_layers={self.num_layers}; "
                f"sample one block per layer (len(fanouts) == num_layers)")

        h = x
        for i, g in enumerate(graphs):
            h = self.layer(i, g, h)
        return h

    def layer(self, i: int, graph: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        """Layer ``i`` alone, exactly as :meth:`forward` applies it (layer-wise inference uses it).

        Layer 0 starts with dropout on its input, and every layer but the last ends with ReLU
        and dropout (both identities in eval mode).

        Args:
            i: layer index, 0 = input layer.
            graph: a block (or whole graph) whose source nodes are the rows of ``h``.
            h: the previous layer's output (the input features for layer 0).
        """
        if i == 0:
            # Dropout on the input too: the input features are the widest layer and the
            # easiest to overfit on small graphs.
            h = self.dropout(h)
        h = self._conv(i, graph, h)
        if i < self.num_layers - 1:
            h = self.dropout(self.act(h))
        return h


def _make_layer(cfg: ModelConfig, in_dim: int, out_dim: int, last: bool) -> nn.Module:
    name = cfg.name
    if name == "sage":
        # SAGE keeps a separate self weight, so zero-in-degree nodes (empty mean = 0) still
        # carry their own features.
        return SAGEConv(in_dim, out_dim, aggregator_type="mean")
    if name == "gcn":
        return GCNLayer(in_dim, out_dim)
    if name == "gat":
        heads = cfg.heads
        per_head = out_dim if last else out_dim // heads
        # residual=True: a zero-in-degree node has no attention inputs, so without the
        # residual its output would be the bias alone. Attention dropout is off so that
        # dropout means one thing (between layers) for every model.
        return GATConv(in_dim, per_head, num_heads=heads, feat_drop=0.0, attn_drop=0.0,
                       residual=True, allow_zero_in_degree=True)
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
        return GINConv(mlp, aggregator_type="mean", learn_eps=False)
    raise ConfigError(f"model.name={name!r} is not allowed; use one of {', '.join(MODEL_NAMES)}")


def build_model(cfg: ModelConfig, in_feats: int, num_classes: int) -> GNN:
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
        raise ConfigError(f"model.hidden={cfg.hidden} is not divisible by model.heads={cfg.heads}; "
                          "pick a multiple of heads")
    if in_feats < 1 or num_classes < 1:
        raise ValueError(f"in_feats={in_feats} and num_classes={num_classes} must be >= 1")

    dims = [in_feats] + [cfg.hidden] * (cfg.num_layers - 1) + [num_classes]
    layers = [_make_layer(cfg, dims[i], dims[i + 1], last=(i == cfg.num_layers - 1))
              for i in range(cfg.num_layers)]
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
