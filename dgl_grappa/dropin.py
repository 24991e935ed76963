"""Drop-in Grappa for an existing DistDGL training script: a local-only loader over a DistGraph.

A DistDGL trainer already holds its machine's partition: ``g.local_partition`` (the
graph structure the co-located server put in shared memory: inner nodes first, then the
1-hop halo) and, for every node tensor, the rows of the inner nodes
(``g.ndata[k].local_partition``). :class:`GrappaLoader` samples from those only and
replaces ``DistNodeDataLoader``:

* seeds are this machine's own training nodes; neighbours are sampled with the script's
  own ``NeighborSampler`` on the inner-node subgraph (halo dropped), so every node of a
  batch is owned by this machine;
* it yields ``(input_nodes, seeds, blocks)`` like DistNodeDataLoader, with **global** node
  ids, so the script's ``g.ndata["feat"][input_nodes]`` keeps working and every row it
  asks for is served from this machine's memory: no remote pull;
* every worker takes the same number of steps per epoch (one all-reduce, once), so no
  collective waits on a finished worker;
* before yielding a batch it sets the batch weight of the coverage-corrected
  communication hook (``correction.register(ddp)``): the script's loss stays the plain
  mean cross-entropy. The node-level variant needs a weighted loss and is therefore not a
  drop-in (use ``batch``, ``shrinkage`` or ``none``).

Example (the two changes to a DistDGL script):
    >>> corr = make_correction("batch")                                         # doctest: +SKIP
    >>> loader = GrappaLoader(g, sampler, batch_size=1000, correction=corr)     # was DistNodeDataLoader
    >>> model = DDP(model); corr.register(model)                                # was DDP(model)
"""
from __future__ import annotations

import logging

import dgl
import torch
from torch import Tensor

from . import coverage as cov
from .reducers.correction import BatchCorrection, Correction, NodeCorrection
from .sampler import LocalBatches, equal_steps

log = logging.getLogger("dgl_grappa")


def _local_edges(lp: dgl.DGLGraph) -> tuple[Tensor, Tensor]:
    # The shared-memory partition may only allow CSC; derive (src, dst) from it then.
    if "coo" in lp.formats()["created"] or "coo" in lp.formats().get("not created", []):
        return lp.edges()
    indptr, indices, _ = lp.adj_tensors("csc")
    dst = torch.repeat_interleave(torch.arange(indptr.numel() - 1), indptr[1:] - indptr[:-1])
    return indices, dst


class GrappaLoader:
    """Local-only, coverage-weighted replacement for ``DistNodeDataLoader``.

    Args:
        g: the DistGraph (its machine must hold a partition: ``g.local_partition``).
        sampler: the script's ``dgl.dataloading.NeighborSampler`` (or anything with
            ``sample(graph, seeds)``), used on the local graph.
        batch_size: seeds per batch on the machine with the most training nodes; the
            others use smaller batches so that every machine takes the same number of steps.
        correction: a :class:`~dgl_grappa.reducers.Correction` (none, batch, shrinkage)
            whose hook state is set before every batch; None = plain averaging.
        hops: hops of the coverage recurrence (usually the model's number of layers).
        w_min: lower clamp of the node weights.
        self_loops: count a self-loop in both degrees.
        seed: seed of shuffling and sampling (the rank is added).
        train_key, degree_key: node-data keys of the training mask and of the full-graph
            in-degree (written by ``python -m dgl_grappa partition``; without it the
            degrees are asked from the servers once, here).

    Attributes:
        weights: node weight of every inner node (local id order).
        offset: global id of the first inner node (global = local + offset).
        steps: batches per epoch.
    """

    def __init__(self, g, sampler, batch_size: int, correction: Correction | None = None, *, hops: int = 2,
                 w_min: float = 0.05, self_loops: bool = True, seed: int = 0, train_key: str = "train_mask",
                 degree_key: str = "in_degree"):
        if isinstance(correction, NodeCorrection):
            raise ValueError("the node-level correction weights the loss itself, so it is not a drop-in; use "
                             "--grappa.correction=batch, shrinkage or none with the drop-in loader")
        lp = g.local_partition
        if lp is None:
            raise RuntimeError("this trainer's machine holds no partition (g.local_partition is None); the "
                               "drop-in loader needs co-located servers and trainers")
        inner = lp.ndata["inner_node"].bool()
        n_inner = int(inner.sum())
        if not bool(inner[:n_inner].all()):
            raise RuntimeError("unexpected partition layout: inner nodes are not first")
        gids = lp.ndata[dgl.NID][:n_inner]
        self.offset = int(gids[0]) if n_inner else 0
        if n_inner and not torch.equal(gids, torch.arange(self.offset, self.offset + n_inner, dtype=gids.dtype)):
            raise RuntimeError("the inner nodes' global ids are not one contiguous range; partition with "
                               "dgl.distributed.partition_graph (reshuffled ids)")
        src, dst = _local_edges(lp)
        keep = (src < n_inner) & (dst < n_inner)  # halo dropped: every sampled node is owned here
        src, dst = src[keep], dst[keep]
        self.graph = dgl.graph((src, dst), num_nodes=n_inner).formats(["csc"])
        train = g.ndata[train_key].local_partition[:n_inner].bool()
        self.train_ids = train.nonzero(as_tuple=True)[0]
        if degree_key in g.ndata:
            deg = g.ndata[degree_key].local_partition[:n_inner]
        else:
            log.warning("node data %r is missing: asking the servers for the in-degrees once", degree_key)
            deg = g.in_degrees(torch.arange(self.offset, self.offset + n_inner))
        c = cov.coverage(src, dst, n_inner, deg.to(torch.int64), hops, self_loops)
        self.coverage = c
        self.weights = cov.node_weights(c, w_min)
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        self.steps = equal_steps(self.train_ids.numel(), batch_size)
        self.batches = LocalBatches(self.graph, self.train_ids, list(getattr(sampler, "fanouts", [])) or [-1],
                                    self.steps, seed=seed * 1000 + rank)
        self.batches.sampler = sampler  # the script's own sampler, on the local graph
        self.correction = correction
        self._epoch = 0

    def __len__(self) -> int:
        return self.steps

    def _prime(self, w: Tensor) -> None:
        corr = self.correction
        if isinstance(corr, BatchCorrection):  # batch and shrinkage: one scalar per batch
            a = corr.batch_weight(w) if w.numel() else 0.0
            corr.state.scale = corr.state.norm = a
            corr.last_weight = a
        elif corr is not None:
            corr.last_weight = 1.0

    def __iter__(self):
        epoch, self._epoch = self._epoch, self._epoch + 1
        for input_nodes, seeds, blocks in self.batches.epoch(epoch):
            self._prime(self.weights[seeds])
            yield input_nodes + self.offset, seeds + self.offset, blocks
