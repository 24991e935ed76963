"""A user's own graph, saved with ``dgl.save_graphs(path, [g])``.

The file must hold exactly one homogeneous graph whose ndata carries features, labels and
the three split masks under the keys named in the config (``data.feat_key`` etc.). They are
returned under the standard names with standard dtypes; other ndata and all edata are
dropped so that the rest of the package sees one fixed contract.
"""

from __future__ import annotations

import logging
from pathlib import Path

import dgl
import torch
from dgl import DGLError

from ..config import ConfigError, DataConfig
from .common import make_graph

log = logging.getLogger("dgl_grappa")

# (standard name, DataConfig field that names the user's key)
_KEY_FIELDS = (
    ("feat", "feat_key"),
    ("label", "label_key"),
    ("train_mask", "train_mask_key"),
    ("val_mask", "val_mask_key"),
    ("test_mask", "test_mask_key"),
)


def _read_single_graph(path: Path) -> dgl.DGLGraph:
    if not path.is_file():
        raise ConfigError(
            f"data.path='{path}' does not exist; set --data.path to a file written by dgl.save_graphs(path, [g])"
        )
    try:
        graphs, _ = dgl.load_graphs(str(path))
    except (DGLError, OSError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"data.path='{path}' could not be read by dgl.load_graphs ({first}); "
            f"save the graph with dgl.save_graphs(path, [g])"
        ) from None
    if len(graphs) != 1:
        raise ConfigError(
            f"data.path='{path}' holds {len(graphs)} graphs; save exactly one with dgl.save_graphs(path, [g])"
        )
    g = graphs[0]
    if not g.is_homogeneous:
        raise ConfigError(
            f"data.path='{path}' holds a heterogeneous graph (node types {g.ntypes}, edge "
            f"types {g.etypes}); convert it with dgl.to_homogeneous(g, ndata=[...]) and save that"
        )
    return g


def _mask(name: str, key: str, t: torch.Tensor, n: int) -> torch.Tensor:
    """Convert a user mask (bool / int / uint8 / 0-1 float) to bool, or raise ConfigError."""
    if t.dim() == 2 and t.shape[1] == 1:
        t = t[:, 0]
    if t.dim() != 1:
        raise ConfigError(f"ndata['{key}'] ({name}) has shape {tuple(t.shape)}; it must be [{n}]")
    if t.dtype == torch.bool:
        return t
    if t.is_complex() or not bool(((t == 0) | (t == 1)).all()):
        raise ConfigError(f"ndata['{key}'] ({name}) has values other than 0/1; store a bool or 0/1 mask of shape [{n}]")
    return t != 0


def load_user_graph(cfg: DataConfig) -> dgl.DGLGraph:
    """Load a single homogeneous graph saved with ``dgl.save_graphs``.

    Args:
        cfg: data config; uses ``path`` and the ``*_key`` fields naming the ndata keys.

    Returns:
        The standard graph: ndata ``feat`` (float32 [N, F]; a 1-D tensor is refused),
        ``label`` (int64 [N]) and bool ``train_mask`` / ``val_mask`` / ``test_mask``.

    Raises:
        ConfigError: missing or unreadable file, several graphs, heterogeneous graph, a
            missing ndata key (the message lists the keys present), a value of the wrong
            shape or type, or a class id beyond what the nodes can hold. Feature values beyond
            :data:`FEATURE_WARN` get a warning.
    """
    if not cfg.path:
        raise ConfigError("data.path is empty but data.name=dgl; set --data.path=<file saved with dgl.save_graphs>")
    path = Path(cfg.path).expanduser()
    g = _read_single_graph(path)
    n = g.num_nodes()
    present = sorted(g.ndata.keys())

    values: dict[str, torch.Tensor] = {}
    for std, field_name in _KEY_FIELDS:
        key = getattr(cfg, field_name)
        if key not in g.ndata:
            raise ConfigError(
                f"data.{field_name}='{key}' is not an ndata key of '{path}' (keys present: "
                f"{', '.join(present) or 'none'}); set --data.{field_name}=<one of them>"
            )
        values[std] = g.ndata[key]

    feat = values["feat"]
    if feat.dim() == 1:  # one number per node: the training would run on it and fail far from the cause
        raise ConfigError(
            f"ndata['{cfg.feat_key}'] (features) of data.path='{cfg.path}' is 1-D (shape {tuple(feat.shape)}): "
            f"store a [{n}, F] tensor of feature rows (a single feature per node: feat[:, None]) and save the "
            "graph again"
        )
    if feat.dim() != 2 or not (feat.is_floating_point() or feat.dtype in _INT_DTYPES):
        raise ConfigError(
            f"ndata['{cfg.feat_key}'] (features) has shape {tuple(feat.shape)} and dtype {feat.dtype}; "
            f"store a numeric [{n}, F] tensor"
        )
    if feat.is_floating_point() and feat.numel():
        big = float(feat.abs().max())
        if big > FEATURE_WARN and bool(torch.isfinite(feat).all()):
            log.warning(
                "ndata['%s'] (features) of data.path='%s' holds values up to %.3g: a model's first layer "
                "multiplies them, and the loss can reach the limits of float32; scale them (e.g. standardise "
                "each column) if training misbehaves",
                cfg.feat_key,
                cfg.path,
                big,
            )
    if feat.is_floating_point():
        bad = ~torch.isfinite(feat)
        if bool(bad.any()):
            raise ConfigError(
                f"ndata['{cfg.feat_key}'] (features) of data.path='{cfg.path}' holds {int(bad.sum())} "
                f"values that are not finite (inf or NaN) in {int(bad.any(1).sum())} nodes; training on "
                "them gives a NaN loss: replace them (e.g. torch.nan_to_num) and save the graph again"
            )

    label = values["label"]
    if label.dim() == 2 and label.shape[1] == 1:
        label = label[:, 0]
    if label.dim() != 1:
        raise ConfigError(
            f"ndata['{cfg.label_key}'] (labels) has shape {tuple(label.shape)}; store class ids "
            f"of shape [{n}] (for one-hot labels use label.argmax(1))"
        )
    if label.is_floating_point():
        if not bool((label == label.round()).all()):
            raise ConfigError(
                f"ndata['{cfg.label_key}'] (labels) is {label.dtype} with non-integer values; store int64 class ids"
            )
    elif label.dtype not in _INT_DTYPES:
        raise ConfigError(f"ndata['{cfg.label_key}'] (labels) has dtype {label.dtype}; store int64 class ids")
    label = label.to(torch.int64)

    masks = {name: _mask(name, getattr(cfg, f), values[name], n) for name, f in _KEY_FIELDS if name.endswith("_mask")}
    if not bool(masks["train_mask"].any()):
        raise ConfigError(f"ndata['{cfg.train_mask_key}'] (train_mask) selects no node; mark the training nodes")
    labelled = masks["train_mask"] | masks["val_mask"] | masks["test_mask"]
    # Unlabelled nodes may carry -1 (a common convention) as long as no split uses them.
    if n and bool((label[labelled] < 0).any()):
        raise ConfigError(
            f"ndata['{cfg.label_key}'] has negative labels on nodes inside a split mask; "
            f"use class ids >= 0 or leave those nodes out of the masks"
        )
    check_class_ids(label, n, f"ndata['{cfg.label_key}'] (labels) of data.path='{cfg.path}'")

    src, dst = g.edges()
    return make_graph(src, dst, n, feat=feat, label=label, **masks)


_INT_DTYPES = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool)
FEATURE_WARN = 1e6
"""Feature values beyond this magnitude are trained on, with a warning (float32 overflows at 3.4e38)."""


def check_class_ids(label: torch.Tensor, n: int, what: str) -> None:
    """The classes a model is built for are 0 .. max label: refuse a largest label beyond ``n`` nodes' worth.

    A class id far beyond the others (a corrupt label, an id from another numbering) would otherwise
    size the model's output layer by it: at 2^40 the allocation itself fails.

    Example:
        >>> check_class_ids(torch.tensor([0, 2, 1]), 3, "labels")
        >>> check_class_ids(torch.tensor([0, 1 << 40, 1]), 3, "labels")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_grappa.config.errors.ConfigError: labels hold class id 1099511627776 (node 1), but 3 nodes have at most ...
    """
    if label.numel() == 0:
        return
    top = int(label.max())
    if top >= max(n, 1):
        node = int(torch.argmax(label))
        raise ConfigError(
            f"{what} hold class id {top} (node {node}), but {n} nodes have at most {n} classes (ids "
            f"0..{n - 1}); number the classes 0..C-1 (e.g. torch.unique(label, return_inverse=True)[1]) "
            "and save the graph again"
        )


__all__ = ["FEATURE_WARN", "check_class_ids", "load_user_graph"]
