"""The models' layers with their message passing in PyTorch operations (``train.kernels: torch``).

Each class here is the DGL-backed layer of :mod:`dgl_grappa.method.models` with ``forward`` rewritten
over a :class:`~.plain.PlainGraph`: the parameters, their names (``state_dict`` keys), their
initialisation and the first-hop entry point are the parent's, so a checkpoint of one kernel loads
into the other, and a model built with either draws the same initial weights from the same seed.
Given a DGL graph or block they read its structure first (:func:`~.plain.to_plain`), so whole-graph
and layer-wise evaluation call them as they call the DGL layers.

Example:
    >>> import dgl, torch
    >>> layer = TorchSAGE(4, 2)
    >>> layer(dgl.rand_graph(5, 12), torch.randn(5, 4)).shape
    torch.Size([5, 2])
"""

from __future__ import annotations

from dgl.nn import GATConv
from torch import Tensor

from ..models import GCNLayer, GCNSymLayer, GINLayer, SAGELayer
from .plain import dst_rows, edge_softmax, mean_src, sum_src, to_plain

__all__ = ["TorchSAGE", "TorchGCN", "TorchGCNSym", "TorchGIN", "TorchGAT", "TORCH_LAYERS"]


def _project_first(w_in: int, w_out: int) -> bool:
    # Aggregate in the narrower width (DGL's rule too): project first when the input is wider.
    return w_in > w_out


class TorchSAGE(SAGELayer):
    """GraphSAGE (mean) with the empty-neighbourhood rule: ``fc_self(x_v) + fc_neigh(mean_u x_u)``."""

    def forward(self, graph, feat: Tensor, deg: Tensor | None = None) -> Tensor:
        g = to_plain(graph)
        x_dst = dst_rows(g, feat)
        if _project_first(feat.shape[-1], self._out_feats):
            neigh = mean_src(g, self.fc_neigh(feat))
        else:
            neigh = self.fc_neigh(mean_src(g, feat))
        out = self.fc_self(x_dst) + neigh
        if self.empty == "self" and deg is not None:
            # a node with no sampled in-neighbour but some in the whole graph takes its own row as the mean
            imputed = ((g.in_degrees() == 0) & (deg[: g.num_dst] > 0)).nonzero(as_tuple=True)[0]
            if imputed.numel():
                out = out.index_add(0, imputed, self.fc_neigh(x_dst[imputed]))
        return out


class TorchGCN(GCNLayer):
    """GCN with the implicit self-loop and in-degree normalisation: ``W (x_v + sum_u x_u) / (d_v + 1) + b``."""

    def forward(self, graph, x: Tensor) -> Tensor:
        g = to_plain(graph)
        w = self.conv.weight
        inv = (1.0 / (g.in_degrees().to(x.dtype) + 1.0)).unsqueeze(-1)
        if _project_first(x.shape[-1], w.shape[1]):
            h = x @ w
            agg = sum_src(g, h) + dst_rows(g, h)
        else:
            agg = (sum_src(g, x) + dst_rows(g, x)) @ w
        return agg * inv + self.conv.bias


class TorchGCNSym(GCNSymLayer):
    """GCN as DGL's ``GraphConv(norm='both')``: ``W sum_u x_u / sqrt(d_out(u) d_in(v)) + b`` (degrees at least 1)."""

    def forward(self, graph, feat: Tensor) -> Tensor:
        g = to_plain(graph)
        src_norm = g.out_degrees().clamp(min=1).to(feat.dtype).pow(-0.5).unsqueeze(-1)
        dst_norm = g.in_degrees().clamp(min=1).to(feat.dtype).pow(-0.5).unsqueeze(-1)
        h = feat * src_norm
        if _project_first(feat.shape[-1], self.weight.shape[1]):
            out = sum_src(g, h @ self.weight)
        else:
            out = sum_src(g, h) @ self.weight
        return out * dst_norm + self.bias


class TorchGIN(GINLayer):
    """GIN (mean): ``mlp((1 + eps) x_v + mean_u x_u)``."""

    def forward(self, graph, feat: Tensor) -> Tensor:
        g = to_plain(graph)
        return self.apply_func((1 + self.eps) * dst_rows(g, feat) + mean_src(g, feat))


class TorchGAT(GATConv):
    """GAT (DGL's ``GATConv`` with a residual and no dropout inside): per head,
    ``sum_u softmax_u(leaky_relu(a_l . W x_u + a_r . W x_v)) W x_u + res(x_v) + b``; ``[N_dst, heads, out]``."""

    def forward(self, graph, feat: Tensor, edge_weight=None, get_attention=False) -> Tensor:
        if edge_weight is not None or get_attention:
            raise ValueError("the torch GAT kernel takes neither edge_weight nor get_attention; use train.kernels=dgl")
        g = to_plain(graph)
        heads, width = self._num_heads, self._out_feats
        h = self.feat_drop(feat)
        ft = self.fc(h).view(-1, heads, width)
        ft_dst = dst_rows(g, ft)
        el = (ft * self.attn_l).sum(-1, keepdim=True)  # [N_src, heads, 1]
        er = (ft_dst * self.attn_r).sum(-1, keepdim=True)  # [N_dst, heads, 1]
        e = self.leaky_relu(el.index_select(0, g.src) + er.index_select(0, g.dst))
        a = self.attn_drop(edge_softmax(g, e))
        out = ft.new_zeros((g.num_dst, heads, width)).index_add_(0, g.dst, ft.index_select(0, g.src) * a)
        if self.res_fc is not None:
            out = out + self.res_fc(dst_rows(g, h)).view(g.num_dst, -1, width)
        if self.has_explicit_bias:
            out = out + self.bias.view(1, heads, width)
        if self.activation:
            out = self.activation(out)
        return out


TORCH_LAYERS = {
    SAGELayer: TorchSAGE,
    GCNLayer: TorchGCN,
    GCNSymLayer: TorchGCNSym,
    GINLayer: TorchGIN,
    GATConv: TorchGAT,
}
"""The torch kernel of each DGL-backed layer class :func:`~dgl_grappa.method.models.build_model` makes."""
