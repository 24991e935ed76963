"""Node partitioners as pure numpy functions: random, (restreaming) LDG / Fennel, METIS.

Every partitioner takes the graph as an in-neighbour CSR (``indptr``, ``indices``; the
graphs here are symmetric, so in-neighbours are all neighbours) and returns ``part``, an
int64 array with the part id of every node.

LDG (Stanton & Kliot, KDD 2012) streams the nodes in some order and puts node v into

    argmax_p  |N(v) ∩ P_p| * (1 - |P_p| / C)          C = capacity = slack * N / k

Fennel (Tsourakakis et al., WSDM 2014) uses ``|N(v) ∩ P_p| - alpha * gamma * |P_p|^(gamma-1)``.
Restreaming (Nishimura & Ugander, KDD 2013): later passes count the neighbours' parts of
the previous pass (so every neighbour is known), and a node's own previous placement is
taken out of the sizes while it is re-placed. ``train_mask`` adds the same multiplicative
penalty on the part's share of train nodes, so every worker gets seeds.

Cost: O(N + E) per pass (one Python step per node with a numpy bincount over its
neighbours: ~1 s per pass per 100k nodes on one core). Perturbation per repartitioning
= a different ``seed`` (stream order).
"""
from __future__ import annotations

import time

import numpy as np


def random_partition(n: int, k: int, seed: int) -> np.ndarray:
    """Balanced random assignment: a random permutation of (i mod k)."""
    rng = np.random.default_rng(seed)
    return rng.permutation(np.arange(n, dtype=np.int64) % k)


def stream_partition(indptr: np.ndarray, indices: np.ndarray, k: int, *, passes: int = 3,
                     seed: int = 0, method: str = "ldg", slack: float = 1.05,
                     train_mask: np.ndarray | None = None, order: str = "random",
                     init: np.ndarray | None = None) -> np.ndarray:
    """(Re)streaming LDG or Fennel.

    Args:
        indptr, indices: CSR of the (symmetric) graph.
        k: number of parts.
        passes: 1 = one-pass streaming; >1 = restreaming.
        seed: RNG seed of the stream order (the per-switch perturbation).
        method: "ldg" or "fennel".
        slack: hard capacity = slack * n / k (also for train nodes when train_mask given).
        train_mask: bool [n]; balance train nodes too (multiplicative penalty + hard cap).
        order: "random" or "bfs" (BFS from a random node; better first pass on sparse graphs).
        init: optional starting assignment (restream from it; passes then counts from it).

    Returns:
        int64 [n] part ids.
    """
    n = indptr.shape[0] - 1
    rng = np.random.default_rng(seed)
    if order == "bfs":
        perm = _bfs_order(indptr, indices, rng)
    else:
        perm = rng.permutation(n)
    part = np.full(n, -1, dtype=np.int64) if init is None else init.astype(np.int64).copy()
    size = np.bincount(part[part >= 0], minlength=k).astype(np.float64)
    cap = slack * n / k
    tm = train_mask.astype(bool) if train_mask is not None else None
    if tm is not None:
        tsize = np.bincount(part[(part >= 0) & tm], minlength=k).astype(np.float64)
        tcap = slack * max(int(tm.sum()), 1) / k
    m = indices.shape[0]
    alpha = np.sqrt(k) * m / max(n, 1) ** 1.5  # Fennel's alpha for gamma = 1.5 (m = directed edges)
    eps = 1e-9
    for _ in range(passes):
        for v in perm:
            old = part[v]
            if old >= 0:
                size[old] -= 1
                if tm is not None and tm[v]:
                    tsize[old] -= 1
            nb = part[indices[indptr[v]:indptr[v + 1]]]
            cnt = np.bincount(nb[nb >= 0], minlength=k).astype(np.float64)
            if method == "ldg":
                pen = 1.0 - size / cap
                if tm is not None and tm[v]:
                    pen = pen * (1.0 - tsize / tcap)
                score = cnt * pen + eps * pen  # ties (e.g. no placed neighbour): least loaded
            else:
                score = cnt - alpha * 1.5 * np.sqrt(size)
                if tm is not None and tm[v]:
                    score = score - alpha * 1.5 * np.sqrt(tsize) * (n / max(tcap * k, 1))
            full = size + 1 > cap
            if tm is not None and tm[v]:
                full |= tsize + 1 > tcap
            score[full] = -np.inf
            p = int(np.argmax(score))
            part[v] = p
            size[p] += 1
            if tm is not None and tm[v]:
                tsize[p] += 1
    return part


def _bfs_order(indptr: np.ndarray, indices: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Node order of a BFS (restarted at random unvisited nodes), via scipy's csgraph."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import breadth_first_order
    n = indptr.shape[0] - 1
    a = sp.csr_matrix((np.ones(indices.shape[0], dtype=np.int8), indices, indptr), shape=(n, n))
    seen = np.zeros(n, dtype=bool)
    out = []
    for s in rng.permutation(n):
        if seen[s]:
            continue
        o = breadth_first_order(a, int(s), directed=False, return_predecessors=False)
        o = o[~seen[o]]
        seen[o] = True
        out.append(o)
    return np.concatenate(out)


def metis_partition(graph, k: int, seed: int = 0, train_mask=None) -> np.ndarray:
    """DGL's METIS assignment (not streaming; reference only). ``graph`` is a DGLGraph."""
    import dgl
    import torch
    bal = torch.as_tensor(train_mask).to(torch.int64) if train_mask is not None else None
    return dgl.metis_partition_assignment(graph, k, balance_ntypes=bal).numpy().astype(np.int64)


def partition_stats(indptr: np.ndarray, indices: np.ndarray, part: np.ndarray, k: int,
                    train_mask: np.ndarray | None = None) -> dict:
    """Edge cut fraction, node balance (max/mean), train balance, halo share per part."""
    n = indptr.shape[0] - 1
    dst = np.repeat(np.arange(n), np.diff(indptr))
    cut = part[indices] != part[dst]
    sizes = np.bincount(part, minlength=k)
    keys = np.unique(part[dst[cut]] * n + indices[cut])
    halo = np.bincount(keys // n, minlength=k)
    out = {"edge_cut": float(cut.mean()) if cut.size else 0.0,
           "balance": float(sizes.max() / sizes.mean()),
           "min_part": int(sizes.min()),
           "halo_over_inner_max": float((halo / np.maximum(sizes, 1)).max()),
           "halo_over_inner_mean": float((halo / np.maximum(sizes, 1)).mean())}
    if train_mask is not None:
        t = np.bincount(part[train_mask.astype(bool)], minlength=k)
        out["train_balance"] = float(t.max() / max(t.mean(), 1e-9))
        out["min_train"] = int(t.min())
    return out


def make_partition(method: str, indptr, indices, k: int, seed: int, train_mask=None, dgl_graph=None,
                   passes: int = 3) -> tuple[np.ndarray, float]:
    """Dispatch by name: random | ldg | ldg1 (one pass) | fennel | metis. Returns (part, seconds)."""
    t0 = time.perf_counter()
    n = indptr.shape[0] - 1
    if method == "random":
        p = random_partition(n, k, seed)
    elif method in ("ldg", "fennel"):
        p = stream_partition(indptr, indices, k, passes=passes, seed=seed, method=method, train_mask=train_mask)
    elif method == "ldg1":
        p = stream_partition(indptr, indices, k, passes=1, seed=seed, method="ldg", train_mask=train_mask)
    elif method == "ldgbfs":
        p = stream_partition(indptr, indices, k, passes=passes, seed=seed, method="ldg", train_mask=train_mask,
                             order="bfs")
    elif method == "metis":
        p = metis_partition(dgl_graph, k, seed, train_mask)
    else:
        raise ValueError(f"unknown partition method {method!r}")
    return p, time.perf_counter() - t0
