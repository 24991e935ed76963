"""Drop-in Grappa for an existing DistDGL training script: a local-only loader over a DistGraph.

A DistDGL trainer already holds its machine's partition: ``g.local_partition`` (the
graph structure the co-located server put in shared memory: inner nodes first, then the
1-hop halo) and, for every node tensor, the rows of the inner nodes
(``g.ndata[k].local_partition``). :class:`GrappaLoader` samples from those only and
replaces ``DistNodeDataLoader``:

* seeds are this machine's own training nodes; neighbours are sampled with the script's
  own ``NeighborSampler`` on the inner-node subgraph (halo dropped: ``train.halo=keep``
  would make the script pull halo rows from their owners every step, so it is refused),
  so every node of a batch is owned by this machine;
* it yields ``(input_nodes, seeds, blocks)`` like DistNodeDataLoader, with **global** node
  ids, so the script's ``g.ndata["feat"][input_nodes]`` keeps working and every row it
  asks for is served from this machine's memory: no remote pull;
* every worker takes the same number of steps per epoch (one all-reduce, once), so no
  collective waits on a finished worker (and the script must not wrap the loop in
  ``model.join()``: a joined rank would run the hook on zero buckets with stale state);
* before yielding a batch it sets the batch weight of the coverage-corrected
  communication hook (``correction.register(ddp)``): the script's loss stays the plain
  mean cross-entropy. The node-level variant needs a weighted loss and is therefore not a
  drop-in (use ``batch``, ``shrinkage`` or ``none``);
* first-hop completion (``first_hop="exact"``, the native default) works here too, with one
  more line in the script: the loader samples layers 1..L-1 only, and the script passes the
  partition's precomputed aggregates to its model, ``model(blocks, x,
  agg=loader.aggregates(input_nodes), deg=g.ndata["in_degree"][input_nodes])`` (a model of
  :mod:`dgl_grappa.method.models`, or any whose first layer takes them). The loader reads
  this machine's aggregates once from the partition folder (``part_config``; written by
  ``python -m dgl_grappa prepare``) and keeps them in the precision the memory budget
  leaves room for next to the server's features. Every row is local.
  Passing ``deg`` alone (``first_hop="sampled"``) gives GraphSAGE its empty-neighbourhood
  rule. What the drop-in cannot do is keep the halo (``train.halo=keep``): the script
  reads features through the DistGraph, which would pull halo rows every step, so it
  trains on the inner nodes only; with first-hop completion the first hop of every node
  is still complete.

* learnable embeddings (a featureless graph, as in DGL's ``train_dist_transductive.py``):
  ``emb = loader.embedding(dim)`` replaces the script's ``DistEmbedding``: this machine's own
  nodes' rows, trained locally by ``emb.optimizer(lr)`` (PyTorch's ``SparseAdam``, instead of
  ``dgl.distributed.optim.SparseAdam``), and with ``halo="keep"`` the halo's frozen initial rows;
  ``emb(input_nodes)`` takes the batch's global ids. No row moves (:mod:`.embedding`).

* a heterogeneous graph (DGL's RGCN example): :class:`GrappaHeteroLoader` replaces
  ``DistNodeDataLoader(g, {target: train_nid}, sampler)``: this machine's own training nodes of the
  target type, sampled per relation inside its local heterograph; ``loader.features`` and
  ``loader.embedding(dim)`` give every input row per type from local memory (:mod:`.hetero`).

* link prediction (DGL's ``train_dist_unsupervised.py``): :class:`GrappaEdgeLoader` replaces
  ``DistEdgeDataLoader`` and yields ``(input_nodes, pair_graph, neg_pair_graph, blocks)``: this
  machine's own edges whose source it holds, negatives from the nodes it holds, the script's
  ``NeighborSampler`` on the local graph (:mod:`.link`, the native runtime's functions).

The method is the native runtime's, not a copy: the local graph is
:func:`dgl_grappa.method.local_part.local_graph`, the weights :func:`dgl_grappa.method.coverage.partition_weights`,
the batches :class:`dgl_grappa.method.sampler.LocalBatches`, and the hook state is set by
:meth:`Correction.prime <dgl_grappa.method.reducers.Correction.prime>`, which the native
``Correction.loss`` calls too. :class:`PartitionLoader` is that core, fed with plain
tensors; :class:`GrappaLoader` only reads them from a DistGraph.

Example (the changes to a DistDGL script):
    >>> corr = make_correction("none")                                          # doctest: +SKIP
    >>> loader = GrappaLoader(g, sampler, batch_size=1000, correction=corr,     # was DistNodeDataLoader
    ...                       first_hop="exact", part_config=part_config)       # doctest: +SKIP
    >>> model = DDP(model); corr.register(model)                                # was DDP(model)
    >>> for input_nodes, seeds, blocks in loader:                               # doctest: +SKIP
    ...     x = g.ndata["feat"][input_nodes]
    ...     agg, deg = loader.aggregates(input_nodes), g.ndata["in_degree"][input_nodes]
    ...     out = model(blocks, x, agg=agg, deg=deg)                            # was model(blocks, x)
"""
from __future__ import annotations

import logging

import dgl
import torch
from torch import Tensor

from ..config import dropin_problem
from . import coverage as cov
from .embedding import LocalEmbedding
from .hetero import HeteroEmbedding
from .link import LocalEdgeBatches, as_local_negatives, edge_usability, positive_edges
from .local_part import local_graph, relabel
from .reducers.correction import Correction
from .sampler import LocalBatches, equal_steps, seeded_workers, skip_first_layer

log = logging.getLogger("dgl_grappa")


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

    _every_node = False  # keep only what the training seeds' trees reach (the edge loader: every node)

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

    _every_node = True

    def __init__(self, *args, negative_sampler=None, **kwargs):
        if negative_sampler is not None or not hasattr(self, "_negatives"):
            self._negatives = negative_sampler  # GrappaEdgeLoader sets it before its reads
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


class GrappaLoader(PartitionLoader):
    """Local-only, coverage-weighted replacement for ``DistNodeDataLoader``: a :class:`PartitionLoader` over a DistGraph.

    What the loader keeps follows the native runtime's rules (:func:`~.local_part.choose_kept`):
    the nodes the training seeds' sampled trees reach, the tables in the most exact precision
    that ``memory_budget`` leaves room for next to the server's fp32 features, and a uniform
    sample of the halo when even int4 does not fit. With ``halo="keep"`` the kept halo rows
    (features, in-degrees and, with a first-hop mode, aggregates) are read once here through
    the KVStore (``one_time_bytes``) and served from memory afterwards: read every row a batch
    needs with :meth:`features` (``g.ndata["feat"][input_nodes]`` would pull halo rows from
    their owners every step).

    Args:
        g: the DistGraph (its machine must hold a partition: ``g.local_partition``).
        sampler, batch_size, correction, hops, w_min, self_loops, seed, halo, first_hop: as for
            :class:`PartitionLoader` (``first_hop`` "exact" or "block" read the aggregates).
        part_config: the partition json the servers loaded (the aggregates are read from its
            folder: ``python -m dgl_grappa prepare`` adds them to a folder made elsewhere).
        memory_budget: ``train.memory_budget`` (a multiple of the own fp32 feature rows, or a
            size): the server holds the own features in fp32, the loader the rest.
        storage: ``train.storage`` (auto: the most exact precision that fits).
        aggregate: which precomputed first hop the aggregates are: "mean" (the in-neighbour
            mean: what ``SAGEConv('mean')``, ``GraphConv(norm='right')`` and the package's models
            take) or "gcn" (``sum_u x_u / sqrt(d_out(u) d_in(v))``, what ``GraphConv(norm='both')``
            computes; ``python -m dgl_grappa prepare --gcn`` adds it).
        train_key, degree_key, feat_key: node-data keys of the training mask, the full-graph
            in-degree (without it the degrees are asked from the servers once, here) and the
            features; ``feat_key=None``: no features (learnable rows instead, :meth:`embedding`):
            nothing feature-wide is read or held.

    Example:
        >>> loader = GrappaLoader(g, sampler, 1000, make_correction("none"), halo="keep",   # doctest: +SKIP
        ...                       first_hop="block", part_config=part_config)
        >>> for input_nodes, seeds, blocks in loader:                                       # doctest: +SKIP
        ...     out = model(blocks, loader.features(input_nodes))    # the script's own model, unchanged
    """

    def __init__(self, g, sampler, batch_size: int, correction: Correction | None = None, *, hops: int = 2,
                 w_min: float = 0.05, self_loops: bool = True, seed: int = 0, halo: str = "drop",
                 first_hop: str = "sampled", train_key: str = "train_mask", degree_key: str = "in_degree",
                 feat_key: str | None = "feat", part_config: str | None = None, memory_budget: str = "1.5",
                 storage: str = "auto", aggregate: str = "mean"):
        from ..config import parse_budget
        from .local_part import Keep, choose_kept
        from .storage import NodeTable, row_bytes

        _refuse(correction, halo)  # before anything is asked from the servers
        if first_hop not in ("exact", "sampled", "block"):
            raise ValueError(f"first_hop={first_hop!r} is not allowed; use sampled, exact or block")
        lp = g.local_partition
        if lp is None:
            raise RuntimeError("this trainer's machine holds no partition (g.local_partition is None); the "
                               "drop-in loader needs co-located servers and trainers")
        completes = first_hop != "sampled"
        if aggregate not in ("mean", "gcn"):
            raise ValueError(f"aggregate={aggregate!r} is not allowed; use mean or gcn")
        if completes and part_config is None:
            raise ValueError(f"first_hop={first_hop!r} needs part_config= (this machine's aggregates are read from "
                             "the partition folder); or use first_hop='sampled'")
        inner = lp.ndata["inner_node"].bool()
        n_inner = int(inner.sum())
        gids = lp.ndata[dgl.NID]
        # The node data's local rows (``.local_partition``) are the inner nodes in global id
        # order; they line up with the local ids only for one contiguous range.
        first = int(gids[0]) if n_inner else 0
        if n_inner and not torch.equal(gids[:n_inner], torch.arange(first, first + n_inner, dtype=gids.dtype)):
            raise RuntimeError("the inner nodes' global ids are not one contiguous range; partition with "
                               "dgl.distributed.partition_graph (reshuffled ids)")
        self._first, self._n_inner, self.num_nodes_total = first, n_inner, g.num_nodes()
        self._embedding = None  # made by embedding()
        self._has_feat = feat_key is not None
        if feat_key is not None and feat_key not in g.ndata:
            raise ValueError(f"the graph has no node data {feat_key!r} (a graph without features?); pass feat_key=None "
                             "and train on learnable rows: loader.embedding(dim)")
        if feat_key is not None:
            self._feat = g.ndata[feat_key].local_partition  # the server's own rows, in shared memory
        else:
            self._feat = torch.zeros((n_inner, 0))  # no features: learnable rows instead
        if feat_key is None and completes:
            raise ValueError(f"first_hop={first_hop!r} aggregates features, and feat_key=None has none; use "
                             "first_hop='sampled' with learnable rows")
        width = int(self._feat.shape[1])
        train = g.ndata[train_key].local_partition[:n_inner]
        if degree_key in g.ndata:
            deg = g.ndata[degree_key].local_partition[:n_inner]
        else:
            log.warning("node data %r is missing: asking the servers for the in-degrees once", degree_key)
            deg = g.in_degrees(gids[:n_inner])
        # What to keep: the native runtime's choice, with the server's fp32 features already held.
        _, _, src, dst = local_graph(lp, inner, halo)
        n_local = n_inner + (int((~inner).sum()) if halo == "keep" else 0)
        part_id = int(g.get_partition_book().partid)
        mult, size = parse_budget(memory_budget)
        layers = len(getattr(sampler, "fanouts", []) or [])
        # The edge loader reaches every node: any node it holds can be the end of a pair.
        reach = None if self._every_node or not layers else (layers - 1 if completes else layers)
        keep = Keep(reach=reach, storage=storage, budget=mult, budget_bytes=size, seed=seed)
        top = float(self._feat.abs().max()) if self._feat.numel() else 0.0
        kept, inner_kept, halo_reach, precision = choose_kept(
            src, dst, n_local, n_inner, train.bool().nonzero(as_tuple=True)[0], keep, width,
            inner_tables=1 if completes else 0, halo_tables=2 if completes else 1, part_id=part_id, top=top,
            fixed=n_inner * width * 4)
        self.precision = precision
        halo_ids = kept[inner_kept.numel():]
        self._halo_gids = gids[halo_ids].to(torch.int64)  # sorted by local id, which DGL orders by global id
        order = torch.argsort(self._halo_gids)
        self._halo_gids, halo_ids = self._halo_gids[order], halo_ids[order]
        kept = torch.cat([inner_kept, halo_ids])
        # Read once: the kept halo's rows through the KVStore, the aggregates from the folder.
        self.halo_feat = (NodeTable.store(g.ndata[feat_key][self._halo_gids], precision)
                          if halo == "keep" and feat_key is not None else None)
        halo_deg = (g.ndata[degree_key][self._halo_gids] if degree_key in g.ndata
                    else g.in_degrees(self._halo_gids)) if halo == "keep" else deg[:0]
        self.agg, self.halo_agg = None, None
        self._agg_row = torch.full((n_inner,), -1, dtype=torch.int64)
        self._agg_row[inner_kept] = torch.arange(inner_kept.numel())
        if completes:
            self.agg, self.halo_agg = _aggregates(g, part_config, part_id, inner_kept, self._halo_gids, width,
                                                  precision, halo == "keep", "agg" if aggregate == "mean" else "gcn")
        per_halo = row_bytes(width, precision) * (2 if completes else 1) + 8
        self.one_time_bytes = int(self._halo_gids.numel() * per_halo) if halo == "keep" else 0
        self.halo_reach, self.halo_kept = int(halo_reach.numel()), int(self._halo_gids.numel()) * (halo == "keep")
        log.info("drop-in: part %d keeps %d of %d inner nodes and %d of %d reachable halo nodes, tables in %s "
                 "(%d bytes besides the server's features; %d bytes read once)", part_id, inner_kept.numel(),
                 n_inner, self.halo_kept, self.halo_reach, precision, self.nbytes, self.one_time_bytes)
        self._deg, self._halo_deg = deg, halo_deg.to(deg.dtype)
        deg_all = torch.zeros(n_local, dtype=deg.dtype)  # in local id order, as PartitionLoader reads it
        deg_all[:n_inner] = deg
        if halo == "keep":
            deg_all[halo_ids] = halo_deg.to(deg.dtype)
        super().__init__(lp, inner, gids, train, deg_all, sampler, batch_size, correction, hops=hops, w_min=w_min, self_loops=self_loops, seed=seed,
                         halo=halo, first_hop=first_hop, kept=kept, num_nodes=self.num_nodes_total)

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
            >>> emb = loader.embedding(64)                    # was DistEmbedding(g.num_nodes(), 64, ...)   # doctest: +SKIP
            >>> emb_opt = emb.optimizer(lr=0.01)              # was dgl.distributed.optim.SparseAdam([emb], lr=0.01)  # doctest: +SKIP
            >>> for input_nodes, seeds, blocks in loader:                                                     # doctest: +SKIP
            ...     loss = F.cross_entropy(model(blocks, emb(input_nodes)), labels); ...; emb_opt.step()
        """
        if self.first_hop != "sampled":
            raise ValueError(f"first_hop={self.first_hop!r} precomputes aggregates of features; learnable rows need "
                             "first_hop='sampled'")
        if self._embedding is None:
            self._embedding = GlobalIdEmbedding(self, dim, seed)
        return self._embedding

    def _split(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        """(mask of own nodes, position of each other node in the kept halo) for global ``ids``."""
        own = (ids >= self._first) & (ids < self._first + self._n_inner)
        pos = torch.searchsorted(self._halo_gids, ids[~own])
        if pos.numel() and (bool((pos >= self._halo_gids.numel()).any())
                            or not torch.equal(self._halo_gids[pos.clamp(max=max(self._halo_gids.numel() - 1, 0))],
                                               ids[~own])):
            raise RuntimeError("a batch asked for a node this machine does not hold (the loader left its part)")
        return own, pos

    def features(self, input_nodes: Tensor) -> Tensor:
        """fp32 input rows of a batch's ``input_nodes``, all from this machine's memory.

        Own nodes come from the server's shared memory, kept halo nodes from the rows read
        once, and with ``first_hop="block"`` the virtual ids (``num_nodes`` + v) are v's
        first-hop aggregates.
        """
        if not self._has_feat:
            raise RuntimeError("this loader was made with feat_key=None: it holds no features; read the input rows "
                               "from loader.embedding(dim)")
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
    """:class:`~.embedding.LocalEmbedding` over one :class:`GrappaLoader`'s machine, called with global ids.

    Rows: the machine's own nodes (global ids ``first .. first + n``, in order), then the kept
    halo (the loader's sorted halo ids). Made by :meth:`GrappaLoader.embedding`.
    """

    def __init__(self, loader: GrappaLoader, dim: int, seed: int = 0):
        own = torch.arange(loader._first, loader._first + loader._n_inner, dtype=torch.int64)
        halo = loader._halo_gids if loader.halo == "keep" else loader._halo_gids[:0]
        super().__init__(torch.cat([own, halo]), loader._n_inner, dim, seed)
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


class GrappaEdgeLoader(GrappaLoader, PartitionEdgeLoader):
    """Local-only replacement for ``DistEdgeDataLoader`` (link prediction): a :class:`PartitionEdgeLoader` over a DistGraph.

    What it keeps and reads once is :class:`GrappaLoader`'s, with every node of the partition
    kept (any node it holds may be the end of a positive or negative pair); read every input
    row with :meth:`features` (and :meth:`aggregates`, :meth:`degrees`). The batches are
    :class:`PartitionEdgeLoader`'s: this machine's positive edges and negatives drawn from the
    nodes it holds, so no row, no sampling request and no edge lookup leaves the machine.

    Args:
        g, sampler, batch_size, correction: as for :class:`GrappaLoader` (``batch_size``: positive
            edges per batch; ``correction``: None or ``make_correction("none")``).
        negative_sampler: the script's negative sampler (``dgl.dataloading.negative_sampler.Uniform(k)``
            draws uniformly from the nodes this machine holds; :class:`~dgl_grappa.method.link.LocalNegativeSampler`
            ``(k, "degree")`` in proportion to their full-graph in-degree^0.75).
        kwargs: :class:`GrappaLoader`'s keywords (``halo``, ``first_hop``, ``part_config``, ``memory_budget``, ...).

    Example:
        >>> loader = GrappaEdgeLoader(g, sampler, 1000, negative_sampler=Uniform(1), halo="keep",   # doctest: +SKIP
        ...                           first_hop="block", part_config=part_config)
        >>> for input_nodes, pair_graph, neg_pair_graph, blocks in loader:                          # doctest: +SKIP
        ...     loss = loss_fcn(model(blocks, loader.features(input_nodes)), pair_graph, neg_pair_graph)
    """

    def __init__(self, g, sampler, batch_size: int, correction: Correction | None = None, *, negative_sampler,
                 **kwargs):
        _refuse_link(correction)  # before anything is asked from the servers
        self._negatives = negative_sampler
        super().__init__(g, sampler, batch_size, correction, **kwargs)


class GrappaHeteroLoader:
    """Local-only replacement for ``DistNodeDataLoader`` on a heterogeneous DistGraph (DGL's RGCN example's loader).

    Seeds are this machine's own training nodes of the ``target`` type; the script's ``NeighborSampler`` samples
    inside the machine's local heterograph (:func:`~.hetero.local_heterograph` of ``g.local_partition``: every
    type's inner nodes and, with ``halo="keep"``, its 1-hop halo), per relation, as in the native runtime
    (:class:`~.hetero.HeteroLocalRuntime`). It yields ``(input_nodes, seeds, blocks)`` as ``DistNodeDataLoader``
    does for a heterograph: ``input_nodes`` and ``seeds`` are dicts of per-type global ids. Every input row comes
    from this machine's memory: :meth:`features` (own rows from the server, the kept halo's read once through the
    KVStore, ``one_time_bytes``) and :meth:`embedding` (the featureless types' own rows, trained here, and the
    halo's frozen initial rows; the drop-in for the script's ``DistEmbedding`` per type). Every machine takes the
    same number of steps.

    Args:
        g: the DistGraph (its machine must hold a partition).
        sampler: the script's ``dgl.dataloading.NeighborSampler`` (fan-outs per layer, for every relation).
        batch_size: seeds per batch on the machine with the most training nodes.
        correction: None or ``make_correction("none")`` (the heterogeneous runtime averages plainly).
        target: the labelled node type (empty: the one type with ``train_key``).
        halo: "keep" or "drop".
        seed: seed of shuffling and sampling (the rank is added).
        feat_key, train_key: node-data keys of the features and of the training mask.

    Example:
        >>> loader = GrappaHeteroLoader(g, sampler, 1000, target="paper", halo="keep")    # doctest: +SKIP
        >>> emb = loader.embedding(64); emb_opt = emb.optimizer(lr=0.01)                   # doctest: +SKIP
        >>> for input_nodes, seeds, blocks in loader:                                      # doctest: +SKIP
        ...     x = {**loader.features(input_nodes), **emb(input_nodes)}
        ...     loss = F.cross_entropy(model(blocks, x), g.nodes["paper"].data["label"][seeds["paper"]])
    """

    def __init__(self, g, sampler, batch_size: int, correction: Correction | None = None, *, target: str = "",
                 halo: str = "keep", seed: int = 0, feat_key: str = "feat", train_key: str = "train_mask"):
        from .hetero import TargetSeeds, local_heterograph
        from ..partition.layout import part_edges

        if correction is not None and correction.name != "none":
            raise ValueError(f"the heterogeneous loader averages gradients plainly; correction={correction.name!r} "
                             "weights nodes by a homogeneous coverage: pass None or make_correction('none')")
        if halo not in ("drop", "keep"):
            raise ValueError(f"halo={halo!r} is not allowed; use drop or keep")
        lp = g.local_partition
        if lp is None:
            raise RuntimeError("this trainer's machine holds no partition (g.local_partition is None); the "
                               "drop-in loader needs co-located servers and trainers")
        gpb = g.get_partition_book()
        self.halo, self.correction = halo, correction
        self.target = target or next(t for t in g.ntypes if train_key in g.nodes[t].data)
        inner = lp.ndata["inner_node"].bool()
        n_local = lp.num_nodes() if halo == "keep" else int(inner.sum())
        homo = lp.ndata[dgl.NID][:n_local].to(torch.int64)
        # the server's shared graph has no node types or owners: the partition book gives them
        ntype_id, type_gid = gpb.map_to_per_ntype(homo)
        owner = gpb.nid2partid(homo)
        src, dst = part_edges(lp)
        self.graph, _, n_inner, self.global_ids, _ = local_heterograph(
            src, dst, lp.edata[dgl.ETYPE], inner, ntype_id, type_gid, owner, list(g.ntypes),
            [tuple(e) for e in g.canonical_etypes], halo)
        self.num_inner_by_type = n_inner
        self._first, self._halo_sorted, self._halo_local, self._halo_row = {}, {}, {}, {}
        for t in g.ntypes:
            gids = self.global_ids[t]
            first = int(gids[0]) if n_inner[t] else 0
            # the server's rows of a type (``.local_partition``) are its own nodes in per-type id order
            if n_inner[t] and not torch.equal(gids[: n_inner[t]], torch.arange(first, first + n_inner[t])):
                raise RuntimeError(f"the own nodes of type {t} are not one contiguous range of per-type ids; partition "
                                   "with dgl.distributed.partition_graph")
            order = torch.argsort(gids[n_inner[t]:])
            self._first[t] = first
            self._halo_sorted[t] = gids[n_inner[t]:][order]
            self._halo_local[t] = order + n_inner[t]
            # local id of a halo node -> its row of the halo table (sorted by global id), made once
            self._halo_row[t] = torch.empty(gids.numel(), dtype=torch.int64)
            self._halo_row[t][self._halo_local[t]] = torch.arange(order.numel())
        self.featured = [t for t in g.ntypes if feat_key in g.nodes[t].data]
        self.bare_types = [t for t in g.ntypes if t not in self.featured]
        # own rows: the server's shared memory; the kept halo's: pulled once through the KVStore, held here
        self._own = {t: g.nodes[t].data[feat_key].local_partition for t in self.featured}
        self._halo_feat = {t: g.nodes[t].data[feat_key][self._halo_sorted[t]] if self._halo_sorted[t].numel()
                           else self._own[t][:0].float() for t in self.featured}
        self.one_time_bytes = sum(int(x.numel()) * 4 for x in self._halo_feat.values())
        t = self.target
        train = g.nodes[t].data[train_key].local_partition[: n_inner[t]].bool()
        self.train_ids = train.nonzero(as_tuple=True)[0]
        if seeded_workers(self.train_ids.numel()) < _world():
            raise ValueError(f"a machine's partition has no training nodes of type {t}, and the drop-in loader needs "
                             "some on every machine; use fewer parts or --partition.balance_train=true")
        self.steps = equal_steps(self.train_ids.numel(), batch_size)
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        self.batches = LocalBatches(self.graph, self.train_ids, TargetSeeds(sampler, t), self.steps,
                                    seed=seed * 1000 + rank)
        self._weights = torch.ones(n_inner[t])
        self._epoch = 0
        self._embedding = None
        log.info("drop-in (heterogeneous): part %d holds %s own and %s halo nodes; %d bytes read once",
                 int(gpb.partid), dict(n_inner), {k: int(v.numel()) for k, v in self._halo_sorted.items()},
                 self.one_time_bytes)

    def __len__(self) -> int:
        return self.steps

    def set_epoch(self, epoch: int) -> None:
        """Draw the next iteration's batches as epoch ``epoch`` (e.g. when resuming at that epoch)."""
        self._epoch = epoch

    def __iter__(self):
        epoch, self._epoch = self._epoch, self._epoch + 1
        for input_nodes, seeds, blocks in self.batches.epoch(epoch):
            if self.correction is not None:
                self.correction.prime(self._weights[seeds])
            yield ({t: self.global_ids[t][ids] for t, ids in input_nodes.items()},
                   {self.target: self.global_ids[self.target][seeds]}, blocks)

    def local_ids(self, ntype: str, ids: Tensor) -> Tensor:
        """This machine's local ids (of its local heterograph) of nodes of ``ntype`` given by per-type global ids."""
        ids = ids.to(torch.int64)
        first, n = self._first[ntype], self.num_inner_by_type[ntype]
        own = (ids >= first) & (ids < first + n)
        out = torch.empty_like(ids)
        out[own] = ids[own] - first
        other = ids[~own]
        if other.numel():
            halo = self._halo_sorted[ntype]
            pos = torch.searchsorted(halo, other).clamp(max=max(halo.numel() - 1, 0))
            if not halo.numel() or not torch.equal(halo[pos], other):
                raise RuntimeError("a batch asked for a node this machine does not hold (the loader left its part)")
            out[~own] = self._halo_local[ntype][pos]
        return out

    def features(self, input_nodes: dict) -> dict:
        """fp32 rows of the featured types among ``input_nodes`` (per-type global ids), all from this machine's memory."""
        out = {}
        for t, ids in input_nodes.items():
            if t not in self._own:
                continue
            local = self.local_ids(t, ids)
            n = self.num_inner_by_type[t]
            rows = torch.empty((local.numel(), int(self._own[t].shape[1])), dtype=torch.float32)
            own = local < n
            rows[own] = self._own[t][local[own]].float()
            rows[~own] = self._halo_feat[t][self._halo_row[t][local[~own]]]
            out[t] = rows
        return out

    def embedding(self, dim: int, seed: int = 0):
        """The featureless types' learnable rows on this machine: the drop-in for a ``DistEmbedding`` per type.

        Own rows are trained here by the module's ``optimizer(lr)`` (PyTorch's ``SparseAdam``); the kept halo's
        rows are their owners' initial rows, frozen (:class:`~.hetero.HeteroEmbedding`). Called with a batch's
        ``input_nodes`` (per-type global ids), it returns ``{featureless type: rows}``.
        """
        if self._embedding is None:
            self._embedding = GlobalIdHeteroEmbedding(self, dim, seed)
        return self._embedding

    @property
    def nbytes(self) -> int:
        """Bytes this loader holds besides the server's tables: the kept halo's feature rows and the learnable rows
        of :meth:`embedding` with their optimizer's moments."""
        held = sum(int(x.numel()) * 4 for x in self._halo_feat.values())
        return held + (self._embedding.memory()["embed"] if self._embedding is not None else 0)


class GlobalIdHeteroEmbedding(HeteroEmbedding):
    """:class:`~.hetero.HeteroEmbedding` over one :class:`GrappaHeteroLoader`'s machine, called with per-type global ids."""

    def __init__(self, loader: GrappaHeteroLoader, dim: int, seed: int = 0):
        from types import SimpleNamespace

        part = SimpleNamespace(global_ids=loader.global_ids, num_inner_by_type=loader.num_inner_by_type,
                               bare_types=loader.bare_types)
        super().__init__(part, dim, seed)
        self._loader = loader

    def forward(self, input_nodes: dict) -> dict:
        """``{featureless type: rows}`` of a batch's ``input_nodes`` (own rows differentiable, halo rows frozen)."""
        return {t: self.types[t](self._loader.local_ids(t, ids)) for t, ids in input_nodes.items() if t in self.types}


_EXCHANGES = 0


def _aggregates(g, part_config, part_id: int, inner_kept: Tensor, halo_gids: Tensor, width: int, precision: str,
                with_halo: bool, what: str = "agg"):
    """This machine's kept aggregates, and (with the halo) the kept halo's, read once through the KVStore.

    The owners publish their nodes' aggregates in a temporary DistTensor (each writes its own
    rows: local), every machine pulls its halo's rows once, and the tensor is dropped.
    """
    from ..partition.aggregates import load_sidecar
    from .storage import NodeTable

    n_inner = int(g.local_partition.ndata["inner_node"].bool().sum())
    agg = load_sidecar(part_config, part_id, what=what)
    if agg.shape != (n_inner, width):
        raise ValueError(f"the aggregates of part {part_id} in {part_config} are {tuple(agg.shape)}, not "
                         f"({n_inner}, {width}): the folder was prepared for another partitioning; run "
                         "`python -m dgl_grappa prepare` again")
    mine = NodeTable.store(agg[inner_kept], precision)
    if not with_halo:
        return mine, None
    first = int(g.local_partition.ndata[dgl.NID][0]) if n_inner else 0
    global _EXCHANGES
    _EXCHANGES += 1  # the same count on every trainer: they build their loaders together
    shared = dgl.distributed.DistTensor((g.num_nodes(), width), torch.float32,
                                        name=f"grappa_first_hop_agg_{_EXCHANGES}",
                                        part_policy=g.get_node_partition_policy("_N"), persistent=False)
    shared[torch.arange(first, first + n_inner)] = agg
    g.barrier()  # every owner has written its rows
    theirs = NodeTable.store(shared[halo_gids], precision) if halo_gids.numel() else NodeTable.store(
        torch.zeros((0, width)), precision)
    g.barrier()  # every machine has read before the tensor goes
    del shared
    return mine, theirs
