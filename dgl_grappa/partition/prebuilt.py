"""Prebuilt partitionings (``partition.prebuilt``): parts read straight from a folder in
DGL's layout that another tool wrote (``bigpart``, DGL's pipeline, ``partition``).
"""

from __future__ import annotations

import dataclasses
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
    try:
        meta = json.loads(part_config.read_text())
        n = int(meta["num_parts"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"partition.prebuilt: {part_config} is not a readable partition json ({type(exc).__name__}: "
            f"{exc}); point partition.prebuilt at a partition folder DGL or dgl_grappa wrote"
        ) from None
    if n != cfg.partition.num_parts:
        raise ConfigError(
            f"partition.prebuilt has {n} parts but partition.num_parts={cfg.partition.num_parts}; "
            f"use --partition.num_parts={n}"
        )
    check_part_files(part_config, meta, n)
    stats = read_stats(part_config.parent) or {}
    check_same_graph(cfg, stats, part_config)
    stats.setdefault("method", meta.get("part_method", "prebuilt"))
    stats.setdefault("num_parts", n)
    stats.setdefault("edge_cut", None)
    stats.setdefault("seconds", 0.0)
    stats.setdefault("inner_nodes", inner_nodes(meta))
    stats.setdefault("num_nodes", int(meta.get("num_nodes", sum(stats["inner_nodes"]))))
    stats["part_config"] = str(part_config)
    return stats


def check_part_files(part_config: Path, meta: dict, n: int) -> None:
    """Every part's files are there (a missing one would fail deep inside DGL's reader, on one worker)."""
    base = part_config.parent
    for p in range(n):
        files = meta.get(f"part-{p}")
        if not isinstance(files, dict):
            raise ConfigError(
                f"partition.prebuilt: {part_config} lists no files for part {p} of {n}; the partition "
                "json is incomplete: partition the graph again"
            )
        for key in ("part_graph", "node_feats"):
            f = Path(files.get(key, f"part{p}/?"))
            f = f if f.is_absolute() else base / f
            if not f.is_file():
                missing = f.parent if not f.parent.is_dir() else f
                raise ConfigError(
                    f"partition.prebuilt: {missing} is missing (part {p} of {n}); copy the whole "
                    f"partition folder, or partition the graph again"
                )


def check_same_graph(cfg: Config, stats: dict, part_config: Path) -> None:
    """A folder dgl_grappa wrote records the data source it cut: it must be the one the config names.

    Otherwise the run would train on one graph while its summary names another. Folders of other tools
    record none and are taken as they are.
    """
    made = (stats.get("fingerprint") or {}).get("data")
    if not isinstance(made, dict) or "name" not in made:
        return
    here = cfg.data

    def where(name: str, path: str) -> str:
        return f"data.name={name}" + (f" data.path={path}" if path else "")

    def same_path(a: str, b: str) -> bool:
        return (not a and not b) or (
            bool(a) and bool(b) and Path(a).expanduser().resolve() == Path(b).expanduser().resolve()
        )

    same = made["name"] == here.name and same_path(made.get("path", ""), here.path)
    if same and here.name == "synthetic" and "synthetic" in made:
        same = made["synthetic"] == dataclasses.asdict(here.synthetic)
    if not same:
        cut = where(made["name"], made.get("path", ""))
        raise ConfigError(
            f"partition.prebuilt={part_config.parent} was cut from {cut}, not from "
            f"{where(here.name, here.path)}; set --data.name and --data.path to the graph it was cut "
            "from, or partition this graph"
        )


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
    nodes = int(stats.get("num_nodes") or 0)
    if nodes and int(n) > nodes:  # a corrupt or foreign label would size the output layer by it
        raise ConfigError(
            f"partition.prebuilt={Path(stats['part_config']).parent} holds class id {int(n) - 1}, but "
            f"its {nodes} nodes have at most {nodes} classes; number the classes 0..C-1 and partition "
            "again"
        )
    return int(n)
