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

from ..config import DROPIN_HALO_NOTE, dropin_problem
from . import coverage as cov
from .local_part import local_graph
from .reducers.correction import Correction
from .sampler import LocalBatches, equal_steps, seeded_workers, skip_first_layer

log = logging.getLogger("dgl_grappa")


def _refuse(correction: Correction | None, halo: str) -> None:
    why = dropin_problem(correction.name if correction is not None else "none", halo)
    if why is None and halo != "drop":
        why = DROPIN_HALO_NOTE.replace(": it drops the halo", "; pass halo='drop'")
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
        in_degree: full-graph in-degree of the inner nodes (local id order).
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
        halo: ``train.halo``; only "drop" (see the module docstring).
        first_hop: "sampled", or "exact" (first-hop completion): the loader samples only
            layers 1..L-1 (``sampler`` loses its first layer, see
            :func:`~dgl_grappa.method.sampler.skip_first_layer`), and the script's model computes
            layer 0 from the partition's precomputed aggregates:
            ``model(blocks, x, agg=loader.aggregates(input_nodes), deg=g.ndata["in_degree"][input_nodes])``
            (every row is this machine's own).

    Attributes:
        graph: the local (inner-node) graph batches are sampled from.
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
                 first_hop: str = "sampled"):
        _refuse(correction, halo)
        if first_hop not in ("exact", "sampled"):
            raise ValueError(f"first_hop={first_hop!r} is not allowed; use exact or sampled")
        self.halo = halo
        self.first_hop = first_hop
        if first_hop == "exact":
            sampler = skip_first_layer(sampler)
        self.graph, n_inner, src, dst = local_graph(graph, inner, halo)
        self.global_ids = global_ids[:n_inner]
        self.train_ids = train_mask[:n_inner].bool().nonzero(as_tuple=True)[0]
        # The script's own loss takes the seeds' labels, so a step without seeds cannot be made
        # weight 0 here: every machine needs training nodes (agreed first, so no trainer waits).
        if seeded_workers(self.train_ids.numel()) < (torch.distributed.get_world_size()
                                                      if torch.distributed.is_initialized() else 1):
            raise ValueError("a machine's partition has no training nodes, and the drop-in loader needs some on "
                             "every machine; use fewer parts or --partition.balance_train=true")
        self.coverage, self.weights = cov.partition_weights(src, dst, n_inner, in_degree[:n_inner], hops,
                                                            self_loops, w_min)
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        self.steps = equal_steps(self.train_ids.numel(), batch_size)
        self.batches = LocalBatches(self.graph, self.train_ids, sampler, self.steps, seed=seed * 1000 + rank)
        self.correction = correction
        self._epoch = 0

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
            yield self.global_ids[input_nodes], self.global_ids[seeds], blocks


class GrappaLoader(PartitionLoader):
    """Local-only, coverage-weighted replacement for ``DistNodeDataLoader``: a :class:`PartitionLoader` over a DistGraph.

    Args:
        g: the DistGraph (its machine must hold a partition: ``g.local_partition``).
        sampler, batch_size, correction, hops, w_min, self_loops, seed, halo, first_hop: as for
            :class:`PartitionLoader`.
        part_config: the partition json the servers loaded (``first_hop="exact"`` reads this
            machine's aggregates from its folder: ``python -m dgl_grappa prepare`` adds them).
        memory_budget: ``train.memory_budget`` (a multiple of the own fp32 feature rows, or
            bytes): the server holds the features in fp32; the aggregates take the most
            exact precision that fits in the rest (at least int4).
        train_key, degree_key: node-data keys of the training mask and of the full-graph
            in-degree (written by ``python -m dgl_grappa partition``; without it the
            degrees are asked from the servers once, here).
    """

    def __init__(self, g, sampler, batch_size: int, correction: Correction | None = None, *, hops: int = 2,
                 w_min: float = 0.05, self_loops: bool = True, seed: int = 0, halo: str = "drop",
                 first_hop: str = "sampled", train_key: str = "train_mask", degree_key: str = "in_degree",
                 part_config: str | None = None, memory_budget: str = "1.5"):
        _refuse(correction, halo)  # before anything is asked from the servers
        lp = g.local_partition
        if lp is None:
            raise RuntimeError("this trainer's machine holds no partition (g.local_partition is None); the "
                               "drop-in loader needs co-located servers and trainers")
        inner = lp.ndata["inner_node"].bool()
        n_inner = int(inner.sum())
        gids = lp.ndata[dgl.NID]
        # The node data's local rows (``.local_partition``) are the inner nodes in global id
        # order; they line up with the local ids only for one contiguous range.
        first = int(gids[0]) if n_inner else 0
        if n_inner and not torch.equal(gids[:n_inner], torch.arange(first, first + n_inner, dtype=gids.dtype)):
            raise RuntimeError("the inner nodes' global ids are not one contiguous range; partition with "
                               "dgl.distributed.partition_graph (reshuffled ids)")
        train = g.ndata[train_key].local_partition[:n_inner]
        if degree_key in g.ndata:
            deg = g.ndata[degree_key].local_partition[:n_inner]
        else:
            log.warning("node data %r is missing: asking the servers for the in-degrees once", degree_key)
            deg = g.in_degrees(gids[:n_inner])
        if first_hop == "exact" and part_config is None:
            raise ValueError("first_hop='exact' needs part_config= (this machine's aggregates are read from the "
                             "partition folder); or use first_hop='sampled'")
        self.agg = None
        self._first = first
        if first_hop == "exact":
            self.agg = _aggregates(part_config, g.get_partition_book().partid, int(g.ndata["feat"].shape[1]),
                                   n_inner, memory_budget)
        super().__init__(lp, inner, gids, train, deg, sampler, batch_size, correction, hops=hops, w_min=w_min,
                         self_loops=self_loops, seed=seed, halo=halo, first_hop=first_hop)

    def aggregates(self, input_nodes: Tensor) -> Tensor:
        """fp32 first-hop aggregates of ``input_nodes`` (global ids of this machine's nodes), from local memory."""
        if self.agg is None:
            raise RuntimeError("this loader was made with first_hop='sampled': it holds no aggregates")
        return self.agg.gather(input_nodes - self._first)


def _aggregates(part_config, part_id: int, width: int, n_inner: int, memory_budget: str):
    """This machine's aggregates in the most exact precision that fits next to the server's fp32 features."""
    from ..config import ConfigError, parse_budget
    from ..partition.aggregates import load_sidecar
    from .storage import NodeTable, row_bytes

    agg = load_sidecar(part_config, part_id)
    if agg.shape != (n_inner, width):
        raise ValueError(f"the aggregates of part {part_id} in {part_config} are {tuple(agg.shape)}, not "
                         f"({n_inner}, {width}): the folder was prepared for another partitioning; run "
                         "`python -m dgl_grappa prepare` again")
    mult, size = parse_budget(memory_budget)
    own = n_inner * width * 4
    room = (size or mult * own) - own if (size or mult) else float("inf")
    for precision in ("fp32", "fp16", "int8", "int4"):
        if n_inner * row_bytes(width, precision) <= room:
            break
    else:
        raise ConfigError(f"train.memory_budget={memory_budget} leaves no room for the aggregates next to the server's "
                          f"features (they need {1 + row_bytes(width, 'int4') / (4 * width):.3f} x the own rows in int4)")
    log.info("drop-in: first-hop aggregates of part %d held in %s (%d bytes)", part_id, precision,
             int(n_inner * row_bytes(width, precision)))
    return NodeTable.store(agg, precision)
