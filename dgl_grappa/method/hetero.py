"""Heterogeneous graphs, the Grappa way: a worker's local heterograph, its inputs and batches.

DGL's layout stores a part of a heterogeneous graph as one homogeneous graph (inner nodes
first, then the 1-hop halo) with the type of every node and edge. :func:`load_local_hetero`
turns worker r's part into its **local heterograph**: per node type, the part's inner nodes
(local ids ``0 .. num_inner[t] - 1``) and, with ``train.halo: keep``, the halo nodes of that type
after them; per relation, the part's edges of that relation (every in-edge of an inner node, and
the edges from inner nodes into the halo that DGL's 1-hop layout stores; with
``train.halo_in_edges: featureless`` also every kept halo node's in-edges over the relations from
featureless types, read once from their owners' parts: :mod:`.hetero_halo`). Nothing is read during
training:

* **features** of the types that have them: the inner rows from the part's own file, the kept
  halo's rows read once from their owners' files (one-time bytes, as the homogeneous
  :func:`~.local_part.load_local`);
* **learnable rows** of the featureless types (``model.embed``): one
  :class:`~.embedding.LocalEmbedding` per type (:class:`HeteroEmbedding`): the own nodes' rows,
  trained here by a local sparse optimizer, and the halo's rows, starting as their owners' initial
  rows (a pure function of the seed, the type and the node's id, computed here). With
  ``model.embed_halo_sync`` k > 0 the halo's copies are trained here too and every k epochs
  averaged with their owners' rows (:class:`~.embedding.HaloSync`: the only bytes of these rows on
  the network); with 0 they stay frozen and no byte moves;
* **labels and training seeds** of the target type (``data.target``);
* with ``train.first_hop: exact``, **per-relation first-hop aggregates**: for every relation from a
  featured type, every local node's mean of its in-neighbours' features over that relation in the
  whole graph (written by :func:`~dgl_grappa.partition.hetero.partition_hetero`; the halo's rows
  read once from their owners' files), so that RGCN's first layer is exact for those relations and
  only the relations from featureless types are sampled in the first block.

:class:`TargetSeeds` samples inside the local heterograph with DGL's ``NeighborSampler``
(``train.fanouts``: per layer, for every relation), seeded with the worker's own training nodes
of the target type (the heterogeneous kind's data side, :class:`dgl_grappa.kinds.hetero.HeteroRuntime`,
takes the same number of steps on every worker); the model is :class:`~.rgcn.RGCN`.

Example:
    >>> lp = load_local_hetero("runs/h/partitions/0/grappa.json", 0, halo="keep")   # doctest: +SKIP
    >>> lp.num_inner_by_type, lp.graph.canonical_etypes                              # doctest: +SKIP
"""

from __future__ import annotations

import copy
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import dgl
import numpy as np
import torch
from torch import Tensor, nn

from ..config import ConfigError
from ..partition.hetero import relation_agg_path, to_original_order_typed
from ..partition.layout import part_edges, part_paths, read_node_tensors
from .embedding import HaloSync, LearnableRows, LocalEmbedding, gather_rows
from .hetero_halo import complete_halo_in_edges, per_type_ids
from .local_part import Keep, budget_error, check_modes, precision_ladder, reached_nodes
from .storage import NodeTable, row_bytes

__all__ = [
    "HeteroEmbedding",
    "HeteroFeatures",
    "HeteroLocalPartition",
    "TargetSeeds",
    "canonical_etypes",
    "load_local_hetero",
    "local_heterograph",
    "type_seed",
]


def type_seed(seed: int, ntype: str) -> int:
    """The seed of node type ``ntype``'s initial rows (``train.seed`` mixed with the type's name), so that two
    types do not start from the same rows; both systems use it.

    Example:
        >>> type_seed(0, "author") != type_seed(0, "field")
        True
    """
    return (int(seed) ^ zlib.crc32(ntype.encode())) & 0xFFFFFFFF


def canonical_etypes(meta: dict) -> list[tuple]:
    """The relations of a partition json, in the order of their ids (``edata[dgl.ETYPE]``)."""
    et = meta.get("etypes") or {}
    return [tuple(k.split(":")) for k, _ in sorted(et.items(), key=lambda kv: kv[1])]


def ntypes_of(meta: dict) -> list[str]:
    """The node types of a partition json, in the order of their ids (``ndata[dgl.NTYPE]``)."""
    return [k for k, _ in sorted((meta.get("ntypes") or {}).items(), key=lambda kv: kv[1])]


@dataclass
class HeteroLocalPartition:
    """What a worker holds of its part of a heterogeneous graph; per-type local ids index every table.

    Attributes:
        part_id, num_parts: which part of how many.
        graph: the local heterograph (per type: inner nodes first, then the kept halo).
        target: the labelled node type trained on.
        ntypes, etypes: its node types and (canonical) relations.
        num_inner_by_type: inner nodes of every type.
        global_ids: per type, the shuffled per-type id of every local node (a ``DistGraph``'s id space).
        owner: per type, the owning part of every local node.
        feat: per featured type, the rows of every local node (a :class:`~.storage.NodeTable` in the chosen
            precision, rows back in fp32; halo rows read once at load).
        label: label of every inner node of the target type.
        train_ids: local ids (of the target type) of the inner training nodes.
        one_time_bytes: the kept halo's feature (and aggregate) rows, read once from their owners.
        memory: bytes per table (``feat_inner``, ``feat_halo``, ``agg_inner``, ``agg_halo``, ``other``) and ``by_type``.
        agg: with ``first_hop="exact"``, per relation from a featured type, the first-hop aggregate of every local
            node of its destination type (the whole graph's mean over the relation's in-neighbours; a
            :class:`~.storage.NodeTable` in the same precision as ``feat``).
        part_inner_by_type: the part's inner nodes of every type, kept or not (the budget's unit counts them).
        keep: what the loader chose (precision, nodes and halo reached and kept, the budget in bytes).
    """

    part_id: int
    num_parts: int
    graph: dgl.DGLGraph
    target: str
    ntypes: list[str]
    etypes: list[tuple]
    num_inner_by_type: dict[str, int]
    global_ids: dict[str, Tensor]
    owner: dict[str, Tensor]
    feat: dict[str, NodeTable]
    label: Tensor
    train_ids: Tensor
    load_seconds: float
    halo_bytes_loaded: int = 0
    one_time_bytes: int = 0
    memory: dict = field(default_factory=dict)
    keep: dict = field(default_factory=dict)
    agg: dict = field(default_factory=dict)
    part_inner_by_type: dict = field(default_factory=dict)

    @property
    def num_inner(self) -> int:
        """Inner nodes of every type together."""
        return sum(self.num_inner_by_type.values())

    @property
    def part_inner(self) -> int:
        """Inner nodes of the part, kept or not."""
        return sum(self.part_inner_by_type.values()) if self.part_inner_by_type else self.num_inner

    @property
    def bare_types(self) -> list[str]:
        """The node types without features (their input rows are learnable: ``model.embed``)."""
        return [t for t in self.ntypes if t not in self.feat]

    def input_dims(self, embed_dim: int) -> dict[str, int]:
        """The input width of every node type: its features', or ``embed_dim`` for a featureless type."""
        return {t: int(self.feat[t].shape[1]) if t in self.feat else int(embed_dim) for t in self.ntypes}

    @property
    def rows_held(self) -> int:
        """Feature and aggregate rows held (every type and relation, inner and halo)."""
        return sum(int(x.shape[0]) for x in [*self.feat.values(), *self.agg.values()])

    @property
    def resident_bytes(self) -> int:
        """Bytes of the feature-width tables, in their precision: every featured type's rows and every relation's
        aggregates (the tables the budget holds; the trainer adds the learnable rows)."""
        return sum(int(x.nbytes) for x in [*self.feat.values(), *self.agg.values()])

    @property
    def resident_other_bytes(self) -> int:
        """Bytes of the rest: labels, ids, owners, the graph's arrays."""
        return int(self.memory.get("other", 0))

    @property
    def own_fp32_bytes(self) -> int:
        """The part's own feature rows in fp32, kept or not (the unit of the budget; the trainer adds the learnable
        rows for the memory ratio)."""
        inner = self.part_inner_by_type or self.num_inner_by_type
        return sum(inner[t] * int(x.shape[1]) * 4 for t, x in self.feat.items())


def _node_data(feat_file: Path) -> dict:
    return read_node_tensors(feat_file)  # a truncated or corrupt file: one line, never zeros


def load_local_hetero(
    part_config: str | Path,
    part_id: int,
    halo: str = "keep",
    target: str = "",
    first_hop: str = "sampled",
    *,
    keep: Keep | None = None,
    halo_in_edges: str = "part",
) -> HeteroLocalPartition:
    """Load worker ``part_id``'s local heterograph of a partitioning (no servers, no network).

    What it keeps follows the homogeneous loader's rule (:func:`~.local_part.load_local`), per worker:

    * **reach**: the nodes the training seeds' sampled trees can contain: ``keep.reach`` in-edge hops over every
      relation and, with ``first_hop="exact"``, one hop more over the relations from featureless types (the first
      block samples only those); every own node of a featureless type stays (its learnable row is trained here);
    * **precision**: the featured types' tables (own rows, the per-relation aggregates, the halo's rows of both)
      in the most exact precision ``keep.storage`` allows that fits ``keep.budget`` x the part's own featured rows
      in fp32 (:func:`~.local_part.precision_ladder`);
    * **halo sample**: when even the last precision does not fit, a uniform random subset of the reached halo nodes
      that hold such rows, as many as fit (seeded by ``keep.seed`` and the part); halo nodes that hold none (of a
      featureless type without aggregates) stay.

    The featureless types' learnable rows are not in the budget (as with ``model.embed``: the trainer counts them).

    Args:
        part_config: the partitioning's json (``partition_hetero`` or DGL's ``partition_graph`` of a heterograph).
        part_id: which part.
        halo: "drop" (inner nodes of every type only) or "keep" (the 1-hop halo of every type too; the rows
            of the featured types read once here from the owners' files).
        target: the labelled node type; empty = the one type whose node data has ``train_mask``.
        first_hop: "exact" also loads the per-relation first-hop aggregates of the relations from featured types
            (``python -m dgl_grappa partition`` writes them); "sampled" does not.
        keep: reach, storage and budget (:class:`~.local_part.Keep`); default: every node, fp32.
        halo_in_edges: "part" (the edges the part stores) or "featureless": also every kept halo node's in-edges
            over the relations from featureless types, read once from its owner's part, their new source nodes
            joining the halo without feature or aggregate rows (:func:`~.hetero_halo.complete_halo_in_edges`).

    Returns:
        A :class:`HeteroLocalPartition`; its ``one_time_bytes`` are the kept halo's feature and aggregate rows (in
        their stored precision).

    Raises:
        ConfigError: the folder is not a heterogeneous partitioning, the target type has no labels, (exact) a
            relation's aggregates are missing, or the budget cannot hold the own reached rows even in int4.
    """
    check_modes(first_hop, halo)
    if halo_in_edges not in ("part", "featureless"):
        raise ConfigError(f"train.halo_in_edges={halo_in_edges!r} is not allowed; use part or featureless")
    keep = keep or Keep()
    exact = first_hop == "exact"
    t0 = time.perf_counter()
    meta, graph_file, feat_file = part_paths(part_config, part_id)
    ntypes, etypes = ntypes_of(meta), canonical_etypes(meta)
    if not ntypes or not isinstance(meta.get("node_map"), dict):
        raise ConfigError(f"{part_config} is not a partitioning of a heterogeneous graph (no node types in its json)")
    pg = dgl.load_graphs(str(graph_file))[0][0]
    inner = pg.ndata["inner_node"].bool()
    n_inner_all = int(inner.sum())
    n_local = pg.num_nodes() if halo == "keep" else n_inner_all
    ntype_id = pg.ndata[dgl.NTYPE].to(torch.int64)[:n_local]
    gid = pg.ndata[dgl.NID].to(torch.int64)[:n_local]
    owner_all = (
        pg.ndata["part_id"].to(torch.int64)
        if "part_id" in pg.ndata
        else torch.full((pg.num_nodes(),), part_id, dtype=torch.int64)
    )[:n_local]
    node_map = meta["node_map"]
    type_gid = torch.empty_like(gid)
    for i, t in enumerate(ntypes):
        sel = ntype_id == i
        type_gid[sel] = per_type_ids(gid[sel], node_map[t])
    src, dst = part_edges(pg)
    etype_id = pg.edata[dgl.ETYPE].to(torch.int64)
    del pg
    src, dst = src.to(torch.int64), dst.to(torch.int64)
    e = (src < n_local) & (dst < n_local)  # halo="drop": the edges among inner nodes
    src, dst, etype_id = src[e], dst[e], etype_id[e]
    node = _node_data(feat_file)
    target = target or next((t for t in ntypes if f"{t}/train_mask" in node), "")
    if f"{target}/label" not in node or f"{target}/train_mask" not in node:
        raise ConfigError(
            f"partition {part_config} has no labels or train_mask of node type {target!r}; set "
            "--data.target to the labelled type, or re-create it with `python -m dgl_grappa partition`"
        )
    featured = [t for t in ntypes if f"{t}/feat" in node]
    first = {t: [lo for lo, _ in node_map[t]] for t in ntypes}
    # the budget's unit: the part's own featured rows in fp32 (kept or not); the tables every node of a type holds
    part_inner = {t: int((ntype_id[:n_inner_all] == i).sum()) for i, t in enumerate(ntypes)}
    width = {t: int(node[f"{t}/feat"].shape[1]) for t in featured}
    own_fp32 = sum(part_inner[t] * width[t] * 4 for t in featured)
    agg_rels = [e for e in etypes if e[0] in featured] if exact else []
    tables = {t: ([width[t]] if t in featured else []) + [width[e[0]] for e in agg_rels if e[2] == t] for t in ntypes}
    top = max((float(node[f"{t}/feat"].abs().max()) for t in featured if node[f"{t}/feat"].numel()), default=0.0)
    needed = _reached_typed(
        src,
        dst,
        etype_id,
        ntype_id,
        n_inner_all,
        node,
        target,
        featured,
        ntypes,
        etypes,
        first,
        gid,
        part_id,
        keep.reach,
        exact,
    )
    inner_kept = needed[:n_inner_all].nonzero(as_tuple=True)[0]
    halo_reach = needed[n_inner_all:].nonzero(as_tuple=True)[0] + n_inner_all
    precision, halo_kept = _choose_typed(keep, ntype_id, inner_kept, halo_reach, tables, ntypes, own_fp32, part_id, top)
    kept = torch.cat([inner_kept, halo_kept])
    if kept.numel() < n_local:  # relabel the kept nodes 0..k-1, inner first, and keep their edges
        new = torch.full((n_local,), -1, dtype=torch.int64)
        new[kept] = torch.arange(kept.numel())
        e = (new[src] >= 0) & (new[dst] >= 0)
        src, dst, etype_id = new[src[e]], new[dst[e]], etype_id[e]
        ntype_id, gid, type_gid, owner_all = ntype_id[kept], gid[kept], type_gid[kept], owner_all[kept]
    inner_k = torch.arange(kept.numel()) < inner_kept.numel()
    # per type, the local nodes with feature and aggregate rows: every one but the sources halo_in_edges adds (last)
    tabled = {t: int((ntype_id == i).sum()) for i, t in enumerate(ntypes)}
    completed = None
    if halo_in_edges == "featureless" and halo == "keep":
        local = {
            "src": src,
            "dst": dst,
            "etype_id": etype_id,
            "ntype_id": ntype_id,
            "gid": gid,
            "type_gid": type_gid,
            "owner": owner_all,
            "inner": inner_k,
        }
        arrays, completed = complete_halo_in_edges(part_config, node_map, local, ntypes, etypes, featured)
        src, dst, etype_id, ntype_id, gid, type_gid, owner_all, inner_k = (
            arrays[k] for k in ("src", "dst", "etype_id", "ntype_id", "gid", "type_gid", "owner", "inner")
        )
    graph, nodes, n_inner, gids, owner = local_heterograph(
        src, dst, etype_id, inner_k, ntype_id, type_gid, owner_all, ntypes, etypes, halo
    )
    feat: dict[str, NodeTable] = {}
    for t in featured:
        table = NodeTable.empty(nodes[t].numel(), width[t], precision)
        if n_inner[t]:  # own rows: the part's file holds its inner nodes of type t in the order of their global ids
            table.put(slice(0, n_inner[t]), node[f"{t}/feat"][gid[nodes[t][: n_inner[t]]] - first[t][part_id]].float())
        feat[t] = table
    t_inner = nodes[target][: n_inner[target]]
    idx = gid[t_inner] - first[target][part_id]
    label = node[f"{target}/label"][idx].to(torch.int64)
    train_ids = node[f"{target}/train_mask"][idx].bool().nonzero(as_tuple=True)[0]
    del node
    # the kept halo's feature rows: read once, owner by owner (one owner's file in memory at a time)
    halo_rows = {t: nodes[t].numel() - n_inner[t] for t in ntypes}
    one_time = 0
    halo_owners = torch.unique(torch.cat([owner[t][n_inner[t] :] for t in featured])) if featured else torch.zeros(0)
    for p in halo_owners.tolist():
        other = _node_data(part_paths(part_config, p)[2])
        for t in featured:
            at = (owner[t][n_inner[t] :] == p).nonzero(as_tuple=True)[0] + n_inner[t]
            if at.numel():
                feat[t].put(at, other[f"{t}/feat"][gid[nodes[t][at]] - first[t][p]].float())
                one_time += int(at.numel() * row_bytes(width[t], precision))
        del other
    agg: dict[tuple, NodeTable] = {}
    if exact:
        agg, agg_once = _relation_aggregates(
            part_config,
            part_id,
            etypes,
            featured,
            {t: v[: tabled[t]] for t, v in nodes.items()},
            n_inner,
            {t: v[: tabled[t]] for t, v in owner.items()},
            gid,
            first,
            precision,
        )
        one_time += agg_once
    if completed is not None:
        one_time += completed["one_time_bytes"]
    memory = _memory(feat, n_inner, [label, train_ids, *gids.values(), *owner.values()], graph, agg, precision)
    limit = keep.limit(own_fp32)
    return HeteroLocalPartition(
        part_id=part_id,
        num_parts=len(next(iter(node_map.values()))),
        graph=graph,
        target=target,
        ntypes=ntypes,
        etypes=etypes,
        num_inner_by_type=n_inner,
        global_ids=gids,
        owner=owner,
        feat=feat,
        label=label,
        train_ids=train_ids,
        load_seconds=time.perf_counter() - t0,
        halo_bytes_loaded=one_time,
        one_time_bytes=one_time,
        memory=memory,
        agg=agg,
        part_inner_by_type=part_inner,
        keep={
            "precision": precision,
            "reach": keep.reach,
            "nodes": n_local,
            "kept": int(kept.numel()),
            "inner_kept": int(inner_kept.numel()),
            "halo": n_local - n_inner_all,
            "halo_reach": int(halo_reach.numel()),
            "halo_kept": int(halo_kept.numel()),
            "halo_by_type": halo_rows,
            "budget_bytes": limit if limit < float("inf") else None,
            **({"halo_in_edges": completed} if completed is not None else {}),
        },
    )


def _reached_typed(
    src: Tensor,
    dst: Tensor,
    etype_id: Tensor,
    ntype_id: Tensor,
    n_inner: int,
    node: dict,
    target: str,
    featured: list,
    ntypes: list,
    etypes: list,
    first: dict,
    gid: Tensor,
    part_id: int,
    reach: int | None,
    exact: bool,
) -> Tensor:
    """Bool mask of the local nodes a worker keeps before the budget: what the seeds' trees reach (see
    :func:`load_local_hetero`), and every own node of a featureless type; every node with ``reach`` None."""
    n_local = ntype_id.numel()
    tid = ntypes.index(target)
    t_inner = (ntype_id[:n_inner] == tid).nonzero(as_tuple=True)[0]
    if reach is None or t_inner.numel() == 0:
        return torch.ones(n_local, dtype=torch.bool)
    seeds = t_inner[node[f"{target}/train_mask"][gid[t_inner] - first[target][part_id]].bool()]
    # a part without training seeds takes its steps on a placeholder batch of its first target node (weight 0)
    needed = reached_nodes(src, dst, n_local, seeds if seeds.numel() else t_inner[:1], reach)
    bare = torch.tensor([t not in featured for t in ntypes], dtype=torch.bool)
    if exact and etypes:  # the first block samples the relations from featureless types once more
        from_bare = torch.tensor([t not in featured for t in (e[0] for e in etypes)], dtype=torch.bool)[etype_id]
        hop = torch.zeros(n_local, dtype=torch.bool)
        hop[src[from_bare & needed[dst]]] = True
        needed |= hop
    needed[:n_inner] |= bare[ntype_id[:n_inner]]  # own learnable rows: trained here (and gathered to evaluate)
    return needed


def _choose_typed(
    keep: Keep,
    ntype_id: Tensor,
    inner_kept: Tensor,
    halo_reach: Tensor,
    tables: dict,
    ntypes: list,
    own_fp32: int,
    part_id: int,
    top: float,
) -> tuple[str, Tensor]:
    """(precision, halo nodes kept) under the budget, as :func:`~.local_part.load_local` chooses them, with rows of
    several widths: a node of type t holds ``tables[t]`` (the widths of its feature and aggregate rows)."""
    ladder = precision_ladder(keep.storage, top)
    limit = keep.limit(own_fp32)

    def cost(ids: Tensor, precision: str) -> Tensor:
        per = torch.tensor(
            [float(sum(row_bytes(w, precision) for w in tables[t])) for t in ntypes], dtype=torch.float64
        )
        return per[ntype_id[ids]]

    for precision in ladder:
        if float(cost(inner_kept, precision).sum() + cost(halo_reach, precision).sum()) <= limit:
            return precision, halo_reach
    precision = ladder[-1]
    inner = float(cost(inner_kept, precision).sum())
    if inner > limit:
        raise budget_error(part_id, precision, inner, own_fp32)
    gen = torch.Generator().manual_seed(keep.seed * 1_000_003 + part_id)
    order = halo_reach[torch.randperm(halo_reach.numel(), generator=gen)]
    c = cost(order, precision)
    fits = (torch.cumsum(c, 0) <= limit - inner) | (c == 0)  # a node without such rows costs the budget nothing
    return precision, torch.sort(order[fits]).values


def local_heterograph(
    src: Tensor,
    dst: Tensor,
    etype_id: Tensor,
    inner: Tensor,
    ntype_id: Tensor,
    type_gid: Tensor,
    owner: Tensor,
    ntypes: list[str],
    etypes: list[tuple],
    halo: str = "keep",
):
    """A worker's local heterograph from its part's homogeneous graph in DGL's layout (every runtime uses this).

    Args:
        src, dst, etype_id: the part's edges (local homogeneous ids) and their relation ids (``etypes`` order).
        inner: bool mask of the part's inner nodes (first, as DGL lays them out).
        ntype_id, type_gid, owner: node type id, shuffled per-type global id and owning part of every local node
            kept (all of the part's with ``halo="keep"``, its inner nodes with ``"drop"``).
        ntypes, etypes: node types and canonical relations, in the order of their ids.
        halo: "keep" (the halo of every type and every edge of the part) or "drop" (inner nodes and the edges
            among them only).

    Returns:
        ``(graph, nodes, num_inner, global_ids, owner)``: the heterograph (per type: inner nodes first, then the
        kept halo; COO and CSC made), and per type the local homogeneous ids of its nodes, its inner count, its
        nodes' per-type global ids and their owners.

    Raises:
        RuntimeError: the inner nodes are not first (not DGL's layout).
    """
    inner = inner.bool()
    n_inner_all = int(inner.sum())
    if not bool(inner[:n_inner_all].all()):
        raise RuntimeError("unexpected partition layout: inner nodes are not first")
    n_local = ntype_id.numel()
    src, dst, etype_id = src.to(torch.int64), dst.to(torch.int64), etype_id.to(torch.int64)
    e = (src < n_local) & (dst < n_local)  # halo="drop": the edges among inner nodes
    src, dst, etype_id = src[e], dst[e], etype_id[e]
    typed = torch.empty(n_local, dtype=torch.int64)
    nodes, n_inner, gids, owners = {}, {}, {}, {}
    for i, t in enumerate(ntypes):
        ids = (ntype_id.to(torch.int64) == i).nonzero(as_tuple=True)[0]
        nodes[t] = ids
        typed[ids] = torch.arange(ids.numel())
        n_inner[t] = int((ids < n_inner_all).sum())
        gids[t] = type_gid[ids].to(torch.int64)
        owners[t] = owner[ids].to(torch.int64)
    graph = dgl.heterograph(
        {et: (typed[src[etype_id == j]], typed[dst[etype_id == j]]) for j, et in enumerate(etypes)},
        num_nodes_dict={t: int(nodes[t].numel()) for t in ntypes},
        idtype=torch.int64,
    )
    graph.create_formats_()  # CSC for sampling, COO for the whole-part ops: once, not in a step
    return graph, nodes, n_inner, gids, owners


def _relation_aggregates(
    part_config,
    part_id: int,
    etypes: list,
    featured: list,
    nodes: dict,
    n_inner: dict,
    owner: dict,
    gid: Tensor,
    first: dict,
    precision: str = "fp32",
) -> tuple[dict, int]:
    """Every local node's per-relation first-hop aggregates (relations from featured types), stored in
    ``precision``: own rows from the part's file, the kept halo's from their owners' (read once; the second value
    is those bytes, in the stored precision)."""
    out, once = {}, 0
    for e in (e for e in etypes if e[0] in featured):
        d = e[2]
        files = {}

        def table(p):
            if p not in files:
                f = relation_agg_path(part_config, p, e)
                if not f.is_file():
                    raise ConfigError(
                        f"{f} is missing: the partitioning has no first-hop aggregates of relation "
                        f"{':'.join(e)}; re-create it with `python -m dgl_grappa partition`, or use "
                        "--train.first_hop=sampled"
                    )
                files[p] = torch.from_numpy(np.load(f))
            return files[p]

        own = table(part_id)
        width = int(own.shape[1])
        rows = NodeTable.empty(nodes[d].numel(), width, precision)
        if n_inner[d]:
            rows.put(slice(0, n_inner[d]), own[gid[nodes[d][: n_inner[d]]] - first[d][part_id]].float())
        for p in torch.unique(owner[d][n_inner[d] :]).tolist():
            at = (owner[d][n_inner[d] :] == p).nonzero(as_tuple=True)[0] + n_inner[d]
            rows.put(at, table(p)[gid[nodes[d][at]] - first[d][p]].float())
            once += int(at.numel() * row_bytes(width, precision))
        out[e] = rows
    return out, once


def _split(table: NodeTable, n_inner: int) -> tuple[int, int]:
    """(inner, halo) bytes of a table whose first ``n_inner`` rows are the inner nodes' (every row the same size)."""
    n = table.shape[0]
    inner = int(table.nbytes * n_inner // n) if n else 0
    return inner, int(table.nbytes) - inner


def _memory(
    feat: dict, n_inner: dict, others: list, graph: dgl.DGLGraph, agg: dict | None = None, precision: str = "fp32"
) -> dict:
    agg = agg or {}
    by_type = {t: dict(zip(("feat_inner", "feat_halo"), _split(x, n_inner[t]))) for t, x in feat.items()}
    fi, fh = (sum(b[k] for b in by_type.values()) for k in ("feat_inner", "feat_halo"))
    agg_split = {e: _split(x, n_inner[e[2]]) for e, x in agg.items()}
    ai, ah = (sum(v[i] for v in agg_split.values()) for i in (0, 1))
    other = sum(int(x.numel() * x.element_size()) for x in others)
    # the graph's COO and CSC per relation
    other += sum(3 * graph.num_edges(e) * 8 + (graph.num_nodes(e[2]) + 1) * 8 for e in graph.canonical_etypes)
    return {
        "precision": precision,
        "feat_inner": int(fi),
        "feat_halo": int(fh),
        "agg_inner": int(ai),
        "agg_halo": int(ah),
        "resident": int(fi + fh + ai + ah),
        "other": int(other),
        "by_type": by_type,
        "agg_by_relation": {":".join(e): int(x.nbytes) for e, x in agg.items()},
    }


class TargetSeeds:
    """A node-wise sampler of a heterograph seeded with nodes of one type: ``sample(graph, ids)`` samples from
    ``{target: ids}`` and returns the target's output nodes (what :class:`~.sampler.LocalBatches` expects).

    Example:
        >>> sampler = TargetSeeds(dgl.dataloading.NeighborSampler([5, 10]), "paper")   # doctest: +SKIP
    """

    def __init__(self, sampler, target: str):
        self.sampler, self.target = sampler, target

    def sample(self, graph: dgl.DGLGraph, seeds: Tensor):
        input_nodes, output_nodes, blocks = self.sampler.sample(graph, {self.target: seeds})
        return input_nodes, output_nodes[self.target], blocks


class HeteroFeatures:
    """The featured types' rows for a batch's input nodes, from local memory, with a count of the bytes served."""

    def __init__(self, feat: dict[str, NodeTable]):
        self.feat = feat
        self.local_bytes = 0

    def gather(self, input_nodes: dict[str, Tensor]) -> dict[str, Tensor]:
        """Rows of every featured type; a featureless type's entry stays its local ids (for
        :class:`HeteroEmbedding`)."""
        out = {}
        for t, ids in input_nodes.items():
            if t in self.feat:
                out[t] = self.feat[t].gather(ids.to(torch.int64))
                self.local_bytes += out[t].numel() * 4
            else:
                out[t] = ids.to(torch.int64)
        return out

    def take_bytes(self) -> tuple[int, int]:
        """(remote, local) bytes served since the last call: remote is 0, every row is local."""
        local, self.local_bytes = self.local_bytes, 0
        return 0, local


class HeteroEmbedding(LearnableRows, nn.Module):
    """The learnable rows of a worker's featureless node types: one :class:`~.embedding.LocalEmbedding` per type.

    Called with a batch's inputs (a dict: rows for featured types, local ids for featureless ones) it puts the
    rows in place of the ids. One PyTorch ``SparseAdam`` steps the rows that carry a gradient (:meth:`optimizer`),
    on this worker only. With ``sync_every`` 0 those are the own rows, and a halo row is its owner's initial
    row, frozen. With ``sync_every`` k > 0 the halo's copies are trained here too, and every k epochs
    :meth:`sync_halo` averages every row over the workers that hold it (:class:`~.embedding.HaloSync`, a
    collective, between steps): the bytes of ``model.embed_halo_sync``.

    Args:
        lp: the local part (its ``owner`` and ``part_id`` are needed with ``sync_every`` > 0).
        dim: row width (``model.embed_dim``).
        seed: ``train.seed`` (mixed with each type's name: :func:`type_seed`).
        sync_every: ``model.embed_halo_sync``.

    Raises:
        ValueError: ``sync_every`` > 0 without the part's owners.

    Example:
        >>> emb = HeteroEmbedding(lp, 32, seed=0, sync_every=1)          # doctest: +SKIP
        >>> opt = emb.optimizer(0.05); emb.sync_halo(epoch)              # doctest: +SKIP
    """

    def __init__(self, lp: HeteroLocalPartition, dim: int, seed: int = 0, sync_every: int = 0):
        super().__init__()
        self.dim, self.sync_every = int(dim), int(sync_every)
        self.types = nn.ModuleDict(
            {
                t: LocalEmbedding(
                    lp.global_ids[t],
                    lp.num_inner_by_type[t],
                    dim,
                    seed=type_seed(seed, t),
                    train_halo=self.sync_every > 0,
                )
                for t in lp.bare_types
            }
        )
        self._sync: HaloSync | None = None
        if self.sync_every > 0:
            owner, part = getattr(lp, "owner", None), getattr(lp, "part_id", None)
            if owner is None or part is None:
                raise ValueError("syncing the halo's rows needs the owner of every halo row; this part has none")
            self._sync = HaloSync({t: (e, owner[t]) for t, e in self.types.items()}, part)
        self.sync_bytes = 0

    def sync_halo(self, epoch: int) -> int:
        """At the start of epoch ``epoch`` on every worker: average the rows several workers hold when a sync is due
        (every ``sync_every`` epochs, from epoch ``sync_every`` on); the bytes this worker received (0 if none)."""
        if self._sync is None or epoch <= 0 or epoch % self.sync_every:
            return 0
        got = self._sync()
        self.sync_bytes += got
        return got

    def forward(self, x: dict[str, Tensor]) -> dict[str, Tensor]:
        return {t: self.types[t](v) if t in self.types else v for t, v in x.items()}

    def optimizer(self, lr: float) -> torch.optim.SparseAdam:
        """PyTorch's ``SparseAdam`` over every type's trained rows (local; see :meth:`LocalEmbedding.optimizer`)."""
        return torch.optim.SparseAdam([p for e in self.types.values() for p in e.parameters()], lr=lr)

    def take_bytes(self) -> tuple[int, int]:
        """(remote, local) bytes of rows since the last call: remote are the syncs' (:meth:`sync_halo`; 0 without
        them), local the rows served to the steps."""
        remote, self.sync_bytes = self.sync_bytes, 0
        return remote, sum(e.take_bytes()[1] for e in self.types.values())

    def memory(self) -> dict:
        """Bytes held, summed over the types as :meth:`LocalEmbedding.memory`, ``embed_by_type``, and ``embed_sync``
        (the rows at the last sync, :class:`~.embedding.HaloSync`; counted in ``embed``)."""
        per = {t: e.memory() for t, e in self.types.items()}
        out = {k: sum(m[k] for m in per.values()) for k in ("embed_inner", "embed_optimizer", "embed_halo", "embed")}
        synced = self._sync.nbytes if self._sync is not None else 0
        return {**out, "embed": out["embed"] + synced, "embed_sync": synced, "embed_by_type": per}

    @property
    def num_inner(self) -> int:
        return sum(e.num_inner for e in self.types.values())

    @property
    def num_halo(self) -> int:
        return sum(int(e.halo_rows.shape[0]) for e in self.types.values())

    def shard_state(self, optimizer: torch.optim.Optimizer) -> dict:
        """This worker's part of a checkpoint: every type's own rows (with their ids) and halo rows, the rows at the
        last sync, and the optimizer's state."""
        return {
            "types": {
                t: {
                    "global_ids": e.global_ids[: e.num_inner].clone(),
                    "weight": e.own.weight.detach().clone(),
                    "halo": e.halo_rows.detach().clone(),
                }
                for t, e in self.types.items()
            },
            "sync": self._sync.state_dict() if self._sync is not None else None,
            "optimizer": copy.deepcopy(optimizer.state_dict()),
        }

    def load_shard(self, state: dict, optimizer: torch.optim.Optimizer) -> None:
        """Restore what :meth:`shard_state` returned, bit for bit.

        Raises:
            ConfigError: the shard belongs to other nodes or types (another partitioning or graph), or was written
                with another ``model.embed_halo_sync``.
        """
        types = state.get("types") or {}
        if set(types) != set(self.types):
            raise ConfigError(
                "the checkpoint's embedding rows are of other node types than this graph's featureless "
                "ones; resume with the graph it was written with, or start afresh"
            )
        if (state.get("sync") is None) != (self._sync is None):
            raise ConfigError(
                "the checkpoint was written with another model.embed_halo_sync (halo rows synced or "
                "not); resume with the setting it was written with, or start afresh"
            )
        for t, e in self.types.items():
            if not torch.equal(types[t]["global_ids"], e.global_ids[: e.num_inner]):
                raise ConfigError(
                    "the checkpoint's embedding rows belong to other nodes than this worker's part "
                    "(another partitioning); resume on the partitioning it was written with, or start "
                    "afresh"
                )
            with torch.no_grad():
                e.own.weight.copy_(types[t]["weight"])
                if "halo" in types[t]:  # older checkpoints: the frozen initial rows, which the halo holds already
                    e.halo_rows.copy_(types[t]["halo"])
        if self._sync is not None:
            self._sync.load_state_dict(state["sync"])
        optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))

    def gather_rows(self, part_config) -> dict[str, Tensor] | None:
        """Every worker's own rows of every featureless type, on rank 0, in the graph's node order (a collective)."""
        out = {}
        for t, e in self.types.items():
            table = gather_rows(e.global_ids[: e.num_inner], e.own.weight)
            if table is not None:
                out[t] = to_original_order_typed(table, part_config, t)
        return out or None
