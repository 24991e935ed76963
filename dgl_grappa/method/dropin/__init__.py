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
``Correction.loss`` calls too. The modules: :mod:`.core` (:class:`PartitionLoader`,
:class:`PartitionEdgeLoader`: that core, fed with plain tensors), :mod:`.machine` (what a loader
reads once from its trainer's machine and serves every row from), :mod:`.loaders`
(:class:`GrappaLoader`, :class:`GrappaEdgeLoader`: a core and the machine's tables, composed) and
:mod:`.hetero` (:class:`GrappaHeteroLoader`).

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
from .core import PartitionEdgeLoader, PartitionLoader, first_hop_block
from .hetero import GlobalIdHeteroEmbedding, GrappaHeteroLoader
from .loaders import GrappaEdgeLoader, GrappaLoader
from .machine import GlobalIdEmbedding, MachineTables

__all__ = ["GlobalIdEmbedding", "GlobalIdHeteroEmbedding", "GrappaEdgeLoader", "GrappaHeteroLoader", "GrappaLoader",
           "MachineTables", "PartitionEdgeLoader", "PartitionLoader", "first_hop_block"]
