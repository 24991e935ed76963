"""The halo of a local heterograph beyond what the partition stores: its nodes' in-edges over the relations
from featureless types (``train.halo_in_edges: featureless``).

DGL's 1-hop layout stores every in-edge of a part's inner nodes, so a kept halo node has only the
in-edges that start at this part's inner nodes. For a relation from a featured type the first block
does not sample (the precomputed first-hop aggregates are exact for a halo node too), but a relation
from a featureless type (an author writes a paper) is sampled in the first block, and a halo paper
there would see only this part's authors: on a graph cut as much as a heterogeneous graph often is
(METIS at 4 parts cuts 0.47 of hetsynth's edges) most halo papers have no author and no field at all.

:func:`complete_halo_in_edges` reads, once per partitioning, every kept halo node's in-edges over
those relations from its owner's part (one-time bytes: 16 an edge), and adds their source nodes to
the halo where they are not local yet. Those sources are leaves of the first block: they need their
learnable rows (:class:`~.hetero.HeteroEmbedding`, kept current by ``model.embed_halo_sync``) and
nothing else, so they get no feature or aggregate row and cost the memory budget nothing.

Example:
    >>> arrays, stats = complete_halo_in_edges(part_config, meta, arrays, ntypes, etypes, featured)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import NamedTuple

import dgl
import torch
from torch import Tensor

from ..partition.layout import part_edges, part_paths
from .storage import NodeTable

__all__ = [
    "EDGE_BYTES",
    "InEdges",
    "aggregate_rows",
    "complete_halo_in_edges",
    "halo_ending",
    "merge_halo_in_edges",
    "per_type_ids",
]

EDGE_BYTES = 16
"""One-time bytes of an edge read from its owner: the source's global id and the relation, 8 bytes each."""


class InEdges(NamedTuple):
    """In-edges of halo nodes read from their owners: per edge, the source's homogeneous global id, type id,
    per-type global id and owning part, the destination's local id and the relation id; ``eid`` their homogeneous
    global edge ids where the caller tracks them (else None)."""

    src_gid: Tensor
    src_type: Tensor
    src_type_gid: Tensor
    src_owner: Tensor
    dst_local: Tensor
    etype_id: Tensor
    eid: Tensor | None = None


def complete_halo_in_edges(
    part_config, node_map: dict, arrays: dict, ntypes: list[str], etypes: list[tuple], featured: list[str]
) -> tuple[dict, dict]:
    """A local part's edges and nodes with every kept halo node's in-edges over the relations from featureless types.

    Args:
        part_config: the partitioning's json (the owners' part graphs are read from its folder).
        node_map: the json's ``node_map`` (each type's homogeneous id range per part).
        arrays: the local part in homogeneous local ids: ``src``, ``dst``, ``etype_id`` (its edges), ``ntype_id``,
            ``gid`` (homogeneous global id), ``type_gid`` (per-type global id), ``owner`` and ``inner`` (bool) of
            every local node, inner nodes first.
        ntypes, etypes: node types and canonical relations in the order of their ids.
        featured: the node types with features.

    Returns:
        ``(arrays, stats)``: as :func:`merge_halo_in_edges` returns them, the edges read from the owners' part files.
    """
    bare_rel = torch.tensor([e[0] not in featured for e in etypes], dtype=torch.bool)
    halo = halo_ending(arrays, ntypes, etypes, bare_rel)  # the halo nodes such relations end at
    if halo.numel() == 0 or not bool(bare_rel.any()):
        return merge_halo_in_edges(arrays, None, bare_rel, ntypes)
    a = arrays
    got = []  # per owner: (source global id, source type, source owner, destination local id, relation)
    for p in torch.unique(a["owner"][halo]).tolist():
        mine = halo[a["owner"][halo] == p]
        pg = dgl.load_graphs(str(part_paths(part_config, p)[1]))[0][0]
        p_nid = pg.ndata[dgl.NID].to(torch.int64)
        p_inner = int(pg.ndata["inner_node"].bool().sum())
        order = torch.argsort(p_nid[:p_inner])
        at = order[torch.searchsorted(p_nid[:p_inner][order], a["gid"][mine]).clamp(max=max(p_inner - 1, 0))]
        if not torch.equal(p_nid[at], a["gid"][mine]):
            raise RuntimeError(
                f"part {p} does not own the halo nodes this part says it does; the partitioning's "
                "files are of different partitionings"
            )
        where = torch.full((pg.num_nodes(),), -1, dtype=torch.int64)
        where[at] = mine  # the owner's local id -> this part's local id, for the wanted nodes
        s, d = (x.to(torch.int64) for x in part_edges(pg))
        r = pg.edata[dgl.ETYPE].to(torch.int64)
        keep = (where[d] >= 0) & bare_rel[r]
        s, d, r = s[keep], d[keep], r[keep]
        owner_p = (
            pg.ndata["part_id"].to(torch.int64)
            if "part_id" in pg.ndata
            else torch.full((pg.num_nodes(),), p, dtype=torch.int64)
        )
        got.append((p_nid[s], pg.ndata[dgl.NTYPE].to(torch.int64)[s], owner_p[s], where[d], r))
        del pg
    s_gid, s_type, s_owner, d_local, rel = (torch.cat(x) for x in zip(*got))
    s_type_gid = torch.empty_like(s_gid)
    for i, t in enumerate(ntypes):
        sel = s_type == i
        s_type_gid[sel] = per_type_ids(s_gid[sel], node_map[t])
    return merge_halo_in_edges(a, InEdges(s_gid, s_type, s_type_gid, s_owner, d_local, rel), bare_rel, ntypes)


def halo_ending(arrays: dict, ntypes: list[str], etypes: list[tuple], relations: Tensor) -> Tensor:
    """Local ids of the halo nodes (of ``arrays`` as :func:`complete_halo_in_edges` takes them) of the types that one
    of ``relations`` (a bool mask over ``etypes``) points into."""
    into = torch.tensor([any(e[2] == t and bool(m) for e, m in zip(etypes, relations)) for t in ntypes])
    return (~arrays["inner"] & into[arrays["ntype_id"]]).nonzero(as_tuple=True)[0]


def merge_halo_in_edges(arrays: dict, got: InEdges | None, relations: Tensor, ntypes: list[str]) -> tuple[dict, dict]:
    """``arrays`` with the halo's in-edges over ``relations`` (a bool mask over the relation ids) replaced by
    ``got``, the owners' (a superset of what the part stores), and their new source nodes appended as halo nodes.

    Returns:
        ``(arrays, stats)``: the same keys (``eid`` too where ``arrays`` has it: then ``got.eid`` gives the read
        edges'); ``stats``: ``edges_read``, ``edges_added``, ``nodes_added`` (per type) and ``one_time_bytes`` (the
        edges read, :data:`EDGE_BYTES` each).
    """
    stats = {"edges_read": 0, "edges_added": 0, "nodes_added": {t: 0 for t in ntypes}, "one_time_bytes": 0}
    a = dict(arrays)
    if got is None or got.src_gid.numel() == 0:
        return a, stats
    src, dst, et, inner = a["src"], a["dst"], a["etype_id"], a["inner"]
    # the sources this part holds already, and the new ones (appended as halo nodes, one per global id)
    n = a["gid"].numel()
    order = torch.argsort(a["gid"])
    pos = torch.searchsorted(a["gid"][order], got.src_gid).clamp(max=n - 1)
    local = torch.where(a["gid"][order][pos] == got.src_gid, order[pos], torch.full_like(pos, -1))
    new = local < 0
    new_gid, first_at, inverse = _unique_first(got.src_gid[new])
    local[new] = n + inverse
    new_type = got.src_type[new][first_at]
    stale = relations[et] & ~inner[dst]
    a["src"] = torch.cat([src[~stale], local])
    a["dst"] = torch.cat([dst[~stale], got.dst_local])
    a["etype_id"] = torch.cat([et[~stale], got.etype_id])
    if "eid" in a:
        a["eid"] = torch.cat([a["eid"][~stale], got.eid])
    a["ntype_id"] = torch.cat([a["ntype_id"], new_type])
    a["gid"] = torch.cat([a["gid"], new_gid])
    a["type_gid"] = torch.cat([a["type_gid"], got.src_type_gid[new][first_at]])
    a["owner"] = torch.cat([a["owner"], got.src_owner[new][first_at]])
    a["inner"] = torch.cat([inner, torch.zeros(new_gid.numel(), dtype=torch.bool)])
    stats.update(
        edges_read=int(got.etype_id.numel()),
        edges_added=int(got.etype_id.numel() - stale.sum()),
        nodes_added={t: int((new_type == i).sum()) for i, t in enumerate(ntypes)},
        one_time_bytes=int(got.etype_id.numel()) * EDGE_BYTES,
    )
    return a, stats


def _unique_first(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(values, first, inverse)``: the sorted distinct values of ``x``, the index in ``x`` of each one's first
    occurrence, and each element's index among the values."""
    values, inverse = torch.unique(x, sorted=True, return_inverse=True)
    first = torch.full((values.numel(),), x.numel(), dtype=torch.int64)
    first.scatter_reduce_(0, inverse, torch.arange(x.numel()), reduce="amin")
    return values, first, inverse


def per_type_ids(homo: Tensor, ranges: list) -> Tensor:
    """Shuffled per-type ids of nodes of one type from their homogeneous global ids: the type's ids are the parts'
    ranges one after the other (DGL's ``map_to_per_ntype``, without a partition book).

    Example:
        >>> per_type_ids(torch.tensor([2, 11]), [[0, 3], [10, 12]]).tolist()
        [2, 4]
    """
    out = torch.empty_like(homo)
    at = 0
    for lo, hi in ranges:
        sel = (homo >= lo) & (homo < hi)
        out[sel] = homo[sel] - lo + at
        at += hi - lo
    return out


def aggregate_rows(table: NodeTable, ids: Tensor) -> Tensor:
    """First-hop aggregate rows of local ids; 0 for a source that :func:`complete_halo_in_edges` added.

    Those sources have no aggregate row: they are a first block's destination only in a model of 3
    or more layers, where that block then lacks their relations from featured types.

    Example:
        >>> t = NodeTable.store(torch.ones(2, 3))
        >>> aggregate_rows(t, torch.tensor([1, 2])).tolist()
        [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]
    """
    n = table.shape[0]
    if not ids.numel() or int(ids.max()) < n:
        return table.gather(ids)
    rows = table.gather(ids.clamp(max=n - 1))
    rows[ids >= n] = 0.0
    return rows
