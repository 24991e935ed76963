"""Node partitioners of the simulator: random, restreaming LDG (the package's), Fennel, METIS.

Every partitioner takes the graph as an in-neighbour CSR (``indptr``, ``indices``; the
graphs here are symmetric, so in-neighbours are all neighbours) and returns ``part``, an
int64 array with the part id of every node.

LDG is the package's own, :func:`dgl_grappa.partition.assign.ldg_assignment`, called as
``partition.method=ldg`` calls it (neighbourhoods from
:func:`~dgl_grappa.partition.assign.undirected_csr`, train nodes balanced, the
``partition.ldg_passes`` / ``partition.ldg_slack`` defaults), so a simulated LDG cell and a
runtime one with the same seed cut the graph the same way.

Fennel (Tsourakakis et al., WSDM 2014) streams the nodes in some order and puts node v into
``argmax_p |N(v) ∩ P_p| - alpha * gamma * |P_p|^(gamma-1)`` under a hard capacity
``C = slack * N / k``. Restreaming (Nishimura & Ugander, KDD 2013): later passes count the
neighbours' parts of the previous pass (so every neighbour is known), and a node's own
previous placement is taken out of the sizes while it is re-placed. ``train_mask`` adds a
penalty on the part's share of train nodes, so every worker gets seeds.

Cost: O(N + E) per pass (Fennel: one Python step per node with a numpy bincount over its
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


def fennel_partition(
    indptr: np.ndarray,
    indices: np.ndarray,
    k: int,
    *,
    passes: int = 3,
    seed: int = 0,
    slack: float = 1.05,
    train_mask: np.ndarray | None = None,
    init: np.ndarray | None = None,
) -> np.ndarray:
    """(Re)streaming Fennel.

    Args:
        indptr, indices: CSR of the (symmetric) graph.
        k: number of parts.
        passes: 1 = one-pass streaming; >1 = restreaming.
        seed: RNG seed of the stream order (the per-switch perturbation).
        slack: hard capacity = slack * n / k (also for train nodes when train_mask given).
        train_mask: bool [n]; balance train nodes too (additive penalty + hard cap).
        init: optional starting assignment (restream from it; passes then counts from it).

    Returns:
        int64 [n] part ids.
    """
    n = indptr.shape[0] - 1
    rng = np.random.default_rng(seed)
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
    for _ in range(passes):
        for v in perm:
            old = part[v]
            if old >= 0:
                size[old] -= 1
                if tm is not None and tm[v]:
                    tsize[old] -= 1
            nb = part[indices[indptr[v] : indptr[v + 1]]]
            cnt = np.bincount(nb[nb >= 0], minlength=k).astype(np.float64)
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


def ldg_partition(
    indptr: np.ndarray,
    indices: np.ndarray,
    k: int,
    *,
    passes: int | None = None,
    seed: int = 0,
    train_mask: np.ndarray | None = None,
) -> np.ndarray:
    """The package's restreaming LDG, as ``partition.method=ldg`` runs it (``passes`` None: its default)."""
    from dgl_grappa.config import PartitionConfig
    from dgl_grappa.partition.assign import ldg_assignment, undirected_csr

    defaults = PartitionConfig()
    n = indptr.shape[0] - 1
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    ptr, ind = undirected_csr(np.asarray(indices, dtype=np.int64), dst, n)
    tm = None if train_mask is None else np.asarray(train_mask, dtype=bool)
    return ldg_assignment(
        ptr,
        ind,
        k,
        passes=defaults.ldg_passes if passes is None else passes,
        slack=defaults.ldg_slack,
        seed=seed,
        train_mask=tm,
    )


def metis_partition(graph, k: int, seed: int = 0, train_mask=None) -> np.ndarray:
    """DGL's METIS assignment (not streaming; reference only). ``graph`` is a DGLGraph."""
    import dgl
    import torch

    bal = torch.as_tensor(train_mask).to(torch.int64) if train_mask is not None else None
    return dgl.metis_partition_assignment(graph, k, balance_ntypes=bal).numpy().astype(np.int64)


def partition_stats(
    indptr: np.ndarray, indices: np.ndarray, part: np.ndarray, k: int, train_mask: np.ndarray | None = None
) -> dict:
    """Edge cut fraction, node balance (max/mean), train balance, halo share per part."""
    n = indptr.shape[0] - 1
    dst = np.repeat(np.arange(n), np.diff(indptr))
    cut = part[indices] != part[dst]
    sizes = np.bincount(part, minlength=k)
    keys = np.unique(part[dst[cut]] * n + indices[cut])
    halo = np.bincount(keys // n, minlength=k)
    out = {
        "edge_cut": float(cut.mean()) if cut.size else 0.0,
        "balance": float(sizes.max() / sizes.mean()),
        "min_part": int(sizes.min()),
        "halo_over_inner_max": float((halo / np.maximum(sizes, 1)).max()),
        "halo_over_inner_mean": float((halo / np.maximum(sizes, 1)).mean()),
    }
    if train_mask is not None:
        t = np.bincount(part[train_mask.astype(bool)], minlength=k)
        out["train_balance"] = float(t.max() / max(t.mean(), 1e-9))
        out["min_train"] = int(t.min())
    return out


def make_partition(
    method: str, indptr, indices, k: int, seed: int, train_mask=None, dgl_graph=None, passes: int = 3
) -> tuple[np.ndarray, float]:
    """Dispatch by name: random | ldg | ldg1 (one pass) | fennel | metis. Returns (part, seconds)."""
    t0 = time.perf_counter()
    n = indptr.shape[0] - 1
    if method == "random":
        p = random_partition(n, k, seed)
    elif method == "ldg":
        p = ldg_partition(indptr, indices, k, passes=passes, seed=seed, train_mask=train_mask)
    elif method == "ldg1":
        p = ldg_partition(indptr, indices, k, passes=1, seed=seed, train_mask=train_mask)
    elif method == "fennel":
        p = fennel_partition(indptr, indices, k, passes=passes, seed=seed, train_mask=train_mask)
    elif method == "metis":
        p = metis_partition(dgl_graph, k, seed, train_mask)
    else:
        raise ValueError(f"unknown partition method {method!r}")
    return p, time.perf_counter() - t0
