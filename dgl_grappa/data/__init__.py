"""Datasets: one entry point, :func:`load_dataset`, for every ``data.name``.

Every graph comes back homogeneous (idtype int64) with exactly these ndata:

* ``feat``  float32 [N, F] (none on a featureless graph: ``data.synthetic.featureless``)
* ``label`` int64 [N]
* ``train_mask`` / ``val_mask`` / ``test_mask`` bool [N]

Sources (``data.name``):

* ``synthetic`` - a power-law degree-corrected SBM generated from ``data.synthetic``
  (:mod:`.synthetic`), no files;
* ``cora`` / ``citeseer`` - the Planetoid files in ``data.root`` read by DGL's own loaders,
  offline, downloaded once when no folder has them (:mod:`.planetoid`);
* ``ogbn-arxiv`` / ``ogbn-products`` / ``ogbn-mag`` / ``ogbn-papers100M`` - the OGB node-property graphs
  in OGB's layout under ``data.root``, downloaded once (:mod:`.ogb`); ogbn-mag is heterogeneous (like
  ``hetsynth``), ogbn-papers100M goes through the big-graph folder (memory-mapped);
* ``dgl`` - a graph the user saved with ``dgl.save_graphs`` at ``data.path`` (:mod:`.user`);
* ``bigsynth`` - a folder written by :func:`.bigsynth.generate_big` at ``data.path``, as one
  DGLGraph (small graphs only; big ones are trained from ``partition.prebuilt`` and only
  their metadata is read: :func:`dataset_num_classes`).
* ``hetsynth`` - a generated **heterogeneous** graph (:mod:`.hetsynth`: papers, authors, fields
  and six relations), the one exception to the homogeneous contract: ``feat`` on the types of
  ``data.hetsynth.feat_types``, ``label`` and the masks on papers; restricted to the relations of
  ``data.etypes`` when it is set.

Every user error (missing files, wrong keys, bad values) is a
:class:`~dgl_grappa.config.ConfigError` with a one-line message naming the fix.

Example:
    >>> from dgl_grappa.config import DataConfig
    >>> g = load_dataset(DataConfig(name="synthetic"))
    >>> num_classes(g)
    16
"""

from __future__ import annotations

import dgl

from ..config import (
    HETERO_DATASETS,
    OGB_DATASETS,
    Config,
    ConfigError,
    DataConfig,
    ModelConfig,
    hetero_schema,
    select_etypes,
    validate,
)
from .bigsynth import BigGraph
from .common import STANDARD_KEYS, make_graph, num_classes, target_type
from .hetsynth import hetsynth_graph
from .ogb import load_ogb, ogb_big_graph
from .planetoid import cache_root, load_planetoid, planetoid_cache_dir
from .synthetic import SBMArrays, effective_noise, generate_sbm, synthetic_graph
from .user import load_user_graph


def load_dataset(cfg: DataConfig) -> dgl.DGLGraph:
    """Load (or generate) the graph that ``cfg`` names.

    Args:
        cfg: the ``data`` section of the config. It is validated here as well (with the
            other sections at their defaults), so a hand-built DataConfig gets the same
            one-line errors as one loaded from YAML.

    Returns:
        A homogeneous DGLGraph with ndata ``feat`` (float32 [N, F]), ``label`` (int64 [N]),
        ``train_mask``, ``val_mask``, ``test_mask`` (bool [N]). Use :func:`num_classes`
        for the number of classes.

    Raises:
        ConfigError: an invalid option, missing or malformed input files.
    """
    if not isinstance(cfg, DataConfig):
        raise TypeError(f"load_dataset expects a DataConfig, got {type(cfg).__name__}")
    # validate() checks the whole tree; the other sections' defaults are valid, so this
    # runs exactly the data.* checks (a featureless graph with the model that can train on it:
    # the model section is not this function's to check).
    # (a heterogeneous graph: with its model, RGCN on learnable rows, so that only the data.* checks can fail)
    hetero = cfg.name in HETERO_DATASETS
    validate(
        Config(
            data=cfg, model=ModelConfig(name="rgcn" if hetero else "sage", embed=cfg.synthetic.featureless or hetero)
        )
    )
    if cfg.name == "synthetic":
        return synthetic_graph(cfg.synthetic)
    if cfg.name in ("cora", "citeseer"):
        return load_planetoid(cfg.name, cfg.root)
    if cfg.name == "dgl":
        return load_user_graph(cfg)
    if cfg.name == "bigsynth":
        return BigGraph(cfg.path).to_dgl()
    if cfg.name in OGB_DATASETS:
        g = load_ogb(cfg.name, cfg.root)
        if cfg.etypes:
            g = dgl.edge_type_subgraph(g, select_etypes(cfg.etypes, hetero_schema(cfg)["etypes"]))
        return g
    if cfg.name == "hetsynth":
        g = hetsynth_graph(cfg.hetsynth)
        if cfg.etypes:  # the relations kept: every system cuts, trains and evaluates this graph
            g = dgl.edge_type_subgraph(g, select_etypes(cfg.etypes, hetero_schema(cfg)["etypes"]))
        return g
    raise ConfigError(
        f"data.name={cfg.name!r} is not allowed; use one of synthetic, cora, citeseer, "
        f"{', '.join(OGB_DATASETS)}, dgl, bigsynth, hetsynth; any other graph: save it with "
        "dgl.save_graphs(path, [g]) and use --data.name=dgl --data.path=path"
    )


def dataset_num_classes(cfg: DataConfig) -> int | None:
    """Number of classes from the data source's metadata alone, or None when it has none.

    Only the big-graph folders answer without loading the graph: ``bigsynth`` (its meta.json) and
    ``ogbn-papers100M`` (its memory-mapped copy's, made once).
    """
    if cfg.name == "bigsynth":
        return BigGraph(cfg.path).num_classes
    if cfg.name == "ogbn-papers100M":
        return ogb_big_graph(cfg.name, cfg.root).num_classes
    return None


__all__ = [
    "STANDARD_KEYS",
    "SBMArrays",
    "cache_root",
    "dataset_num_classes",
    "effective_noise",
    "generate_sbm",
    "load_dataset",
    "load_ogb",
    "load_planetoid",
    "load_user_graph",
    "make_graph",
    "num_classes",
    "planetoid_cache_dir",
    "synthetic_graph",
    "target_type",
]
