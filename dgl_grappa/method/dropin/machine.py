"""What a drop-in loader holds of its machine: the rows a batch reads, served from local memory.

A DistDGL trainer's machine holds its partition (``g.local_partition``) and, in the co-located server's
shared memory, the own nodes' node data (``g.ndata[k].local_partition``). :class:`MachineTables` adds, read
once, what the native runtime keeps (:func:`~dgl_grappa.method.local_part.choose_kept`): the kept halo's
feature rows and in-degrees through the KVStore, this machine's first-hop aggregates from the partition
folder and the halo's through a temporary DistTensor, in the precision the memory budget leaves room for;
then it serves every row a batch asks for from memory (:meth:`~MachineTables.features`,
:meth:`~MachineTables.degrees`, :meth:`~MachineTables.aggregates`, learnable rows
:meth:`~MachineTables.embedding`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import dgl
import torch
from torch import Tensor

from ...config import ConfigError, parse_budget
from ...partition.aggregates import feature_key, load_sidecar, read_prepared
from ..embedding import LocalEmbedding
from ..local_part import Keep, choose_kept, draw_per_centre, local_graph, locate_ids, remote_sample
from ..storage import NodeTable, row_bytes
from .options import LoaderOptions

log = logging.getLogger("dgl_grappa")


class MachineTables:
    """The tables a drop-in loader reads once from its trainer's machine, and serves every row from.

    Args:
        g: the DistGraph (its machine must hold a partition: ``g.local_partition``).
        sampler: the script's sampler (its number of layers bounds what the seeds' trees reach).
        options: the loader's :class:`~.options.LoaderOptions` (``seed``, ``halo``, ``first_hop``, ``aggregate``,
            ``part_config``, ``memory_budget``, ``storage``, ``train_key``, ``degree_key``, ``feat_key`` are read).
        every_node: keep every node of the part (link prediction: any node may end a pair), not
            only what the training seeds' trees reach.
        negative_pool: other machines' nodes per own node held as negatives (:class:`~.loaders.GrappaEdgeLoader`).
        pool_fanout: in-edges held per pool node outside the halo (:class:`~.loaders.GrappaEdgeLoader`).
        halo_fanout: in-edges from other machines' nodes held per halo node (:class:`~.loaders.GrappaEdgeLoader`).

    Attributes:
        options: the :class:`~.options.LoaderOptions` it was made with.
        local_partition, inner, global_ids, train_mask, in_degree: the part as the core loader reads it
            (``in_degree`` in local id order, the kept halo's read once).
        feat_key: the features' node-data key (``feat_key="auto"`` resolved), or None (no features).
        kept: local ids of the nodes kept (inner first), ``precision``: the tables' precision.
        one_time_bytes: bytes read once (the kept halo's rows and, with a first-hop mode, aggregates; the in-edges
            of other machines' nodes as the servers sent them).
        pool_edges: ``(src, dst, edge id)``, global ids, of the in-edges held for other machines' nodes (the halo's
            and the pool's) besides the part's.
        halo_reach, halo_kept: the halo nodes the seeds' trees reach, and those kept.
    """

    def __init__(
        self,
        g,
        sampler,
        options: LoaderOptions,
        *,
        every_node: bool = False,
        negative_pool: float = 0.0,
        pool_fanout: int = 0,
        halo_fanout: int = 0,
    ):
        self.options = options
        seed, halo, first_hop, part_config = options.seed, options.halo, options.first_hop, options.part_config
        train_key, degree_key, storage = options.train_key, options.degree_key, options.storage
        part_graph = g.local_partition
        if part_graph is None:
            raise RuntimeError(
                "this trainer's machine holds no partition (g.local_partition is None); the "
                "drop-in loader needs co-located servers and trainers"
            )
        completes = first_hop != "sampled"
        if completes and part_config is None:
            raise ValueError(
                f"first_hop={first_hop!r} needs part_config= (this machine's aggregates are read from "
                "the partition folder); or use first_hop='sampled'"
            )
        inner = part_graph.ndata["inner_node"].bool()
        n_inner = int(inner.sum())
        gids = part_graph.ndata[dgl.NID]
        # The node data's local rows (``.local_partition``) are the inner nodes in global id
        # order; they line up with the local ids only for one contiguous range.
        first = int(gids[0]) if n_inner else 0
        if n_inner and not torch.equal(gids[:n_inner], torch.arange(first, first + n_inner, dtype=gids.dtype)):
            raise RuntimeError(
                "the inner nodes' global ids are not one contiguous range; partition with "
                "dgl.distributed.partition_graph (reshuffled ids)"
            )
        self._first, self._n_inner, self.num_nodes_total = first, n_inner, g.num_nodes()
        self._embedding = None  # made by embedding()
        feat_key = feature_key({k: g.ndata[k] for k in g.ndata}, options.feat_key, "the DistGraph")
        self.feat_key = feat_key
        self._has_feat = feat_key is not None
        if feat_key is not None:
            self._feat = g.ndata[feat_key].local_partition  # the server's own rows, in shared memory
        else:
            self._feat = torch.zeros((n_inner, 0))  # no features: learnable rows instead
        if feat_key is None and completes:
            raise ConfigError(
                f"first_hop={first_hop!r} aggregates features, and the loader has none (feat_key=None, "
                "or no 2-D float node data); use first_hop='sampled' with learnable rows"
            )
        width = int(self._feat.shape[1])
        if train_key not in g.ndata:
            raise ConfigError(
                f"the DistGraph has no node data {train_key!r} (its node data: {sorted(g.ndata)}); pass "
                "train_key=<the training mask's key>"
            )
        train = g.ndata[train_key].local_partition[:n_inner]
        part_id = int(g.get_partition_book().partid)
        if degree_key in g.ndata:
            deg = g.ndata[degree_key].local_partition[:n_inner]
        elif part_config is not None and read_prepared(part_config) is not None:  # prepare wrote them
            deg = load_sidecar(part_config, part_id, what="in_degree")
        else:
            log.info(
                "node data %r is missing and the folder is not prepared: asking the servers for the in-degrees once",
                degree_key,
            )
            deg = g.in_degrees(gids[:n_inner])
        # What to keep: the native runtime's choice, with the server's fp32 features already held.
        _, _, src, dst = local_graph(part_graph, inner, halo)
        n_local = n_inner + (int((~inner).sum()) if halo == "keep" else 0)
        mult, size = parse_budget(options.memory_budget)
        layers = len(getattr(sampler, "fanouts", []) or [])
        # The edge loader reaches every node: any node it holds can be the end of a pair.
        reach = None if every_node or not layers else (layers - 1 if completes else layers)
        # The edge loader never samples away a positive edge's source (nor the negative pool's halo nodes): the
        # budget gives memory there, not edges (over it, with a warning).
        keep = Keep(reach=reach, storage=storage, budget=mult, budget_bytes=size, seed=seed, positives=every_node)
        top = float(self._feat.abs().max()) if self._feat.numel() else 0.0
        beyond = _beyond_the_part(g, gids, n_local, n_inner, part_id, negative_pool, seed, pool_fanout, halo_fanout)
        self.pool_edges = beyond.edges
        kept, inner_kept, halo_reach, precision = choose_kept(
            src,
            dst,
            n_local,
            n_inner,
            train.bool().nonzero(as_tuple=True)[0],
            keep,
            width,
            inner_tables=1 if completes else 0,
            halo_tables=2 if completes else 1,
            part_id=part_id,
            top=top,
            fixed=n_inner * width * 4,
            required=beyond.required,
            extra=int(beyond.extra.numel()),
        )
        self.precision, self.part_id, self.memory_budget = precision, part_id, options.memory_budget
        self._room = keep.limit(n_inner * width * 4) - n_inner * width * 4  # what the budget leaves the tables
        halo_ids = kept[inner_kept.numel() :]
        # Every row held besides the own ones, sorted by global id: the kept halo's (DGL orders a part's halo by
        # global id) and the negative pool's nodes outside the halo, which the local graph holds as isolated nodes.
        self.pool_gids, self.extra_gids = beyond.pool, beyond.extra
        self._halo_gids = torch.cat([gids[halo_ids].to(torch.int64), beyond.extra])
        order = torch.argsort(self._halo_gids)
        self._halo_gids = self._halo_gids[order]
        halo_ids = halo_ids[order[order < halo_ids.numel()]]
        kept = torch.cat([inner_kept, halo_ids])
        holds = halo == "keep" or negative_pool > 0  # the same on every trainer: the exchange below is collective
        # Read once: the held rows through the KVStore, the aggregates from the folder.
        self.halo_feat = (
            NodeTable.store(g.ndata[feat_key][self._halo_gids], precision) if holds and feat_key is not None else None
        )
        halo_deg = (
            (g.ndata[degree_key][self._halo_gids] if degree_key in g.ndata else g.in_degrees(self._halo_gids))
            if self._halo_gids.numel()
            else deg[:0]
        )
        self.agg, self.halo_agg = None, None
        self._agg_row = torch.full((n_inner,), -1, dtype=torch.int64)
        self._agg_row[inner_kept] = torch.arange(inner_kept.numel())
        if completes:
            self.agg, self.halo_agg = _aggregates(
                g,
                part_config,
                part_id,
                inner_kept,
                self._halo_gids,
                width,
                precision,
                holds,
                "agg" if options.aggregate == "mean" else "gcn",
            )
        per_halo = row_bytes(width, precision) * (2 if completes else 1) + 8
        # and the in-edges the servers sent for other machines' nodes: source, destination and edge id, 8 bytes each
        self.one_time_bytes = int(self._halo_gids.numel() * per_halo + 24 * beyond.edges_read)
        self.halo_reach, self.halo_kept = int(halo_reach.numel()), int(halo_ids.numel())
        log.info(
            "drop-in: part %d keeps %d of %d inner nodes and %d of %d reachable halo nodes, tables in %s "
            "(%d bytes besides the server's features; %d bytes read once)",
            part_id,
            inner_kept.numel(),
            n_inner,
            self.halo_kept,
            self.halo_reach,
            precision,
            self.nbytes,
            self.one_time_bytes,
        )
        self._deg, self._halo_deg = deg, halo_deg.to(deg.dtype)
        deg_all = torch.zeros(n_local, dtype=deg.dtype)  # in local id order, as the core loader reads it
        deg_all[:n_inner] = deg
        if halo_ids.numel():
            deg_all[halo_ids] = self.degrees(gids[halo_ids].to(torch.int64))
        self.extra_deg = self.degrees(beyond.extra) if beyond.extra.numel() else deg[:0]
        self.local_partition, self.inner, self.global_ids, self.train_mask = part_graph, inner, gids, train
        self.in_degree, self.kept, self.halo, self.first_hop = deg_all, kept, halo, first_hop

    def budget_report(self, edges: dict | None = None) -> tuple[bool, str]:
        """What ``memory_budget`` did to this loader: (whether it cost anything, one line saying what it kept).

        It costs something when the tables are stored below fp32, or when the halo is kept and not all of
        its reachable nodes fit. ``edges``: the edge loader's usable-edge counts (the share of the edges this
        machine owns that it trains on).
        """
        held = self.halo == "keep" and self._has_feat or self.agg is not None  # feature-width tables
        lossy = held and self.precision != "fp32"
        cut = self.halo == "keep" and self.halo_kept < self.halo_reach
        what = f"tables in {self.precision}" if held else "no feature-width tables"
        if self.halo == "keep":
            share = self.halo_kept / self.halo_reach if self.halo_reach else 1.0
            what += f", {self.halo_kept} of {self.halo_reach} reachable halo nodes kept ({share:.1%})"
        if self.pool_gids.numel():
            what += f", a negative pool of {self.pool_gids.numel()} other machines' nodes"
        if self.pool_edges[0].numel():
            what += f", {self.pool_edges[0].numel()} in-edges of other machines' nodes besides the part's"
        if edges is not None:
            what += (
                f", training on {edges['positives']} of the {edges['owned']} edges it owns "
                f"({edges['usable_fraction']:.1%})"
            )
        else:
            what += ", every training node kept"
        over = self.nbytes - self._room
        if over > 0:  # the edge loader keeps every positive edge's source: memory given, not edges
            what += f", {over / 1e6:.2f} MB over the budget"
        return lossy or cut or over > 0, (
            f"drop-in loader, part {self.part_id}, memory_budget={self.memory_budget}: "
            f"{what} ({self.nbytes} bytes held besides the server's features)"
        )

    @property
    def nbytes(self) -> int:
        """Bytes of the feature-width tables this loader holds (the server holds the own features), and of
        the learnable rows of :meth:`embedding` with their optimizer's moments."""
        held = sum(t.nbytes for t in (self.agg, self.halo_agg, self.halo_feat) if t is not None)
        return held + (self._embedding.memory()["embed"] if self._embedding is not None else 0)

    def embedding(self, dim: int, seed: int = 0) -> "GlobalIdEmbedding":
        """Learnable input rows for this machine's nodes: the drop-in for the script's ``DistEmbedding``.

        Own nodes get trainable rows, updated by the module's :meth:`~.embedding.LocalEmbedding.optimizer`
        (PyTorch's ``SparseAdam``, on this machine); with ``halo="keep"`` the kept halo nodes get their
        owners' initial rows, frozen (:mod:`.embedding`). Nothing is read from the KVStore, and no row or
        gradient ever leaves the machine. Called with a batch's global ``input_nodes``.

        Args:
            dim: row width.
            seed: seed of the initial rows (every trainer must use the same).

        Example:
            >>> emb = loader.embedding(64)  # was DistEmbedding(g.num_nodes(), 64, ...)  # doctest: +SKIP
            >>> emb_opt = emb.optimizer(lr=0.01)  # was dgl.distributed.optim.SparseAdam([emb], lr=0.01)
            ... # doctest: +SKIP
            >>> for input_nodes, seeds, blocks in loader:  # doctest: +SKIP
            ...     loss = F.cross_entropy(model(blocks, emb(input_nodes)), labels); ...; emb_opt.step()
        """
        if self.first_hop != "sampled":
            raise ValueError(
                f"first_hop={self.first_hop!r} precomputes aggregates of features; learnable rows need "
                "first_hop='sampled'"
            )
        if self._embedding is None:
            self._embedding = GlobalIdEmbedding(self, dim, seed)
        return self._embedding

    def _split(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        """(mask of own nodes, position of each other node in the kept halo) for global ``ids``."""
        own = (ids >= self._first) & (ids < self._first + self._n_inner)
        pos = torch.searchsorted(self._halo_gids, ids[~own])
        if pos.numel() and (
            bool((pos >= self._halo_gids.numel()).any())
            or not torch.equal(self._halo_gids[pos.clamp(max=max(self._halo_gids.numel() - 1, 0))], ids[~own])
        ):
            raise RuntimeError("a batch asked for a node this machine does not hold (the loader left its part)")
        return own, pos

    def features(self, input_nodes: Tensor) -> Tensor:
        """fp32 input rows of a batch's ``input_nodes``, all from this machine's memory.

        Own nodes come from the server's shared memory, kept halo nodes from the rows read
        once, and with ``first_hop="block"`` the virtual ids (``num_nodes`` + v) are v's
        first-hop aggregates.
        """
        if not self._has_feat:
            raise RuntimeError(
                "this loader was made with feat_key=None: it holds no features; read the input rows "
                "from loader.embedding(dim)"
            )
        ids = input_nodes.to(torch.int64)
        out = torch.empty((ids.numel(), self._feat.shape[1]), dtype=torch.float32)
        virtual = ids >= self.num_nodes_total
        if bool(virtual.any()):
            out[virtual] = self.aggregates(ids[virtual] - self.num_nodes_total)
        real = ~virtual
        if bool(real.any()):
            r = ids[real]
            own, pos = self._split(r)
            rows = torch.empty((r.numel(), out.shape[1]), dtype=torch.float32)
            rows[own] = self._feat[r[own] - self._first].float()
            if pos.numel():
                rows[~own] = self.halo_feat.gather(pos)
            out[real] = rows
        return out

    def degrees(self, input_nodes: Tensor) -> Tensor:
        """Full-graph in-degrees of ``input_nodes`` (global ids this machine holds), from local memory."""
        ids = input_nodes.to(torch.int64)
        own, pos = self._split(ids)
        out = torch.empty(ids.numel(), dtype=self._deg.dtype)
        out[own] = self._deg[ids[own] - self._first]
        if pos.numel():
            out[~own] = self._halo_deg[pos]
        return out

    def aggregates(self, input_nodes: Tensor) -> Tensor:
        """fp32 first-hop aggregates of ``input_nodes`` (global ids this machine holds), from local memory."""
        if self.agg is None:
            raise RuntimeError("this loader was made with first_hop='sampled': it holds no aggregates")
        ids = input_nodes.to(torch.int64)
        own, pos = self._split(ids)
        out = torch.empty((ids.numel(), self.agg.shape[1]), dtype=torch.float32)
        rows = self._agg_row[ids[own] - self._first]
        if bool((rows < 0).any()):
            raise RuntimeError("a batch asked for the aggregate of a node its seeds' trees cannot reach")
        out[own] = self.agg.gather(rows)
        if pos.numel():
            out[~own] = self.halo_agg.gather(pos)
        return out


class GlobalIdEmbedding(LocalEmbedding):
    """:class:`~.embedding.LocalEmbedding` over one machine's :class:`MachineTables`, called with global ids.

    Rows: the machine's own nodes (global ids ``first .. first + n``, in order), then the kept
    halo (the loader's sorted halo ids). Made by :meth:`MachineTables.embedding`.
    """

    def __init__(self, loader: "MachineTables", dim: int, seed: int = 0):
        own = torch.arange(loader._first, loader._first + loader._n_inner, dtype=torch.int64)
        super().__init__(torch.cat([own, loader._halo_gids]), loader._n_inner, dim, seed)
        self._split = loader._split
        self._first = loader._first

    def forward(self, input_nodes: Tensor) -> Tensor:
        """Rows of the global ids ``input_nodes`` (nodes this machine holds)."""
        ids = input_nodes.to(torch.int64)
        own, pos = self._split(ids)
        local = torch.empty_like(ids)
        local[own] = ids[own] - self._first
        local[~own] = self.num_inner + pos
        return super().forward(local)


@dataclass(frozen=True)
class BeyondThePart:
    """What the edge loader holds of other machines besides the part's halo (:func:`_beyond_the_part`).

    Attributes:
        pool: the negative pool's global ids, sorted.
        required: a bool mask over the local nodes of the pool's nodes already in the halo and of the drawn edges'
            local ends (never sampled away by the budget); None when nothing beyond the part is held.
        extra: the other global ids to hold, sorted: the pool's nodes outside the halo and the drawn edges' other
            sources (the local graph holds them as isolated nodes).
        edges: the drawn in-edges ``(src, dst, edge id)`` in global ids.
        edges_read: how many edges the servers sent for the draw (its one-time bytes).
    """

    pool: Tensor
    required: Tensor | None
    extra: Tensor
    edges: tuple[Tensor, Tensor, Tensor]
    edges_read: int


def _beyond_the_part(
    g,
    gids: Tensor,
    n_local: int,
    n_inner: int,
    part_id: int,
    size: float,
    seed: int,
    fanout: int = 0,
    halo_fanout: int = 0,
) -> BeyondThePart:
    """The edge loader's negative pool (the native runtime's ``link.negative_pool``): ``ceil(size x own nodes)`` nodes
    of the other machines, drawn uniformly (:func:`~dgl_grappa.method.local_part.remote_sample`), their rows read
    once beside the halo's; with ``fanout`` > 0, up to that many in-edges of each pool node outside the halo, and
    with ``halo_fanout`` > 0 up to that many of each halo node's in-edges from other machines' nodes (the part holds
    those from its own), asked once from the servers (all of them, then a seeded uniform draw here), their sources
    held as leaves.
    """
    empty = torch.empty(0, dtype=torch.int64)
    pool = empty
    if size > 0:
        gpb = g.get_partition_book()
        ranges = []
        for p in range(gpb.num_partitions()):
            ids = gpb.partid2nids(p)
            ranges.append((int(ids[0]), int(ids[-1]) + 1) if ids.numel() else (ranges[-1][1] if ranges else 0,) * 2)
        pool = remote_sample(ranges, part_id, math.ceil(size * n_inner), seed)
    at = locate_ids(pool, gids, n_local)
    held, read, drawn = pool, 0, []
    first = int(gids[0]) if n_inner else 0  # own nodes are one range of global ids from the first local one
    # Without in-edges a pool node outside the halo has no neighbourhood, and a halo node only its neighbours on
    # this machine (for a positive pair's source, its partner among few), unlike every positive pair's destination
    # (an own node with its whole neighbourhood): the encoder can learn those shapes rather than the graph.
    groups = ((pool[at < 0], fanout, 7919), (gids[n_inner:n_local].to(torch.int64), halo_fanout, 7927))
    groups = [(centres, k, salt) for centres, k, salt in groups if k > 0 and centres.numel()]
    if groups:  # one request for both groups' centres (disjoint: the pool's outside the halo, the halo's)
        sg = dgl.distributed.sample_neighbors(g, torch.cat([centres for centres, _, _ in groups]), -1)
        src_all, dst_all = (e.to(torch.int64) for e in sg.edges())
        eid_all = sg.edata[dgl.EID].to(torch.int64)
        read = eid_all.numel()
        theirs = (src_all < first) | (src_all >= first + n_inner)  # the in-edges from own nodes are in the part
    for centres, k, salt in groups:
        mine = theirs & torch.isin(dst_all, centres)
        order = torch.argsort(eid_all[mine])  # the servers' order may vary from run to run; the seeded draw must not
        src, dst, eid = src_all[mine][order], dst_all[mine][order], eid_all[mine][order]
        centre = torch.unique(dst, return_inverse=True)[1]
        take = draw_per_centre(centre, k, torch.Generator().manual_seed(seed * salt + part_id))
        drawn.append((src[take], dst[take], eid[take]))
    edges = tuple(torch.cat(e) for e in zip(*drawn)) if drawn else (empty, empty, empty)
    if drawn:
        held = torch.unique(torch.cat([pool, edges[0], edges[1]]))
    if not held.numel():
        return BeyondThePart(pool, None, empty, edges, read)
    at = locate_ids(held, gids, n_local)
    required = torch.zeros(n_local, dtype=torch.bool)
    required[at[at >= 0]] = True
    return BeyondThePart(pool, required, held[at < 0], edges, read)


_EXCHANGES = 0
"""Temporary DistTensors made so far (their names must differ; every trainer counts the same)."""


def _aggregates(
    g,
    part_config,
    part_id: int,
    inner_kept: Tensor,
    halo_gids: Tensor,
    width: int,
    precision: str,
    with_halo: bool,
    what: str = "agg",
):
    """This machine's kept aggregates, and (with the halo) the kept halo's, read once through the KVStore.

    The owners publish their nodes' aggregates in a temporary DistTensor (each writes its own
    rows: local), every machine pulls its halo's rows once, and the tensor is dropped.
    """
    n_inner = int(g.local_partition.ndata["inner_node"].bool().sum())
    agg = load_sidecar(part_config, part_id, what=what)
    if agg.shape != (n_inner, width):
        raise ValueError(
            f"the aggregates of part {part_id} in {part_config} are {tuple(agg.shape)}, not "
            f"({n_inner}, {width}): the folder was prepared for another partitioning; run "
            "`python -m dgl_grappa prepare` again"
        )
    mine = NodeTable.store(agg[inner_kept], precision)
    if not with_halo:
        return mine, None
    first = int(g.local_partition.ndata[dgl.NID][0]) if n_inner else 0
    global _EXCHANGES
    _EXCHANGES += 1  # the same count on every trainer: they build their loaders together
    shared = dgl.distributed.DistTensor(
        (g.num_nodes(), width),
        torch.float32,
        name=f"grappa_first_hop_agg_{_EXCHANGES}",
        part_policy=g.get_node_partition_policy("_N"),
        persistent=False,
    )
    shared[torch.arange(first, first + n_inner)] = agg
    g.barrier()  # every owner has written its rows
    theirs = (
        NodeTable.store(shared[halo_gids], precision)
        if halo_gids.numel()
        else NodeTable.store(torch.zeros((0, width)), precision)
    )
    g.barrier()  # every machine has read before the tensor goes
    del shared
    return mine, theirs
