"""Side-by-side runs and benchmarks: Grappa against the DistDGL baseline.

* :mod:`.compare` - ``python -m dgl_grappa compare``: one run of each system, a table and a report;
* :mod:`.matrix` - ``python -m dgl_grappa bench``: a resumable matrix of compare-style cells;
* :mod:`.report` - the accuracy and speed reports of a matrix, with plots;
* :mod:`.capacity` - a model of bytes, memory and time at sizes this machine cannot run.

Layer 7: above both runtimes.
"""
