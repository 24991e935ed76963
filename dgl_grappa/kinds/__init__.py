"""The kinds of job and their registry: what the runtimes, the drop-in's trainer and the bench ask.

Each kind is a :class:`~.base.JobKind` (:mod:`.base` has the interface): node classification
(:mod:`.node`), link prediction (:mod:`.link`) and node classification on a heterogeneous graph
(:mod:`.hetero`); what the two homogeneous kinds share is :mod:`.homogeneous`, and the DistDGL side of
learnable input rows is :mod:`.embeddings`. A config selects its kind by ``train.task`` and whether its
graph is heterogeneous (:func:`kind_of`); :func:`resolve` also checks the kind's config rules.

Adding a kind: one module with a :class:`~.base.JobKind` subclass, and one line in :data:`KINDS`.

Example:
    >>> from dgl_grappa.config import load_config
    >>> resolve(load_config(None, [])).name
    'node'
"""
from __future__ import annotations

from ..config import Config, ConfigError
from .base import Batch, DistJob, JobKind, LocalRuntime, Metric
from .hetero import HeteroKind
from .link import LinkKind
from .node import NodeKind

KINDS: dict[str, JobKind] = {kind.name: kind for kind in (NodeKind(), LinkKind(), HeteroKind())}
"""Every kind of job, by name."""


METRICS: dict[str, Metric] = {k.metric.name: k.metric for k in KINDS.values()}
"""How the kinds are graded, by metric family (a kind's ``task``), in the registry's order."""


def kind_of(cfg: Config) -> JobKind:
    """The kind of job ``cfg`` asks for.

    Raises:
        ConfigError: no kind serves it (a ``train.task`` no kind of this graph has).
    """
    for kind in KINDS.values():
        if kind.matches(cfg):
            return kind
    graph = "heterogeneous" if cfg.hetero else "homogeneous"
    tasks = sorted({k.task for k in KINDS.values() if k.heterogeneous == cfg.hetero})
    raise ConfigError(f"train.task={cfg.train.task} is not trained on a {graph} graph (data.name={cfg.data.name}); "
                      f"use --train.task={' or '.join(tasks)}")


def resolve(cfg: Config) -> JobKind:
    """The kind of job ``cfg`` asks for, its config rules checked (a one-line ConfigError on the first problem)."""
    kind = kind_of(cfg)
    kind.check(cfg)
    return kind


__all__ = ["Batch", "DistJob", "JobKind", "KINDS", "LocalRuntime", "METRICS", "Metric", "kind_of", "resolve"]
