"""Partitionings in DGL's layout: assigning nodes, writing and caching folders, reading them back.

* :mod:`.assign` - node assignments (the restreaming LDG) and what a cut costs;
* :mod:`.aggregates` - the first-hop aggregates written with every part;
* :mod:`.store` - ``partition`` (DGL's ``partition_graph``) and ``ensure_partitions`` (the cache);
* :mod:`.layout` - DGL's folder layout: names, files, per-part structure without DGL's loader;
* :mod:`.prebuilt` - folders another tool wrote (``partition.prebuilt``);
* :mod:`.bigpart` - graphs that do not fit in one process, streamed into DGL's layout;
* :mod:`.schedule` - the repartition schedule (which partitioning serves epoch e);
* :mod:`.share` - rank 0 sends a part to a host without shared storage.

Layer 3: above :mod:`dgl_grappa.data`, below the method.
"""
