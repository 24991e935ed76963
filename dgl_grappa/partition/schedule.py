"""Repartition schedule: partitioning j serves epochs [j*k, (j+1)*k); j+1 is built ahead.

Every ``schedule.k`` epochs the node-to-worker assignment changes, so that over time every
edge is local in some partitioning. Repartitioning has three
layers; the first two live here:

* **Assignments** (in-process): :func:`compute_assignment` gives partitioning j of a graph
  for one ``schedule.method``. Re-running METIS on the same graph gives (almost always)
  the same partitioning, so its *input* is perturbed:

  - ``metis-perm``: METIS on the graph with randomly relabelled nodes;
  - ``metis-subsample``: METIS on a random subsample (:data:`SUBSAMPLE_KEEP`) of the
    undirected edges;
  - ``metis-weights``: DGL 2.1.0 cannot pass edge weights to METIS (its C++ wrapper calls
    ``METIS_PartGraphKway`` with ``adjwgt=NULL``; ``partition_graph`` and
    ``metis_partition_assignment`` take only vertex-balance options). Parallel edges do
    reach METIS unmerged, and METIS sums over adjacency entries (its reported cut counts
    every copy), so an integer weight w in 1..:data:`WEIGHT_MAX` is emulated by w copies
    of the edge. METIS's input format describes a simple graph; it accepts the copies
    without complaint, and we found no behaviour worse than for simple graphs;
  - ``random``: uniform random parts, like ``partition_graph(part_method="random")``;
  - ``chunk-rotation``: see :func:`chunk_rotation`;
  - ``ldg``: the restreaming LDG of ``partition.partition`` (:func:`dgl_grappa.partition.assign.ldg_assignment`,
    train nodes balanced), a new stream order per partitioning (seed ``[schedule.seed, j]``).

  For the ``metis-*`` methods partitioning 0 is METIS on the unperturbed graph, so a run
  with repartitioning starts from the kind of partitioning a fixed-partition run uses
  (not always the identical one: see :func:`_metis` on DGL's METIS reproducibility).
* **Layout** (:func:`build_partitioning`): writes an assignment in DGL's standard layout
  under ``<output dir>/partitions/<j>/`` through ``partition.partition`` (so the node data
  keys, first-hop aggregates included, and the statistics are the same as for a fixed
  partitioning). See :func:`dgl_grappa.partition.assign.forced_assignment` for how DGL's
  ``partition_graph`` is made to use our assignment.
* **Runtime** (:mod:`dgl_grappa.runtime.repartition`): a spawned builder process writes
  partitioning j+1 while j trains; at a boundary every worker agrees on the new
  partitioning through a broadcast (bounded wait), loads its part, and rank 0 removes
  folders that no worker uses any more.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import dgl
import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from ..config import Config, PartitionConfig
from ..data import load_dataset
from .assign import forced_assignment, ldg_assignment, undirected_csr
from .layout import STATS_FILE, part_config_path, read_stats
from .store import check_partitionable, folder_problem, partition

log = logging.getLogger("dgl_grappa")

METHODS = ("metis-perm", "metis-subsample", "metis-weights", "random", "chunk-rotation", "ldg")
#: metis-subsample: share of the undirected edges METIS sees in partitioning j >= 1.
SUBSAMPLE_KEEP = 0.75
#: metis-weights: integer edge weights are drawn uniformly from 1..WEIGHT_MAX.
WEIGHT_MAX = 3
# Independent random streams per method, so that two methods never share their draws.
_STREAM = {m: i for i, m in enumerate(METHODS)}
_CHUNK_STREAM = 1_000


# ---------------------------------------------------------------------------------------
# Schedule arithmetic
# ---------------------------------------------------------------------------------------


def partitioning_index(epoch: int, k: int) -> int:
    """Index j of the partitioning that epoch ``epoch`` trains on (0 when k == 0)."""
    return 0 if k <= 0 else epoch // k


def resume_partitioning(epoch: int, epochs: int, k: int) -> int:
    """The partitioning a run resumed at ``epoch`` loads first (the last one when nothing is left to train)."""
    return partitioning_index(min(epoch, max(epochs - 1, 0)), k)


def num_partitionings(epochs: int, k: int) -> int:
    """How many partitionings a run of ``epochs`` epochs uses (1 when k == 0 or k >= epochs)."""
    return 1 if k <= 0 else max(1, math.ceil(epochs / k))


def is_switch_epoch(epoch: int, k: int) -> bool:
    """True when a new partitioning starts at ``epoch`` (never at epoch 0)."""
    return k > 0 and epoch > 0 and epoch % k == 0


def partition_root(output_dir: str | Path) -> Path:
    """``<output dir>/partitions``: partitioning j lives in ``<root>/<j>/``."""
    return Path(output_dir) / "partitions"


def partitioning_dirs(root: str | Path) -> dict[int, Path]:
    """The finished partitioning folders under ``root``, by index."""
    root = Path(root)
    if not root.is_dir():
        return {}
    return {int(p.name): p for p in root.iterdir() if p.is_dir() and p.name.isdigit()}


def remove_old(root: str | Path, active: int, keep_last: int) -> list[int]:
    """Remove partitionings older than the ``keep_last`` newest ones up to ``active``.

    Call only once every worker has loaded ``active`` (load_local keeps nothing open).

    Returns:
        The indices removed.
    """
    gone = []
    for j, path in sorted(partitioning_dirs(root).items()):
        if j <= active - keep_last:
            shutil.rmtree(path, ignore_errors=True)
            gone.append(j)
    return gone


# ---------------------------------------------------------------------------------------
# Assignments
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AssignmentSpec:
    """What fixes the sequence of assignments (with the graph itself).

    Attributes:
        num_parts: parts per partitioning (W).
        method: one of :data:`METHODS`.
        seed: seed of the perturbations (``schedule.seed``).
        balance_edges, balance_train: METIS balance options (``partition.*``).
    """

    num_parts: int
    method: str
    seed: int = 0
    balance_edges: bool = False
    balance_train: bool = False

    @classmethod
    def from_config(cls, cfg: Config) -> "AssignmentSpec":
        """The spec of a run's config (``partition`` and ``schedule`` sections)."""
        return cls(
            cfg.partition.num_parts,
            cfg.schedule.method,
            cfg.schedule.seed,
            cfg.partition.balance_edges,
            cfg.partition.balance_train,
        )


def _metis(
    num_nodes: int, src: np.ndarray, dst: np.ndarray, spec: AssignmentSpec, balance: np.ndarray | None
) -> np.ndarray:
    """DGL's METIS on the graph (src, dst); quiet (DGL prints a few lines per call).

    METIS depends on the order of each node's adjacency list, and DGL's COO -> CSC
    conversion does not fix that order: the same edge list, as fresh graph objects, gave a
    different partitioning on most calls. So METIS gets a canonical CSC (in-edges sorted by
    destination, then source). A rarer variation remains inside DGL's METIS itself: now and
    then a call returns another, equally good partitioning (seen for the same input across
    processes), so METIS-based assignments are reproducible only up to such flips.
    """
    order = np.argsort(dst * num_nodes + src, kind="stable")
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=indptr[1:])
    g = dgl.graph(
        (
            "csc",
            (torch.from_numpy(indptr), torch.from_numpy(src[order]), torch.arange(order.shape[0], dtype=torch.int64)),
        ),
        num_nodes=num_nodes,
        idtype=torch.int64,
    )
    bal = torch.from_numpy(balance) if balance is not None else None
    with contextlib.redirect_stdout(io.StringIO()):
        part = dgl.metis_partition_assignment(g, spec.num_parts, balance_ntypes=bal, balance_edges=spec.balance_edges)
    return part.numpy().astype(np.int64)


def _undirected_pairs(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct undirected edges (u < v), self-loops dropped. METIS symmetrises its input,
    so one direction per pair is the same graph to it, at half the memory."""
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    keys = np.unique(lo[lo != hi] * n + hi[lo != hi])
    return keys // n, keys % n


def chunk_rotation(num_nodes: int, num_parts: int, seed: int, j: int) -> np.ndarray:
    """Partitioning j of the chunk-rotation scheme, as a partition of the nodes.

    The authors' scheme cuts the graph once into W random chunks; worker i holds its base
    chunk i plus a variable chunk that rotates round-robin at each switch, so every chunk
    sits on two workers at once. A DGL partitioning gives every node exactly one owner, so
    that is not expressible. The nearest partition: cut the nodes once into 2W random,
    equal chunks, W base and W variable ones; part i = base chunk i + variable chunk
    (i + j) mod W. Each worker keeps half its nodes across a switch; edges inside a chunk
    or between a base and a variable chunk are local at some switch (within W partitionings),
    but edges between two base (or two variable) chunks never are: about 1/2 + 1/(2W) of
    the edges are ever local, against all of them in the overlapping original.

    Args:
        num_nodes: N.
        num_parts: W.
        seed: seed of the one-off chunk cut.
        j: partitioning index.

    Returns:
        int64 [N] part of every node.
    """
    perm = np.random.default_rng([seed, _CHUNK_STREAM]).permutation(num_nodes)
    chunk = np.empty(num_nodes, dtype=np.int64)
    chunk[perm] = np.arange(num_nodes, dtype=np.int64) * (2 * num_parts) // max(num_nodes, 1)
    base = chunk < num_parts
    return np.where(base, chunk, (chunk - num_parts - j) % num_parts)


def compute_assignment(g: dgl.DGLGraph, spec: AssignmentSpec, j: int) -> np.ndarray:
    """Partitioning j of ``g`` under ``spec``, a function of (graph, spec, j) only.

    ``random`` and ``chunk-rotation`` are exactly reproducible; the METIS methods up to the
    rare flips of DGL's METIS described in :func:`_metis`.

    Args:
        g: the full homogeneous graph (ndata ``train_mask`` needed with balance_train).
        spec: method, parts, seed and balance options.
        j: partitioning index (>= 0).

    Returns:
        int64 [N] part id of every node, in [0, num_parts).
    """
    if spec.method not in METHODS:
        raise ValueError(f"schedule.method={spec.method!r} is not one of {', '.join(METHODS)}")
    n, w = g.num_nodes(), spec.num_parts
    if w == 1:
        return np.zeros(n, dtype=np.int64)
    rng = np.random.default_rng([spec.seed, j, _STREAM[spec.method]])
    if spec.method == "random":
        return rng.integers(0, w, size=n, dtype=np.int64)
    if spec.method == "chunk-rotation":
        return chunk_rotation(n, w, spec.seed, j)
    src, dst = (t.numpy() for t in g.edges())
    if spec.method == "ldg":
        indptr, indices = undirected_csr(src, dst, n)
        return ldg_assignment(
            indptr, indices, w, seed=int(rng.integers(2**31)), train_mask=g.ndata["train_mask"].numpy().astype(bool)
        )
    balance = g.ndata["train_mask"].numpy().astype(np.int64) if spec.balance_train else None
    if j == 0:
        return _metis(n, src, dst, spec, balance)  # unperturbed: partitioning 0 = METIS as is
    if spec.method == "metis-perm":
        # Relabel v -> perm[v]; METIS sees the same graph under other names.
        perm = rng.permutation(n)
        bal = None
        if balance is not None:
            bal = np.empty_like(balance)
            bal[perm] = balance
        part_new = _metis(n, perm[src], perm[dst], spec, bal)
        return part_new[perm]
    u, v = _undirected_pairs(src, dst, n)
    if spec.method == "metis-subsample":  # each undirected edge survives with prob. SUBSAMPLE_KEEP
        keep = rng.random(u.shape[0]) < SUBSAMPLE_KEEP
        return _metis(n, u[keep], v[keep], spec, balance)
    # metis-weights: weight w_e in 1..WEIGHT_MAX as w_e parallel copies of the edge.
    reps = rng.integers(1, WEIGHT_MAX + 1, size=u.shape[0])
    return _metis(n, np.repeat(u, reps), np.repeat(v, reps), spec, balance)


def overlap(prev: np.ndarray, new: np.ndarray, num_parts: int) -> float:
    """Fraction of nodes that keep their part, after the best matching of part labels.

    Part ids are arbitrary names, so the labels of ``new`` are matched to those of ``prev``
    by a maximum-weight assignment on the W x W confusion matrix.
    """
    conf = np.bincount(prev * num_parts + new, minlength=num_parts * num_parts).reshape(num_parts, num_parts)
    rows, cols = linear_sum_assignment(conf, maximize=True)
    return float(conf[rows, cols].sum()) / max(prev.shape[0], 1)


class LocalityTracker:
    """Which edges have been local (both ends in one part) in at least one partitioning."""

    def __init__(self, src: np.ndarray, dst: np.ndarray):
        self.src, self.dst = src, dst
        self.ever = np.zeros(src.shape[0], dtype=bool)

    def add(self, assignment: np.ndarray) -> float:
        """Record one more partitioning; returns the fraction of edges ever local so far."""
        self.ever |= assignment[self.src] == assignment[self.dst]
        return float(self.ever.mean()) if self.ever.size else 1.0


# ---------------------------------------------------------------------------------------
# Writing DGL's layout for an assignment
# ---------------------------------------------------------------------------------------


def write_layout(
    g: dgl.DGLGraph, assignment: np.ndarray, num_parts: int, out_dir: str | Path, fingerprint: dict | None = None
) -> dict:
    """Write ``assignment`` in DGL's layout (``partition.partition``, same node data keys).

    Args:
        g: the full graph (ndata feat, label, masks).
        assignment: int64 [N] part of every node, in [0, num_parts).
        num_parts: W.
        out_dir: target folder.
        fingerprint: stored with the statistics.

    Returns:
        ``partition``'s statistics (edge_cut, inner/halo counts, part_config, ...).
    """
    # The balance options act inside METIS only, which the forced assignment replaces.
    pcfg = PartitionConfig(num_parts=num_parts, method="metis")
    with forced_assignment(assignment, num_parts), contextlib.redirect_stdout(io.StringIO()):
        stats = partition(g, pcfg, out_dir, fingerprint=fingerprint)
    written = np.load(Path(out_dir) / "assignment.npy")
    if not np.array_equal(written, assignment):
        raise RuntimeError(
            f"DGL wrote a different assignment into {out_dir} than requested "
            "(this DGL version partitions differently; report it)"
        )
    return stats


def build_partitioning(
    g: dgl.DGLGraph, spec: AssignmentSpec, j: int, root: str | Path, prev: np.ndarray | None = None
) -> tuple[dict, np.ndarray]:
    """Compute partitioning j and write it to ``<root>/<j>/`` (atomically: built aside, renamed).

    Args:
        g: the full graph (ndata feat, label, masks).
        spec: the assignment spec.
        j: partitioning index.
        root: ``<output dir>/partitions``.
        prev: partitioning j-1's assignment, for the overlap statistic.

    Returns:
        (statistics, assignment). The statistics are those of ``partition.partition`` plus
        ``method``, ``index``, ``assign_s``, ``write_s``, ``build_s`` and, with ``prev``,
        ``overlap_prev``; they are also stored in the folder's grappa_partition.json.
    """
    root = Path(root)
    final, tmp = root / str(j), root / f".building-{j}"
    for p in (final, tmp):
        if p.exists():
            shutil.rmtree(p)
    t0 = time.perf_counter()
    assignment = compute_assignment(g, spec, j)
    t1 = time.perf_counter()
    fp = {"schedule_method": spec.method, "seed": spec.seed, "index": j, "num_parts": spec.num_parts}
    stats = write_layout(g, assignment, spec.num_parts, tmp, fp)
    # DGL's json names its part files relative to itself, so the folder can be renamed.
    os.replace(tmp, final)
    t2 = time.perf_counter()
    stats.update(
        {
            "method": spec.method,
            "index": j,
            "part_config": str(part_config_path(final)),
            "assign_s": t1 - t0,
            "write_s": t2 - t1,
            "build_s": t2 - t0,
        }
    )
    if prev is not None:
        stats["overlap_prev"] = overlap(prev, assignment, spec.num_parts)
    (final / STATS_FILE).write_text(json.dumps(stats, indent=1))
    return stats, assignment


def resume_schedule(cfg: Config, j: int, g: dgl.DGLGraph | None = None) -> dict:
    """Launcher side of a resumed run: partitioning ``j`` intact on disk; its statistics.

    The folder is checked file by file against its manifest; a missing or broken one is
    built again (an assignment is a function of the graph, the method, the seed and ``j``:
    exactly for ``random`` and ``chunk-rotation``, up to DGL's rare METIS flips for the
    METIS methods). Half-built folders and partitionings after ``j`` (an abandoned future,
    or one the builder would write again) are removed.

    Args:
        cfg: the run's config.
        j: the partitioning the resumed epoch trains on.
        g: the graph, if loaded already (loaded only when a build is needed).
    """
    root = partition_root(cfg.run.output_dir)
    if root.is_dir():
        for path in root.glob(".building-*"):
            shutil.rmtree(path, ignore_errors=True)
    for i, path in partitioning_dirs(root).items():
        if i > j:
            shutil.rmtree(path, ignore_errors=True)
    spec = AssignmentSpec.from_config(cfg)
    final = root / str(j)
    stats = read_stats(final)
    expected = {"schedule_method": spec.method, "seed": spec.seed, "index": j, "num_parts": spec.num_parts}
    if stats is not None and stats.get("fingerprint") == expected:
        why = folder_problem(final, stats)
        if why is None:
            log.info("resuming on partitioning %d in %s", j, final)
            return stats
        log.warning("partitioning %d in %s is broken: %s; building it again", j, final, why)
    else:
        log.info("partitioning %d is not on disk; building it again", j)
    if g is None:
        g = load_dataset(cfg.data)
    prev_file = root / str(j - 1) / "assignment.npy"
    prev = np.load(prev_file) if j > 0 and prev_file.is_file() else None
    stats, _ = build_partitioning(g, spec, j, root, prev)
    return stats


def prepare_schedule(cfg: Config, g: dgl.DGLGraph) -> dict:
    """Launcher side, before the workers start: clear old partitionings, build partitioning 0.

    Returns:
        Partitioning 0's statistics (``part_config`` is what the workers load first).
    """
    check_partitionable(g.num_nodes(), cfg.partition.num_parts)  # before an earlier run's partitionings go
    root = partition_root(cfg.run.output_dir)
    if cfg.partition.out_dir:
        log.warning(
            "partition.out_dir=%s is ignored with schedule.k>0: partitionings go to %s/<j>", cfg.partition.out_dir, root
        )
    # A previous run's partitionings would break keep_last; half-built ones are a crash's.
    stale = list(partitioning_dirs(root).values()) + (list(root.glob(".building-*")) if root.is_dir() else [])
    for path in stale:
        shutil.rmtree(path)
    spec = AssignmentSpec.from_config(cfg)
    stats, _ = build_partitioning(g, spec, 0, root)
    log.info(
        "schedule: %s every %d epochs; partitioning 0 built in %.2f s (edge cut %.4f) -> %s",
        spec.method,
        cfg.schedule.k,
        stats["build_s"],
        stats["edge_cut"],
        root / "0",
    )
    return stats
