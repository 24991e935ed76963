"""What both runtimes (Grappa's native trainer and the DistDGL baseline) share.

* :mod:`.metrics` - the epoch clock, phase times, byte meters, memory, JSONL logs;
* :mod:`.meter` - the epoch meter both trainers use: per-epoch records, their log, the summary's shared fields;
* :mod:`.checkpoint` - atomic checkpoints, fingerprints, resume points;
* :mod:`.agreement` - checkpoints as collectives: rank 0 writes, every rank agrees on what to resume from;
* :mod:`.restarts` - the restart budget of a job whose worker died;
* :mod:`.evaluation` - the global evaluation (single process or layer-wise);
* :mod:`.repartition` - the background builder and driver of periodic repartitioning.

Layer 5: above the method, below :mod:`dgl_grappa.native` and :mod:`dgl_grappa.distdgl`.
"""
