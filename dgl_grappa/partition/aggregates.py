"""First-hop aggregates: what first-hop completion precomputes per node, once per partitioning."""
from __future__ import annotations

import dgl
import torch
from torch import Tensor


def neighbour_mean(g: dgl.DGLGraph, x: Tensor) -> Tensor:
    """Per node, the mean of its in-neighbours' rows of ``x`` (0 for a node without in-neighbours).

    The first-hop aggregate of first-hop completion (``train.first_hop=exact``): every
    model's first layer is a function of (x_v, this mean, the in-degree); see
    :meth:`dgl_grappa.method.models.GNN.forward`.
    """
    src, dst = g.edges()
    deg = torch.bincount(dst, minlength=g.num_nodes()).to(x.dtype).clamp(min=1)
    total = torch.zeros_like(x).index_add_(0, dst, x[src])
    return total / deg.unsqueeze(1)
