"""Side-by-side runs and benchmarks: Grappa against the DistDGL baseline.

* :mod:`.compare` - ``python -m dgl_grappa compare``: one run of each system, a table and a report;
* :mod:`.matrix` - ``python -m dgl_grappa bench``: a resumable matrix of compare-style cells, planned
  (:mod:`.plan`), stored (:mod:`.storage`), checked for stale runs (:mod:`.staleness`) and run
  (:mod:`.execute`);
* :mod:`.report` - the accuracy and speed reports of a matrix, with plots;
* :mod:`.capacity` - a model of bytes, memory and time at sizes this machine cannot run;
* :mod:`.project` - ``python -m dgl_grappa project``: both systems' epoch time on larger clusters,
  calibrated on runs made here.

Layer 7: above both runtimes.
"""
