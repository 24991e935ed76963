"""Drop-in Grappa for an existing DistDGL script: local-only loaders over a DistGraph.

A DistDGL trainer already holds its machine's partition: ``g.local_partition`` (the graph the
co-located server put in shared memory: inner nodes first, then the 1-hop halo) and, for every node
tensor, the rows of its own nodes (``g.ndata[k].local_partition``). The loaders here sample from
those only and replace DGL's distributed loaders in a script written for DistDGL (DGL's own
examples included; docs/dropin.md shows the diff per kind):

* :class:`GrappaLoader` for ``DistNodeDataLoader``, :class:`GrappaEdgeLoader` for
  ``DistEdgeDataLoader`` (link prediction), :class:`GrappaHeteroLoader` for ``DistNodeDataLoader``
  on a heterograph. Seeds (or positive edges) are this machine's own; neighbours are sampled with
  the script's own sampler inside the machine's part, the kept 1-hop halo included; every machine
  takes the same number of steps.
* Batches are DistDGL's: global ids in ``input_nodes``, the seeds, every block's
  ``srcdata``/``dstdata[dgl.NID]`` and ``edata[dgl.EID]``, the pair graphs' ids; on a heterograph
  dicts per type and blocks with the relations they sampled. With ``first_hop="block"`` a virtual
  first block makes a mean-aggregating layer compute the full-graph first hop.
* Inputs from local memory: ``loader.features(input_nodes)`` (the feature key found: "auto"), and
  :meth:`serve <GrappaLoader.serve>` for the reads a script's own layers make (its
  ``g.nodes[t].data[key][ids]``, its ``DistEmbedding``: own rows trained in this machine's shard by
  DGL's own ``SparseAdam``, the kept halo's frozen): during the loader's epochs from this
  machine's memory, outside them DGL's own (:mod:`.serve`).
* Under a memory budget (the native runtime's rules), whose cost is logged as a warning.
* Before yielding a batch a loader primes the coverage-corrected communication hook
  (``correction.register(ddp)``); the node-level correction weights the loss and is no drop-in.

The method is the native runtime's, not a copy: the local graph is
:func:`dgl_grappa.method.local_part.local_graph`, the weights
:func:`dgl_grappa.method.coverage.partition_weights`, the batches
:class:`dgl_grappa.method.sampler.LocalBatches`, and the hook state is set by
:meth:`Correction.prime <dgl_grappa.method.reducers.Correction.prime>`. The modules: :mod:`.core`
(:class:`PartitionLoader`, :class:`PartitionEdgeLoader`: batches of one part from plain tensors, with
their global ids), :mod:`.options` (:class:`LoaderOptions`: the settings every loader takes, as keywords
or as one object), :mod:`.machine` (what a loader reads once from its machine and serves every row
from), :mod:`.loaders` (:class:`GrappaLoader`, :class:`GrappaEdgeLoader`), :mod:`.hetero`
(:class:`GrappaHeteroLoader`) and :mod:`.serve` (``loader.serve``).

Example (the changes to DGL's node classification example):
    >>> dataloader = GrappaLoader(g, sampler, args.batch_size, first_hop="block",        # doctest: +SKIP
    ...                           part_config=args.part_config)      # was DistNodeDataLoader(g, train_nid, ...)
    >>> for step, (input_nodes, seeds, blocks) in enumerate(dataloader):                 # doctest: +SKIP
    ...     batch_inputs = dataloader.features(input_nodes)          # was g.ndata["features"][input_nodes]
"""

from .core import NO_EDGE, PartitionEdgeLoader, PartitionLoader, first_hop_block
from .hetero import GlobalIdHeteroEmbedding, GrappaHeteroLoader
from .loaders import GrappaEdgeLoader, GrappaLoader
from .machine import GlobalIdEmbedding, MachineTables
from .options import LoaderOptions
from .serve import ServedEmbedding, ServedGraph, ServedRows

__all__ = [
    "NO_EDGE",
    "GlobalIdEmbedding",
    "GlobalIdHeteroEmbedding",
    "GrappaEdgeLoader",
    "GrappaHeteroLoader",
    "GrappaLoader",
    "LoaderOptions",
    "MachineTables",
    "PartitionEdgeLoader",
    "PartitionLoader",
    "ServedEmbedding",
    "ServedGraph",
    "ServedRows",
    "first_hop_block",
]
