"""Partitioning a heterogeneous graph (several node and edge types) into DGL's layout.

``dgl.distributed.partition_graph`` handles heterographs itself: it cuts the homogeneous view
(every node type's nodes one after the other, in ``g.ntypes`` order), keeps the 1-hop halo of
every part, and writes one homogeneous graph per part with the node and edge type of every
node and edge (``ndata/edata[dgl.NTYPE / dgl.ETYPE]``), node data per type (``<ntype>/<key>``)
and a json whose ``node_map`` gives, per node type, each part's range of global (shuffled,
homogeneous) ids. :func:`partition_hetero` calls it, as :func:`~.store.partition` does for a
homogeneous graph, and adds the same statistics (edge cut and halo per part over the
homogeneous view, train nodes of the target type per part) and, per node type, the original
id of every shuffled per-type id (``orig_ids.<ntype>.npy``, for putting a type's rows back in
the graph's order). ``ldg`` runs on the homogeneous view and is handed to DGL as METIS's
answer (:func:`~.assign.forced_assignment`).

**Per-relation first-hop aggregates.** For every relation r = (s, name, d) whose source type s
has features, every node v of type d gets the mean of its r-in-neighbours' features over the
whole graph (0 without one), the input of RGCN's first layer for that relation
(``train.first_hop: exact``). They are computed here from the whole graph (which this function
holds anyway) and written per part beside DGL's files, ``part<i>/grappa/agg.<s:name:d>.npy``
(float32, the part's inner nodes of type d in node-data order; :func:`relation_agg_path`).
Relations from a featureless type have none: a mean of learnable rows would go stale.

Example:
    >>> stats = partition_hetero(g, PartitionConfig(num_parts=2), "runs/h/partitions/0")   # doctest: +SKIP
    >>> stats["hetero"]["target"]                                                           # doctest: +SKIP
    'paper'
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import dgl
import numpy as np
import torch
from torch import Tensor

from ..config import ConfigError, PartitionConfig
from ..data.common import target_type
from .assign import METHODS, balance_stats, cut, edge_cut_stats
from .layout import LAYOUT_VERSION, part_config_path, part_paths, reorder

log = logging.getLogger("dgl_grappa")

#: Node data a heterogeneous partition keeps, per type (the target type's labels and masks, features where
#: a type has them).
HETERO_NODE_KEYS = ("feat", "label", "train_mask", "val_mask", "test_mask")


def orig_ids_path(out_dir: str | Path, ntype: str) -> Path:
    """``orig_ids.<ntype>.npy`` of a heterogeneous partition folder: the original per-type id of every
    shuffled per-type id."""
    return Path(out_dir) / f"orig_ids.{ntype}.npy"


def to_original_order_typed(rows: Tensor, part_config: str | Path, ntype: str) -> Tensor:
    """Rows of node type ``ntype`` indexed by its shuffled per-type ids, reordered to the graph's own ids.

    Raises:
        ConfigError: the folder lacks ``orig_ids.<ntype>.npy`` (not written by ``python -m dgl_grappa partition``).
    """
    return reorder(rows, orig_ids_path(Path(part_config).parent, ntype))


def agg_key(etype: tuple) -> str:
    """The name of a relation's aggregate table: ``src:name:dst``."""
    return ":".join(etype)


def relation_agg_path(part_config: str | Path, part_id: int, etype: tuple) -> Path:
    """Part ``part_id``'s first-hop aggregates of relation ``etype`` (``part<i>/grappa/agg.<s:name:d>.npy``)."""
    return part_paths(part_config, part_id)[1].parent / "grappa" / f"agg.{agg_key(etype)}.npy"


def relation_means(g: dgl.DGLGraph, etype: tuple, x: Tensor) -> Tensor:
    """Per node of ``etype``'s destination type, the mean of its in-neighbours' rows ``x`` over that relation (0 for
    a node without one): what a ``GraphConv(norm="right")`` of the relation averages over the whole graph.

    Example:
        >>> g = dgl.heterograph({("a", "r", "b"): ([0, 1], [0, 0])})
        >>> relation_means(g, ("a", "r", "b"), torch.tensor([[1.0], [3.0]])).tolist()
        [[2.0]]
    """
    src, dst = g.edges(etype=etype)
    n = g.num_nodes(etype[2])
    deg = torch.bincount(dst, minlength=n).to(x.dtype).clamp(min=1)
    return torch.zeros((n, x.shape[1]), dtype=x.dtype).index_add_(0, dst, x[src]) / deg.unsqueeze(1)


def homogeneous_edges(g: dgl.DGLGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, type offsets) of the homogeneous view DGL cuts: node ids of every type after the previous
    types' (``g.ntypes`` order), as ``dgl.to_homogeneous`` numbers them."""
    offsets = np.cumsum([0] + [g.num_nodes(t) for t in g.ntypes])
    idx = {t: i for i, t in enumerate(g.ntypes)}
    src, dst = [], []
    for s_t, e, d_t in g.canonical_etypes:
        s, d = g.edges(etype=(s_t, e, d_t))
        src.append(s.numpy() + offsets[idx[s_t]])
        dst.append(d.numpy() + offsets[idx[d_t]])
    cat = (lambda xs: np.concatenate(xs).astype(np.int64)) if src else (lambda xs: np.zeros(0, dtype=np.int64))
    return cat(src), cat(dst), offsets


def partition_hetero(
    g: dgl.DGLGraph, cfg: PartitionConfig, out_dir: str | Path, fingerprint: dict | None = None, target: str = ""
) -> dict:
    """Partition heterograph ``g`` with ``dgl.distributed.partition_graph`` into ``out_dir`` (DGL's layout).

    Args:
        g: the heterograph: ``feat`` on some node types, ``label`` and the masks on the target type.
        cfg: partition options (num_parts, method, balance_*, seed).
        out_dir: target folder (created).
        fingerprint: what identifies the input (stored, so that a later run can reuse the folder).
        target: the labelled node type (``data.target``; empty: the one type with labels).

    Returns:
        The statistics of :func:`~.store.partition` (over the homogeneous view) and ``hetero``: node types,
        relations (``src:name:dst``), the target type and the types with features. :func:`~.store.partition`
        (which calls this for a heterograph) adds the folder's file manifest and writes them beside DGL's files.
    """
    if cfg.method not in METHODS:
        raise ConfigError(f"partition.method={cfg.method!r} is not allowed; use one of {', '.join(METHODS)}")
    target = target_type(g, target)
    if target is None or "train_mask" not in g.nodes[target].data:
        raise ConfigError("the heterogeneous graph has no node type with labels and a train_mask; set --data.target")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    g = g.clone()
    for t in g.ntypes:
        for k in list(g.nodes[t].data.keys()):
            if k not in HETERO_NODE_KEYS:
                del g.nodes[t].data[k]
    for e in g.canonical_etypes:
        for k in list(g.edges[e].data.keys()):
            del g.edges[e].data[k]
    n_total = g.num_nodes()
    src, dst, offsets = homogeneous_edges(g)
    ti = g.ntypes.index(target)
    train = np.zeros(n_total, dtype=bool)
    train[offsets[ti] : offsets[ti + 1]] = g.nodes[target].data["train_mask"].numpy().astype(bool)
    balance = {target: g.nodes[target].data["train_mask"].to(torch.int64)} if cfg.balance_train else None
    t0 = time.perf_counter()
    # partition_graph prints a line per part and type; the statistics below say it once
    orig_nids, forced_parts, assign_s = cut(
        g, cfg, out, src=src, dst=dst, train_mask=train, balance_ntypes=balance, quiet=True
    )
    seconds = time.perf_counter() - t0
    meta = json.loads(part_config_path(out).read_text())
    if not isinstance(orig_nids, dict):  # DGL returns a tensor when the graph has one node type
        orig_nids = {g.ntypes[0]: orig_nids}
    # original homogeneous id -> part: type by type, part p holds the next (hi - lo) shuffled per-type ids
    assignment = np.empty(n_total, dtype=np.int64)
    for i, t in enumerate(g.ntypes):
        orig = orig_nids[t].numpy()
        at = 0
        for p, (lo, hi) in enumerate(meta["node_map"][t]):
            assignment[offsets[i] + orig[at : at + hi - lo]] = p
            at += hi - lo
        np.save(orig_ids_path(out, t), orig)
    if cfg.method == "ldg" and cfg.num_parts > 1 and not np.array_equal(assignment, forced_parts):
        raise RuntimeError(
            f"DGL wrote a different assignment into {out} than LDG computed "
            "(this DGL version partitions differently; report it)"
        )
    np.save(out / "assignment.npy", assignment)
    # per-relation first-hop aggregates of the relations from a featured type, part by part (inner nodes of the
    # destination type in node-data order: the part's per-type ids, one after the other)
    aggregated = [e for e in g.canonical_etypes if "feat" in g.nodes[e[0]].data]
    for e in aggregated:
        means = relation_means(g, e, g.nodes[e[0]].data["feat"].float())
        orig, at = orig_nids[e[2]], 0
        for p, (lo, hi) in enumerate(meta["node_map"][e[2]]):
            f = relation_agg_path(part_config_path(out), p, e)
            f.parent.mkdir(parents=True, exist_ok=True)
            np.save(f, means[orig[at : at + hi - lo]].numpy())
            at += hi - lo
    stats = edge_cut_stats(src, dst, assignment, cfg.num_parts)
    stats.update(balance_stats(assignment, cfg.num_parts, train))
    stats.update(
        {
            "num_parts": cfg.num_parts,
            "method": cfg.method,
            "seed": cfg.seed,
            "seconds": seconds,
            "assign_seconds": assign_s,
            "layout": LAYOUT_VERSION,
            "num_nodes": n_total,
            "num_edges": g.num_edges(),
            "train_nodes": np.bincount(assignment[train], minlength=cfg.num_parts).tolist(),
            "part_config": str(part_config_path(out)),
            "fingerprint": fingerprint or {},
            "hetero": {
                "ntypes": list(g.ntypes),
                "etypes": [":".join(e) for e in g.canonical_etypes],
                "target": target,
                "featured": [t for t in g.ntypes if "feat" in g.nodes[t].data],
                "num_nodes": {t: g.num_nodes(t) for t in g.ntypes},
                "aggregates": [agg_key(e) for e in aggregated],
                "inner_nodes": {t: [hi - lo for lo, hi in meta["node_map"][t]] for t in g.ntypes},
            },
            "featureless": False,
            "prepare_seconds": 0.0,
        }
    )
    return stats


__all__ = [
    "HETERO_NODE_KEYS",
    "agg_key",
    "homogeneous_edges",
    "orig_ids_path",
    "partition_hetero",
    "relation_agg_path",
    "relation_means",
    "to_original_order_typed",
]
