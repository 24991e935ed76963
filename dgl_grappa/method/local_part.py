"""A worker's local view of its part: the local graph, its features, aggregates and kept halo.

``load_local`` gives worker r its part: the local graph (inner nodes, plus the 1-hop halo
with ``halo="keep"``), local features (and first-hop aggregates), labels, train ids and
the global in-degrees. Halo rows are read once here, from the owners' partition files,
never during a training step, and counted as one-time bytes. ``load_local_lean`` gives
the same view from the part's files with a fraction of the memory (``partition.prebuilt``).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import dgl
import torch
from torch import Tensor

from ..config import ConfigError
from ..partition.layout import AGG_KEY, NODE_KEYS, node_map, part_edges, part_paths, read_part_structure

log = logging.getLogger("dgl_grappa")


def local_graph(pg: dgl.DGLGraph, inner: Tensor, halo: str = "drop") -> tuple[dgl.DGLGraph, int, Tensor, Tensor]:
    """The graph a worker trains on, from its part of a DGL partitioning (every runtime uses this).

    Args:
        pg: the part's graph as DGL stores it: inner nodes first, then the 1-hop halo
            (``load_partition``'s graph, or a DistGraph's ``local_partition``).
        inner: bool mask of the inner (owned) nodes of ``pg``.
        halo: "drop" (inner nodes and the edges among them only) or "keep" (halo nodes and
            every edge of the part stay: all in-edges of the inner nodes, and the edges from
            inner nodes into halo nodes that DGL's 1-hop layout stores, so a halo node's
            local neighbourhood is its inner neighbours; no halo node's own halo).

    Returns:
        (graph, number of inner nodes, src, dst): the local graph (COO for full-graph
        edge ops, CSC for neighbour sampling), its node count's inner share, and its edges.

    Raises:
        RuntimeError: the inner nodes are not first (not DGL's layout).
    """
    if halo not in ("drop", "keep"):
        raise ConfigError(f"train.halo={halo!r} is not allowed; use drop or keep")
    inner = inner.bool()
    num_inner = int(inner.sum())
    # DGL puts inner nodes first; local ids of the inner nodes index their node data.
    if not bool(inner[:num_inner].all()):
        raise RuntimeError("unexpected partition layout: inner nodes are not first")
    src, dst = part_edges(pg)
    n_local = pg.num_nodes()
    if halo == "drop":
        keep = (src < num_inner) & (dst < num_inner)
        src, dst = src[keep], dst[keep]
        n_local = num_inner
    # CSC for neighbour sampling; COO for full-graph edge ops (GAT's SDDMM needs COO or CSR).
    graph = dgl.graph((src, dst), num_nodes=n_local).formats(["coo", "csc"])
    return graph, num_inner, src, dst


@dataclass
class LocalPartition:
    """What a worker holds of its part; local ids index every tensor.

    Attributes:
        part_id, num_parts: which part of how many.
        graph: local graph (inner nodes first, then halo nodes when kept), CSC format.
        num_inner: number of inner (owned) nodes.
        global_ids: global (shuffled) id of every local node.
        owner: owning part of every local node.
        feat: features of every local node (halo rows read from the owners at load time).
        label: label of every inner node.
        train_ids: local ids of the inner training nodes.
        in_degree: full-graph in-degree of every local node.
        src, dst: the local graph's edges.
        halo_bytes_loaded: feature bytes read from other parts' files at load time.
        load_seconds: time taken by ``load_local``.
        agg: first-hop aggregate of every local node (``first_hop="exact"``), else None.
        one_time_bytes: bytes a worker moves once for this partitioning (see :func:`load_local`).
        rows_held: feature-width rows this worker holds (features, plus aggregates with exact).
    """

    part_id: int
    num_parts: int
    graph: dgl.DGLGraph
    num_inner: int
    global_ids: Tensor
    owner: Tensor
    feat: Tensor
    label: Tensor
    train_ids: Tensor
    in_degree: Tensor
    src: Tensor
    dst: Tensor
    halo_bytes_loaded: int
    load_seconds: float
    agg: Tensor | None = None
    one_time_bytes: int = 0
    rows_held: int = 0


def _with_halo_rows(part_config, halo_gids: Tensor, halo_owner: Tensor, first_ids: list[int], feat: Tensor,
                    in_degree: Tensor, agg: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None, int, int]:
    """Append the halo nodes' rows (features, in-degrees, aggregates when ``agg`` is given),
    read once from their owners' partition files, to the inner rows.

    Args:
        halo_gids, halo_owner: global id and owning part of every halo node, in local order.
        first_ids: the first global id of every part (DGL's layout: contiguous per part).

    Returns:
        (feat, in_degree, agg) with the halo rows appended, the feature bytes read, and the
        one-time bytes (features, 8-byte in-degree and aggregate of every halo row).
    """
    n_halo, width = halo_gids.numel(), feat.shape[1]
    halo_feat = torch.empty((n_halo, width), dtype=feat.dtype)
    halo_deg = torch.empty(n_halo, dtype=in_degree.dtype)
    halo_agg = torch.empty((n_halo, width), dtype=feat.dtype) if agg is not None else None
    for p in torch.unique(halo_owner).tolist():
        rows = (halo_owner == p).nonzero(as_tuple=True)[0]
        other, _ = dgl.distributed.load_partition_feats(str(part_config), p, load_edges=False)
        idx = halo_gids[rows] - first_ids[p]
        halo_feat[rows] = other["_N/feat"][idx]
        halo_deg[rows] = other["_N/in_degree"][idx]
        if halo_agg is not None:
            halo_agg[rows] = other[f"_N/{AGG_KEY}"][idx]
        del other
    row_bytes = width * feat.element_size()
    one_time = n_halo * (row_bytes * (2 if agg is not None else 1) + 8)
    return (torch.cat([feat, halo_feat]), torch.cat([in_degree, halo_deg]),
            torch.cat([agg, halo_agg]) if agg is not None else None, halo_feat.numel() * halo_feat.element_size(),
            one_time)


def load_local(part_config: str | Path, part_id: int, halo: str = "drop", first_hop: str = "sampled") -> LocalPartition:
    """Load worker ``part_id``'s local view of a partitioning (no servers, no network).

    Args:
        part_config: the partitioning's json.
        part_id: which part.
        halo: "drop" (inner nodes only) or "keep" (1-hop halo nodes kept, their rows read
            once here from the owners' partition files).
        first_hop: "exact" also loads the first-hop aggregates (node data ``agg``: inner rows
            from this part, halo rows from their owners with ``halo=keep``); "sampled" does not.

    Returns:
        A :class:`LocalPartition`. Its ``one_time_bytes`` is what a worker of a real cluster
        moves once per partitioning: with ``halo=keep`` every halo row's features, in-degree
        (8 bytes) and, with ``exact``, aggregate; with ``halo=drop`` and ``exact`` the feature
        rows (+ 8 bytes) of the outside in-neighbours from which the owner computes its inner
        nodes' aggregates (here the partitioner has done it: it holds the whole graph).

    Raises:
        ConfigError: node data missing (``agg`` for ``first_hop=exact``: re-create the partitioning).
    """
    if first_hop not in ("exact", "sampled"):
        raise ConfigError(f"train.first_hop={first_hop!r} is not allowed; use exact or sampled")
    t0 = time.perf_counter()
    pg, nfeat, _, gpb, _, _, _ = dgl.distributed.load_partition(str(part_config), part_id)
    node = {k.split("/", 1)[-1]: v for k, v in nfeat.items()}
    missing = [k for k in NODE_KEYS if k not in node]
    if missing:
        raise ConfigError(f"partition {part_config} lacks node data {missing}; re-create it with "
                          "`python -m dgl_grappa partition`")
    exact = first_hop == "exact"
    if exact and AGG_KEY not in node:
        raise ConfigError(f"train.first_hop=exact needs node data '{AGG_KEY}' (first-hop aggregates), which partition "
                          f"{part_config} lacks (written by an older version or another writer, e.g. bigpart); "
                          "re-create it with `python -m dgl_grappa partition`, or use --train.first_hop=sampled")
    graph, num_inner, src, dst = local_graph(pg, pg.ndata["inner_node"], halo)
    gids = pg.ndata[dgl.NID]
    # DGL writes no part_id for a 1-part partitioning: every node is then owned by part 0.
    owner = pg.ndata["part_id"].to(torch.int64) if "part_id" in pg.ndata else torch.full_like(gids, part_id)
    feat, in_degree = node["feat"], node["in_degree"]
    agg = node[AGG_KEY] if exact else None
    halo_bytes = 0
    one_time = 0
    n_local = graph.num_nodes()
    row_bytes = feat.shape[1] * feat.element_size()
    if halo == "drop":
        gids, owner = gids[:num_inner], owner[:num_inner]
        if exact:
            psrc, pdst = part_edges(pg)
            n_in_halo = int(torch.unique(psrc[(psrc >= num_inner) & (pdst < num_inner)]).numel())
            one_time = n_in_halo * (row_bytes + 8)
    else:
        feat, in_degree, agg, halo_bytes, one_time = _with_halo_rows(
            part_config, gids[num_inner:], owner[num_inner:], [int(gpb.partid2nids(p)[0]) for p in
                                                                range(gpb.num_partitions())],
            feat, in_degree, agg)
    train_ids = node["train_mask"].bool().nonzero(as_tuple=True)[0]
    return LocalPartition(
        part_id=part_id, num_parts=gpb.num_partitions(), graph=graph, num_inner=num_inner,
        global_ids=gids, owner=owner, feat=feat, label=node["label"].to(torch.int64),
        train_ids=train_ids, in_degree=in_degree, src=src, dst=dst, halo_bytes_loaded=halo_bytes,
        load_seconds=time.perf_counter() - t0, agg=agg, one_time_bytes=one_time,
        rows_held=n_local * (2 if exact else 1))


def load_local_lean(part_config: str | Path, part_id: int, halo: str = "drop",
                    first_hop: str = "sampled") -> LocalPartition:
    """A worker's part for training, with a fraction of :func:`load_local`'s memory (partition.prebuilt).

    The same local view (same nodes, edges, features, labels, train nodes, in-degrees), but
    the graph is an int32 CSC built straight from the part's files (:func:`read_part_structure`:
    the part's COO is freed before the features are read) instead of int64 COO + CSC after
    ``dgl.distributed.load_partition``; ids are int32 (so DGL draws other, equally distributed
    samples than with load_local's int64 graph); halo features are read only with
    ``halo="keep"``. Per local edge about 8 bytes instead of ~62.

    Args:
        part_config: the partitioning's json.
        part_id: which part.
        halo: "drop" or "keep" (as :func:`load_local`).
        first_hop: "exact" also loads the first-hop aggregates (as :func:`load_local`; bigpart
            writes none, so its partitions need "sampled").
    """
    if first_hop not in ("exact", "sampled"):
        raise ConfigError(f"train.first_hop={first_hop!r} is not allowed; use exact or sampled")
    exact = first_hop == "exact"
    t0 = time.perf_counter()
    st = read_part_structure(part_config, part_id, halo)
    n, num_inner = st["num_nodes"], st["num_inner"]
    indptr, indices = st["indptr"], st["indices"]
    num_edges = int(indices.numel())
    if num_edges >= 2 ** 31 or n >= 2 ** 31:
        raise ValueError(f"part {part_id} has {num_edges} edges / {n} nodes: too many for int32 ids")
    eids = torch.arange(num_edges, dtype=torch.int32)
    graph = dgl.graph(("csc", (indptr.to(torch.int32), indices, eids)), num_nodes=n, idtype=torch.int32)
    # The edge list of the CSC (coverage needs it once), int32: destination of every position.
    dst = torch.repeat_interleave(torch.arange(n, dtype=torch.int32), indptr[1:] - indptr[:-1])
    meta, _, feat_file = part_paths(part_config, part_id)
    node = {k.split("/", 1)[-1]: v for k, v in dgl.data.utils.load_tensors(str(feat_file)).items()}
    missing = [k for k in NODE_KEYS if k not in node]
    if missing:
        raise ConfigError(f"partition {part_config} lacks node data {missing}; re-create it with "
                          "`python -m dgl_grappa partition`")
    if exact and AGG_KEY not in node:
        raise ConfigError(f"train.first_hop=exact needs node data '{AGG_KEY}' (first-hop aggregates), which partition "
                          f"{part_config} lacks (bigpart writes none); use --train.first_hop=sampled")
    feat, in_degree = node["feat"], node["in_degree"]
    agg = node[AGG_KEY] if exact else None
    gids, owner = st["global_ids"][:n].clone(), st["owner"][:n].clone()
    # With halo=drop and exact, load_local also counts the outside in-neighbours' rows the
    # owner needs for the aggregates; the lean reader never keeps those edges, so 0 here.
    halo_bytes = one_time = 0
    if halo == "keep" and n > num_inner:
        feat, in_degree, agg, halo_bytes, one_time = _with_halo_rows(
            part_config, gids[num_inner:], owner[num_inner:], [lo for lo, _ in node_map(meta)], feat, in_degree, agg)
    train_ids = node["train_mask"].bool().nonzero(as_tuple=True)[0].to(torch.int32)
    return LocalPartition(
        part_id=part_id, num_parts=st["num_parts"], graph=graph, num_inner=num_inner, global_ids=gids, owner=owner,
        feat=feat, label=node["label"].to(torch.int64), train_ids=train_ids, in_degree=in_degree, src=indices,
        dst=dst, halo_bytes_loaded=halo_bytes, load_seconds=time.perf_counter() - t0, agg=agg,
        one_time_bytes=one_time, rows_held=n * (2 if exact else 1))
