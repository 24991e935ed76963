"""dgl_grappa: Grappa's gradient-only communication for distributed GNN training on DGL.

Each worker trains on its own partition only (local-only neighbour sampling, local
features); the only bytes on the network are the gradients of one all-reduce per step.
First-hop completion and the kept 1-hop halo win back the accuracy that isolation costs,
under a memory budget per worker. The folders are the layers (ARCHITECTURE.md).

The public API, importable from here (loaded on first use, so that ``import dgl_grappa``
stays cheap: the remote guard imports this package before torch or DGL are importable):

* :class:`GrappaLoader` - the drop-in replacement of ``DistNodeDataLoader`` for an existing
  DistDGL script (:mod:`dgl_grappa.method.dropin`); :class:`GrappaEdgeLoader` the one of
  ``DistEdgeDataLoader`` (link prediction); :class:`GrappaHeteroLoader` the one of
  ``DistNodeDataLoader`` on a heterogeneous graph; :class:`LoaderOptions` their settings as one object
  (the keywords they take: ``first_hop="block"``, ``part_config=...``);
* :func:`make_correction` - the gradient reducer the drop-in registers on the DDP model
  (:mod:`dgl_grappa.method.reducers`);
* :func:`load_config` - the config tree from YAML and ``--section.key=value`` overrides
  (:mod:`dgl_grappa.config`);
* :func:`run_worker` - one worker of a job that torchrun, Slurm or your own launcher started
  (:mod:`dgl_grappa.native.trainer`; ``python -m dgl_grappa worker`` calls it);
* :func:`prepare` - first-hop aggregates for a partition folder another tool wrote
  (:mod:`dgl_grappa.partition.aggregates`; ``python -m dgl_grappa prepare``).

Example:
    >>> import dgl_grappa
    >>> cfg = dgl_grappa.load_config(None, ["--partition.num_parts=2"])
    >>> cfg.train.memory_budget
    '1.5'
"""

import importlib as _importlib
import os as _os

_os.environ.setdefault("DGLBACKEND", "pytorch")

__version__ = "0.1.0"

_API = {
    "GrappaLoader": "dgl_grappa.method.dropin",
    "GrappaEdgeLoader": "dgl_grappa.method.dropin",
    "GrappaHeteroLoader": "dgl_grappa.method.dropin",
    "LoaderOptions": "dgl_grappa.method.dropin",
    "make_correction": "dgl_grappa.method.reducers",
    "load_config": "dgl_grappa.config",
    "run_worker": "dgl_grappa.native.trainer",
    "prepare": "dgl_grappa.partition.aggregates",
}
__all__ = sorted(_API)


def __getattr__(name: str):
    if name in _API:
        value = getattr(_importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dgl_grappa' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_API))
