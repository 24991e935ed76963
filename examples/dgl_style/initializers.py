"""The ``DistEmbedding`` initialisers of the DGL-style scripts beside this file.

DGL's scripts define theirs in the script itself (``initializer`` in ``train_dist_transductive.py``,
``init_emb`` in ``entity_classify_dist.py``). A ``DistEmbedding`` sends its initialiser to the servers
pickled by name, and DGL's ``tools/launch.py`` runs the script in its servers too, where the name
resolves. The package's launcher runs bare DGL servers for now, so the scripts here import theirs from
this module, which a server can import (the tests put this folder on ``PYTHONPATH``).
"""
import torch as th


def initializer(shape, dtype):
    """Rows uniform in [-1, 1) (train_dist_transductive.py's)."""
    arr = th.zeros(shape, dtype=dtype)
    arr.uniform_(-1, 1)
    return arr


def init_emb(shape, dtype):
    """Rows uniform in [-1, 1) (entity_classify_dist.py's)."""
    arr = th.zeros(shape, dtype=dtype)
    th.nn.init.uniform_(arr, -1.0, 1.0)
    return arr
