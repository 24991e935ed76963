"""Writing and caching partitionings: ``partition`` (DGL's ``partition_graph`` plus the
method's node data) and ``ensure_partitions`` (reuse a folder whose fingerprint and
files match, else cut again).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from pathlib import Path

import dgl
import numpy as np
import torch

from ..cluster.output import library_output_to
from ..config import Config, ConfigError, PartitionConfig, config_changes
from ..data import load_dataset
from ..data.common import hold_out_of
from .aggregates import prepare
from .assign import METHODS, balance_stats, cut, edge_cut_stats
from .hetero import partition_hetero
from .layout import (
    LAYOUT_VERSION,
    NODE_KEYS,
    STATS_FILE,
    part_config_path,
    read_stats,
    undone_on_write_failure,
)

log = logging.getLogger("dgl_grappa")

PARTITION_LOG = "partition.log"
"""The file in a partition folder that holds what DGL and METIS printed while writing it (not in its manifest)."""

_SAID_REUSED: set[Path] = set()
"""Partition folders this process has already reported (as written, or as reused): a compare
ensures its partitioning, then each of its runs asks again; one line says it."""


def partition(
    g: dgl.DGLGraph, cfg: PartitionConfig, out_dir: str | Path, fingerprint: dict | None = None, target: str = ""
) -> dict:
    """Partition ``g`` with dgl.distributed.partition_graph into ``out_dir``.

    Args:
        g: homogeneous graph with ndata feat (none: a featureless graph, no aggregates), label,
            train/val/test_mask.
        cfg: partition options (num_parts, method, balance_*, seed).
        out_dir: target folder (created; DGL's layout).
        fingerprint: anything that identifies the input (stored so a later run can reuse it).
        target: a heterograph's labelled node type (``data.target``; empty: the one type with labels).

    Returns:
        Statistics: edge_cut, inner/halo node counts and halo_share per part, seconds,
        and ``part_config`` (path of the json).

    A heterogeneous ``g`` (several node or edge types) is cut by :func:`~.hetero.partition_hetero`.

    Example:
        >>> stats = partition(g, cfg.partition, "runs/x/partitions/0")   # doctest: +SKIP
        >>> stats["edge_cut"]                                            # doctest: +SKIP
        0.05
    """
    if not g.is_homogeneous:
        check_partitionable(g.num_nodes(), cfg.num_parts)
        stats = partition_hetero(g, cfg, out_dir, fingerprint, target)
        stats["files"] = file_manifest(out_dir)
        (Path(out_dir) / STATS_FILE).write_text(json.dumps(stats, indent=1))
        return stats
    if cfg.method not in METHODS:
        raise ConfigError(f"partition.method={cfg.method!r} is not allowed; use one of {', '.join(METHODS)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    g = g.clone()
    g.ndata["in_degree"] = g.in_degrees().to(torch.int64)
    for k in list(g.ndata.keys()):
        if k not in NODE_KEYS:
            del g.ndata[k]
    balance_ntypes = g.ndata["train_mask"].to(torch.int64) if cfg.balance_train else None
    check_partitionable(g.num_nodes(), cfg.num_parts)
    src, dst = (t.numpy() for t in g.edges())
    train = g.ndata["train_mask"].numpy().astype(bool)
    t0 = time.perf_counter()
    # the 1-hop halo kept in every part: halo "keep" and DistDGL both use it
    orig_nids, forced_parts, assign_s = cut(
        g, cfg, out, src=src, dst=dst, train_mask=train, balance_ntypes=balance_ntypes, quiet=cfg.method == "ldg"
    )
    seconds = time.perf_counter() - t0
    meta = json.loads(part_config_path(out).read_text())
    # New (shuffled) ids are contiguous per part; map them back to the original nodes.
    new_part = np.zeros(g.num_nodes(), dtype=np.int64)
    for p, (lo, hi) in enumerate(meta["node_map"]["_N"]):
        new_part[lo:hi] = p
    assignment = np.empty(g.num_nodes(), dtype=np.int64)
    assignment[orig_nids.numpy()] = new_part
    stats = edge_cut_stats(src, dst, assignment, cfg.num_parts)
    stats.update(balance_stats(assignment, cfg.num_parts, train))
    stats.update(
        {
            "num_parts": cfg.num_parts,
            "method": cfg.method,
            "seed": cfg.seed,
            "seconds": seconds,
            "assign_seconds": assign_s,
            "layout": LAYOUT_VERSION,
            "num_nodes": g.num_nodes(),
            "num_edges": g.num_edges(),
            "train_nodes": np.bincount(assignment[train], minlength=cfg.num_parts).tolist(),
            "part_config": str(part_config_path(out)),
            "fingerprint": fingerprint or {},
        }
    )
    # assignment: original id -> part; orig_ids: global (shuffled) id -> original id.
    if cfg.method == "ldg" and cfg.num_parts > 1 and not np.array_equal(assignment, forced_parts):
        raise RuntimeError(
            f"DGL wrote a different assignment into {out} than LDG computed "
            "(this DGL version partitions differently; report it)"
        )
    np.save(out / "assignment.npy", assignment)
    np.save(out / "orig_ids.npy", orig_nids.numpy())
    # First-hop aggregates, from the written parts (the same path as for a folder made elsewhere).
    # A featureless graph has none: its input rows are learnable (model.embed), so nothing is precomputed.
    stats["featureless"] = "feat" not in g.ndata
    t1 = time.perf_counter()
    if not stats["featureless"]:
        prep = prepare(part_config_path(out), gcn=True)  # gcn: for GraphConv(norm='both') through the drop-in
        stats["aggregate_remote_pairs"] = [p["remote_pairs"] for p in prep["parts"]]
    stats["prepare_seconds"] = time.perf_counter() - t1
    stats["files"] = file_manifest(out)
    (out / STATS_FILE).write_text(json.dumps(stats, indent=1))
    return stats


def check_partitionable(num_nodes: int, num_parts: int) -> None:
    """Raise a one-line ConfigError when a graph of ``num_nodes`` nodes cannot have ``num_parts`` parts."""
    if num_parts > num_nodes:
        raise ConfigError(
            f"partition.num_parts={num_parts} is more than the graph's {num_nodes} nodes; use at most "
            f"{num_nodes} parts (better far fewer: every part needs training nodes)"
        )


def file_manifest(out_dir: str | Path) -> dict[str, list]:
    """``{relative path: [bytes, sha256]}`` of every file of a partition folder (its stats file excepted).

    Stored in the stats, so that a reused folder is checked file by file
    (:func:`folder_problem`) instead of trusting whatever is on disk.
    """
    out = Path(out_dir)
    manifest = {}
    for f in sorted(out.rglob("*")):
        # the log is appended to by later writes of the folder: it is no part of what a reuse checks
        if f.is_file() and f.name not in (STATS_FILE, PARTITION_LOG) and not f.name.startswith("."):
            manifest[str(f.relative_to(out))] = [f.stat().st_size, _sha256(f)]
    return manifest


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def folder_problem(out_dir: str | Path, stats: dict) -> str | None:
    """What is wrong with a partition folder against its recorded manifest, or None when it is intact.

    Sizes first (a truncated file is found without reading it), then the sha256 of each file.
    """
    out = Path(out_dir)
    manifest = stats.get("files")
    if not manifest:
        return "it has no file manifest (written by an older version)"
    for rel, (size, _) in manifest.items():
        f = out / rel
        if not f.is_file():
            return f"{f} is missing"
        if f.stat().st_size != size:
            return f"{f} is {f.stat().st_size} bytes, {size} were written (truncated or replaced)"
    for rel, (_, digest) in manifest.items():
        if _sha256(out / rel) != digest:
            return f"{out / rel} has changed since it was written (sha256 differs)"
    return None


def format_stats(stats: dict) -> str:
    """A short table of a partitioning for the terminal."""
    lines = [
        f"{stats['method']} into {stats['num_parts']} parts: edge-cut fraction {stats['edge_cut']:.4f} "
        f"({stats['seconds']:.2f} s)",
        "part  inner_nodes  halo_nodes  halo/inner",
    ]
    for p, (i, h, s) in enumerate(zip(stats["inner_nodes"], stats["halo_nodes"], stats["halo_share"])):
        lines.append(f"{p:>4}  {i:>11}  {h:>10}  {s:>9.1%}")
    return "\n".join(lines)


def cut_summary(stats: dict) -> str:
    """One line on a partitioning: the edges whose ends lie in different parts, counted once per directed edge.

    DGL's own "0 edge cuts" counts the edges no part owns (none: each edge belongs to its destination's
    part), and METIS's counts the cut pairs of the undirected graph it partitions; this is the count the
    reports use (``edge_cut``, a share of the directed edges).

    Example:
        >>> cut_summary({"edge_cut": 0.0523, "num_edges": 200000, "num_parts": 2, "method": "metis",
        ...              "seconds": 1.2})
        'metis cut 10460 of 200000 edges (5.2 %) into 2 parts in 1.2 s'
    """
    n = stats.get("num_edges")
    count = f"{round(stats['edge_cut'] * n)} of {n} edges" if n else "a share of the edges"
    took = f" in {stats['seconds']:.1f} s" if stats.get("seconds") is not None else ""
    return f"{stats['method']} cut {count} ({stats['edge_cut'] * 100:.1f} %) into {stats['num_parts']} parts{took}"


def partition_log_path(cfg: Config) -> Path:
    """Where the libraries' output of this run's partitioning goes: ``partition.log`` in the partition folder
    (the folder the user named, or the run's own), so that a partitioning carries its own log."""
    return partition_dir(cfg) / PARTITION_LOG


def partition_dir(cfg: Config) -> Path:
    """Where this run's partitioning lives: ``partition.out_dir``, else ``<run.output_dir>/partitions/0/``
    (a repartitioning run keeps its j-th under ``partitions/<j>/``)."""
    return Path(cfg.partition.out_dir) if cfg.partition.out_dir else Path(cfg.run.output_dir) / "partitions" / "0"


SEEDLESS_METHODS = ("metis",)
"""Partition methods that draw nothing at random: ``partition.seed`` leaves them unchanged."""


def partition_fingerprint(cfg: Config) -> dict:
    """What identifies a partitioning: the data and partition settings (not where it is written).

    ``partition.seed`` is left out for :data:`SEEDLESS_METHODS`, so that runs which differ
    only in the seed share one METIS partitioning.
    """
    part = dataclasses.asdict(cfg.partition)
    part.pop("out_dir")
    if part["method"] in SEEDLESS_METHODS:
        part.pop("seed")
    data = dataclasses.asdict(cfg.data)
    if not cfg.hetero:
        # the heterogeneous graph's settings: only where they apply, so that every other fingerprint (and a
        # benchmark's folder named after it) stays as it was
        for key in ("hetsynth", "target", "etypes"):
            data.pop(key, None)
    else:
        data.pop("synthetic", None)  # the homogeneous generator's settings do not make this graph
    if cfg.data.name == "dgl":  # the same path may hold another graph later
        try:
            st = Path(cfg.data.path).stat()
            data["file"] = [st.st_size, st.st_mtime_ns]
        except OSError:
            pass
    if part["method"] != "ldg":
        part.pop("ldg_passes", None)
        part.pop("ldg_slack", None)
    fp = {"data": data, "partition": part, "layout": LAYOUT_VERSION}
    held = hold_out_of(cfg)
    if held is not None:
        # A kind that holds data out (link prediction: edges) cuts the graph without it: which is part of what was
        # cut. Only then, so that every other fingerprint (and a benchmark's folder named after it) stays as it was.
        fp["held_out"] = dict(held.settings)
    return fp


def ensure_partitions(cfg: Config, g: dgl.DGLGraph | None = None) -> tuple[dict, dgl.DGLGraph | None]:
    """Partition the configured graph unless an identical partitioning already exists.

    The partitioning is reused when its recorded fingerprint (the data and partition
    settings) equals this config's; otherwise the graph is loaded (unless given) and cut.
    A kind of job that holds data out (link prediction: edges, :func:`~dgl_grappa.data.common.hold_out_of`) has
    the graph cut without it, and the split is part of the fingerprint.

    Args:
        cfg: the run's config (``data``, ``partition``, ``run.output_dir``).
        g: the graph, when the caller has loaded it already.

    Returns:
        (partition statistics, the whole graph (held-out edges included) or None when it was not needed).
    """
    out = partition_dir(cfg)
    fp = json.loads(json.dumps(partition_fingerprint(cfg)))
    stats = read_stats(out)
    chosen = bool(cfg.partition.out_dir)  # a folder the user named, not one inside this run's output
    # settings added to the code after the folder was written count at their default
    old_fp = (stats or {}).get("fingerprint") or {}
    changes = config_changes(old_fp, fp, json.loads(json.dumps(partition_fingerprint(Config()))))
    if "held_out" in old_fp and "held_out" not in fp:  # a graph cut without held-out data lacks what this run needs
        changes.append(f"train.task: held out {old_fp['held_out']} -> nothing held out ({cfg.train.task})")
    if stats is not None and not changes:
        why = folder_problem(out, stats)
        if why is None and "aggregates" not in stats.get("hetero", {"aggregates": []}):
            why = "it has no per-relation first-hop aggregates (written by an older version)"
        if why is None:
            if out.resolve() not in _SAID_REUSED:
                log.info("reusing the partitioning in %s", out.resolve())
                _SAID_REUSED.add(out.resolve())
            if not stats.get("featureless") and "hetero" not in stats:
                prepare(part_config_path(out), gcn=True)  # a no-op when current (a folder from before gcn gets it)
            return stats, g
        log.warning("the partitioning in %s is broken: %s; partitioning again", out, why)
    elif stats is not None and chosen:
        raise ConfigError(
            f"partition.out_dir={out} holds a partitioning of another graph or settings "
            f"({changes[0]}); point --partition.out_dir at "
            "a new folder, or remove that one"
        )
    elif chosen and out.is_dir() and any(out.iterdir()):
        raise ConfigError(
            f"partition.out_dir={out} is not empty and holds no dgl_grappa partitioning; point "
            "--partition.out_dir at a new or empty folder"
        )
    if g is None:
        g = load_dataset(cfg.data)
    check_partitionable(g.num_nodes(), cfg.partition.num_parts)
    held = hold_out_of(cfg)
    cut = g if held is None else held.cut(g)  # link prediction: without the held-out edges (g stays whole)
    if cut.num_edges() == 0:  # DGL's partitioner fails on it with a TypeError deep inside
        raise ConfigError(
            f"the graph has {g.num_nodes()} nodes and no edges: a GNN learns along edges and there is "
            "nothing to partition; give a graph with edges between its nodes"
        )
    lib_log = partition_log_path(cfg)
    log.info(
        "partitioning %d nodes / %d edges into %d parts (%s) -> %s",
        cut.num_nodes(),
        cut.num_edges(),
        cfg.partition.num_parts,
        cfg.partition.method,
        out.resolve(),
    )
    key = "partition.out_dir" if chosen else "run.output_dir"
    # DGL's and METIS's own prints (timings, peak memory, their own cut counts) go to the log file
    with (
        undone_on_write_failure(
            out,
            f"partitioning into {out}",
            f"free space or set --{key}=<a folder with room>",
            f"make the folder writable or set --{key}=<a writable folder>",
        ),
        library_output_to(lib_log),
    ):
        stats = partition(cut, cfg.partition, out, fingerprint=fp, target=cfg.data.target)
    if cut is not g:
        stats["held_out_edges"] = g.num_edges() - cut.num_edges()
        (out / STATS_FILE).write_text(json.dumps(stats, indent=1))
    _SAID_REUSED.add(out.resolve())
    log.info("%s (DGL's and METIS's own output: %s in that folder)", cut_summary(stats), lib_log.name)
    return stats, g
