"""Partitions: DGL's ``partition_graph`` on disk, their statistics, and a worker's local view.

``partition`` writes DGL's standard layout (``<graph>.json`` + ``part<i>/``), so the same
folder serves Grappa workers and real DistDGL servers; besides the features it stores each
node's first-hop aggregate (``agg``, first-hop completion). The node assignment is DGL's
METIS or random, or the restreaming LDG of :func:`ldg_assignment` (the package's one LDG,
also used by ``bigpart`` and the scheduler), which DGL's ``partition_graph`` writes through
:func:`forced_assignment`. ``load_local`` gives worker r its part: the local graph (inner
nodes, plus the 1-hop halo with ``halo="keep"``), local features (and aggregates), labels,
train ids and the global in-degrees. Halo rows are read once here, from the owners'
partition files, never during a training step, and counted as one-time bytes.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

import dgl
import numpy as np
import torch
from torch import Tensor

from .config import Config, ConfigError, PartitionConfig

log = logging.getLogger("dgl_grappa")

GRAPH_NAME = "grappa"
STATS_FILE = "grappa_partition.json"
# Node data written into every partition; "in_degree" is the full-graph in-degree, which a
# worker cannot count from its own edges for halo nodes.
NODE_KEYS = ("feat", "label", "train_mask", "val_mask", "test_mask", "in_degree")
# First-hop completion (train.first_hop=exact): the full-graph mean of every node's in-neighbours'
# features (0 without in-neighbours), written next to NODE_KEYS by ``partition`` (the partitioner has the
# whole graph; in a cluster the owners compute it from the halo rows they read, which is what
# load_local counts as one-time bytes). Optional: partitions without it serve first_hop=sampled.
AGG_KEY = "agg"
# Bumped when the files ``partition`` writes change (2: the ``agg`` node data), so cached
# partitionings of an older layout are not reused.
LAYOUT_VERSION = 2
METHODS = ("metis", "random", "ldg")
"""partition.method values: DGL's METIS and random, and the restreaming LDG of :func:`ldg_assignment`."""


def part_config_path(out_dir: str | Path) -> Path:
    """The ``<graph>.json`` that DGL's loaders take, inside a partition folder."""
    return Path(out_dir) / f"{GRAPH_NAME}.json"


def edge_cut_stats(src: np.ndarray, dst: np.ndarray, assignment: np.ndarray, num_parts: int) -> dict:
    """Edge-cut fraction and per-part halo share of a node assignment.

    Args:
        src, dst: edges of the full graph (dst aggregates from src).
        assignment: part id of every node.
        num_parts: number of parts.

    Returns:
        ``{"edge_cut": float, "inner_nodes": [...], "halo_nodes": [...], "halo_share": [...]}``
        where the halo of part p are the distinct sources outside p of edges into p, and
        halo_share = halo / inner.
    """
    ps, pd = assignment[src], assignment[dst]
    cut = ps != pd
    n = assignment.shape[0]
    inner = np.bincount(assignment, minlength=num_parts)
    # Distinct (destination part, source node) pairs of cut edges = halo nodes of each part.
    keys = np.unique(pd[cut].astype(np.int64) * n + src[cut])
    halo = np.bincount(keys // n, minlength=num_parts)
    return {
        "edge_cut": float(cut.mean()) if cut.size else 0.0,
        "inner_nodes": inner.tolist(),
        "halo_nodes": halo.tolist(),
        "halo_share": [float(h) / max(int(i), 1) for h, i in zip(halo, inner)],
    }


def balance_stats(assignment: np.ndarray, num_parts: int, train_mask: np.ndarray | None = None) -> dict:
    """Node balance (largest part / mean part) and, with ``train_mask``, train-node balance."""
    sizes = np.bincount(assignment, minlength=num_parts)
    out = {"node_balance": float(sizes.max() / max(sizes.mean(), 1e-12))}
    if train_mask is not None:
        t = np.bincount(assignment[train_mask], minlength=num_parts)
        out["train_balance"] = float(t.max() / max(t.mean(), 1e-12))
        out["train_nodes"] = t.tolist()
    return out


def neighbour_mean(g: dgl.DGLGraph, x: Tensor) -> Tensor:
    """Per node, the mean of its in-neighbours' rows of ``x`` (0 for a node without in-neighbours).

    The first-hop aggregate of first-hop completion (``train.first_hop=exact``): every
    model's first layer is a function of (x_v, this mean, the in-degree); see
    :meth:`dgl_grappa.models.GNN.forward`.
    """
    src, dst = g.edges()
    deg = torch.bincount(dst, minlength=g.num_nodes()).to(x.dtype).clamp(min=1)
    total = torch.zeros_like(x).index_add_(0, dst, x[src])
    return total / deg.unsqueeze(1)


def undirected_csr(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the neighbourhoods of a directed edge list taken both ways (in- and out-neighbours).

    Returns:
        ``(indptr int64 [N+1], indices [2E])``, int32 indices when N < 2**31.
    """
    a = np.concatenate((dst, src)).astype(np.int64, copy=False)
    b = np.concatenate((src, dst))
    order = np.argsort(a, kind="stable")
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(a, minlength=num_nodes), out=indptr[1:])
    return indptr, b[order].astype(np.int32 if num_nodes < 2 ** 31 else np.int64)


LDG_STREAM = 0x1D6
"""RNG stream of :func:`ldg_assignment` (``default_rng([seed, LDG_STREAM])``): a bare
``default_rng(seed)`` would repeat the synthetic generator's own permutation for the same seed."""


def ldg_assignment(indptr: np.ndarray, indices: np.ndarray, num_parts: int, *, passes: int = 3,
                   slack: float = 0.05, seed: int = 0, train_mask: np.ndarray | None = None,
                   block: int | None = None) -> np.ndarray:
    """Restreaming linear deterministic greedy (LDG), vectorised over blocks of nodes: the one LDG of the package.

    LDG (Stanton & Kliot, KDD 2012) streams the nodes in a seeded random order and puts node
    v into ``argmax_p |N(v) in P_p| * (1 - |P_p| / C)`` with the hard capacity
    ``C = (1 + slack) N / P`` (full parts are closed). Restreaming (Nishimura & Ugander, KDD
    2013): ``passes`` passes, each in a new order; a node's neighbours count with their latest
    part (this pass or the previous one), and its own previous placement is taken out of the
    part sizes while it is re-placed. With ``train_mask``, a train node's score is also
    multiplied by ``1 - |train in P_p| / C_train`` under a hard cap ``C_train = (1 + slack)
    N_train / P``, so every worker gets its share of seeds.

    Vectorised: the nodes of a block of ``block`` nodes decide together on the sizes at the
    block's start; parts a block would overfill keep their best-scoring candidates and the
    others choose again among the parts still open, so both caps hold exactly (except in
    pathological cases where no part has room for a node under both caps: it then goes one
    over). Ties (no placed
    neighbour) break at random, weighted towards emptier parts. O(passes x (N + E)).

    Args:
        indptr, indices: CSR of each node's neighbours (for a directed graph, in- and
            out-neighbours: :func:`undirected_csr`).
        num_parts: P.
        passes: streaming passes (>= 1); 3 by default (the research's setting).
        slack: allowed imbalance of nodes and train nodes (0.05 = cap 1.05 x the mean).
        seed: seed of the stream orders and tie-breaks (stream :data:`LDG_STREAM`).
        train_mask: bool [N]; balance train nodes too.
        block: nodes decided together; default ``clamp(slack * N / P / 4, 16, 8192)``, so a
            block is small against the slack of a part.

    Returns:
        int64 [N] part ids in [0, P).

    Example:
        >>> indptr, indices = undirected_csr(np.array([0, 1, 2]), np.array([1, 2, 3]), 4)
        >>> ldg_assignment(indptr, indices, 2, seed=0).shape
        (4,)
    """
    if passes < 1:
        raise ConfigError(f"ldg passes={passes} must be >= 1")
    if slack < 0:
        raise ConfigError(f"ldg slack={slack} must be >= 0")
    n, k = indptr.shape[0] - 1, int(num_parts)
    if k <= 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    rng = np.random.default_rng([int(seed), LDG_STREAM])
    cap = max(math.ceil(n / k), math.floor((1.0 + slack) * n / k))
    tm = None if train_mask is None else np.asarray(train_mask, dtype=bool)
    tcap = 0
    if tm is not None:
        nt = int(tm.sum())
        tcap = max(math.ceil(nt / k), math.floor((1.0 + slack) * nt / k))
    bs = int(block) if block else int(min(8192, max(16, slack * n / k / 4)))
    part = np.full(n, -1, dtype=np.int64)
    size = np.zeros(k, dtype=np.float64)
    tsize = np.zeros(k, dtype=np.float64)
    for _ in range(passes):
        order = rng.permutation(n)
        for i in range(0, n, bs):
            nodes = order[i:i + bs]
            b = nodes.shape[0]
            old = part[nodes]
            placed = old >= 0
            size -= np.bincount(old[placed], minlength=k)
            is_t = tm[nodes] if tm is not None else np.zeros(b, dtype=bool)
            if tm is not None:
                tsize -= np.bincount(old[placed & is_t], minlength=k)
            starts, ends = indptr[nodes], indptr[nodes + 1]
            lens = ends - starts
            row = np.repeat(np.arange(b), lens)
            pos = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens) \
                + np.repeat(starts, lens)
            npart = part[indices[pos]]
            ok = npart >= 0
            counts = np.bincount(row[ok] * k + npart[ok], minlength=b * k).reshape(b, k).astype(np.float64)
            pen = np.clip(1.0 - size / cap, 0.0, None)
            score = (counts + rng.random((b, k)) * 1e-3) * pen
            score[:, size >= cap] = -np.inf
            if tm is not None and is_t.any():
                tpen = np.clip(1.0 - tsize / tcap, 0.0, None)
                st = score[is_t] * tpen
                st[:, tsize >= tcap] = -np.inf
                score[is_t] = st
            choice = _capped_choice(score, size, cap, is_t, tsize, tcap)
            part[nodes] = choice
            size += np.bincount(choice, minlength=k)
            if tm is not None:
                tsize += np.bincount(choice[is_t], minlength=k)
    return part


def _over_cap(choice: np.ndarray, score: np.ndarray, members: np.ndarray, base: np.ndarray, cap: int) -> np.ndarray:
    """Positions (into ``choice``) of the members that overfill their chosen part: the lowest scores beyond the room."""
    idx = np.flatnonzero(members)
    if idx.size == 0:
        return idx
    ch = choice[idx]
    sc = score[idx, ch]
    order = np.lexsort((-sc, ch))
    ch_sorted = ch[order]
    first = np.flatnonzero(np.concatenate(([True], ch_sorted[1:] != ch_sorted[:-1])))
    lengths = np.diff(np.concatenate((first, [ch_sorted.shape[0]])))
    rank = np.arange(ch_sorted.shape[0]) - np.repeat(first, lengths)
    room = np.maximum(cap - base[ch_sorted], 0)
    return idx[order[rank >= room]]


def _capped_choice(score: np.ndarray, size: np.ndarray, cap: int, is_t: np.ndarray, tsize: np.ndarray,
                   tcap: int) -> np.ndarray:
    """Each row's best part such that no part exceeds ``cap`` nodes (``tcap`` train nodes) after the block.

    Every row takes its best part; where a part would overflow, it keeps its best-scoring
    rows and the others (few: a block is small against a part's slack) choose one by one,
    train rows first, the best part that still has room for them.
    """
    n_rows, k = score.shape
    choice = score.argmax(1)
    bad = np.zeros(n_rows, dtype=bool)
    bad[_over_cap(choice, score, np.ones(n_rows, dtype=bool), size, cap)] = True
    if is_t.any():
        bad[_over_cap(choice, score, is_t, tsize, tcap)] = True
    if not bad.any():
        return choice
    ok = ~bad
    room = cap - size - np.bincount(choice[ok], minlength=k)
    troom = tcap - tsize - np.bincount(choice[ok & is_t], minlength=k)
    rows = np.flatnonzero(bad)
    for r in rows[np.argsort(~is_t[rows], kind="stable")]:
        s = score[r].copy()
        full = room <= 0
        if is_t[r]:
            full |= troom <= 0
        s[full] = -np.inf
        if np.isfinite(s).any():
            p = int(s.argmax())
        else:  # no part has room for it (pathological): the emptiest, one over its cap
            p = int(np.argmax(room + (troom if is_t[r] else 0)))
        choice[r] = p
        room[p] -= 1
        if is_t[r]:
            troom[p] -= 1
    return choice


@contextlib.contextmanager
def forced_assignment(assignment: np.ndarray, num_parts: int):
    """Make ``dgl.distributed.partition_graph(part_method="metis")`` use ``assignment``.

    partition_graph takes only ``metis`` or ``random`` and has no argument for a ready
    assignment; re-implementing its halo construction, id reshuffling and file writing
    would copy DGL. Relabelling nodes cannot make METIS (or DGL's seeded random draw, whose
    part sizes are random) yield an arbitrary assignment either. So, for the duration of
    the call, the module-level name partition_graph calls for METIS is bound to a function
    that returns ``assignment``; everything else is DGL's own code. The function checks its
    arguments, and callers check the written ``assignment.npy`` against ``assignment``
    (:func:`partition` for ``ldg``, ``scheduler.write_layout``), so a DGL version that
    partitions differently fails loudly instead of silently.
    """
    import dgl.distributed.partition as dgl_part

    original = dgl_part.metis_partition_assignment
    calls = []

    def fixed(sim_g, k, *args, **kwargs):
        if k != num_parts or sim_g.num_nodes() != assignment.shape[0]:
            raise RuntimeError(f"partition_graph asked for {k} parts of {sim_g.num_nodes()} nodes; "
                               f"the forced assignment has {num_parts} parts of {assignment.shape[0]}")
        calls.append(k)
        return torch.from_numpy(np.ascontiguousarray(assignment, dtype=np.int64))

    dgl_part.metis_partition_assignment = fixed
    try:
        yield calls
    finally:
        dgl_part.metis_partition_assignment = original


def partition(g: dgl.DGLGraph, cfg: PartitionConfig, out_dir: str | Path, fingerprint: dict | None = None) -> dict:
    """Partition ``g`` with dgl.distributed.partition_graph into ``out_dir``.

    Args:
        g: homogeneous graph with ndata feat, label, train/val/test_mask.
        cfg: partition options (num_parts, method, balance_*, seed).
        out_dir: target folder (created; DGL's layout).
        fingerprint: anything that identifies the input (stored so a later run can reuse it).

    Returns:
        Statistics: edge_cut, inner/halo node counts and halo_share per part, seconds,
        and ``part_config`` (path of the json).

    Example:
        >>> stats = partition(g, cfg.partition, "runs/x/partitions/0")   # doctest: +SKIP
        >>> stats["edge_cut"]                                            # doctest: +SKIP
        0.05
    """
    if cfg.method not in METHODS:
        raise ConfigError(f"partition.method={cfg.method!r} is not allowed; use one of {', '.join(METHODS)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    g = g.clone()
    g.ndata["in_degree"] = g.in_degrees().to(torch.int64)
    g.ndata[AGG_KEY] = neighbour_mean(g, g.ndata["feat"])
    for k in list(g.ndata.keys()):
        if k not in NODE_KEYS + (AGG_KEY,):
            del g.ndata[k]
    balance_ntypes = g.ndata["train_mask"].to(torch.int64) if cfg.balance_train else None
    check_partitionable(g.num_nodes(), cfg.num_parts)
    t0 = time.perf_counter()
    assign_s = 0.0
    forced = contextlib.nullcontext()
    dgl_method = cfg.method
    if cfg.method == "ldg" and cfg.num_parts > 1:
        indptr, indices = undirected_csr(*(t.numpy() for t in g.edges()), g.num_nodes())
        assignment = ldg_assignment(indptr, indices, cfg.num_parts, passes=cfg.ldg_passes, slack=cfg.ldg_slack,
                                    seed=cfg.seed, train_mask=g.ndata["train_mask"].numpy().astype(bool))
        assign_s = time.perf_counter() - t0
        forced, dgl_method = forced_assignment(assignment, cfg.num_parts), "metis"
        forced_parts = assignment
    elif cfg.method == "ldg":
        dgl_method = "random"  # one part: nothing to assign
    dgl.seed(cfg.seed)  # partition_graph's "random" draws every node's part from DGL's RNG
    # num_hops=1 keeps the 1-hop halo in every part: halo "keep" and DistDGL both use it.
    try:
        with forced, (contextlib.redirect_stdout(io.StringIO()) if cfg.method == "ldg" else contextlib.nullcontext()):
            orig_nids, _ = dgl.distributed.partition_graph(
                g, GRAPH_NAME, cfg.num_parts, str(out), num_hops=1, part_method=dgl_method,
                balance_ntypes=balance_ntypes, balance_edges=cfg.balance_edges, return_mapping=True)
    except dgl.DGLError as exc:
        log.debug("partition_graph failed: %s", exc)
        raise ConfigError(f"partition.num_parts={cfg.num_parts}: DGL could not cut this {g.num_nodes()}-node graph "
                          f"into {cfg.num_parts} parts (it fails when a part comes out empty); use fewer parts, "
                          f"e.g. --partition.num_parts={max(1, cfg.num_parts // 2)}") from None
    seconds = time.perf_counter() - t0
    meta = json.loads(part_config_path(out).read_text())
    # New (shuffled) ids are contiguous per part; map them back to the original nodes.
    new_part = np.zeros(g.num_nodes(), dtype=np.int64)
    for p, (lo, hi) in enumerate(meta["node_map"]["_N"]):
        new_part[lo:hi] = p
    assignment = np.empty(g.num_nodes(), dtype=np.int64)
    assignment[orig_nids.numpy()] = new_part
    src, dst = (t.numpy() for t in g.edges())
    stats = edge_cut_stats(src, dst, assignment, cfg.num_parts)
    train = g.ndata["train_mask"].numpy().astype(bool)
    stats.update(balance_stats(assignment, cfg.num_parts, train))
    stats.update({"num_parts": cfg.num_parts, "method": cfg.method, "seed": cfg.seed, "seconds": seconds,
                  "assign_seconds": assign_s, "layout": LAYOUT_VERSION,
                  "num_nodes": g.num_nodes(), "num_edges": g.num_edges(),
                  "train_nodes": np.bincount(assignment[train], minlength=cfg.num_parts).tolist(),
                  "part_config": str(part_config_path(out)), "fingerprint": fingerprint or {}})
    # assignment: original id -> part; orig_ids: global (shuffled) id -> original id.
    if cfg.method == "ldg" and cfg.num_parts > 1 and not np.array_equal(assignment, forced_parts):
        raise RuntimeError(f"DGL wrote a different assignment into {out} than LDG computed "
                           "(this DGL version partitions differently; report it)")
    np.save(out / "assignment.npy", assignment)
    np.save(out / "orig_ids.npy", orig_nids.numpy())
    stats["files"] = file_manifest(out)
    (out / STATS_FILE).write_text(json.dumps(stats, indent=1))
    return stats


def check_partitionable(num_nodes: int, num_parts: int) -> None:
    """Raise a one-line ConfigError when a graph of ``num_nodes`` nodes cannot have ``num_parts`` parts."""
    if num_parts > num_nodes:
        raise ConfigError(f"partition.num_parts={num_parts} is more than the graph's {num_nodes} nodes; use at most "
                          f"{num_nodes} parts (better far fewer: every part needs training nodes)")


def file_manifest(out_dir: str | Path) -> dict[str, list]:
    """``{relative path: [bytes, sha256]}`` of every file of a partition folder (its stats file excepted).

    Stored in the stats, so that a reused folder is checked file by file
    (:func:`folder_problem`) instead of trusting whatever is on disk.
    """
    out = Path(out_dir)
    manifest = {}
    for f in sorted(out.rglob("*")):
        if f.is_file() and f.name != STATS_FILE and not f.name.startswith("."):
            manifest[str(f.relative_to(out))] = [f.stat().st_size, _sha256(f)]
    return manifest


def _sha256(path: Path) -> str:
    import hashlib

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


def read_stats(out_dir: str | Path) -> dict | None:
    """The statistics ``partition`` wrote into out_dir, or None when there are none."""
    f = Path(out_dir) / STATS_FILE
    if not f.is_file() or not part_config_path(out_dir).is_file():
        return None
    return json.loads(f.read_text())


def format_stats(stats: dict) -> str:
    """A short table of a partitioning for the terminal."""
    lines = [f"{stats['method']} into {stats['num_parts']} parts: edge-cut fraction {stats['edge_cut']:.4f} "
             f"({stats['seconds']:.2f} s)", "part  inner_nodes  halo_nodes  halo/inner"]
    for p, (i, h, s) in enumerate(zip(stats["inner_nodes"], stats["halo_nodes"], stats["halo_share"])):
        lines.append(f"{p:>4}  {i:>11}  {h:>10}  {s:>9.1%}")
    return "\n".join(lines)


def partition_dir(cfg: Config) -> Path:
    """Where this run's partitioning lives (issue: <output dir>/partitions/<j>/)."""
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
    if cfg.data.name == "dgl":  # the same path may hold another graph later
        try:
            st = Path(cfg.data.path).stat()
            data["file"] = [st.st_size, st.st_mtime_ns]
        except OSError:
            pass
    if part["method"] != "ldg":
        part.pop("ldg_passes", None)
        part.pop("ldg_slack", None)
    return {"data": data, "partition": part, "layout": LAYOUT_VERSION}


def _first_difference(a: dict, b: dict, prefix: str = "") -> str:
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key, "<unset>"), b.get(key, "<unset>")
        if isinstance(x, dict) and isinstance(y, dict):
            d = _first_difference(x, y, f"{prefix}{key}.")
            if d:
                return d
        elif x != y:
            return f"{prefix}{key}={x!r} there, {y!r} here"
    return ""


def ensure_partitions(cfg: Config, g: dgl.DGLGraph | None = None) -> tuple[dict, dgl.DGLGraph | None]:
    """Partition the configured graph unless an identical partitioning already exists.

    The partitioning is reused when its recorded fingerprint (the data and partition
    settings) equals this config's; otherwise the graph is loaded (unless given) and cut.

    Args:
        cfg: the run's config (``data``, ``partition``, ``run.output_dir``).
        g: the graph, when the caller has loaded it already.

    Returns:
        (partition statistics, the graph or None when it was not needed).
    """
    from .data import load_dataset

    out = partition_dir(cfg)
    fp = json.loads(json.dumps(partition_fingerprint(cfg)))
    stats = read_stats(out)
    chosen = bool(cfg.partition.out_dir)  # a folder the user named, not one inside this run's output
    if stats is not None and stats.get("fingerprint") == fp:
        why = folder_problem(out, stats)
        if why is None:
            log.info("reusing the partitioning in %s", out)
            return stats, g
        log.warning("the partitioning in %s is broken: %s; partitioning again", out, why)
    elif stats is not None and chosen:
        raise ConfigError(f"partition.out_dir={out} holds a partitioning of another graph or settings "
                          f"({_first_difference(stats.get('fingerprint') or {}, fp)}); point --partition.out_dir at "
                          "a new folder, or remove that one")
    elif chosen and out.is_dir() and any(out.iterdir()):
        raise ConfigError(f"partition.out_dir={out} is not empty and holds no dgl_grappa partitioning; point "
                          "--partition.out_dir at a new or empty folder")
    if g is None:
        g = load_dataset(cfg.data)
    check_partitionable(g.num_nodes(), cfg.partition.num_parts)
    log.info("partitioning %d nodes / %d edges into %d parts (%s) -> %s", g.num_nodes(), g.num_edges(),
             cfg.partition.num_parts, cfg.partition.method, out)
    return partition(g, cfg.partition, out, fingerprint=fp), g


def _edges(pg: dgl.DGLGraph) -> tuple[Tensor, Tensor]:
    # A DistDGL server's shared-memory partition may allow CSC only; derive (src, dst) from it then.
    formats = pg.formats()
    if "coo" in formats["created"] or "coo" in formats.get("not created", []):
        return pg.edges()
    indptr, indices, _ = pg.adj_tensors("csc")
    dst = torch.repeat_interleave(torch.arange(indptr.numel() - 1), indptr[1:] - indptr[:-1])
    return indices, dst


def local_graph(pg: dgl.DGLGraph, inner: Tensor, halo: str = "drop") -> tuple[dgl.DGLGraph, int, Tensor, Tensor]:
    """The graph a worker trains on, from its part of a DGL partitioning (every runtime uses this).

    Args:
        pg: the part's graph as DGL stores it: inner nodes first, then the 1-hop halo
            (``load_partition``'s graph, or a DistGraph's ``local_partition``).
        inner: bool mask of the inner (owned) nodes of ``pg``.
        halo: "drop" (inner nodes and the edges among them only) or "keep" (halo nodes and
            every edge of the part stay: all in-edges of the inner nodes, and the edges from
            inner nodes into halo nodes that DGL's 1-hop layout stores, so a halo node's
            local neighbourhood is its inner neighbours; no halo node's own halo).

    Returns:
        (graph, number of inner nodes, src, dst): the local graph (COO for full-graph
        edge ops, CSC for neighbour sampling), its node count's inner share, and its edges.

    Raises:
        RuntimeError: the inner nodes are not first (not DGL's layout).
    """
    if halo not in ("drop", "keep"):
        raise ConfigError(f"train.halo={halo!r} is not allowed; use drop or keep")
    inner = inner.bool()
    num_inner = int(inner.sum())
    # DGL puts inner nodes first; local ids of the inner nodes index their node data.
    if not bool(inner[:num_inner].all()):
        raise RuntimeError("unexpected partition layout: inner nodes are not first")
    src, dst = _edges(pg)
    n_local = pg.num_nodes()
    if halo == "drop":
        keep = (src < num_inner) & (dst < num_inner)
        src, dst = src[keep], dst[keep]
        n_local = num_inner
    # CSC for neighbour sampling; COO for full-graph edge ops (GAT's SDDMM needs COO or CSR).
    graph = dgl.graph((src, dst), num_nodes=n_local).formats(["coo", "csc"])
    return graph, num_inner, src, dst


@dataclass
class LocalPartition:
    """What a worker holds of its part; local ids index every tensor.

    Attributes:
        part_id, num_parts: which part of how many.
        graph: local graph (inner nodes first, then halo nodes when kept), CSC format.
        num_inner: number of inner (owned) nodes.
        global_ids: global (shuffled) id of every local node.
        owner: owning part of every local node.
        feat: features of every local node (halo rows read from the owners at load time).
        label: label of every inner node.
        train_ids: local ids of the inner training nodes.
        in_degree: full-graph in-degree of every local node.
        src, dst: the local graph's edges.
        halo_bytes_loaded: feature bytes read from other parts' files at load time.
        load_seconds: time taken by ``load_local``.
        agg: first-hop aggregate of every local node (``first_hop="exact"``), else None.
        one_time_bytes: bytes a worker moves once for this partitioning (see :func:`load_local`).
        rows_held: feature-width rows this worker holds (features, plus aggregates with exact).
    """

    part_id: int
    num_parts: int
    graph: dgl.DGLGraph
    num_inner: int
    global_ids: Tensor
    owner: Tensor
    feat: Tensor
    label: Tensor
    train_ids: Tensor
    in_degree: Tensor
    src: Tensor
    dst: Tensor
    halo_bytes_loaded: int
    load_seconds: float
    agg: Tensor | None = None
    one_time_bytes: int = 0
    rows_held: int = 0


def _with_halo_rows(part_config, halo_gids: Tensor, halo_owner: Tensor, first_ids: list[int], feat: Tensor,
                    in_degree: Tensor, agg: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None, int, int]:
    """Append the halo nodes' rows (features, in-degrees, aggregates when ``agg`` is given),
    read once from their owners' partition files, to the inner rows.

    Args:
        halo_gids, halo_owner: global id and owning part of every halo node, in local order.
        first_ids: the first global id of every part (DGL's layout: contiguous per part).

    Returns:
        (feat, in_degree, agg) with the halo rows appended, the feature bytes read, and the
        one-time bytes (features, 8-byte in-degree and aggregate of every halo row).
    """
    n_halo, width = halo_gids.numel(), feat.shape[1]
    halo_feat = torch.empty((n_halo, width), dtype=feat.dtype)
    halo_deg = torch.empty(n_halo, dtype=in_degree.dtype)
    halo_agg = torch.empty((n_halo, width), dtype=feat.dtype) if agg is not None else None
    for p in torch.unique(halo_owner).tolist():
        rows = (halo_owner == p).nonzero(as_tuple=True)[0]
        other, _ = dgl.distributed.load_partition_feats(str(part_config), p, load_edges=False)
        idx = halo_gids[rows] - first_ids[p]
        halo_feat[rows] = other["_N/feat"][idx]
        halo_deg[rows] = other["_N/in_degree"][idx]
        if halo_agg is not None:
            halo_agg[rows] = other[f"_N/{AGG_KEY}"][idx]
        del other
    row_bytes = width * feat.element_size()
    one_time = n_halo * (row_bytes * (2 if agg is not None else 1) + 8)
    return (torch.cat([feat, halo_feat]), torch.cat([in_degree, halo_deg]),
            torch.cat([agg, halo_agg]) if agg is not None else None, halo_feat.numel() * halo_feat.element_size(),
            one_time)


def load_local(part_config: str | Path, part_id: int, halo: str = "drop", first_hop: str = "sampled") -> LocalPartition:
    """Load worker ``part_id``'s local view of a partitioning (no servers, no network).

    Args:
        part_config: the partitioning's json.
        part_id: which part.
        halo: "drop" (inner nodes only) or "keep" (1-hop halo nodes kept, their rows read
            once here from the owners' partition files).
        first_hop: "exact" also loads the first-hop aggregates (node data ``agg``: inner rows
            from this part, halo rows from their owners with ``halo=keep``); "sampled" does not.

    Returns:
        A :class:`LocalPartition`. Its ``one_time_bytes`` is what a worker of a real cluster
        moves once per partitioning: with ``halo=keep`` every halo row's features, in-degree
        (8 bytes) and, with ``exact``, aggregate; with ``halo=drop`` and ``exact`` the feature
        rows (+ 8 bytes) of the outside in-neighbours from which the owner computes its inner
        nodes' aggregates (here the partitioner has done it: it holds the whole graph).

    Raises:
        ConfigError: node data missing (``agg`` for ``first_hop=exact``: re-create the partitioning).
    """
    if first_hop not in ("exact", "sampled"):
        raise ConfigError(f"train.first_hop={first_hop!r} is not allowed; use exact or sampled")
    t0 = time.perf_counter()
    pg, nfeat, _, gpb, _, _, _ = dgl.distributed.load_partition(str(part_config), part_id)
    node = {k.split("/", 1)[-1]: v for k, v in nfeat.items()}
    missing = [k for k in NODE_KEYS if k not in node]
    if missing:
        raise ConfigError(f"partition {part_config} lacks node data {missing}; re-create it with "
                          "`python -m dgl_grappa partition`")
    exact = first_hop == "exact"
    if exact and AGG_KEY not in node:
        raise ConfigError(f"train.first_hop=exact needs node data '{AGG_KEY}' (first-hop aggregates), which partition "
                          f"{part_config} lacks (written by an older version or another writer, e.g. bigpart); "
                          "re-create it with `python -m dgl_grappa partition`, or use --train.first_hop=sampled")
    graph, num_inner, src, dst = local_graph(pg, pg.ndata["inner_node"], halo)
    gids = pg.ndata[dgl.NID]
    # DGL writes no part_id for a 1-part partitioning: every node is then owned by part 0.
    owner = pg.ndata["part_id"].to(torch.int64) if "part_id" in pg.ndata else torch.full_like(gids, part_id)
    feat, in_degree = node["feat"], node["in_degree"]
    agg = node[AGG_KEY] if exact else None
    halo_bytes = 0
    one_time = 0
    n_local = graph.num_nodes()
    row_bytes = feat.shape[1] * feat.element_size()
    if halo == "drop":
        gids, owner = gids[:num_inner], owner[:num_inner]
        if exact:
            psrc, pdst = _edges(pg)
            n_in_halo = int(torch.unique(psrc[(psrc >= num_inner) & (pdst < num_inner)]).numel())
            one_time = n_in_halo * (row_bytes + 8)
    else:
        feat, in_degree, agg, halo_bytes, one_time = _with_halo_rows(
            part_config, gids[num_inner:], owner[num_inner:], [int(gpb.partid2nids(p)[0]) for p in
                                                                range(gpb.num_partitions())],
            feat, in_degree, agg)
    train_ids = node["train_mask"].bool().nonzero(as_tuple=True)[0]
    return LocalPartition(
        part_id=part_id, num_parts=gpb.num_partitions(), graph=graph, num_inner=num_inner,
        global_ids=gids, owner=owner, feat=feat, label=node["label"].to(torch.int64),
        train_ids=train_ids, in_degree=in_degree, src=src, dst=dst, halo_bytes_loaded=halo_bytes,
        load_seconds=time.perf_counter() - t0, agg=agg, one_time_bytes=one_time,
        rows_held=n_local * (2 if exact else 1))


# ---------------------------------------------------------------------------------------
# Hosts without shared storage (launch.copy_partitions)
# ---------------------------------------------------------------------------------------

def part_files(part_dir: str | Path, parts: list[int], halo: str = "drop", metadata: bool = True) -> list[str]:
    """The files of a partitioning folder that workers of ``parts`` need, relative to it.

    Args:
        part_dir: the partitioning folder (``<graph>.json`` + ``part<i>/``).
        parts: the parts trained on one host.
        halo: with "keep", every part's ``node_feat.dgl`` too (halo rows are read from
            their owners' files at load time).
        metadata: the folder's top-level files (json, statistics, assignment: what rank 0's
            schedule reads); else only the json.

    Returns:
        Relative paths, sorted.
    """
    d = Path(part_dir)
    out = {f.name for f in d.iterdir() if f.is_file()} if metadata else {part_config_path(d).name}
    for p in parts:
        out |= {str(f.relative_to(d)) for f in (d / f"part{p}").rglob("*") if f.is_file()}
    if halo == "keep":
        out |= {str(f.relative_to(d)) for f in d.glob("part*/node_feat.dgl")}
    return sorted(out)


def has_part(part_dir: str | Path, part: int, halo: str = "drop") -> bool:
    """Whether a partitioning folder holds what the worker of ``part`` loads (json + its files)."""
    d = Path(part_dir)
    try:
        meta = json.loads(part_config_path(d).read_text())
        files = list(meta[f"part-{part}"].values())
        if halo == "keep":
            files += [meta[f"part-{p}"]["node_feats"] for p in range(meta["num_parts"])]
    except (OSError, ValueError, KeyError):
        return False
    return all((d / f).is_file() for f in files)


def share_partition(part_config: str | Path, rank: int, host_index: int, halo: str = "drop",
                    chunk_bytes: int = 64 << 20) -> int:
    """Rank 0 sends the workers on other hosts their part of a partitioning, over the process group.

    For hosts without shared storage: rank 0 has the partitioning on disk (it built it, or
    the launcher gave it); every worker on another host that lacks its files receives the
    json and its ``part<r>/`` folder (see :func:`part_files`) at the same path, written
    through temporary files. A collective: every rank calls it; point-to-point gloo sends
    bounded by the group's timeout, in chunks of ``chunk_bytes``.

    Args:
        part_config: the partitioning's json (the same path on every host).
        rank: this worker's rank.
        host_index: this worker's host.
        halo: ``train.halo`` (keep: every part's features are needed).

    Returns:
        Bytes sent (rank 0) or received (others); 0 where nothing moved.
    """
    import pickle

    import torch.distributed as dist

    d = Path(part_config).parent
    world = dist.get_world_size()
    have = rank == 0 or has_part(d, rank, halo)
    everyone: list = [None] * world
    dist.all_gather_object(everyone, (host_index, have))
    # Workers on rank 0's host share its storage; the others need the files unless they have them.
    needs = [h != everyone[0][0] and not ok for h, ok in everyone]
    need = needs[rank]
    moved = 0
    if rank == 0:
        for r in (r for r in range(1, world) if needs[r]):
            rel = part_files(d, [r], halo, metadata=False)
            header = pickle.dumps([(p, (d / p).stat().st_size) for p in rel])
            dist.send(torch.tensor([len(header)], dtype=torch.int64), dst=r)
            dist.send(torch.frombuffer(bytearray(header), dtype=torch.uint8), dst=r)
            for p in rel:
                with open(d / p, "rb") as f:
                    while chunk := f.read(chunk_bytes):
                        dist.send(torch.frombuffer(bytearray(chunk), dtype=torch.uint8), dst=r)
                        moved += len(chunk)
        log.info("sent partition files (%d bytes) to ranks %s", moved, [r for r in range(world) if needs[r]])
    elif need:
        n = torch.zeros(1, dtype=torch.int64)
        dist.recv(n, src=0)
        buf = torch.empty(int(n[0]), dtype=torch.uint8)
        dist.recv(buf, src=0)
        for p, size in pickle.loads(buf.numpy().tobytes()):
            target = d / p
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{rank}.tmp")
            with open(tmp, "wb") as f:
                left = size
                while left > 0:
                    chunk = torch.empty(min(chunk_bytes, left), dtype=torch.uint8)
                    dist.recv(chunk, src=0)
                    f.write(chunk.numpy().tobytes())
                    left -= chunk.numel()
            tmp.replace(target)  # several ranks of one host may write the json: same content
            moved += size
        log.info("received %d bytes of partition files into %s", moved, d)
    dist.barrier()
    return moved


# ---------------------------------------------------------------------------------------
# Prebuilt partitionings (partition.prebuilt): parts read straight from DGL's layout
# ---------------------------------------------------------------------------------------

def prebuilt_part_config(folder: str | Path) -> Path:
    """The partition json of a prebuilt partition folder (or the json itself).

    Args:
        folder: a folder in DGL's layout (``<graph>.json`` + ``part<i>/``), e.g. written by
            :mod:`dgl_grappa.bigpart` or :func:`partition`; or the json's path.

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
    node_map = meta["node_map"]["_N"] if isinstance(meta["node_map"], dict) else meta["node_map"]
    stats.setdefault("method", meta.get("part_method", "prebuilt"))
    stats.setdefault("num_parts", n)
    stats.setdefault("edge_cut", None)
    stats.setdefault("seconds", 0.0)
    stats.setdefault("inner_nodes", [int(hi) - int(lo) for lo, hi in node_map])
    stats.setdefault("num_nodes", int(meta.get("num_nodes", sum(stats["inner_nodes"]))))
    stats["part_config"] = str(part_config)
    return stats


def prebuilt_num_classes(cfg: Config, stats: dict) -> int:
    """Number of classes of a prebuilt partitioning, without loading the whole graph.

    From the data source's metadata (``data.name: bigsynth``), else the partition
    statistics (``num_classes``), else the largest label in the parts' node data + 1 (read
    one part at a time).
    """
    from .data import dataset_num_classes

    n = dataset_num_classes(cfg.data) if cfg.data.name == "bigsynth" else None
    if n is None:
        n = stats.get("num_classes")
    if n is None:
        top = -1
        for p in range(int(stats["num_parts"])):
            _, _, feat_file = _part_files(stats["part_config"], p)
            labels = dgl.data.utils.load_tensors(str(feat_file))
            lab = next(v for k, v in labels.items() if k.split("/", 1)[-1] == "label")
            top = max(top, int(lab.max()) if lab.numel() else -1)
            del labels
        n = top + 1
    return int(n)


def _node_map(meta: dict) -> list[tuple[int, int]]:
    nm = meta["node_map"]["_N"] if isinstance(meta["node_map"], dict) else meta["node_map"]
    return [(int(lo), int(hi)) for lo, hi in nm]


def _part_files(part_config: str | Path, part_id: int) -> tuple[dict, Path, Path]:
    part_config = Path(part_config)
    meta = json.loads(part_config.read_text())
    files = meta[f"part-{part_id}"]
    base = part_config.parent
    graph_file, feat_file = Path(files["part_graph"]), Path(files["node_feats"])
    return meta, (graph_file if graph_file.is_absolute() else base / graph_file), \
        (feat_file if feat_file.is_absolute() else base / feat_file)


def read_part_structure(part_config: str | Path, part_id: int, halo: str = "drop", *,
                        in_edges_of_inner: bool = False) -> dict:
    """One part's structure from its ``graph.dgl``, as an int32 CSC, without DGL's loader.

    The part's graph is read once (int64 COO with its edge data), the wanted edges are
    kept, it is freed, and the kept edges become a CSC over local ids (by destination; the
    file's edge order within a destination). ``halo="drop"``: edges among inner nodes;
    ``halo="keep"``: every edge of the part (as :func:`local_graph`). With
    ``in_edges_of_inner``: every edge into an inner node, from inner and halo nodes alike
    (the complete in-neighbourhoods of the inner nodes, which layer-wise evaluation needs).

    Returns:
        ``indptr`` (int64 [n + 1]), ``indices`` (int32 source local ids), ``num_nodes`` n
        (local nodes the CSC spans), ``num_inner``, ``global_ids`` (int64 [local nodes of the
        part]), ``owner`` (int64), ``edge_order_sorted`` (whether no sort was needed).
    """
    meta, graph_file, _ = _part_files(part_config, part_id)
    pg = dgl.load_graphs(str(graph_file))[0][0]
    inner = pg.ndata["inner_node"].bool()
    num_inner = int(inner.sum())
    if not bool(inner[:num_inner].all()):
        raise RuntimeError("unexpected partition layout: inner nodes are not first")
    gids = pg.ndata[dgl.NID].to(torch.int64)
    owner = pg.ndata["part_id"].to(torch.int64) if "part_id" in pg.ndata else torch.full_like(gids, part_id)
    n_all = pg.num_nodes()
    src, dst = _edges(pg)
    del pg
    if in_edges_of_inner:
        keep, n = dst < num_inner, num_inner
    elif halo == "drop":
        keep, n = (src < num_inner) & (dst < num_inner), num_inner
    elif halo == "keep":
        keep, n = None, n_all
    else:
        raise ConfigError(f"train.halo={halo!r} is not allowed; use drop or keep")
    if keep is not None:
        src, dst = src[keep], dst[keep]
        del keep
    is_sorted = bool((dst[1:] >= dst[:-1]).all()) if dst.numel() > 1 else True
    if not is_sorted:
        order = torch.sort(dst, stable=True).indices
        src, dst = src[order], dst[order]
        del order
    counts = torch.bincount(dst, minlength=n)
    del dst
    indptr = torch.zeros(n + 1, dtype=torch.int64)
    torch.cumsum(counts, 0, out=indptr[1:])
    indices = src.to(torch.int32)
    del src
    return {"indptr": indptr, "indices": indices, "num_nodes": n, "num_inner": num_inner, "global_ids": gids,
            "owner": owner, "edge_order_sorted": is_sorted, "num_parts": len(_node_map(meta))}


def load_local_lean(part_config: str | Path, part_id: int, halo: str = "drop",
                    first_hop: str = "sampled") -> LocalPartition:
    """A worker's part for training, with a fraction of :func:`load_local`'s memory (partition.prebuilt).

    The same local view (same nodes, edges, features, labels, train nodes, in-degrees), but
    the graph is an int32 CSC built straight from the part's files (:func:`read_part_structure`:
    the part's COO is freed before the features are read) instead of int64 COO + CSC after
    ``dgl.distributed.load_partition``; ids are int32 (so DGL draws other, equally distributed
    samples than with load_local's int64 graph); halo features are read only with
    ``halo="keep"``. Per local edge about 8 bytes instead of ~62.

    Args:
        part_config: the partitioning's json.
        part_id: which part.
        halo: "drop" or "keep" (as :func:`load_local`).
        first_hop: "exact" also loads the first-hop aggregates (as :func:`load_local`; bigpart
            writes none, so its partitions need "sampled").
    """
    if first_hop not in ("exact", "sampled"):
        raise ConfigError(f"train.first_hop={first_hop!r} is not allowed; use exact or sampled")
    exact = first_hop == "exact"
    t0 = time.perf_counter()
    st = read_part_structure(part_config, part_id, halo)
    n, num_inner = st["num_nodes"], st["num_inner"]
    indptr, indices = st["indptr"], st["indices"]
    num_edges = int(indices.numel())
    if num_edges >= 2 ** 31 or n >= 2 ** 31:
        raise ValueError(f"part {part_id} has {num_edges} edges / {n} nodes: too many for int32 ids")
    eids = torch.arange(num_edges, dtype=torch.int32)
    graph = dgl.graph(("csc", (indptr.to(torch.int32), indices, eids)), num_nodes=n, idtype=torch.int32)
    # The edge list of the CSC (coverage needs it once), int32: destination of every position.
    dst = torch.repeat_interleave(torch.arange(n, dtype=torch.int32), indptr[1:] - indptr[:-1])
    meta, _, feat_file = _part_files(part_config, part_id)
    node = {k.split("/", 1)[-1]: v for k, v in dgl.data.utils.load_tensors(str(feat_file)).items()}
    missing = [k for k in NODE_KEYS if k not in node]
    if missing:
        raise ConfigError(f"partition {part_config} lacks node data {missing}; re-create it with "
                          "`python -m dgl_grappa partition`")
    if exact and AGG_KEY not in node:
        raise ConfigError(f"train.first_hop=exact needs node data '{AGG_KEY}' (first-hop aggregates), which partition "
                          f"{part_config} lacks (bigpart writes none); use --train.first_hop=sampled")
    feat, in_degree = node["feat"], node["in_degree"]
    agg = node[AGG_KEY] if exact else None
    gids, owner = st["global_ids"][:n].clone(), st["owner"][:n].clone()
    # With halo=drop and exact, load_local also counts the outside in-neighbours' rows the
    # owner needs for the aggregates; the lean reader never keeps those edges, so 0 here.
    halo_bytes = one_time = 0
    if halo == "keep" and n > num_inner:
        feat, in_degree, agg, halo_bytes, one_time = _with_halo_rows(
            part_config, gids[num_inner:], owner[num_inner:], [lo for lo, _ in _node_map(meta)], feat, in_degree, agg)
    train_ids = node["train_mask"].bool().nonzero(as_tuple=True)[0].to(torch.int32)
    return LocalPartition(
        part_id=part_id, num_parts=st["num_parts"], graph=graph, num_inner=num_inner, global_ids=gids, owner=owner,
        feat=feat, label=node["label"].to(torch.int64), train_ids=train_ids, in_degree=in_degree, src=indices,
        dst=dst, halo_bytes_loaded=halo_bytes, load_seconds=time.perf_counter() - t0, agg=agg,
        one_time_bytes=one_time, rows_held=n * (2 if exact else 1))
