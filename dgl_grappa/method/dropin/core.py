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
from .. import coverage as cov
from ..link import LocalEdgeBatches, as_local_negatives, edge_usability, positive_edges
from ..local_part import local_graph, relabel
from ..reducers.correction import Correction
from ..sampler import LocalBatches, equal_steps, seeded_workers, skip_first_layer


def _world() -> int:
    return torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1


def _refuse(correction: Correction | None, halo: str) -> None:
    why = dropin_problem(correction.name if correction is not None else "none", halo)
    if why is None and halo not in ("drop", "keep"):
        why = f"halo={halo!r} is not allowed; use drop or keep"
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
        hops: hops of the coverage recurrence (usually the model's number of layers).
        w_min: lower clamp of the node weights.
        self_loops: count a self-loop in both degrees.
        seed: seed of shuffling and sampling (the rank is added).
        halo: ``train.halo``: "drop" (inner nodes only) or "keep" (the halo nodes stay, as
            in the native runtime; their rows must then be served by the caller, see
            :class:`GrappaLoader`).
        first_hop: "sampled"; "exact" (first-hop completion through the model: the loader
            samples only layers 1..L-1, see :func:`~dgl_grappa.method.sampler.skip_first_layer`,
            and the model computes layer 0 from the aggregates,
            ``model(blocks, x, agg=loader.aggregates(input_nodes), deg=...)``); or "block"
            (first-hop completion for a model of the script's own: layers 1..L-1 are sampled and
            the loader adds block 0, in which every destination has one virtual in-neighbour
            whose row is its precomputed aggregate, so a mean-aggregating layer, e.g. DGL's
            ``SAGEConv('mean')``, computes the full-graph first hop; ``input_nodes`` then holds
            a virtual neighbour's id as ``num_nodes`` + the node's global id).
        kept: local ids of the nodes to keep (sorted, inner first; :func:`~.local_part.choose_kept`),
            or None for every node.
        num_nodes: the whole graph's node count (``first_hop="block"``: the virtual ids).

    Attributes:
        graph: the local graph batches are sampled from.
        global_ids: global id of every node of ``graph``.
        coverage, weights: coverage and node weight of every node of ``graph``.
        train_ids: local ids of the training seeds.
        steps: batches per epoch.

    Iterating yields ``(input_nodes, seeds, blocks)`` with global ids, like
    ``DistNodeDataLoader``; each iteration is the next epoch (see :meth:`set_epoch`).
    """

    def __init__(self, graph: dgl.DGLGraph, inner: Tensor, global_ids: Tensor, train_mask: Tensor,
                 in_degree: Tensor, sampler, batch_size: int, correction: Correction | None = None, *,
                 hops: int = 2, w_min: float = 0.05, self_loops: bool = True, seed: int = 0, halo: str = "drop",
                 first_hop: str = "sampled", kept: Tensor | None = None, num_nodes: int | None = None):
        _refuse(correction, halo)
        if first_hop not in ("exact", "sampled", "block"):
            raise ValueError(f"first_hop={first_hop!r} is not allowed; use sampled, exact or block")
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
        if kept is not None and kept.numel() < n_local:
            src, dst = relabel(src, dst, kept, n_local)
            n_kept_inner = int((kept < n_inner).sum())
            train = train[kept[:n_kept_inner]]
            gids, deg, n_inner, n_local = gids[kept], deg[kept], n_kept_inner, kept.numel()
            self.graph = dgl.graph((src, dst), num_nodes=n_local).formats(["coo", "csc"])
        self.global_ids = gids
        self.num_inner = n_inner
        self.train_ids = train.nonzero(as_tuple=True)[0]
        self.coverage, self.weights = cov.partition_weights(src, dst, n_local, deg, hops, self_loops, w_min)
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        self.correction = correction
        self._epoch = 0
        self._make_batches(sampler, batch_size, seed * 1000 + rank, src, dst, deg)

    def _make_batches(self, sampler, batch_size: int, seed: int, src: Tensor, dst: Tensor, deg: Tensor) -> None:
        """``steps`` and ``batches``: the training nodes' (the edge loader has its own)."""
        # The script's own loss takes the seeds' labels, so a step without seeds cannot be made
        # weight 0 here: every machine needs training nodes (agreed first, so no trainer waits).
        if seeded_workers(self.train_ids.numel()) < _world():
            raise ValueError("a machine's partition has no training nodes, and the drop-in loader needs some on "
                             "every machine; use fewer parts or --partition.balance_train=true")
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
            if self.first_hop == "block":
                block0, gids = first_hop_block(gids, self.num_nodes)
                blocks = [block0] + list(blocks)
            yield gids, self.global_ids[seeds], blocks


def first_hop_block(dst_gids: Tensor, num_nodes: int) -> tuple[dgl.DGLGraph, Tensor]:
    """Block 0 of first-hop completion for an unmodified mean-aggregating layer.

    Every destination (the input nodes of the sampled layers) gets one in-neighbour: a virtual
    node whose row is the destination's precomputed first-hop aggregate. A mean over that one
    neighbour is the aggregate itself, so e.g. ``SAGEConv('mean')`` computes exactly the
    full-graph first layer: W_self x_v + W_neigh mean_{u in N(v)} x_u. The block's source
    nodes are the destinations (DGL's convention: first), then the virtual nodes.

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
    return block, torch.cat([dst_gids, dst_gids + num_nodes])


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

    Attributes (besides :class:`PartitionLoader`'s):
        positives: local ids of the edges trained on.
        edges: the usable-edge counts (:func:`~dgl_grappa.method.link.edge_usability`).

    Iterating yields ``(input_nodes, pair_graph, neg_pair_graph, blocks)`` like
    ``DistEdgeDataLoader``: ``input_nodes`` in global ids (with ``first_hop="block"`` the virtual
    ids too), the compact pair graphs' ``ndata[dgl.NID]`` in global ids (their edge ids are
    dropped: they would be local), their nodes the blocks' output rows in order.

    Example:
        >>> pg, node, *_ = dgl.distributed.load_partition(part_config, 0)                     # doctest: +SKIP
        >>> loader = PartitionEdgeLoader(pg, pg.ndata["inner_node"], pg.ndata[dgl.NID], node["_N/train_mask"],
        ...                              in_degree, dgl.dataloading.NeighborSampler([10, 25]), 1000,
        ...                              negative_sampler=dgl.dataloading.negative_sampler.Uniform(1))  # doctest: +SKIP
        >>> input_nodes, pair_graph, neg_pair_graph, blocks = next(iter(loader))                 # doctest: +SKIP
    """

    def __init__(self, *args, negative_sampler=None, **kwargs):
        self._negatives = negative_sampler  # read by _make_batches, which the core's __init__ calls
        correction = args[7] if len(args) > 7 else kwargs.get("correction")
        _refuse_link(correction)
        super().__init__(*args, **kwargs)

    def _make_batches(self, sampler, batch_size: int, seed: int, src: Tensor, dst: Tensor, deg: Tensor) -> None:
        if self._negatives is None:
            raise ValueError("the edge loader needs negative_sampler=, e.g. dgl.dataloading.negative_sampler.Uniform(1)")
        self.negative_sampler = as_local_negatives(self._negatives, deg)
        self.positives = positive_edges(src, dst, self.num_inner)
        self.edges = edge_usability(src, dst, self.num_inner, int(deg[: self.num_inner].sum()))
        # The script's loss is a mean over its pairs: a machine without positives cannot take a step of
        # weight 0 with it, so every machine needs some (agreed first, so no trainer waits).
        if seeded_workers(self.positives.numel()) < _world():
            raise ValueError("a machine's partition holds no positive edge (an edge into one of its nodes whose source "
                             "it holds), and the edge loader needs some on every machine; use halo='keep' or fewer "
                             "parts")
        self.steps = equal_steps(self.positives.numel(), batch_size)
        self.batches = LocalEdgeBatches(self.graph, self.positives, sampler, self.negative_sampler, self.steps,
                                        seed=seed)

    def __iter__(self):
        epoch, self._epoch = self._epoch, self._epoch + 1
        for input_nodes, pair_graph, neg_pair_graph, blocks in self.batches.epoch(epoch):
            if self.correction is not None:
                self.correction.prime(torch.ones(pair_graph.num_edges() + neg_pair_graph.num_edges()))
            gids = self.global_ids[input_nodes]
            if self.first_hop == "block":
                block0, gids = first_hop_block(gids, self.num_nodes)
                blocks = [block0] + list(blocks)
            for pg in (pair_graph, neg_pair_graph):
                pg.ndata[dgl.NID] = self.global_ids[pg.ndata[dgl.NID].long()]
                pg.edata.pop(dgl.EID, None)
            yield gids, pair_graph, neg_pair_graph, blocks


def _refuse_link(correction: Correction | None) -> None:
    if correction is not None and correction.name != "none":
        raise ValueError(f"grappa.correction={correction.name} weights nodes by their coverage, and the link loss is a "
                         "mean over edges; use make_correction('none') (or no correction) with the edge loader")
