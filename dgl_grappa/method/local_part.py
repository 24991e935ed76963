"""A worker's local view of its part: the local graph, its features, aggregates and kept halo.

:func:`load_local` gives worker r its part: the local graph (inner nodes, plus the 1-hop
halo with ``halo="keep"``), local features (and first-hop aggregates), labels, train ids and
the full-graph in-degrees. Halo rows are read once here, from the owners' partition files,
never during a training step, and counted as one-time bytes.

What a worker keeps is chosen here, under a memory budget (:class:`Keep`):

* **reach**: only the nodes the training seeds' sampled trees can reach (``reach`` sampled
  hops from the seeds over in-edges; halo nodes are leaves). Exact: no other node can
  appear in a batch. With sparse labels most of a part is never reached.
* **precision**: the feature-width tables (features, aggregates, halo rows) are stored
  in fp32, fp16, bf16, int8 or int4 (:mod:`.storage`); ``auto`` takes the most exact that fits.
* **halo sample**: when even int4 does not fit, a uniform random subset of the reachable
  halo nodes is kept, as many as fit (seeded by the part). Never a seed: the inner nodes are
  not sampled, and with ``Keep(positives=True)`` (link prediction) nor is a halo node that is
  the source of an edge into an inner node (a positive edge's end) or a node of the negative
  pool. Where those alone do not fit in int4, they are kept over the budget, with a warning
  that names the figure: the budget never costs a positive edge or a seed.

The budget counts the feature-width tables (``resident_bytes``), in multiples of the part's
own feature rows in fp32 (``LocalPartition.own_fp32_bytes``) or in bytes.

Link prediction may also hold a **negative pool** (``load_local(..., pool=)``): a uniform sample of
the nodes other parts own, their rows read once like the halo's, so that negatives can be drawn
from the whole graph (:mod:`.link`).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import dgl
import torch
from torch import Tensor

from ..config import ConfigError
from ..partition.aggregates import load_sidecar
from ..partition.layout import node_map, part_edges, part_paths, read_node_tensors, read_part_structure
from .storage import PRECISIONS, NodeTable, row_bytes

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


@dataclass(frozen=True)
class Keep:
    """What a worker keeps of its part: the loader's choices (see the module docstring).

    Attributes:
        reach: sampled hops from the training seeds whose nodes are kept (the model's
            layers, less one with first-hop completion); None keeps every node of the part.
        storage: precision of the feature-width tables: fp32, fp16, bf16, int8, int4, or auto
            (the most exact of fp32, fp16, int8, int4 that fits the budget; bf16 where fp16
            would overflow).
        budget: the most feature-width bytes to hold, as a multiple of the part's own
            feature rows in fp32; 0 = no limit.
        budget_bytes: the same in bytes (used instead of ``budget`` when > 0).
        seed: seed of the halo sample (with the part id).
        positives: link prediction: the halo nodes that are sources of edges into inner nodes
            (the ends of the positive edges a worker trains on) are never sampled away; kept
            over the budget, with a warning, where int4 cannot hold them.

    Example:
        >>> Keep(reach=1, storage="auto", budget=1.5)
        Keep(reach=1, storage='auto', budget=1.5, budget_bytes=0, seed=0, positives=False)
    """

    reach: int | None = None
    storage: str = "fp32"
    budget: float = 0.0
    budget_bytes: int = 0
    seed: int = 0
    positives: bool = False

    def limit(self, own_fp32_bytes: int) -> float:
        """The budget in bytes for a part whose own feature rows take ``own_fp32_bytes`` in fp32."""
        if self.budget_bytes > 0:
            return float(self.budget_bytes)
        return self.budget * own_fp32_bytes if self.budget > 0 else float("inf")


@dataclass
class LocalPartition:
    """What a worker holds of its part; local ids index every tensor.

    Attributes:
        part_id, num_parts: which part of how many.
        graph: local graph (kept inner nodes first, then kept halo nodes), CSC format.
        num_inner: number of inner (owned) nodes in the local graph.
        global_ids: global (shuffled) id of every local node.
        owner: owning part of every local node.
        feat: features of every local node (:class:`~.storage.NodeTable`; halo rows read
            from the owners at load time).
        label: label of every inner node of the local graph.
        train_ids: local ids of the inner training nodes.
        in_degree: full-graph in-degree of every local node.
        src, dst: the local graph's edges.
        halo_bytes_loaded: feature bytes read from other parts' files at load time.
        load_seconds: time taken by ``load_local``.
        agg: first-hop aggregate of every local node (``first_hop="exact"``), else None.
        one_time_bytes: bytes a worker moves once for this partitioning (see :func:`load_local`).
        rows_held: feature-width rows this worker holds (features, plus aggregates with exact).
        part_inner: inner nodes of the part (kept or not).
        own_fp32_bytes: ``part_inner`` x feature width x 4: the budget's unit.
        memory: bytes per resident table (``feat_inner``, ``feat_halo``, ``agg_inner``,
            ``agg_halo``; ``other``: labels, ids, degrees, the graph) and the precision.
        keep: what the loader chose (nodes reached and kept, halo kept of reachable, precision).
        pool: local ids of the negative pool (:func:`remote_sample`; halo nodes among them keep
            their ids, the others follow the kept halo, without edges), sorted; None without one.
        num_nodes_total: nodes of the whole graph (every part's inner nodes).
    """

    part_id: int
    num_parts: int
    graph: dgl.DGLGraph
    num_inner: int
    global_ids: Tensor
    owner: Tensor
    feat: NodeTable
    label: Tensor
    train_ids: Tensor
    in_degree: Tensor
    src: Tensor
    dst: Tensor
    halo_bytes_loaded: int
    load_seconds: float
    agg: NodeTable | None = None
    one_time_bytes: int = 0
    rows_held: int = 0
    part_inner: int = 0
    own_fp32_bytes: int = 0
    memory: dict = field(default_factory=dict)
    keep: dict = field(default_factory=dict)
    pool: Tensor | None = None
    num_nodes_total: int = 0

    @property
    def resident_bytes(self) -> int:
        """Bytes of the feature-width tables held (features, aggregates, halo rows, in their precision)."""
        return self.feat.nbytes + (self.agg.nbytes if self.agg is not None else 0)

    @property
    def resident_other_bytes(self) -> int:
        """Bytes of everything else held per node and edge: labels, ids, degrees, the graph's arrays."""
        return int(self.memory.get("other", 0))


def check_modes(first_hop: str, halo: str) -> None:
    """A one-line ConfigError unless ``first_hop`` and ``halo`` are modes a part can be loaded with."""
    if first_hop not in ("exact", "sampled"):
        raise ConfigError(f"train.first_hop={first_hop!r} is not allowed; use exact or sampled")
    if halo not in ("drop", "keep"):
        raise ConfigError(f"train.halo={halo!r} is not allowed; use drop or keep")


def reached_nodes(src: Tensor, dst: Tensor, num_nodes: int, seeds: Tensor, hops: int) -> Tensor:
    """Bool mask of the nodes within ``hops`` in-edge steps of ``seeds`` (the seeds included).

    A sampled block for a node draws from its in-neighbours, so these are the only nodes a
    ``hops``-layer sampled tree from the seeds can contain.

    Example:
        >>> src, dst = torch.tensor([0, 1, 2]), torch.tensor([1, 2, 3])   # 0 -> 1 -> 2 -> 3
        >>> reached_nodes(src, dst, 5, torch.tensor([3]), 2).nonzero().flatten().tolist()
        [1, 2, 3]
    """
    need = torch.zeros(num_nodes, dtype=torch.bool)
    need[seeds.long()] = True
    frontier = need.clone()
    src, dst = src.long(), dst.long()
    for _ in range(hops):
        step = torch.zeros(num_nodes, dtype=torch.bool)
        step[src[frontier[dst]]] = True
        frontier = step & ~need
        if not bool(frontier.any()):
            break
        need |= frontier
    return need


def _node_data(feat_file: Path, part_config, part_id: int, features: bool = True) -> dict:
    """Part ``part_id``'s node data, checked against the partition json (truncated or corrupt files, rows
    per node) and, with ``features``, for values that are not finite."""
    meta = part_paths(part_config, part_id)[0]
    node = {k.split("/", 1)[-1]: v for k, v in read_node_tensors(feat_file, meta, part_id).items()}
    if not features:
        node.pop("feat", None)  # learnable rows instead (model.embed): the features are not held
    missing = [k for k in (("feat",) if features else ()) + ("label", "train_mask") if k not in node]
    if missing:
        raise ConfigError(
            f"partition {part_config} lacks node data {missing}; re-create it with "
            "`python -m dgl_grappa partition`, or add them to the partition's node data"
        )
    if features and node["feat"].is_floating_point():
        bad = int((~torch.isfinite(node["feat"])).sum())
        if bad:
            raise ConfigError(
                f"{feat_file}: the features hold {bad} values that are not finite (inf or NaN); "
                "training on them gives a NaN loss: replace them (e.g. torch.nan_to_num) and "
                "partition again"
            )
    return node


def _in_degree(node: dict, part_config, part_id: int, rows: Tensor | None = None) -> Tensor:
    if "in_degree" in node:
        deg = node["in_degree"]
        return deg if rows is None else deg[rows]
    return load_sidecar(part_config, part_id, rows, what="in_degree")


def precision_ladder(storage: str, top: float) -> list[str]:
    """The precisions ``train.storage`` lets the loader try, most exact first: ``auto`` is fp32, fp16 (bf16 where
    ``top``, the largest magnitude, would overflow fp16), int8, int4; a fixed precision is itself alone.

    Example:
        >>> precision_ladder("auto", 1.0), precision_ladder("auto", 1e5)[1], precision_ladder("int8", 1.0)
        (['fp32', 'fp16', 'int8', 'int4'], 'bf16', ['int8'])
    """
    if storage == "auto":
        return ["fp32", "fp16" if top < 6.0e4 else "bf16", "int8", "int4"]
    if storage in PRECISIONS:
        return [storage]
    raise ConfigError(f"train.storage={storage!r} is not allowed; use auto or one of {', '.join(PRECISIONS)}")


def budget_error(
    part_id: int, precision: str, need_bytes: float, own_fp32: int, setting: str = "--train.memory_budget"
) -> ConfigError:
    """The one-line error of a budget that cannot hold a part's own reachable rows and aggregates even in the
    last precision, naming the smallest budget that would (``need_bytes`` of tables against ``own_fp32``).

    ``setting`` is how the caller's user sets the budget: the native runtime's ``--train.memory_budget``, the
    drop-in loader's ``memory_budget`` argument.

    Example:
        >>> str(budget_error(0, "int4", 3e6, 2_000_000, setting="memory_budget")).split("; ")[-1]
        'use memory_budget=1.5 or more'
    """
    need = need_bytes / max(own_fp32, 1)
    return ConfigError(
        f"{setting.lstrip('-')} cannot hold part {part_id}'s own reachable rows and aggregates even in "
        f"{precision} ({need_bytes / 1e6:.2f} MB = {need:.3f} x its fp32 feature rows); use "
        f"{setting}={math.ceil(need * 1000) / 1000} or more"
    )


def _choose(
    keep: Keep,
    n_inner: int,
    halo: Tensor,
    required: Tensor,
    width: int,
    inner_tables: int,
    halo_tables: int,
    own_fp32: int,
    part_id: int,
    top: float,
    fixed: int = 0,
    extra: int = 0,
) -> tuple[str, Tensor]:
    """(precision, halo nodes kept) under the budget: the most exact precision that holds every
    reachable node, else the last precision with the ``required`` halo nodes and a uniform sample of
    the others; ``required`` ones that do not fit are kept over the budget, with a warning.

    ``halo``: reachable halo ids; ``required``: bool mask over ``halo`` of the nodes never sampled away;
    ``inner_tables`` / ``halo_tables``: feature-width tables held per inner / halo node;
    ``fixed``: bytes the budget already holds elsewhere (the drop-in: the server's fp32 features);
    ``extra``: nodes outside the halo held like halo nodes, never sampled away (the negative pool).
    """
    ladder = precision_ladder(keep.storage, top)
    limit = keep.limit(own_fp32) - fixed
    for precision in ladder:
        row = row_bytes(width, precision)
        if n_inner * row * inner_tables + (halo.numel() + extra) * row * halo_tables <= limit:
            return precision, halo
    precision = ladder[-1]
    row = row_bytes(width, precision)
    # Only the drop-in loader holds bytes elsewhere (``fixed``: the server's features); its budget is an argument.
    setting = "memory_budget" if fixed else "--train.memory_budget"
    if limit < n_inner * row * inner_tables:
        raise budget_error(part_id, precision, fixed + n_inner * row * inner_tables, own_fp32, setting)
    must = halo[required]
    need = n_inner * row * inner_tables + (must.numel() + extra) * row * halo_tables
    if need > limit:
        over_budget_warning(
            keep, part_id, precision, must.numel(), extra, halo.numel(), fixed + need, own_fp32, setting
        )
        return precision, must
    optional = halo[~required]
    room = int((limit - need) // (row * halo_tables)) if halo_tables else optional.numel()
    gen = torch.Generator().manual_seed(keep.seed * 1_000_003 + part_id)
    chosen = optional[torch.randperm(optional.numel(), generator=gen)[:room]]
    log.warning(
        "part %d: %s holds %d of its %d reachable halo nodes in %s (a uniform sample; every seed kept): %s",
        part_id,
        setting.lstrip("-"),
        must.numel() + chosen.numel(),
        halo.numel(),
        precision,
        fits_hint(fixed + n_inner * row * inner_tables + (halo.numel() + extra) * row * halo_tables, own_fp32, setting),
    )
    return precision, torch.sort(torch.cat([must, chosen])).values


def fits_hint(need_bytes: float, own_fp32: int, setting: str = "--train.memory_budget") -> str:
    """The setting that holds ``need_bytes`` of tables, for a part whose own fp32 rows take ``own_fp32``
    (``setting``: how the caller's user sets the budget, as for :func:`budget_error`).

    Example:
        >>> fits_hint(3e6, 2_000_000)
        '--train.memory_budget=1.5 holds them all'
    """
    return f"{setting}={math.ceil(need_bytes / max(own_fp32, 1) * 1000) / 1000} holds them all"


def over_budget_warning(
    keep: Keep,
    part_id: int,
    precision: str,
    n_required: int,
    extra: int,
    n_halo: int,
    need_bytes: float,
    own_fp32: int,
    setting: str = "--train.memory_budget",
) -> None:
    """Say, loudly, that a part holds more than its budget because the budget would cost positive edges."""
    limit = keep.limit(own_fp32)
    log.warning(
        "part %d: %s (%.3f x its own fp32 feature rows) cannot hold in %s the %d halo nodes that are "
        "sources of its positive edges%s (of %d reachable); sampling them would drop positive edges, so every one is "
        "kept and its tables take %.3f x its own fp32 rows (%.2f MB over the budget): %s, or --train.halo=drop trains "
        "on the edges with both ends owned only",
        part_id,
        setting.lstrip("-"),
        limit / max(own_fp32, 1),
        precision,
        n_required,
        f" and the {extra} nodes of its negative pool" if extra else "",
        n_halo,
        need_bytes / max(own_fp32, 1),
        (need_bytes - limit) / 1e6,
        fits_hint(need_bytes, own_fp32, setting),
    )


def positive_sources(src: Tensor, dst: Tensor, num_inner: int, n_local: int) -> Tensor:
    """Bool mask over the local nodes: the halo nodes that are sources of an edge into an inner node (the ends of the
    positive edges link prediction trains on, :func:`~.link.positive_edges`).

    Example:
        >>> # inner nodes 0, 1; halo 2, 3: 2 -> 0 enters the part, 0 -> 3 leaves it, 3 -> 2 stays in the halo
        >>> positive_sources(torch.tensor([2, 0, 3]), torch.tensor([0, 3, 2]), 2, 4).tolist()
        [False, False, True, False]
    """
    mask = torch.zeros(n_local, dtype=torch.bool)
    s, d = src.long(), dst.long()
    mask[s[(d < num_inner) & (s >= num_inner)]] = True
    return mask


def choose_kept(
    src: Tensor,
    dst: Tensor,
    n_local: int,
    num_inner: int,
    seeds: Tensor,
    keep: Keep,
    width: int,
    *,
    inner_tables: int,
    halo_tables: int,
    part_id: int,
    top: float,
    fixed: int = 0,
    required: Tensor | None = None,
    extra: int = 0,
):
    """Which local nodes a worker keeps, and in which precision (the loader's choice, see the module docstring).

    Args:
        src, dst: the local graph's edges (inner nodes first, then the halo).
        n_local, num_inner: its node count and inner share.
        seeds: local ids of the training seeds (none: node 0's tree, for placeholder steps).
        keep: reach, storage and budget; with ``keep.positives`` the halo sources of edges into inner
            nodes are never sampled away (:func:`positive_sources`).
        width: feature width.
        inner_tables, halo_tables, fixed: as for the budget (features and aggregates held per node).
        part_id, top: the part (seeds the halo sample) and the largest feature magnitude (fp16 range).
        required: bool mask over the local nodes of more halo nodes never sampled away (the negative pool's).
        extra: nodes held besides the local graph's, like halo nodes, never sampled away (the negative pool's
            nodes outside the halo).

    Returns:
        ``(kept local ids, inner ones, reachable halo ids, precision)``; kept is sorted, inner first. Where the
        budget cannot hold the inner nodes in the last precision: a one-line ``ConfigError`` naming the smallest
        budget; where it cannot hold the required halo nodes: every one kept, and a warning naming the figure.
    """
    own_fp32 = num_inner * width * 4
    if keep.reach is None:
        needed = torch.ones(n_local, dtype=torch.bool)
    else:
        # A part without training seeds takes every agreed step on a placeholder batch of its
        # node 0 (weight 0, see LocalBatches): it keeps that node's tree.
        roots = seeds if seeds.numel() or num_inner == 0 else torch.zeros(1, dtype=torch.int64)
        needed = reached_nodes(src, dst, n_local, roots, keep.reach)
    inner_kept = needed[:num_inner].nonzero(as_tuple=True)[0]
    halo_reach = needed[num_inner:].nonzero(as_tuple=True)[0] + num_inner
    must = positive_sources(src, dst, num_inner, n_local) if keep.positives else torch.zeros(n_local, dtype=torch.bool)
    if required is not None:
        must |= required.bool()
    precision, halo_kept = _choose(
        keep,
        inner_kept.numel(),
        halo_reach,
        must[halo_reach],
        width,
        inner_tables,
        halo_tables,
        own_fp32,
        part_id,
        top,
        fixed,
        extra,
    )
    return torch.cat([inner_kept, halo_kept]), inner_kept, halo_reach, precision


def relabel(src: Tensor, dst: Tensor, kept: Tensor, n_local: int) -> tuple[Tensor, Tensor]:
    """The edges among the ``kept`` local nodes, in their new ids 0..k-1 (kept's order)."""
    new = torch.full((n_local,), -1, dtype=torch.int64)
    new[kept] = torch.arange(kept.numel())
    e = (new[src.long()] >= 0) & (new[dst.long()] >= 0)
    return new[src.long()[e]], new[dst.long()[e]]


def _halo_rows(
    part_config,
    meta: dict,
    gids: Tensor,
    owner: Tensor,
    width: int,
    exact: bool,
    precision: str,
    aggregate: str = "agg",
    features: bool = True,
) -> tuple[NodeTable, Tensor, NodeTable | None]:
    """Features (none without ``features``: width 0), in-degrees and (exact) aggregates of halo nodes,
    read once from their owners' files."""
    n = gids.numel()
    # Stored owner by owner: one owner's rows in fp32 at a time, never the whole halo's.
    feat = NodeTable.empty(n, width, precision)
    deg = torch.empty(n, dtype=torch.int64)
    agg = NodeTable.empty(n, width, precision) if exact else None
    first = [lo for lo, _ in node_map(meta)]
    for p in torch.unique(owner).tolist():
        rows = (owner == p).nonzero(as_tuple=True)[0]
        idx = gids[rows] - first[p]
        _, _, feat_file = part_paths(part_config, p)
        other = _node_data(feat_file, part_config, p, features)
        if features:
            feat.put(rows, other["feat"][idx].float())
        deg[rows] = _in_degree(other, part_config, p, idx).to(torch.int64)
        del other
        if agg is not None:
            _put_sidecar(agg, rows, part_config, p, idx, what=aggregate)
    return feat, deg, agg


def _put_sidecar(
    table: NodeTable, rows: Tensor, part_config, part: int, idx: Tensor, chunk: int = 1 << 18, what: str = "agg"
) -> None:
    """Fill ``table[rows]`` with part ``part``'s aggregates ``what`` of its inner rows ``idx``, a bounded chunk at a
    time."""
    for a in range(0, idx.numel(), chunk):
        table.put(rows[a : a + chunk], load_sidecar(part_config, part, idx[a : a + chunk], what=what))


def _remote_owner_rows(part_config, part_id: int, rows: Tensor) -> int:
    """Partial-sum rows the owners send for the aggregates of inner ``rows`` (prepare's per-node count)."""
    try:
        counts = load_sidecar(part_config, part_id, rows, what="remote_owners")
    except ConfigError:
        return 0
    return int(counts.sum())


def remote_sample(ranges: list[tuple[int, int]], part_id: int, size: int, seed: int = 0) -> Tensor:
    """``size`` global ids drawn uniformly without replacement from the nodes other parts own (sorted;
    every one of them when ``size`` reaches their number). Seeded by ``seed`` and the part.

    Args:
        ranges: every part's global id range ``(first, end)`` (:func:`~dgl_grappa.partition.layout.node_map`).
        part_id: this part (its own range is left out).
        size: how many.
        seed: the run's seed.

    Example:
        >>> remote_sample([(0, 4), (4, 10)], 1, 2, seed=0).tolist() <= [0, 1, 2, 3]
        True
    """
    lo, hi = ranges[part_id]
    remote = ranges[-1][1] - (hi - lo)
    size = max(0, min(int(size), remote))
    gen = torch.Generator().manual_seed(seed * 1_000_003 + 7_919 * part_id + 17)
    if 4 * size >= remote:
        idx = torch.randperm(remote, generator=gen)[:size]
    else:  # a few draws with replacement, deduplicated: no permutation of every remote node
        idx = torch.empty(0, dtype=torch.int64)
        while idx.numel() < size:
            idx = torch.unique(torch.cat([idx, torch.randint(0, remote, (2 * size,), generator=gen)]))
        idx = idx[torch.randperm(idx.numel(), generator=gen)[:size]]
    idx = torch.sort(idx).values
    return torch.where(idx < lo, idx, idx + (hi - lo))  # skip this part's own range


def locate_ids(want: Tensor, gids: Tensor, n_local: int) -> Tensor:
    """The local id of every global id of ``want`` among the first ``n_local`` local nodes, -1 where absent."""
    have = gids[:n_local].to(torch.int64)
    order = torch.argsort(have)
    pos = torch.searchsorted(have[order], want).clamp(max=max(have.numel() - 1, 0))
    hit = (have[order][pos] == want) if have.numel() else torch.zeros_like(want, dtype=torch.bool)
    return torch.where(hit, order[pos] if have.numel() else want, torch.full_like(want, -1))


def draw_per_centre(centre: Tensor, fanout: int, gen: torch.Generator) -> Tensor:
    """Positions of at most ``fanout`` entries per value of ``centre`` (an edge's centre, >= 0), drawn uniformly
    without replacement: a random key per entry, sorted within each centre, the first ``fanout`` taken.

    Example:
        >>> draw_per_centre(torch.tensor([0, 0, 0, 1]), 2, torch.Generator().manual_seed(0)).numel()
        3
    """
    if not centre.numel():
        return torch.empty(0, dtype=torch.int64)
    order = torch.argsort(centre.double() * 2 + torch.rand(centre.numel(), generator=gen, dtype=torch.float64))
    counts = torch.bincount(centre[order])
    rank = torch.arange(centre.numel()) - (torch.cumsum(counts, 0) - counts)[centre[order]]
    return order[rank < fanout]


def pool_neighbours(
    part_config, ranges: list[tuple[int, int]], centres: Tensor, fanout: int, seed: int = 0
) -> tuple[Tensor, Tensor]:
    """Up to ``fanout`` in-neighbours of every node of ``centres`` (global ids), drawn uniformly without
    replacement (seeded) from its owner's part, which DGL's 1-hop layout gives all of its inner nodes'
    in-edges; read once, one owner's structure at a time.

    Returns:
        ``(src, dst)``: global ids of the drawn edges ``neighbour -> centre``.
    """
    firsts = torch.tensor([lo for lo, _ in ranges[1:]], dtype=torch.int64)
    owner = torch.bucketize(centres, firsts, right=True)
    gen = torch.Generator().manual_seed(seed * 1_000_003 + 31)
    src, dst = [], []
    for q in torch.unique(owner).tolist():
        mine = centres[owner == q]
        st = read_part_structure(part_config, q, in_edges_of_inner=True)
        local = locate_ids(mine, st["global_ids"], st["num_inner"])
        lo, hi = st["indptr"][local], st["indptr"][local + 1]
        deg = hi - lo
        seg = torch.repeat_interleave(torch.arange(mine.numel()), deg)
        edge = torch.repeat_interleave(lo - torch.cumsum(deg, 0) + deg, deg) + torch.arange(int(deg.sum()))
        take = draw_per_centre(seg, fanout, gen)
        src.append(st["global_ids"][st["indices"][edge[take]].long()])
        dst.append(mine[seg[take]])
        del st
    empty = torch.empty(0, dtype=torch.int64)
    return (torch.cat(src) if src else empty), (torch.cat(dst) if dst else empty)


def load_local(
    part_config: str | Path,
    part_id: int,
    halo: str = "drop",
    first_hop: str = "sampled",
    *,
    lean: bool = False,
    keep: Keep | None = None,
    aggregate: str = "agg",
    features: bool = True,
    pool: float = 0.0,
    pool_fanout: int = 0,
) -> LocalPartition:
    """Load worker ``part_id``'s local view of a partitioning (no servers, no network).

    Args:
        part_config: the partitioning's json.
        part_id: which part.
        halo: "drop" (inner nodes only) or "keep" (1-hop halo nodes kept, their rows read
            once here from the owners' partition files).
        first_hop: "exact" also loads the first-hop aggregates (``python -m dgl_grappa
            prepare`` writes them; ``partition`` does it itself); "sampled" does not.
        lean: build the graph as an int32 CSC straight from the part's files, with a
            fraction of the memory of ``dgl.distributed.load_partition``'s int64 COO + CSC
            (about 8 bytes per local edge instead of ~62); DGL then draws other, equally
            distributed samples.
        keep: what to keep under which budget (:class:`Keep`); default: every node, fp32.
        aggregate: the folder's first-hop table layer 0 reads (:func:`first_hop_table`): agg
            (the neighbour mean) or gcn (the ``GraphConv(norm='both')`` sum).
        features: False loads no features (learnable rows instead, ``model.embed``; the part
            may have none): ``feat`` is then a table of width 0, and a halo node costs only its
            in-degree; not with ``exact``.
        pool: link prediction's negative pool: ``ceil(pool x inner nodes)`` nodes of other parts
            (:func:`remote_sample`, seeded by ``keep.seed``), held as halo nodes are (features,
            in-degree, aggregates, read once from their owners' files; never sampled away by the
            budget); ``LocalPartition.pool`` lists them. 0: none.
        pool_fanout: in-neighbours per pool node outside the halo (:func:`pool_neighbours`), held as
            leaves (their rows read once, as the halo's), so that a pool node's sampled tree is a
            tree as any other node's; 0: no edges (a pool node's sampled neighbourhood is empty). A
            pool node in the halo keeps the halo's neighbourhood (the own nodes that point at it).

    Returns:
        A :class:`LocalPartition`. Its ``one_time_bytes`` is what a worker of a real cluster
        moves once per partitioning: every kept halo (and pool) row's features, in-degree (8 bytes) and,
        with ``exact``, aggregate, in the stored precision; and with ``exact`` and a halo that
        is not kept whole, at most one fp32 partial-sum row per (kept inner node, other owner
        of its in-neighbours) for its aggregate (with the whole halo the owner computes them
        from the halo rows it reads).

    Raises:
        ConfigError: node data or aggregates missing, a budget that cannot hold the own rows.
    """
    check_modes(first_hop, halo)
    keep = keep or Keep()
    exact = first_hop == "exact"
    if exact and not features:
        raise ValueError(
            "first_hop='exact' aggregates features: load_local(..., features=False) needs first_hop='sampled'"
        )
    t0 = time.perf_counter()
    meta, _, feat_file = part_paths(part_config, part_id)
    if lean:
        st = read_part_structure(part_config, part_id, halo)
        n_local, num_inner = st["num_nodes"], st["num_inner"]
        indptr, src = st["indptr"], st["indices"]
        if int(src.numel()) >= 2**31 or n_local >= 2**31:
            raise ValueError(f"part {part_id} has {src.numel()} edges / {n_local} nodes: too many for int32 ids")
        dst = torch.repeat_interleave(torch.arange(n_local, dtype=torch.int32), indptr[1:] - indptr[:-1])
        gids, owner = st["global_ids"][:n_local].clone(), st["owner"][:n_local].clone()
        num_parts = st["num_parts"]
        graph = None
    else:
        pg, _, _, gpb, _, _, _ = dgl.distributed.load_partition(str(part_config), part_id, load_feats=False)
        graph, num_inner, src, dst = local_graph(pg, pg.ndata["inner_node"], halo)
        n_local = graph.num_nodes()
        gids = pg.ndata[dgl.NID][:n_local]
        # DGL writes no part_id for a 1-part partitioning: every node is then owned by part 0.
        owner = (
            pg.ndata["part_id"].to(torch.int64)
            if "part_id" in pg.ndata
            else torch.full_like(pg.ndata[dgl.NID], part_id)
        )[:n_local]
        num_parts = gpb.num_partitions()
        del pg
    node = _node_data(feat_file, part_config, part_id, features)
    train_local = node["train_mask"].bool().nonzero(as_tuple=True)[0]
    width = int(node["feat"].shape[1]) if features else 0
    own_fp32 = num_inner * width * 4
    # What can appear in a batch: every node, or what the seeds' trees reach; under the budget.
    top = float(node["feat"].abs().max()) if features and node["feat"].numel() else 0.0
    tables = 2 if exact else 1
    ranges = node_map(meta)
    pool_gids, pool_halo, extra_out, pool_src, pool_dst = None, None, torch.empty(0, dtype=torch.int64), None, None
    if pool > 0:
        if keep.reach is not None:
            raise ValueError(
                "a negative pool needs every node of the part kept: load_local(..., keep=Keep(reach=None))"
            )
        pool_gids = remote_sample(ranges, part_id, math.ceil(pool * num_inner), keep.seed)
        at = locate_ids(pool_gids, gids, n_local)
        held_g = pool_gids
        if pool_fanout > 0:  # the pool's nodes outside the halo get a tree: a sample of their in-neighbours
            pool_src, pool_dst = pool_neighbours(
                part_config, ranges, pool_gids[at < 0], pool_fanout, keep.seed * 7919 + part_id
            )
            held_g = torch.unique(torch.cat([pool_gids, pool_src]))
        at_all = locate_ids(held_g, gids, n_local)
        pool_halo = torch.zeros(n_local, dtype=torch.bool)
        pool_halo[at_all[at_all >= num_inner]] = True
        extra_out = held_g[at_all < 0]  # sorted: read from their owners, appended after the kept nodes
    kept, inner_kept, halo_reach, precision = choose_kept(
        src,
        dst,
        n_local,
        num_inner,
        train_local,
        keep,
        width,
        inner_tables=tables,
        halo_tables=tables,
        part_id=part_id,
        top=top,
        required=pool_halo,
        extra=int(extra_out.numel()),
    )
    halo_kept = kept[inner_kept.numel() :]
    partial_rows = 0  # fp32 partial sums from other owners, for aggregates the kept halo rows do not cover
    if exact and halo == "drop":
        partial_rows = _remote_owner_rows(part_config, part_id, inner_kept)
    elif exact and halo_kept.numel() < n_local - num_inner:
        held = torch.zeros(n_local, dtype=torch.bool)
        held[kept] = True
        s, d = src.long(), dst.long()
        miss = (d < num_inner) & held[d] & (s >= num_inner) & ~held[s]
        partial_rows = int(torch.unique(d[miss] * num_parts + owner[s[miss]]).numel())
    pool_ids = None
    if pool_gids is not None:  # the pool in new ids: local ones where they were kept, the others appended
        new = torch.full((n_local,), -1, dtype=torch.int64)
        new[kept] = torch.arange(kept.numel())

        def new_id(g: Tensor) -> Tensor:
            at = locate_ids(g, gids, n_local)
            appended = kept.numel() + torch.searchsorted(extra_out, g)
            return torch.where(at >= 0, new[at.clamp(min=0)], appended)

        pool_ids = torch.sort(new_id(pool_gids)).values
        if pool_src is not None and pool_src.numel():
            pool_src, pool_dst = new_id(pool_src), new_id(pool_dst)
    if kept.numel() < n_local:  # relabel the kept nodes 0..k-1, inner first, and keep their edges
        src, dst = relabel(src, dst, kept, n_local)
        if lean:
            src, dst = src.to(torch.int32), dst.to(torch.int32)
        graph = None
        gids, owner = gids[kept], owner[kept]
    n_pool_edges = 0
    if extra_out.numel():
        firsts = torch.tensor([lo for lo, _ in ranges[1:]], dtype=torch.int64)
        gids = torch.cat([gids, extra_out.to(gids.dtype)])
        owner = torch.cat([owner, torch.bucketize(extra_out, firsts, right=True).to(owner.dtype)])
        graph = None
    if pool_src is not None and pool_src.numel():  # the pool's drawn in-edges, after the part's own
        src = torch.cat([src, pool_src.to(src.dtype)])
        dst = torch.cat([dst, pool_dst.to(dst.dtype)])
        n_pool_edges = int(pool_src.numel())
        graph = None
    n_keep, n_inner_keep = kept.numel(), inner_kept.numel()
    n_all = n_keep + int(extra_out.numel())  # the local graph's nodes: kept ones, then the pool's others
    if graph is None:
        if lean:
            counts = torch.bincount(dst.long(), minlength=n_all)
            indptr = torch.zeros(n_all + 1, dtype=torch.int64)
            torch.cumsum(counts, 0, out=indptr[1:])
            eids = torch.arange(src.numel(), dtype=torch.int32)
            graph = dgl.graph(
                ("csc", (indptr.to(torch.int32), src.to(torch.int32), eids)), num_nodes=n_all, idtype=torch.int32
            )
        else:
            graph = dgl.graph((src, dst), num_nodes=n_all).formats(["coo", "csc"])
    new_inner = torch.full((num_inner,), -1, dtype=torch.int64)
    new_inner[inner_kept] = torch.arange(n_inner_keep)
    train_ids = new_inner[train_local]
    if lean:
        train_ids = train_ids.to(torch.int32)
    in_degree = _in_degree(node, part_config, part_id, None).to(torch.int64)[inner_kept]
    all_inner = n_inner_keep == num_inner
    if not features:
        feat = NodeTable.store(torch.zeros((n_inner_keep, 0)), precision)
    else:
        feat = NodeTable.store(node["feat"] if all_inner else node["feat"][inner_kept], precision)
    label = node["label"].to(torch.int64)[inner_kept]
    del node
    agg = None
    if exact:
        agg = NodeTable.empty(n_inner_keep, width, precision)
        _put_sidecar(agg, torch.arange(n_inner_keep), part_config, part_id, inner_kept, what=aggregate)
    halo_bytes = one_time = 0
    n_halo = n_all - n_inner_keep  # the kept halo's nodes and the pool's others: rows read from their owners
    if n_halo:
        hfeat, hdeg, hagg = _halo_rows(
            part_config, meta, gids[n_inner_keep:], owner[n_inner_keep:], width, exact, precision, aggregate, features
        )
        feat = NodeTable.cat([feat, hfeat])
        in_degree = torch.cat([in_degree, hdeg])
        agg = NodeTable.cat([agg, hagg]) if exact else None
        halo_bytes = n_halo * width * 4
        one_time = n_halo * (int(row_bytes(width, precision)) * (2 if exact else 1) + 8)
    one_time += partial_rows * width * 4 + n_pool_edges * 8  # and the pool's drawn neighbours' ids
    memory = _memory(
        feat, agg, n_inner_keep, n_all, precision, [gids, owner, label, train_ids, in_degree, src, dst], graph
    )
    limit = keep.limit(own_fp32)
    tables_bytes = feat.nbytes + (agg.nbytes if agg is not None else 0)
    return LocalPartition(
        part_id=part_id,
        num_parts=num_parts,
        graph=graph,
        num_inner=n_inner_keep,
        global_ids=gids,
        owner=owner,
        feat=feat,
        label=label,
        train_ids=train_ids,
        in_degree=in_degree,
        src=src,
        dst=dst,
        halo_bytes_loaded=halo_bytes,
        load_seconds=time.perf_counter() - t0,
        agg=agg,
        one_time_bytes=one_time,
        rows_held=n_all * (2 if exact else 1),
        part_inner=num_inner,
        own_fp32_bytes=own_fp32,
        memory=memory,
        keep={
            "precision": precision,
            "reach": keep.reach,
            "nodes": n_local,
            "kept": n_keep,
            "inner_kept": n_inner_keep,
            "halo": n_local - num_inner,
            "halo_reach": int(halo_reach.numel()),
            "halo_kept": n_keep - n_inner_keep,
            "budget_bytes": limit if limit < float("inf") else None,
            "over_budget_bytes": max(0, int(tables_bytes - limit)) if limit < float("inf") else 0,
            "pool": 0 if pool_ids is None else int(pool_ids.numel()),
            "pool_read": int(extra_out.numel()),
            "pool_edges": n_pool_edges,
        },
        pool=pool_ids,
        num_nodes_total=ranges[-1][1],
    )


def _memory(
    feat: NodeTable, agg: NodeTable | None, n_inner: int, n: int, precision: str, others: list, graph: dgl.DGLGraph
) -> dict:
    def split(t: NodeTable | None) -> tuple[int, int]:
        if t is None or n == 0:
            return 0, 0
        per = t.nbytes / n
        return int(round(per * n_inner)), t.nbytes - int(round(per * n_inner))

    fi, fh = split(feat)
    ai, ah = split(agg)
    other = sum(int(x.numel() * x.element_size()) for x in others)
    # the graph's CSC (built for sampling) besides the src/dst edge list counted above
    other += (graph.num_nodes() + 1 + 2 * graph.num_edges()) * (4 if graph.idtype == torch.int32 else 8)
    return {
        "precision": precision,
        "feat_inner": fi,
        "feat_halo": fh,
        "agg_inner": ai,
        "agg_halo": ah,
        "resident": fi + fh + ai + ah,
        "other": other,
    }


def load_local_lean(
    part_config: str | Path, part_id: int, halo: str = "drop", first_hop: str = "sampled", *, keep: Keep | None = None
) -> LocalPartition:
    """:func:`load_local` with ``lean=True`` (``partition.prebuilt``)."""
    return load_local(part_config, part_id, halo, first_hop, lean=True, keep=keep)


def first_hop_table(model) -> str:
    """The partition folder's first-hop table a model's layer 0 reads (``model``: the config's
    model section): ``gcn`` for GCN with ``gcn_norm: both``, else ``agg`` (the neighbour mean)."""
    return "gcn" if model.name == "gcn" and getattr(model, "gcn_norm", "right") == "both" else "agg"
