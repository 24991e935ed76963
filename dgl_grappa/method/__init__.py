"""The method, in one place: what a Grappa worker computes, whoever runs it.

* :mod:`.local_part` - a worker's local view of its part: local graph, features,
  first-hop aggregates, the kept 1-hop halo (read once per partitioning);
* :mod:`.sampler` - local-only neighbour sampling and equal step counts;
* :mod:`.coverage` - coverage and importance weights (pure tensor functions);
* :mod:`.reducers` - DDP communication hooks and the corrections that drive them;
* :mod:`.models` - GCN, GraphSAGE, GAT, GIN with first-hop completion;
* :mod:`.local_runtime` - the data side of one partitioning on one worker;
* :mod:`.dropin` - the same method as a loader for an existing DistDGL script.

Layer 4: reads partitions (:mod:`dgl_grappa.partition`), used by both runtimes.
"""
