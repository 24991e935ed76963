"""Partitions: DGL's ``partition_graph`` on disk, their statistics, and a worker's local view.

``partition`` writes DGL's standard layout (``<graph>.json`` + ``part<i>/``), so the same
folder serves Grappa workers and real DistDGL servers. ``load_local`` gives worker r its
part: the local graph (inner nodes, plus halo nodes as leaves with ``halo="keep"``), local
features, labels, train ids and the global in-degrees that coverage needs. Halo features
are read once here, from the owners' partition files, never during a training step.
"""
from __future__ import annotations

import dataclasses
import json
import logging
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
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    g = g.clone()
    g.ndata["in_degree"] = g.in_degrees().to(torch.int64)
    for k in list(g.ndata.keys()):
        if k not in NODE_KEYS:
            del g.ndata[k]
    balance_ntypes = g.ndata["train_mask"].to(torch.int64) if cfg.balance_train else None
    check_partitionable(g.num_nodes(), cfg.num_parts)
    t0 = time.perf_counter()
    dgl.seed(cfg.seed)  # partition_graph's "random" draws every node's part from DGL's RNG
    # num_hops=1 keeps the 1-hop halo in every part: halo "keep" and DistDGL both use it.
    try:
        orig_nids, _ = dgl.distributed.partition_graph(
            g, GRAPH_NAME, cfg.num_parts, str(out), num_hops=1, part_method=cfg.method,
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
    stats.update({"num_parts": cfg.num_parts, "method": cfg.method, "seed": cfg.seed, "seconds": seconds,
                  "num_nodes": g.num_nodes(), "num_edges": g.num_edges(),
                  "train_nodes": np.bincount(assignment[train], minlength=cfg.num_parts).tolist(),
                  "part_config": str(part_config_path(out)), "fingerprint": fingerprint or {}})
    # assignment: original id -> part; orig_ids: global (shuffled) id -> original id.
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
    return {"data": data, "partition": part}


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
        halo: "drop" (inner nodes and the edges among them only) or "keep" (halo nodes
            stay, as leaves: the part's edges all point to inner nodes).

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


def load_local(part_config: str | Path, part_id: int, halo: str = "drop") -> LocalPartition:
    """Load worker ``part_id``'s local view of a partitioning (no servers, no network).

    Args:
        part_config: the partitioning's json.
        part_id: which part.
        halo: "drop" (inner nodes only) or "keep" (1-hop halo nodes as leaves).

    Returns:
        A :class:`LocalPartition`.
    """
    t0 = time.perf_counter()
    pg, nfeat, _, gpb, _, _, _ = dgl.distributed.load_partition(str(part_config), part_id)
    node = {k.split("/", 1)[-1]: v for k, v in nfeat.items()}
    missing = [k for k in NODE_KEYS if k not in node]
    if missing:
        raise ConfigError(f"partition {part_config} lacks node data {missing}; re-create it with "
                          "`python -m dgl_grappa partition`")
    graph, num_inner, src, dst = local_graph(pg, pg.ndata["inner_node"], halo)
    gids = pg.ndata[dgl.NID]
    # DGL writes no part_id for a 1-part partitioning: every node is then owned by part 0.
    owner = pg.ndata["part_id"].to(torch.int64) if "part_id" in pg.ndata else torch.full_like(gids, part_id)
    feat, in_degree = node["feat"], node["in_degree"]
    halo_bytes = 0
    n_local = graph.num_nodes()
    if halo == "drop":
        gids, owner = gids[:num_inner], owner[:num_inner]
    else:
        halo_feat = torch.empty((n_local - num_inner, feat.shape[1]), dtype=feat.dtype)
        halo_deg = torch.empty(n_local - num_inner, dtype=in_degree.dtype)
        halo_owner = owner[num_inner:]
        for p in torch.unique(halo_owner).tolist():
            rows = (halo_owner == p).nonzero(as_tuple=True)[0]
            other, _ = dgl.distributed.load_partition_feats(str(part_config), p, load_edges=False)
            offset = int(gpb.partid2nids(p)[0])
            idx = gids[num_inner:][rows] - offset
            halo_feat[rows] = other["_N/feat"][idx]
            halo_deg[rows] = other["_N/in_degree"][idx]
            del other
        halo_bytes = halo_feat.numel() * halo_feat.element_size()
        feat = torch.cat([feat, halo_feat])
        in_degree = torch.cat([in_degree, halo_deg])
    train_ids = node["train_mask"].bool().nonzero(as_tuple=True)[0]
    return LocalPartition(
        part_id=part_id, num_parts=gpb.num_partitions(), graph=graph, num_inner=num_inner,
        global_ids=gids, owner=owner, feat=feat, label=node["label"].to(torch.int64),
        train_ids=train_ids, in_degree=in_degree, src=src, dst=dst, halo_bytes_loaded=halo_bytes,
        load_seconds=time.perf_counter() - t0)


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


def load_local_lean(part_config: str | Path, part_id: int, halo: str = "drop") -> LocalPartition:
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
    """
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
    feat, in_degree = node["feat"], node["in_degree"]
    gids, owner = st["global_ids"][:n].clone(), st["owner"][:n].clone()
    halo_bytes = 0
    if halo == "keep" and n > num_inner:
        node_map = _node_map(meta)
        halo_feat = torch.empty((n - num_inner, feat.shape[1]), dtype=feat.dtype)
        halo_deg = torch.empty(n - num_inner, dtype=in_degree.dtype)
        halo_owner = owner[num_inner:]
        for p in torch.unique(halo_owner).tolist():
            rows = (halo_owner == p).nonzero(as_tuple=True)[0]
            other, _ = dgl.distributed.load_partition_feats(str(part_config), p, load_edges=False)
            idx = gids[num_inner:][rows] - node_map[p][0]
            halo_feat[rows] = other["_N/feat"][idx]
            halo_deg[rows] = other["_N/in_degree"][idx]
            del other
        halo_bytes = halo_feat.numel() * halo_feat.element_size()
        feat = torch.cat([feat, halo_feat])
        in_degree = torch.cat([in_degree, halo_deg])
    train_ids = node["train_mask"].bool().nonzero(as_tuple=True)[0].to(torch.int32)
    return LocalPartition(
        part_id=part_id, num_parts=st["num_parts"], graph=graph, num_inner=num_inner, global_ids=gids, owner=owner,
        feat=feat, label=node["label"].to(torch.int64), train_ids=train_ids, in_degree=in_degree, src=indices,
        dst=dst, halo_bytes_loaded=halo_bytes, load_seconds=time.perf_counter() - t0)
