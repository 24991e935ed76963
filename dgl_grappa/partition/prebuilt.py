"""Prebuilt partitionings (``partition.prebuilt``): parts read straight from a folder in
DGL's layout that another tool wrote (``bigpart``, DGL's pipeline, ``partition``).
"""
from __future__ import annotations

import json
from pathlib import Path

import dgl

from ..config import Config, ConfigError
from ..data import dataset_num_classes
from .layout import part_config_path, part_paths, read_stats


def prebuilt_part_config(folder: str | Path) -> Path:
    """The partition json of a prebuilt partition folder (or the json itself).

    Args:
        folder: a folder in DGL's layout (``<graph>.json`` + ``part<i>/``), e.g. written by
            :mod:`dgl_grappa.partition.bigpart` or :func:`partition`; or the json's path.

    Raises:
        ConfigError: no such folder, or no partition json in it.
    """
    p = Path(folder)
    if p.is_file():
        return p
    if not p.is_dir():
        raise ConfigError(f"partition.prebuilt={str(p)!r} does not exist; give a partition folder in DGL's layout")
    if part_config_path(p).is_file():
        return part_config_path(p)
    for f in sorted(p.glob("*.json")):
        try:
            meta = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and "node_map" in meta and "num_parts" in meta:
            return f
    raise ConfigError(f"partition.prebuilt={str(p)!r} holds no partition json (DGL's <graph>.json with node_map)")


def prebuilt_stats(cfg: Config) -> dict:
    """Statistics of the prebuilt partitioning ``cfg.partition.prebuilt``, checked against the config.

    Returns:
        The folder's ``grappa_partition.json`` when it has one (bigpart and ``partition``
        write it), else the counts the partition json gives; always with ``part_config``.

    Raises:
        ConfigError: its number of parts differs from ``partition.num_parts``.
    """
    part_config = prebuilt_part_config(cfg.partition.prebuilt)
    meta = json.loads(part_config.read_text())
    n = int(meta["num_parts"])
    if n != cfg.partition.num_parts:
        raise ConfigError(f"partition.prebuilt has {n} parts but partition.num_parts={cfg.partition.num_parts}; "
                          f"use --partition.num_parts={n}")
    stats = read_stats(part_config.parent) or {}
    stats.setdefault("method", meta.get("part_method", "prebuilt"))
    stats.setdefault("num_parts", n)
    stats.setdefault("edge_cut", None)
    stats.setdefault("seconds", 0.0)
    stats.setdefault("inner_nodes", inner_nodes(meta))
    stats.setdefault("num_nodes", int(meta.get("num_nodes", sum(stats["inner_nodes"]))))
    stats["part_config"] = str(part_config)
    return stats


def inner_nodes(meta: dict) -> list[int]:
    """The nodes each part owns, every node type together, from a partition json's ``node_map``.

    DGL writes ``{ntype: [[start, end], ...]}``, one id range per part and node type (``_N`` alone
    on a homogeneous graph); older DGL a bare list of ranges.

    Example:
        >>> inner_nodes({"node_map": {"author": [[0, 25], [40, 65]], "paper": [[25, 40], [65, 80]]}})
        [40, 40]
    """
    node_map = meta["node_map"]
    ranges = list(node_map.values()) if isinstance(node_map, dict) else [node_map]
    return [sum(int(per_type[p][1]) - int(per_type[p][0]) for per_type in ranges) for p in range(len(ranges[0]))]


def prebuilt_num_classes(cfg: Config, stats: dict) -> int:
    """Number of classes of a prebuilt partitioning, without loading the whole graph.

    From the data source's metadata (``data.name: bigsynth``), else the partition
    statistics (``num_classes``), else the largest label in the parts' node data + 1 (read
    one part at a time).
    """
    n = dataset_num_classes(cfg.data) if cfg.data.name in ("bigsynth", "ogbn-papers100M") else None
    if n is None:
        n = stats.get("num_classes")
    if n is None:
        top = -1
        for p in range(int(stats["num_parts"])):
            _, _, feat_file = part_paths(stats["part_config"], p)
            labels = dgl.data.utils.load_tensors(str(feat_file))
            lab = next(v for k, v in labels.items() if k.split("/", 1)[-1] == "label")
            top = max(top, int(lab.max()) if lab.numel() else -1)
            del labels
        n = top + 1
    return int(n)
