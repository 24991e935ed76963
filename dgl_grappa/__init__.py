"""dgl_grappa: Grappa's gradient-only communication for distributed GNN training on DGL.

Each worker trains on its own partition only (local-only neighbour sampling, local
features); the only bytes on the network are the gradients of one all-reduce per step,
corrected for the neighbourhood each worker could not see (see :mod:`dgl_grappa.method.coverage`
and :mod:`dgl_grappa.method.reducers`).
"""
import os as _os

_os.environ.setdefault("DGLBACKEND", "pytorch")

__version__ = "0.1.0"
