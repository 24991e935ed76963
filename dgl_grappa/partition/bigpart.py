"""Partition a graph that does not fit in one process, straight into DGL's layout.

``dgl.distributed.partition_graph`` needs the whole graph as one DGLGraph (about 29 GB at
100M edges). This module partitions a :class:`~dgl_grappa.data.bigsynth.BigGraph` (edge
chunks on disk) with O(N) node arrays plus one chunk or one part in memory:

1. **assign** a part to every node without a DGLGraph: ``random``, ``contiguous`` id
   ranges, or ``ldg`` (the package's restreaming linear deterministic greedy,
   ``partition.ldg_assignment``, over a CSR built from the chunks);
2. **bucket**: one pass over the edge chunks gives every edge its reshuffled endpoints and
   its new edge id, and appends it to the file of the part that owns its destination
   (``inner`` edges) and, if its source lives elsewhere, to that source part's file
   (``outer`` edges: DGL's 1-hop partition keeps the out-edges of inner nodes too);
3. **write** one part at a time exactly as ``partition_graph(..., num_hops=1)`` lays it
   out (checked against DGL by ``tests/test_bigpart.py``), plus the project's
   ``assignment.npy``, ``orig_ids.npy`` and ``grappa_partition.json``, so that
   :func:`dgl_grappa.method.local_part.load_local`, ``dgl.distributed.load_partition`` and DistDGL
   servers all read the folder.

Conventions shared with DGL 2.1.0 (``dgl/distributed/partition.py``, ``dgl/partition.py``):
new node ids are contiguous per part, in part order (``node_map``); an edge belongs to the
part of its destination and the edges of part p have the contiguous new ids of
``edge_map[p]``; ``graph.dgl`` holds inner nodes first (ndata ``_ID`` = new global id,
``inner_node`` uint8, ``part_id`` when P > 1), then the halo; inner edges first (sorted by
``_ID``), then the out-edges to halo nodes (``inner_edge`` 0). ``orig_id`` is *not* stored
(DGL deletes it before saving); the new-to-original node map is ``orig_ids.npy``.
Where DGL's choice is an implementation detail we pick a documented one: within a part,
new node ids follow the original ids (DGL's unstable ``torch.sort`` order can be passed in
as ``order``); new edge ids are ordered by (new destination id, original edge id); halo
nodes are ordered by new id.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import dgl
import numpy as np
import torch
from dgl.data.utils import save_tensors

from ..config import ConfigError
from ..data.bigsynth import BigGraph
from .aggregates import prepare
from .assign import ldg_assignment
from .layout import GRAPH_NAME, NODE_KEYS, STATS_FILE, part_config_path

ASSIGN_METHODS = ("random", "contiguous", "ldg")
_ROW = 3  # bucket record: new src, new dst, new edge id (int64 each)


# ----------------------------------------------------------------------------- assignment


def assign_random(num_nodes: int, num_parts: int, seed: int = 0) -> np.ndarray:
    """Uniform random part per node (what ``part_method="random"`` does in DGL).

    Args:
        num_nodes: N.
        num_parts: P.
        seed: RNG seed.

    Returns:
        int64 [N] part ids in [0, P).

    Example:
        >>> assign_random(5, 2, seed=0).shape
        (5,)
    """
    return np.random.default_rng(seed).integers(0, num_parts, size=num_nodes, dtype=np.int64)


def assign_contiguous(num_nodes: int, num_parts: int) -> np.ndarray:
    """Equal contiguous id ranges: node i goes to part ``i * P // N``.

    Args:
        num_nodes: N.
        num_parts: P.

    Returns:
        int64 [N] part ids, non-decreasing.

    Example:
        >>> assign_contiguous(5, 2).tolist()
        [0, 0, 0, 1, 1]
    """
    return np.arange(num_nodes, dtype=np.int64) * num_parts // max(num_nodes, 1)


def _ranks_in_groups(keys_sorted: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For a sorted key array: rank of every element inside its run of equal keys, and the
    (first index, length) of every run."""
    m = keys_sorted.shape[0]
    if m == 0:
        e = np.empty(0, dtype=np.int64)
        return e, e, e
    first = np.flatnonzero(np.concatenate(([True], keys_sorted[1:] != keys_sorted[:-1])))
    lengths = np.diff(np.concatenate((first, [m])))
    rank = np.arange(m, dtype=np.int64) - np.repeat(first, lengths)
    return rank, first, lengths


def build_csr(graph: BigGraph) -> tuple[np.ndarray, np.ndarray]:
    """Out-neighbour CSR of the whole graph, built chunk by chunk (4 or 8 bytes per edge).

    Args:
        graph: the on-disk graph.

    Returns:
        ``(indptr, indices)``: int64 [N+1] and int32 (int64 when N >= 2**31) [E]; the
        neighbours of v are ``indices[indptr[v]:indptr[v+1]]``, in edge-id order.

    Example:
        >>> indptr, indices = build_csr(BigGraph("runs/scale/graph"))   # doctest: +SKIP
    """
    n = graph.num_nodes
    out_deg = np.zeros(n, dtype=np.int64)
    for _, src, _ in graph.edge_chunks():
        out_deg += np.bincount(src, minlength=n)
    indptr = np.concatenate(([0], np.cumsum(out_deg)))
    del out_deg
    indices = np.empty(int(indptr[-1]), dtype=np.int32 if n < 2**31 else np.int64)
    cursor = indptr[:-1].copy()
    for _, src, dst in graph.edge_chunks():
        order = np.argsort(src, kind="stable")
        s = src[order]
        rank, first, lengths = _ranks_in_groups(s)
        indices[cursor[s] + rank] = dst[order]
        cursor[s[first]] += lengths
    return indptr, indices


def assign_ldg(
    graph: BigGraph,
    num_parts: int,
    *,
    passes: int = 3,
    block: int | None = None,
    slack: float = 0.05,
    seed: int = 0,
    csr: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Restreamed linear deterministic greedy over a CSR built from the chunks.

    The package's one LDG, :func:`dgl_grappa.partition.assign.ldg_assignment` (``partition.method=ldg``
    uses it too): a seeded random stream order, ``block`` nodes decided together, hard caps of
    ``(1 + slack)`` times the mean part on nodes and on train nodes (``split == 0``).

    Args:
        graph: the on-disk graph.
        num_parts: P.
        passes: streaming passes (>= 1).
        block: nodes decided together; default: see ``ldg_assignment``.
        slack: allowed imbalance.
        seed: stream order and tie-breaks.
        csr: a prebuilt :func:`build_csr` result (built here otherwise).

    Returns:
        int64 [N] part ids.

    Example:
        >>> parts = assign_ldg(BigGraph("runs/scale/graph"), 4)          # doctest: +SKIP
    """
    indptr, indices = csr if csr is not None else build_csr(graph)
    split = getattr(graph, "split", None)
    train = None if split is None else np.asarray(split) == 0
    return ldg_assignment(
        indptr, indices, num_parts, passes=passes, slack=slack, seed=seed, train_mask=train, block=block
    )


def assign(graph: BigGraph, method: str, num_parts: int, seed: int = 0, **kwargs) -> np.ndarray:
    """Dispatch to ``assign_<method>``.

    Args:
        graph: the on-disk graph.
        method: one of :data:`ASSIGN_METHODS`.
        num_parts: P.
        seed: seed for random and ldg.
        kwargs: passed to :func:`assign_ldg`.

    Returns:
        int64 [N] part ids.

    Example:
        >>> parts = assign(BigGraph("runs/scale/graph"), "random", 4)   # doctest: +SKIP
    """
    if method == "random":
        return assign_random(graph.num_nodes, num_parts, seed)
    if method == "contiguous":
        return assign_contiguous(graph.num_nodes, num_parts)
    if method == "ldg":
        return assign_ldg(graph, num_parts, seed=seed, **kwargs)
    raise ConfigError(f"assignment method {method!r} is not allowed; use one of {', '.join(ASSIGN_METHODS)}")


# ----------------------------------------------------------------------------- writer


@dataclass
class WorkState:
    """What the bucket pass leaves in the work folder for the per-part writers."""

    num_parts: int
    num_nodes: int
    num_edges: int
    node_bounds: list[int]  # part p owns new ids [node_bounds[p], node_bounds[p+1])
    edge_bounds: list[int]  # and new edge ids [edge_bounds[p], edge_bounds[p+1])
    inner_edges: list[int]
    outer_edges: list[int]
    cut_edges: int
    method: str
    seconds: float

    @staticmethod
    def load(work: Path) -> "WorkState":
        return WorkState(**json.loads((work / "state.json").read_text()))


def _check_order(assignment: np.ndarray, order: np.ndarray, num_parts: int) -> None:
    n = assignment.shape[0]
    if (
        order.shape != (n,)
        or (n and (order.min() < 0 or order.max() >= n))
        or np.bincount(order, minlength=n).max(initial=1) != 1
    ):
        raise ConfigError("order must be a permutation of the node ids")
    if np.any(np.diff(assignment[order]) < 0):
        raise ConfigError("order must list the nodes of part 0 first, then part 1, ... (DGL's node_map)")


def bucket_edges(
    graph: BigGraph,
    assignment: np.ndarray,
    num_parts: int,
    work_dir: str | Path,
    *,
    order: np.ndarray | None = None,
    method: str = "custom",
) -> WorkState:
    """Reshuffle node and edge ids and bucket the edges by part (stage 2; one pass).

    Args:
        graph: the on-disk graph.
        assignment: int [N] part of every original node id.
        num_parts: P.
        work_dir: folder for the bucket files and the reshuffle (created; emptied first).
        order: new-to-original node id permutation (default: by part, then original id).
            Must list part 0's nodes first, then part 1's, ...
        method: name recorded as ``part_method``.

    Returns:
        The :class:`WorkState` (also saved in ``work_dir/state.json``).

    Example:
        >>> st = bucket_edges(g, assign_random(g.num_nodes, 4), 4, "runs/x/_work")   # doctest: +SKIP
    """
    t0 = time.perf_counter()
    work = Path(work_dir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    n, p = graph.num_nodes, int(num_parts)
    a = np.asarray(assignment, dtype=np.int64)
    if a.shape != (n,) or (n and (a.min() < 0 or a.max() >= p)):
        raise ConfigError(f"assignment must hold one part id in [0, {p}) per node ({n} nodes)")
    if order is None:
        new2old = np.argsort(a, kind="stable")
    else:
        new2old = np.asarray(order, dtype=np.int64)
        _check_order(a, new2old, p)
    old2new = np.empty(n, dtype=np.int64)
    old2new[new2old] = np.arange(n, dtype=np.int64)
    node_bounds = np.concatenate(([0], np.cumsum(np.bincount(a, minlength=p))))
    np.save(work / "new2old.npy", new2old)
    np.save(work / "assignment.npy", a)
    # New edge id of u->v = (edges into new ids < new(v)) + rank of the edge among v's
    # in-edges by original edge id; the running counter `seen` makes that one pass.
    indptr = np.concatenate(([0], np.cumsum(graph.in_degree[new2old])))
    del new2old
    if int(indptr[-1]) != graph.num_edges:
        raise RuntimeError(f"in-degrees sum to {int(indptr[-1])}, not {graph.num_edges} edges")
    seen = np.zeros(n, dtype=np.int64)
    inner = np.zeros(p, dtype=np.int64)
    outer = np.zeros(p, dtype=np.int64)
    handles = {(kind, q): open(work / f"{kind}{q}.bin", "wb") for kind in ("in", "out") for q in range(p)}
    try:
        for _, src, dst in graph.edge_chunks():
            sn, dn = old2new[src], old2new[dst]
            ps, pd = a[src], a[dst]
            del src, dst
            srt = np.argsort(dn, kind="stable")
            dns = dn[srt]
            rank, first, lengths = _ranks_in_groups(dns)
            neid = np.empty_like(dn)
            neid[srt] = indptr[dns] + seen[dns] + rank
            seen[dns[first]] += lengths
            del srt, dns, rank, first, lengths
            rec = np.stack((sn, dn, neid), axis=1)
            del sn, dn, neid
            for q in range(p):
                m = pd == q
                rec[m].tofile(handles["in", q])
                inner[q] += int(m.sum())
                m = (ps == q) & (pd != q)
                rec[m].tofile(handles["out", q])
                outer[q] += int(m.sum())
    finally:
        for h in handles.values():
            h.close()
    edge_bounds = indptr[node_bounds]
    state = WorkState(
        num_parts=p,
        num_nodes=n,
        num_edges=graph.num_edges,
        node_bounds=node_bounds.tolist(),
        edge_bounds=edge_bounds.tolist(),
        inner_edges=inner.tolist(),
        outer_edges=outer.tolist(),
        cut_edges=int(outer.sum()),
        method=method,
        seconds=time.perf_counter() - t0,
    )
    if inner.tolist() != np.diff(edge_bounds).tolist():
        raise RuntimeError("bucketed in-edges disagree with the in-degrees")
    (work / "state.json").write_text(json.dumps(state.__dict__))
    return state


def write_part(graph: BigGraph, work_dir: str | Path, part_id: int, out_dir: str | Path) -> dict:
    """Write ``part<part_id>/`` (graph.dgl, node_feat.dgl, edge_feat.dgl) from the buckets.

    Memory: this part's edge records (24 bytes per inner or outer edge, plus the DGLGraph
    built from them) and its inner nodes' features.

    Args:
        graph: the on-disk graph (features, labels, masks, in-degrees).
        work_dir: the folder :func:`bucket_edges` filled.
        part_id: which part.
        out_dir: the partition folder.

    Returns:
        ``{"part": p, "inner_nodes", "halo_nodes" (distinct outside sources of in-edges),
        "local_nodes", "local_edges", "seconds"}``.

    Example:
        >>> write_part(g, "runs/x/_work", 0, "runs/x")                  # doctest: +SKIP
    """
    t0 = time.perf_counter()
    work, out = Path(work_dir), Path(out_dir)
    st = WorkState.load(work)
    p = int(part_id)
    lo, hi = st.node_bounds[p], st.node_bounds[p + 1]
    n_inner = hi - lo
    rin = np.fromfile(work / f"in{p}.bin", dtype=np.int64).reshape(-1, _ROW)
    rin = rin[np.argsort(rin[:, 2], kind="stable")]
    rout = np.fromfile(work / f"out{p}.bin", dtype=np.int64).reshape(-1, _ROW)
    rout = rout[np.argsort(rout[:, 2], kind="stable")]
    if rin.shape[0] and not np.array_equal(rin[[0, -1], 2], [st.edge_bounds[p], st.edge_bounds[p + 1] - 1]):
        raise RuntimeError(f"part {p}: inner edge ids do not span edge_map")
    # Halo (DGL, 1 hop): sources of in-edges outside the part, and targets of out-edges.
    src_in = rin[:, 0]
    outside_src = np.unique(src_in[(src_in < lo) | (src_in >= hi)])
    halo = np.union1d(outside_src, rout[:, 1])
    src = np.concatenate((src_in, rout[:, 0]))
    dst = np.concatenate((rin[:, 1], rout[:, 1]))
    eid = np.concatenate((rin[:, 2], rout[:, 2]))
    n_in_edges = rin.shape[0]
    del rin, rout, src_in

    def to_local(x: np.ndarray) -> np.ndarray:
        loc = x - lo
        ext = (x < lo) | (x >= hi)
        loc[ext] = n_inner + np.searchsorted(halo, x[ext])
        return loc

    lsrc, ldst = to_local(src), to_local(dst)
    del src, dst
    n_local = n_inner + halo.shape[0]
    g = dgl.graph((torch.from_numpy(lsrc), torch.from_numpy(ldst)), num_nodes=n_local, idtype=torch.int64)
    del lsrc, ldst
    gids = np.concatenate((np.arange(lo, hi, dtype=np.int64), halo))
    g.ndata[dgl.NID] = torch.from_numpy(gids)
    g.ndata["inner_node"] = torch.cat(
        (torch.ones(n_inner, dtype=torch.uint8), torch.zeros(halo.shape[0], dtype=torch.uint8))
    )
    if st.num_parts > 1:  # DGL writes no part_id for a single part
        owner = np.searchsorted(np.asarray(st.node_bounds), gids, side="right") - 1
        g.ndata["part_id"] = torch.from_numpy(owner.astype(np.int64))
    g.edata[dgl.EID] = torch.from_numpy(eid)
    inner_edge = np.zeros(eid.shape[0], dtype=np.uint8)
    inner_edge[:n_in_edges] = 1
    g.edata["inner_edge"] = torch.from_numpy(inner_edge)
    del eid, inner_edge, gids
    pdir = out / f"part{p}"
    pdir.mkdir(parents=True, exist_ok=True)
    n_edges_local = g.num_edges()
    dgl.save_graphs(str(pdir / "graph.dgl"), [g])
    del g

    orig = np.load(work / "new2old.npy", mmap_mode="r")[lo:hi].copy()
    split = graph.split[orig]
    node = {
        "feat": torch.from_numpy(graph.read_feat_rows(orig)),
        "label": torch.from_numpy(graph.label[orig].astype(np.int64)),
        "train_mask": torch.from_numpy(split == 0),
        "val_mask": torch.from_numpy(split == 1),
        "test_mask": torch.from_numpy(split == 2),
        "in_degree": torch.from_numpy(graph.in_degree[orig].astype(np.int64)),
    }
    assert tuple(node) == NODE_KEYS  # the keys load_local expects, in partition.py's order
    save_tensors(str(pdir / "node_feat.dgl"), {f"_N/{k}": v for k, v in node.items()})
    save_tensors(str(pdir / "edge_feat.dgl"), {})
    return {
        "part": p,
        "inner_nodes": n_inner,
        "halo_nodes": int(outside_src.shape[0]),
        "local_nodes": int(n_local),
        "local_edges": int(n_edges_local),
        "inner_edges": int(n_in_edges),
        "seconds": time.perf_counter() - t0,
    }


def finish(
    work_dir: str | Path,
    out_dir: str | Path,
    parts: list[dict],
    *,
    fingerprint: dict | None = None,
    keep_work: bool = False,
) -> dict:
    """Write DGL's ``<graph>.json`` and the project's stats, copy the id maps, drop the buckets.

    Args:
        work_dir: the bucket folder.
        out_dir: the partition folder.
        parts: the :func:`write_part` results, one per part.
        fingerprint: anything that identifies the input (stored in the stats).
        keep_work: keep ``work_dir`` (default: delete it).

    Returns:
        The statistics written to ``grappa_partition.json`` (same keys as
        :func:`dgl_grappa.partition.store.partition`, plus ``writer`` and per-part details).

    Example:
        >>> stats = finish("runs/x/_work", "runs/x", parts)            # doctest: +SKIP
    """
    work, out = Path(work_dir), Path(out_dir)
    st = WorkState.load(work)
    parts = sorted(parts, key=lambda r: r["part"])
    if [r["part"] for r in parts] != list(range(st.num_parts)):
        raise ConfigError(f"finish needs all {st.num_parts} parts, got {[r['part'] for r in parts]}")
    nb, eb = st.node_bounds, st.edge_bounds
    meta = {
        "graph_name": GRAPH_NAME,
        "num_nodes": st.num_nodes,
        "num_edges": st.num_edges,
        "part_method": st.method,
        "num_parts": st.num_parts,
        "halo_hops": 1,
        "node_map": {"_N": [[nb[q], nb[q + 1]] for q in range(st.num_parts)]},
        "edge_map": {"_N:_E:_N": [[eb[q], eb[q + 1]] for q in range(st.num_parts)]},
        "ntypes": {"_N": 0},
        "etypes": {"_N:_E:_N": 0},
    }
    for q in range(st.num_parts):
        meta[f"part-{q}"] = {
            "node_feats": f"part{q}/node_feat.dgl",
            "edge_feats": f"part{q}/edge_feat.dgl",
            "part_graph": f"part{q}/graph.dgl",
        }
    # Same formatting as DGL's _dump_part_config.
    part_config_path(out).write_text(json.dumps(meta, indent=4, sort_keys=False))
    # assignment: original id -> part; orig_ids: new (shuffled) id -> original id (as partition.py).
    shutil.copyfile(work / "assignment.npy", out / "assignment.npy")
    shutil.copyfile(work / "new2old.npy", out / "orig_ids.npy")
    inner = np.asarray([r["inner_nodes"] for r in parts])
    halo = np.asarray([r["halo_nodes"] for r in parts])
    stats = {
        "edge_cut": st.cut_edges / st.num_edges if st.num_edges else 0.0,
        "inner_nodes": inner.tolist(),
        "halo_nodes": halo.tolist(),
        "halo_share": [float(h) / max(int(i), 1) for h, i in zip(halo, inner)],
        "num_parts": st.num_parts,
        "method": st.method,
        "seconds": st.seconds + sum(r["seconds"] for r in parts),
        "num_nodes": st.num_nodes,
        "num_edges": st.num_edges,
        "part_config": str(part_config_path(out)),
        "fingerprint": fingerprint or {},
        "writer": "bigpart",
        "parts": parts,
        "bucket_seconds": st.seconds,
    }
    # First-hop aggregates, part by part from the written files (bounded memory, as for any folder).
    t0 = time.perf_counter()
    prep = prepare(part_config_path(out))
    stats["prepare_seconds"] = time.perf_counter() - t0
    stats["aggregate_remote_pairs"] = [p["remote_pairs"] for p in prep["parts"]]
    (out / STATS_FILE).write_text(json.dumps(stats, indent=1))
    if not keep_work:
        shutil.rmtree(work, ignore_errors=True)
    return stats


def write_partitions(
    graph: BigGraph,
    assignment: np.ndarray,
    num_parts: int,
    out_dir: str | Path,
    *,
    method: str = "custom",
    order: np.ndarray | None = None,
    work_dir: str | Path | None = None,
    fingerprint: dict | None = None,
) -> dict:
    """Bucket, write every part, and finish: the whole writer in one call.

    Args:
        graph: the on-disk graph.
        assignment: int [N] part of every original node.
        num_parts: P.
        out_dir: the partition folder (DGL's layout; the json is ``grappa.json``).
        method: recorded as DGL's ``part_method`` and in the stats.
        order: optional new-to-original node permutation (see :func:`bucket_edges`).
        work_dir: bucket folder (default ``out_dir/_work``; deleted at the end).
        fingerprint: stored in the stats.

    Returns:
        The statistics of :func:`finish`.

    Example:
        >>> g = BigGraph("runs/scale/graph")                             # doctest: +SKIP
        >>> stats = write_partitions(g, assign(g, "ldg", 4), 4, "runs/scale/parts4", method="ldg")  # doctest: +SKIP
        >>> lp = dgl_grappa.method.local_part.load_local(stats["part_config"], 0)  # doctest: +SKIP
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(work_dir) if work_dir is not None else out / "_work"
    bucket_edges(graph, assignment, num_parts, work, order=order, method=method)
    parts = [write_part(graph, work, q, out) for q in range(num_parts)]
    return finish(work, out, parts, fingerprint=fingerprint)


def folder_bytes(path: str | Path) -> int:
    """Total size of the files under ``path`` (bytes)."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


__all__ = [
    "ASSIGN_METHODS",
    "WorkState",
    "assign",
    "assign_contiguous",
    "assign_ldg",
    "assign_random",
    "bucket_edges",
    "build_csr",
    "finish",
    "folder_bytes",
    "write_part",
    "write_partitions",
]
