"""The kinds of job and their registry: what the runtimes, the drop-in's trainer and the bench ask.

Each kind is a :class:`~.base.JobKind` (:mod:`.base` has the interface): node classification
(:mod:`.node`), link prediction (:mod:`.link`) and node classification on a heterogeneous graph
(:mod:`.hetero`); what the two homogeneous kinds share is :mod:`.homogeneous`, and the DistDGL side of
learnable input rows is :mod:`.embeddings`. A config selects its kind by ``train.task`` and whether its
graph is heterogeneous (:func:`kind_of`); :func:`resolve` also checks the kind's config rules.

Adding a kind: one module with a :class:`~.base.JobKind` subclass, and one :func:`register` call (the package's
own: one entry in the tuple below it).

Example:
    >>> from dgl_grappa.config import load_config
    >>> resolve(load_config(None, [])).name
    'node'
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from ..config import Config, ConfigError
from ..data.common import HoldOut, install_hold_outs
from ..runtime.grading import Figure, Metric
from .base import Batch, DistJob, JobKind, LocalRuntime
from .hetero import HeteroKind
from .link import LinkKind
from .node import NodeKind

KINDS: dict[str, JobKind] = {}
"""Every kind of job, by name (:func:`register`)."""

METRICS: dict[str, Metric] = {}
"""How the kinds are graded, by metric family (a kind's ``task``), in the registry's order."""


def register(kind: JobKind) -> JobKind:
    """Add a kind of job to the registry (:data:`KINDS`, its metric to :data:`METRICS`); returns it.

    The package's kinds are registered here; a kind of one's own is registered by this one call in its module,
    which ``train.kind_module`` names so that every process of a job imports it (``tests/test_kind_of_ones_own.py``
    is one: node regression, graded by RMSE).

    Raises:
        ValueError: another kind has its name, its metric is not named after its task, or its task is graded by
            another metric already.

    Example:
        >>> class EdgeRegression(LinkKind):                               # doctest: +SKIP
        ...     name = task = "edge_regress"
        ...     metric = Metric(name="edge_regress", val_key="val_rmse", test_key="test_rmse", words="RMSE",
        ...                     higher_is_better=False)
        >>> register(EdgeRegression())                                     # doctest: +SKIP
    """
    if kind.name in KINDS and KINDS[kind.name] is not kind:
        raise ValueError(f"a kind of job named {kind.name!r} is registered already; give yours another name")
    known = METRICS.get(kind.metric.name)
    if known is not None and known != kind.metric:
        raise ValueError(
            f"task {kind.metric.name!r} is graded by another metric already; give your metric the "
            "kind's own task as its name"
        )
    if kind.metric.name != kind.task:
        raise ValueError(
            f"kind {kind.name!r}: its metric's name ({kind.metric.name!r}) must be its task ({kind.task!r})"
        )
    KINDS[kind.name] = kind
    METRICS.setdefault(kind.metric.name, kind.metric)
    return kind


for _kind in (NodeKind(), LinkKind(), HeteroKind()):
    register(_kind)


def metric_of(task: str | None) -> Metric:
    """How a task (a summary's or a cell's ``task``) is graded: the registered metric of that name, else the first
    kind's (node classification's: a summary or cell that names no task is one)."""
    return METRICS.get(task or "") or next(iter(METRICS.values()))


def import_kind_module(spec: str) -> None:
    """Import ``train.kind_module`` (a module name, or a ``.py`` file's path): the module registers its kind.

    Raises:
        ConfigError: the module cannot be found or fails to import.
    """
    if spec.endswith(".py"):
        path = Path(spec).resolve()
        name = f"dgl_grappa_kind_module_{path.stem}"
        if name in sys.modules:
            return
        if not path.is_file():
            raise ConfigError(
                f"train.kind_module={spec} does not exist; name the .py file (or the module) that "
                "registers your kind of job"
            )
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception:
            del sys.modules[name]
            raise
        return
    try:
        importlib.import_module(spec)
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"train.kind_module={spec} cannot be imported ({exc}); name an importable module, or the "
            "path of a .py file, that registers your kind of job"
        ) from None


def kind_of(cfg: Config) -> JobKind:
    """The kind of job ``cfg`` asks for (importing ``train.kind_module`` first when no registered kind serves it).

    Raises:
        ConfigError: no kind serves it (a ``train.task`` no kind of this graph has).
    """
    for attempt in range(2):
        for kind in KINDS.values():
            if kind.matches(cfg):
                return kind
        if attempt or not cfg.train.kind_module:
            break
        import_kind_module(cfg.train.kind_module)  # a kind of one's own: its module registers it
    graph = "heterogeneous" if cfg.hetero else "homogeneous"
    tasks = sorted({k.task for k in KINDS.values() if k.heterogeneous == cfg.hetero})
    own = (
        f" (train.kind_module={cfg.train.kind_module} registers none for it)"
        if cfg.train.kind_module
        else ", or name the module of a kind of your own with --train.kind_module"
    )
    raise ConfigError(
        f"train.task={cfg.train.task} is not trained on a {graph} graph (data.name={cfg.data.name}); "
        f"use --train.task={' or '.join(tasks)}{own}"
    )


def hold_out(cfg: Config) -> HoldOut | None:
    """What a run of ``cfg`` keeps out of the graph it trains on (its kind's :meth:`~.base.JobKind.hold_out`)."""
    return kind_of(cfg).hold_out(cfg)


install_hold_outs(hold_out)  # the layers below the kinds ask them what a run holds out


def resolve(cfg: Config) -> JobKind:
    """The kind of job ``cfg`` asks for, its config rules checked (a one-line ConfigError on the first problem)."""
    kind = kind_of(cfg)
    kind.check(cfg)
    return kind


__all__ = [
    "Batch",
    "DistJob",
    "Figure",
    "JobKind",
    "KINDS",
    "LocalRuntime",
    "METRICS",
    "Metric",
    "hold_out",
    "kind_of",
    "metric_of",
    "register",
    "resolve",
]
