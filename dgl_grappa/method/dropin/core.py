"""The drop-in's core: local-only batches of one partition, from plain tensors.

:class:`PartitionLoader` (node classification) and :class:`PartitionEdgeLoader` (link prediction)
take a part in DGL's layout as tensors (``dgl.distributed.load_partition``'s graph, or a DistGraph's
``local_partition``) and yield batches like DGL's distributed loaders, in global ids. The loaders of
a DistDGL script (:mod:`.loaders`, :mod:`.hetero`) build on them; the native runtime computes the
same batches from the same functions (:mod:`dgl_grappa.kinds`).
"""

from __future__ import annotations

import dgl
import torch
from torch import Tensor

from ...config import dropin_problem
from ...partition.layout import part_edges
from .. import coverage as cov
from ..link import LocalEdgeBatches, NegativePool, as_local_negatives, edge_usability, positive_edges
from ..local_part import local_graph, locate_ids, relabel
from ..reducers.correction import Correction
from ..sampler import LocalBatches, equal_steps, seeded_workers, skip_first_layer
from .options import LoaderOptions

NO_EDGE = -1
"""``edata[dgl.EID]`` of the virtual first-hop block's edges (first_hop="block"): they are no edge of the graph."""


def _world() -> int:
    return torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1


CORE_OPTIONS = LoaderOptions(halo="drop")
"""A core loader's options when it is given none: it serves no rows, so it keeps no halo unless told to."""


def _refuse(correction: Correction | None, halo: str) -> None:
    why = dropin_problem(correction.name if correction is not None else "none", halo)
    if why is not None:
        raise ValueError(why)


class PartitionLoader:
    """Local-only, coverage-weighted batches of one partition, from plain tensors (the drop-in's core).

    Args:
        graph: the part's graph in DGL's layout: inner nodes first, then the 1-hop halo
            (``dgl.distributed.load_partition``'s graph, or a DistGraph's ``local_partition``).
        inner: bool mask of the inner (owned) nodes of ``graph``.
        global_ids: global id of every node of ``graph``.
        train_mask: training mask of the inner nodes (local id order).
        in_degree: full-graph in-degree of the inner nodes (local id order), and of the halo
            nodes after them with ``halo="keep"``.
        sampler: a ``dgl.dataloading.NeighborSampler`` (or anything with
            ``sample(graph, seeds)``), used on the local graph.
        batch_size: seeds per batch on the part with the most training nodes; the others
            use smaller batches so that every part takes the same number of steps.
        correction: a :class:`~dgl_grappa.method.reducers.Correction` (none, batch, shrinkage)
            primed before every batch; None = plain averaging.
        options: a :class:`~.options.LoaderOptions`, of which the core reads ``hops``, ``w_min``,
            ``self_loops``, ``seed``, ``halo`` and ``first_hop`` (with ``halo="keep"`` the halo nodes'
            rows must be served by the caller, see :class:`GrappaLoader`). Without it, the fields'
            defaults except ``halo="drop"`` (:data:`CORE_OPTIONS`).
        keywords: fields of :class:`~.options.LoaderOptions` (``halo="keep"``, ``first_hop="exact"``, ...),
            put over ``options``.
        kept: local ids of the nodes to keep (sorted, inner first; :func:`~.local_part.choose_kept`),
            or None for every node.
        num_nodes: the whole graph's node count (``first_hop="block"``: the virtual ids).
        extra: ``(global ids, full-graph in-degrees)`` of nodes held besides the part's (the edge loader's
            negative pool outside the halo), appended to the local graph without edges but ``extra_edges``.
        extra_edges: ``(src, dst, edge id)`` in global ids of edges held besides the part's (the negative pool's
            in-edges), both ends among the nodes held; they end at no inner node, so no batch trains on them.

    Attributes:
        options: the :class:`~.options.LoaderOptions` it was made with (``options`` and the keywords).
        graph: the local graph batches are sampled from.
        global_ids: global id of every node of ``graph``.
        edge_ids: global id of every edge of ``graph`` (None when ``graph`` has no ``edata[dgl.EID]``).
        coverage, weights: coverage and node weight of every node of ``graph``.
        train_ids: local ids of the training seeds.
        steps: batches per epoch.

    Iterating yields ``(input_nodes, seeds, blocks)`` as ``DistNodeDataLoader`` does: global ids
    everywhere, in ``input_nodes``, ``seeds``, every block's ``srcdata``/``dstdata[dgl.NID]`` and
    ``edata[dgl.EID]`` (:func:`to_global`); each iteration is the next epoch (see :meth:`set_epoch`).
    """

    def __init__(
        self,
        graph: dgl.DGLGraph,
        inner: Tensor,
        global_ids: Tensor,
        train_mask: Tensor,
        in_degree: Tensor,
        sampler,
        batch_size: int,
        correction: Correction | None = None,
        *,
        options: LoaderOptions | None = None,
        kept: Tensor | None = None,
        num_nodes: int | None = None,
        extra: tuple[Tensor, Tensor] | None = None,
        extra_edges: tuple[Tensor, Tensor, Tensor] | None = None,
        **keywords,
    ):
        o = self.options = LoaderOptions.of(type(self).__name__, options, keywords, CORE_OPTIONS)
        halo, first_hop = o.halo, o.first_hop
        _refuse(correction, halo)
        if first_hop == "block" and num_nodes is None:
            raise ValueError("first_hop='block' needs num_nodes= (the whole graph's node count: virtual ids)")
        self.halo = halo
        self.first_hop = first_hop
        self.num_nodes = num_nodes
        self.edges = None  # the edge loader's usable-edge counts
        if first_hop != "sampled":
            sampler = skip_first_layer(sampler)
        self.graph, n_inner, src, dst = local_graph(graph, inner, halo)
        n_local = self.graph.num_nodes()
        gids, deg = global_ids[:n_local], in_degree[:n_local]
        train = train_mask[:n_inner].bool()
        self.edge_ids = local_edge_ids(
            graph, n_inner, halo, kept if kept is not None and kept.numel() < n_local else None, n_local
        )
        reshaped = False  # the part's graph cut to the kept nodes, or grown by extra nodes and edges: built once
        if kept is not None and kept.numel() < n_local:
            src, dst = relabel(src, dst, kept, n_local)
            n_kept_inner = int((kept < n_inner).sum())
            train = train[kept[:n_kept_inner]]
            gids, deg, n_inner, n_local = gids[kept], deg[kept], n_kept_inner, kept.numel()
            reshaped = True
        if extra is not None and extra[0].numel():  # nodes held outside the part's graph (the negative pool)
            gids, deg = torch.cat([gids, extra[0].to(gids.dtype)]), torch.cat([deg, extra[1].to(deg.dtype)])
            n_local, reshaped = gids.numel(), True
        if extra_edges is not None and extra_edges[0].numel():
            ends = [locate_ids(e.to(torch.int64), gids.to(torch.int64), n_local) for e in extra_edges[:2]]
            if bool((ends[0] < 0).any() or (ends[1] < 0).any() or (ends[1] < n_inner).any()):
                raise RuntimeError("an extra edge's end is not held, or it ends at an own node (the caller: extra=)")
            src, dst = torch.cat([src, ends[0].to(src.dtype)]), torch.cat([dst, ends[1].to(dst.dtype)])
            reshaped = True
            if self.edge_ids is not None:
                self.edge_ids = torch.cat([self.edge_ids, extra_edges[2].to(self.edge_ids.dtype)])
        if reshaped:
            self.graph = dgl.graph((src, dst), num_nodes=n_local).formats(["coo", "csc"])
        self.global_ids = gids
        if self.edge_ids is not None and self.edge_ids.numel() != self.graph.num_edges():
            raise RuntimeError("the local graph's edges and their global ids disagree (a change to local_graph?)")
        self.num_inner = n_inner
        self.train_ids = train.nonzero(as_tuple=True)[0]
        self.coverage, self.weights = cov.partition_weights(src, dst, n_local, deg, o.hops, o.self_loops, o.w_min)
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        self.correction = correction
        self._epoch = 0
        self._make_batches(sampler, batch_size, o.seed * 1000 + rank, src, dst, deg)

    def _make_batches(self, sampler, batch_size: int, seed: int, src: Tensor, dst: Tensor, deg: Tensor) -> None:
        """``steps`` and ``batches``: the training nodes' (the edge loader has its own)."""
        # The script's own loss takes the seeds' labels, so a step without seeds cannot be made
        # weight 0 here: every machine needs training nodes (agreed first, so no trainer waits).
        if seeded_workers(self.train_ids.numel()) < _world():
            raise ValueError(
                "a machine's partition has no training nodes, and the drop-in loader needs some on "
                "every machine; use fewer parts or --partition.balance_train=true"
            )
        self.steps = equal_steps(self.train_ids.numel(), batch_size)
        self.batches = LocalBatches(self.graph, self.train_ids, sampler, self.steps, seed=seed)

    def __len__(self) -> int:
        return self.steps

    def set_epoch(self, epoch: int) -> None:
        """Draw the next iteration's batches as epoch ``epoch`` (e.g. when resuming at that epoch).

        Without it, each iteration is the epoch after the previous one, starting at 0.
        """
        self._epoch = epoch

    def __iter__(self):
        epoch, self._epoch = self._epoch, self._epoch + 1
        for input_nodes, seeds, blocks in self.batches.epoch(epoch):
            if self.correction is not None:
                self.correction.prime(self.weights[seeds])
            gids = self.global_ids[input_nodes]
            blocks = [to_global(b, self.global_ids, self.edge_ids) for b in blocks]
            if self.first_hop == "block":
                block0, gids = first_hop_block(gids, self.num_nodes)
                blocks = [block0] + blocks
            yield gids, self.global_ids[seeds], blocks


def part_edge_order(pg: dgl.DGLGraph) -> Tensor:
    """The part graph's edge ids in the order :func:`~dgl_grappa.partition.layout.part_edges` lists its edges.

    ``pg.edges()`` order when the graph has (or may make) COO; else CSC order, whose edge ids DGL keeps
    (a DistDGL server's shared graph is CSC-only). Per-edge data (``edata[dgl.EID]``, ``edata[dgl.ETYPE]``)
    is in edge-id order: index it with this to line it up with ``part_edges``.
    """
    formats = pg.formats()
    if "coo" in formats["created"] or "coo" in formats.get("not created", []):
        return torch.arange(pg.num_edges())
    eids = pg.adj_tensors("csc")[2]
    return eids.long() if eids.numel() == pg.num_edges() else torch.arange(pg.num_edges())


def local_edge_ids(pg: dgl.DGLGraph, num_inner: int, halo: str, kept: Tensor | None, n_local: int) -> Tensor | None:
    """Global id of every edge of the local graph made from ``pg`` (:func:`~.local_part.local_graph`, then
    :func:`~.local_part.relabel` to ``kept``), in its edge order; None when ``pg`` has no ``edata[dgl.EID]``."""
    if dgl.EID not in pg.edata:
        return None
    eids = pg.edata[dgl.EID][part_edge_order(pg)].to(torch.int64)
    src, dst = (x.long() for x in part_edges(pg))
    if halo == "drop":  # local_graph's rule: the edges among inner nodes
        m = (src < num_inner) & (dst < num_inner)
        src, dst, eids = src[m], dst[m], eids[m]
    if kept is not None:  # relabel's rule: the edges among kept nodes
        new = torch.full((n_local,), -1, dtype=torch.int64)
        new[kept] = torch.arange(kept.numel())
        eids = eids[(new[src] >= 0) & (new[dst] >= 0)]
    return eids


def to_global(block: dgl.DGLGraph, node_ids: Tensor, edge_ids: Tensor | None) -> dgl.DGLGraph:
    """A block sampled on a local graph, with global ids in ``srcdata``/``dstdata[dgl.NID]`` and ``edata[dgl.EID]``
    (as DistDGL's samplers give them); the block itself is changed and returned.

    Args:
        block: a block whose ``dgl.NID``/``dgl.EID`` are local ids (what DGL's samplers put there).
        node_ids: global id of every local node.
        edge_ids: global id of every local edge (None: the block's edge ids are dropped, not left local).
    """
    block.srcdata[dgl.NID] = node_ids[block.srcdata[dgl.NID].long()]
    block.dstdata[dgl.NID] = node_ids[block.dstdata[dgl.NID].long()]
    if edge_ids is not None and dgl.EID in block.edata:
        block.edata[dgl.EID] = edge_ids[block.edata[dgl.EID].long()]
    else:
        block.edata.pop(dgl.EID, None)
    return block


def first_hop_block(dst_gids: Tensor, num_nodes: int) -> tuple[dgl.DGLGraph, Tensor]:
    """Block 0 of first-hop completion for an unmodified mean-aggregating layer.

    Every destination (the input nodes of the sampled layers) gets one in-neighbour: a virtual
    node whose row is the destination's precomputed first-hop aggregate. A mean over that one
    neighbour is the aggregate itself, so e.g. ``SAGEConv('mean')`` computes exactly the
    full-graph first layer: W_self x_v + W_neigh mean_{u in N(v)} x_u. The block's source
    nodes are the destinations (DGL's convention: first), then the virtual nodes.

    Its ids are those of a sampled block: ``srcdata[dgl.NID]`` is the returned input ids (the
    destinations' global ids, then the virtual ids ``num_nodes`` + v), ``dstdata[dgl.NID]`` the
    destinations' global ids, and ``edata[dgl.EID]`` is :data:`NO_EDGE` (-1) for every edge: a virtual
    edge is no edge of the graph.

    Args:
        dst_gids: global ids of the destinations.
        num_nodes: the whole graph's node count: virtual node of v is ``num_nodes + v``.

    Returns:
        ``(block, input ids)``: input ids = ``dst_gids`` then ``num_nodes + dst_gids``.

    Example:
        >>> block, ids = first_hop_block(torch.tensor([7, 3]), 10)
        >>> ids.tolist(), block.num_src_nodes(), block.num_dst_nodes(), block.num_edges()
        ([7, 3, 17, 13], 4, 2, 2)
    """
    n = dst_gids.numel()
    block = dgl.create_block((torch.arange(n, 2 * n), torch.arange(n)), num_src_nodes=2 * n, num_dst_nodes=n)
    ids = torch.cat([dst_gids, dst_gids + num_nodes])
    block.srcdata[dgl.NID] = ids
    block.dstdata[dgl.NID] = dst_gids.clone()
    block.edata[dgl.EID] = torch.full((n,), NO_EDGE, dtype=torch.int64)
    return block, ids


class PartitionEdgeLoader(PartitionLoader):
    """Local-only link-prediction batches of one partition, from plain tensors (the edge drop-in's core).

    The arguments of :class:`PartitionLoader`, and ``negative_sampler`` (keyword): the script's
    negative sampler, e.g. DGL's ``negative_sampler.Uniform(k)``, or
    :class:`~dgl_grappa.method.link.LocalNegativeSampler` ``(k, "degree")``; it draws from the local
    graph's nodes (:func:`~dgl_grappa.method.link.as_local_negatives`). Every node of the part is kept.
    The positives are the edges into this machine's inner nodes whose source it holds
    (:func:`~dgl_grappa.method.link.positive_edges`), in batches of ``batch_size`` edges, the same
    number of steps on every machine (:class:`~dgl_grappa.method.link.LocalEdgeBatches`: the native
    runtime's). ``correction`` must be None or ``none``: the link loss is a mean over edges.

    ``pool`` (keyword): global ids of a negative pool (nodes of other parts held as negatives, which the caller
    appends with ``extra=``), and ``remote``: the number of nodes the other parts own. With a pool the negatives
    follow the global draw of ``DistEdgeDataLoader``'s uniform sampler (:class:`~dgl_grappa.method.link.NegativePool`).

    Attributes (besides :class:`PartitionLoader`'s):
        positives: local ids of the edges trained on.
        edges: the usable-edge counts (:func:`~dgl_grappa.method.link.edge_usability`).

    Iterating yields ``(input_nodes, pair_graph, neg_pair_graph, blocks)`` like
    ``DistEdgeDataLoader``: ``input_nodes`` in global ids (with ``first_hop="block"`` the virtual
    ids too), the blocks' ids global (:func:`to_global`), the compact pair graphs' nodes the blocks'
    output rows in order with ``ndata[dgl.NID]`` in global ids, the positive pair graph's
    ``edata[dgl.EID]`` the global ids of its edges, the negative one without edge ids.

    Example:
        >>> pg, node, *_ = dgl.distributed.load_partition(part_config, 0)                     # doctest: +SKIP
        >>> loader = PartitionEdgeLoader(pg, pg.ndata["inner_node"], pg.ndata[dgl.NID], node["_N/train_mask"],
        ...                              in_degree, dgl.dataloading.NeighborSampler([10, 25]), 1000,
        ...                              negative_sampler=dgl.dataloading.negative_sampler.Uniform(1))  # doctest: +SKIP
        >>> input_nodes, pair_graph, neg_pair_graph, blocks = next(iter(loader))                 # doctest: +SKIP
    """

    def __init__(self, *args, negative_sampler=None, pool: Tensor | None = None, remote: int = 0, **kwargs):
        self._negatives = negative_sampler  # read by _make_batches, which the core's __init__ calls
        self._pool, self._remote = pool, remote
        correction = args[7] if len(args) > 7 else kwargs.get("correction")
        _refuse_link(correction)
        super().__init__(*args, **kwargs)

    def _make_batches(self, sampler, batch_size: int, seed: int, src: Tensor, dst: Tensor, deg: Tensor) -> None:
        if self._negatives is None:
            raise ValueError(
                "the edge loader needs negative_sampler=, e.g. dgl.dataloading.negative_sampler.Uniform(1)"
            )
        pool = None
        if self._pool is not None and self._pool.numel():  # the global draw: own nodes, and the pool for the others
            at = locate_ids(self._pool.to(torch.int64), self.global_ids.to(torch.int64), self.global_ids.numel())
            if bool((at < 0).any()):
                raise RuntimeError("a negative pool node is not in the local graph (the caller must hold it: extra=)")
            pool = NegativePool(own=self.num_inner, pool=torch.sort(at).values, remote=self._remote)
        self.negative_sampler = as_local_negatives(self._negatives, deg, pool)
        self.positives = positive_edges(src, dst, self.num_inner)
        self.edges = edge_usability(src, dst, self.num_inner, int(deg[: self.num_inner].sum()))
        # The script's loss is a mean over its pairs: a machine without positives cannot take a step of
        # weight 0 with it, so every machine needs some (agreed first, so no trainer waits).
        if seeded_workers(self.positives.numel()) < _world():
            raise ValueError(
                "a machine's partition holds no positive edge (an edge into one of its nodes whose source "
                "it holds), and the edge loader needs some on every machine; use halo='keep' or fewer "
                "parts"
            )
        self.steps = equal_steps(self.positives.numel(), batch_size)
        self.batches = LocalEdgeBatches(
            self.graph, self.positives, sampler, self.negative_sampler, self.steps, seed=seed
        )

    def __iter__(self):
        epoch, self._epoch = self._epoch, self._epoch + 1
        for input_nodes, pair_graph, neg_pair_graph, blocks in self.batches.epoch(epoch):
            if self.correction is not None:
                self.correction.prime(torch.ones(pair_graph.num_edges() + neg_pair_graph.num_edges()))
            gids = self.global_ids[input_nodes]
            blocks = [to_global(b, self.global_ids, self.edge_ids) for b in blocks]
            if self.first_hop == "block":
                block0, gids = first_hop_block(gids, self.num_nodes)
                blocks = [block0] + blocks
            # as DistEdgeDataLoader's: the pair graph's nodes and positive edges in global ids, the negative
            # pair graph's nodes in global ids and no edge ids
            pair_graph.ndata[dgl.NID] = self.global_ids[pair_graph.ndata[dgl.NID].long()]
            if neg_pair_graph is not pair_graph:
                neg_pair_graph.ndata[dgl.NID] = self.global_ids[neg_pair_graph.ndata[dgl.NID].long()]
            if self.edge_ids is not None and dgl.EID in pair_graph.edata:
                pair_graph.edata[dgl.EID] = self.edge_ids[pair_graph.edata[dgl.EID].long()]
            else:
                pair_graph.edata.pop(dgl.EID, None)
            neg_pair_graph.edata.pop(dgl.EID, None)
            yield gids, pair_graph, neg_pair_graph, blocks


def _refuse_link(correction: Correction | None) -> None:
    if correction is not None and correction.name != "none":
        raise ValueError(
            f"grappa.correction={correction.name} weights nodes by their coverage, and the link loss is a "
            "mean over edges; use make_correction('none') (or no correction) with the edge loader"
        )
