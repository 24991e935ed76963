"""Coverage of local-only sampling, as pure tensor functions (no processes, no DGL state).

A worker samples neighbours only inside its partition. For an edge u <- w the chance that
a uniform neighbour draw of u stays local is r(u) = deg_loc(u) / deg(u). The coverage of
v for an L-layer model is the probability that an L-hop uniform random walk from v never
leaves the partition:

    c_0(v) = 1
    c_l(v) = r(v) * mean_{u in N_loc(v)} c_{l-1}(u)

c_L(v) is the importance weight of v's sampled computation tree. With ``self_loops`` a
self-loop is counted on both sides (r = (d_loc + 1) / (d + 1), and v is in N_loc(v)), so
that the ratio matches a model that also sees v itself; the same convention must then be
used for both degrees, which is why both are computed here.

Example:
    >>> import torch
    >>> src, dst = torch.tensor([1, 2]), torch.tensor([0, 0])   # edges 1->0, 2->0
    >>> deg = torch.tensor([3, 0, 0])                           # node 0 has 3 in-edges globally
    >>> coverage(src, dst, 3, deg, hops=1, self_loops=False)
    tensor([0.6667, 1.0000, 1.0000])
"""

from __future__ import annotations

import torch
from torch import Tensor


def local_in_degrees(dst: Tensor, num_nodes: int) -> Tensor:
    """In-degree of every local node, counted from the destination ids of the local edges."""
    return torch.bincount(dst, minlength=num_nodes)


def local_ratio(deg_local: Tensor, deg_global: Tensor, self_loops: bool = True) -> Tensor:
    """r(v) = deg_loc(v) / deg(v), the share of v's in-neighbours that are local.

    Args:
        deg_local: in-degree of each node in the local graph.
        deg_global: in-degree of the same nodes in the full graph.
        self_loops: count a self-loop on both sides.

    Returns:
        float32 tensor in [0, 1]; nodes with no in-edges anywhere get 1 (nothing is lost).
    """
    dl = deg_local.to(torch.float32)
    dg = deg_global.to(torch.float32)
    if self_loops:
        dl, dg = dl + 1, dg + 1
    if bool((dl > dg).any()):
        raise ValueError("a local in-degree exceeds the global one: the degrees do not belong to the same graph")
    return torch.where(dg > 0, dl / dg.clamp(min=1), torch.ones_like(dg))


def coverage(
    src: Tensor, dst: Tensor, num_nodes: int, deg_global: Tensor, hops: int, self_loops: bool = True
) -> Tensor:
    """c_hops(v) for every local node, by ``hops`` sparse mean aggregations on the local graph.

    Args:
        src, dst: the local graph's edges (src -> dst: dst aggregates from src), local ids.
        num_nodes: number of local nodes.
        deg_global: full-graph in-degree of every local node.
        hops: number of hops L (>= 0); 0 gives all ones.
        self_loops: count a self-loop on both sides (see module docstring).

    Returns:
        float32 tensor [num_nodes] in [0, 1].
    """
    if hops < 0:
        raise ValueError(f"hops={hops} must be >= 0")
    deg_local = local_in_degrees(dst, num_nodes)
    r = local_ratio(deg_local, deg_global, self_loops)
    n_agg = deg_local.to(torch.float32) + (1.0 if self_loops else 0.0)
    c = torch.ones(num_nodes, dtype=torch.float32)
    for _ in range(hops):
        total = torch.zeros(num_nodes, dtype=torch.float32).index_add_(0, dst, c[src])
        if self_loops:
            total += c
        # An empty local neighbourhood has mean 1 by convention; r is already 0 there
        # unless the node has no in-edges at all, in which case nothing was lost.
        mean = torch.where(n_agg > 0, total / n_agg.clamp(min=1), torch.ones_like(total))
        c = r * mean
    return c


def node_weights(cov: Tensor, w_min: float) -> Tensor:
    """Node-level importance weights: coverage clamped to [w_min, 1] (bounded estimator)."""
    if not 0.0 < w_min <= 1.0:
        raise ValueError(f"w_min={w_min} must be in (0, 1]")
    return cov.clamp(min=w_min, max=1.0)


def partition_weights(
    src: Tensor, dst: Tensor, num_nodes: int, deg_global: Tensor, hops: int, self_loops: bool, w_min: float
) -> tuple[Tensor, Tensor]:
    """Coverage and node weights of every node of a worker's local graph (every runtime uses this).

    Args:
        src, dst, num_nodes, deg_global, hops, self_loops: as for :func:`coverage`.
        w_min: lower clamp of the weights (see :func:`node_weights`).

    Returns:
        (coverage c_hops, weights clamp(c_hops, w_min, 1)), both float32 [num_nodes].
    """
    c = coverage(src, dst, num_nodes, deg_global.to(torch.int64), hops, self_loops)
    return c, node_weights(c, w_min)


def batch_weight(w: Tensor) -> Tensor:
    """Batch-level weight a_i: the value minimising sum_v (a - w_v)^2, i.e. the mean of w."""
    if w.numel() == 0:
        return torch.zeros((), dtype=torch.float32)
    return w.to(torch.float32).mean()


def shrink(a: Tensor, lam: float, target: Tensor | float) -> Tensor:
    """Shrinkage: a' = (1 - lam) * a + lam * target (lam = 1: plain averaging, 0: batch-level)."""
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam={lam} must be in [0, 1]")
    return (1.0 - lam) * a + lam * target


def summarize(cov: Tensor) -> dict[str, float]:
    """Mean and percentiles of a coverage vector, for logs and summaries."""
    if cov.numel() == 0:
        return {
            "mean": float("nan"),
            "p10": float("nan"),
            "p50": float("nan"),
            "p90": float("nan"),
            "min": float("nan"),
        }
    q = torch.quantile(cov.to(torch.float64), torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64))
    return {
        "mean": float(cov.mean()),
        "p10": float(q[0]),
        "p50": float(q[1]),
        "p90": float(q[2]),
        "min": float(cov.min()),
    }
