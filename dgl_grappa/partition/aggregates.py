"""First-hop aggregates: what first-hop completion precomputes per node, once per partitioning.

Every model's first layer is a function of (x_v, the mean of v's in-neighbours' features,
v's full-graph in-degree) (:meth:`dgl_grappa.method.models.GNN.forward`). Those two extra
node tables are computed here, part by part, straight from a partition folder in DGL's
layout, and written next to DGL's files without touching them:

* ``part<i>/grappa/agg.npy``: float32 [inner nodes, F], the in-neighbour mean (0 without
  in-neighbours), in the part's inner-node order (= node data order);
* ``part<i>/grappa/in_degree.npy``: int64 [inner nodes], the full-graph in-degree;
* ``part<i>/grappa/remote_owners.npy``: int32 [inner nodes], how many other parts own one of
  the node's in-neighbours (the partial-sum rows its aggregate needs from elsewhere);
* ``part<i>/grappa/gcn.npy`` (``gcn=True``): float32 [inner nodes, F], the symmetrically
  normalised sum  sum_u x_u / sqrt(d_out(u) d_in(v))  with full-graph degrees (at least 1),
  which is what DGL's ``GraphConv(norm='both')`` computes over v's whole in-neighbourhood;
* ``grappa_prepare.json``: what was computed, from which files (sizes and mtimes), and
  the bytes a cluster would move to compute it.

:func:`prepare` never holds the whole graph: part p's aggregates need the feature rows of
its inner nodes' in-neighbours, which DGL's 1-hop layout lists in part p's own graph file
(every in-edge of an inner node is in its part); the rows are read from their owners'
``node_feat.dgl`` one owner at a time. Memory: part p's in-edges, its aggregate table and
one owner's feature table. In a cluster each owner q would send part p one partial sum per
(inner node of p, q) pair instead of raw rows; ``remote_pairs`` counts those rows.

Example:
    >>> info = prepare("runs/x/partitions/0/grappa.json")      # doctest: +SKIP
    >>> info["parts"][0]["rows"], info["parts"][0]["width"]    # doctest: +SKIP
    (677, 1433)
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import dgl
import numpy as np
import torch
from torch import Tensor

from ..config import ConfigError
from .layout import read_node_tensors, read_part_structure, undone_on_write_failure

log = logging.getLogger("dgl_grappa")

PREPARE_FILE = "grappa_prepare.json"
PREPARE_VERSION = 1
SIDECAR_DIR = "grappa"
AGG_FILE = "agg.npy"
DEGREE_FILE = "in_degree.npy"
OWNERS_FILE = "remote_owners.npy"


def neighbour_mean(g: dgl.DGLGraph, x: Tensor) -> Tensor:
    """Per node, the mean of its in-neighbours' rows of ``x`` (0 for a node without in-neighbours).

    The whole-graph form of what :func:`prepare` computes part by part (tests compare the two).
    """
    src, dst = g.edges()
    deg = torch.bincount(dst, minlength=g.num_nodes()).to(x.dtype).clamp(min=1)
    total = torch.zeros_like(x).index_add_(0, dst, x[src])
    return total / deg.unsqueeze(1)


SIDECARS = {"agg": AGG_FILE, "in_degree": DEGREE_FILE, "remote_owners": OWNERS_FILE}
GCN_FILE = "gcn.npy"
ALL_SIDECARS = {**SIDECARS, "gcn": GCN_FILE}


def sidecar_path(part_config: str | Path, part_id: int, what: str = "agg") -> Path:
    """The file of part ``part_id``'s table ``what`` (agg, in_degree or remote_owners)."""
    meta = _read_meta(Path(part_config))
    return _part_dir(Path(part_config), meta, part_id) / SIDECAR_DIR / ALL_SIDECARS[what]


def read_prepared(part_config: str | Path) -> dict | None:
    """The folder's prepare record when it is current (its input files unchanged, its outputs there), else None."""
    part_config = Path(part_config)
    rec_path = part_config.parent / PREPARE_FILE
    if not rec_path.is_file():
        return None
    try:
        rec = json.loads(rec_path.read_text())
    except (OSError, ValueError):
        return None
    if rec.get("version") != PREPARE_VERSION or rec.get("part_config") != part_config.name:
        return None
    base = part_config.parent
    if _inputs(part_config) != rec.get("inputs"):
        return None
    for part in rec.get("parts", []):
        for key in (k for k in ALL_SIDECARS if k in part):
            f = base / part[key][0]
            if not f.is_file() or f.stat().st_size != part[key][1]:
                return None
    return rec


AUTO_KEY = "auto"
"""``feat_key="auto"``: the features are the graph's one 2-D floating-point node tensor (DGL's examples name
it ``features``, the package ``feat``)."""


def feature_key(tensors: dict, feat_key: str | None, where: str, how: str = "feat_key=") -> str | None:
    """The node-data key of the features among ``tensors``: ``feat_key`` itself, or with "auto" the one 2-D
    floating-point tensor (None when there is none: a featureless graph).

    Args:
        tensors: node data by key (tensors, or anything with ``shape`` and ``dtype``: a DistGraph's ``ndata``).
        feat_key: a key, "auto", or None (no features).
        where: what holds them, for the error (e.g. "the DistGraph").
        how: how the caller names the key, for the error (``feat_key=`` or ``--feat-key ``).

    Raises:
        ConfigError: the key is absent, or "auto" finds more than one candidate; the message lists the keys.

    Example:
        >>> feature_key({"features": torch.zeros(3, 4), "labels": torch.zeros(3)}, "auto", "g")
        'features'
    """
    if feat_key is None:
        return None
    floats = sorted(k for k, t in tensors.items() if len(t.shape) == 2 and t.dtype.is_floating_point)
    if feat_key != AUTO_KEY:
        if feat_key not in tensors:
            hint = f"{how}{floats[0]!r}" if len(floats) == 1 else f"{how}<the features' key>"
            raise ConfigError(f"{where} has no node data {feat_key!r} (its node data: {sorted(tensors)}); pass {hint}")
        return feat_key
    if len(floats) > 1:
        raise ConfigError(
            f"{where} has {len(floats)} 2-D float node tensors {floats}: say which are the features, {how}<one of them>"
        )
    return floats[0] if floats else None


def prepare(part_config: str | Path, feat_key: str = AUTO_KEY, *, gcn: bool = False, force: bool = False) -> dict:
    """Write the first-hop aggregates and full-graph in-degrees of every part of a DGL partition folder.

    A second call on an unchanged folder does nothing and returns the same record. Every
    file is written to a temporary name and renamed, the record last, so an interrupted
    run leaves either the previous state or nothing of its own.

    Args:
        part_config: the folder's partition json (DGL's ``<graph>.json``), or the folder.
        feat_key: the node data key of the features; "auto": the one 2-D float node tensor (DGL's examples'
            ``features``, the package's ``feat``), see :func:`feature_key`.
        gcn: also the ``GraphConv(norm='both')`` aggregate (``gcn.npy``; one more pass over
            the parts' structure for the full-graph out-degrees).
        force: recompute even when the record says the outputs are current.

    Returns:
        The record written to ``grappa_prepare.json``: per part its rows, width, in-edges,
        ``remote_pairs`` (partial-sum rows a cluster moves to compute it) and ``remote_rows``
        (distinct in-neighbours owned elsewhere), file paths and sizes.

    Raises:
        ConfigError: not a homogeneous partition folder in DGL's layout, files missing, the
            feature key absent, or the folder not writable.
    """
    part_config = _locate(Path(part_config))
    rec = None if force else read_prepared(part_config)
    if rec is not None and feat_key in (AUTO_KEY, rec.get("feat_key")) and (rec.get("gcn") or not gcn):
        return rec
    meta = _read_meta(part_config)
    base = part_config.parent
    num_parts = int(meta["num_parts"])
    for p in range(num_parts):
        d = _part_dir(part_config, meta, p)
        # The mode bits too: root may write anywhere, but a folder made read-only says "leave me".
        if any(not os.access(f, os.W_OK) or not f.stat().st_mode & 0o222 for f in (d, base)):
            raise ConfigError(
                f"cannot write the aggregates next to {d}: the folder is read-only; copy the partition "
                "folder somewhere writable, or make it writable"
            )
    t0 = time.perf_counter()
    bounds = _node_bounds(meta)
    feat_files = [_feat_file(part_config, meta, q) for q in range(num_parts)]
    feat_key = _resolve_key(feat_files[0], feat_key, meta)
    out_degree = _out_degrees(part_config, num_parts) if gcn else None
    parts = []
    with undone_on_write_failure(
        base,
        f"preparing {part_config}",
        "free space, or copy the partition folder somewhere with room and prepare it there",
    ):
        for p in range(num_parts):
            parts.append(_prepare_part(part_config, meta, p, bounds, feat_files, feat_key, out_degree))
        rec = {
            "version": PREPARE_VERSION,
            "part_config": part_config.name,
            "feat_key": feat_key,
            "gcn": gcn,
            "num_parts": num_parts,
            "seconds": time.perf_counter() - t0,
            "inputs": _inputs(part_config),
            "parts": [
                {**r, **{k: [str(r[k].relative_to(base)), r[k].stat().st_size] for k in ALL_SIDECARS if k in r}}
                for r in parts
            ],
        }
        _atomic_write_bytes(base / PREPARE_FILE, json.dumps(rec, indent=1).encode())
    log.info("first-hop aggregates of %d parts written in %.1f s", num_parts, rec["seconds"])
    return rec


# ---------------------------------------------------------------------------------------


def _locate(p: Path) -> Path:
    if p.is_dir():
        jsons = [f for f in sorted(p.glob("*.json")) if _looks_like_part_config(f)]
        if not jsons:
            raise ConfigError(
                f"{p} holds no partition json (DGL's <graph>.json with node_map); give a folder "
                "written by dgl.distributed.partition_graph"
            )
        return jsons[0]
    if not p.is_file():
        raise ConfigError(f"{p} does not exist; give a partition folder in DGL's layout or its json")
    return p


def _looks_like_part_config(f: Path) -> bool:
    try:
        meta = json.loads(f.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and "node_map" in meta and "num_parts" in meta


def _read_meta(part_config: Path) -> dict:
    try:
        meta = json.loads(part_config.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{part_config} is not a readable partition json ({exc}); give DGL's <graph>.json") from None
    if not isinstance(meta, dict) or "node_map" not in meta or "num_parts" not in meta:
        raise ConfigError(f"{part_config} is not a partition json in DGL's layout (no node_map / num_parts)")
    nm = meta["node_map"]
    if isinstance(nm, dict) and len(nm) != 1:
        raise ConfigError(
            f"{part_config} partitions a heterogeneous graph ({len(nm)} node types); first-hop "
            "aggregates are computed for homogeneous graphs only"
        )
    return meta


def _node_bounds(meta: dict) -> np.ndarray:
    """First global id of every part, and the end: [P + 1]."""
    nm = meta["node_map"]["_N"] if isinstance(meta["node_map"], dict) else meta["node_map"]
    lo = [int(a) for a, _ in nm]
    return np.array(lo + [int(nm[-1][1])], dtype=np.int64)


def _part_dir(part_config: Path, meta: dict, p: int) -> Path:
    return _file(part_config, meta, p, "part_graph").parent


def _file(part_config: Path, meta: dict, p: int, key: str) -> Path:
    try:
        f = Path(meta[f"part-{p}"][key])
    except KeyError:
        raise ConfigError(f"{part_config} has no part-{p} {key} entry; not DGL's partition layout") from None
    f = f if f.is_absolute() else part_config.parent / f
    if not f.is_file():
        raise ConfigError(f"{f} is missing: the partition folder is incomplete; re-create or re-copy it")
    return f


def _feat_file(part_config: Path, meta: dict, p: int) -> Path:
    return _file(part_config, meta, p, "node_feats")


def _inputs(part_config: Path) -> dict:
    meta = json.loads(part_config.read_text())
    out = {}
    for p in range(int(meta["num_parts"])):
        for key in ("part_graph", "node_feats"):
            f = Path(meta[f"part-{p}"][key])
            f = f if f.is_absolute() else part_config.parent / f
            st = f.stat() if f.is_file() else None
            out[f"part-{p}/{key}"] = [st.st_size, st.st_mtime_ns] if st else None
    return out


def _resolve_key(feat_file: Path, feat_key: str, meta: dict) -> str:
    """The features' key in part 0's node data (``feat_key``, or the one "auto" finds)."""
    tensors = {k.split("/", 1)[-1]: v for k, v in read_node_tensors(feat_file, meta, 0).items()}
    key = feature_key(tensors, feat_key, str(feat_file), "--feat-key ")
    if key is None:
        raise ConfigError(
            f"{feat_file} has no 2-D float node tensor to aggregate (its node data: {sorted(tensors)}): "
            "a featureless graph has no first hop to prepare; train it with learnable rows "
            "(the drop-in's first_hop='sampled')"
        )
    return key


def _node_table(feat_file: Path, key: str, meta: dict, p: int) -> Tensor:
    """Part ``p``'s node table ``key``, its file checked (truncated, corrupt, rows) and its values finite."""
    tensors = read_node_tensors(feat_file, meta, p)
    for k, v in tensors.items():
        if k == key or k.split("/", 1)[-1] == key:
            bad = int((~torch.isfinite(v)).sum()) if v.is_floating_point() else 0
            if bad:
                raise ConfigError(
                    f"{feat_file}: node data {key!r} holds {bad} values that are not finite (inf or "
                    "NaN), which would spread into every neighbour's aggregate; replace them "
                    "(e.g. torch.nan_to_num) and write the partition again"
                )
            return v
    raise ConfigError(
        f"{feat_file} has no node data {key!r} (it has {sorted(tensors)}); pass --feat-key <the features' key>"
    )


def _out_degrees(part_config: Path, num_parts: int) -> Tensor:
    """Full-graph out-degree of every node: the parts' in-edges of their inner nodes are every edge once."""
    out = None
    for p in range(num_parts):
        st = read_part_structure(part_config, p, in_edges_of_inner=True)
        gsrc = st["global_ids"][st["indices"].to(torch.int64)]
        if out is None:
            out = torch.zeros(int(_node_bounds(_read_meta(part_config))[-1]), dtype=torch.int64)
        out += torch.bincount(gsrc, minlength=out.numel())
    return out


def _prepare_part(
    part_config: Path,
    meta: dict,
    p: int,
    bounds: np.ndarray,
    feat_files: list[Path],
    feat_key: str,
    out_degree: Tensor | None = None,
) -> dict:
    st = read_part_structure(part_config, p, in_edges_of_inner=True)
    n_inner = st["num_inner"]
    indptr, indices = st["indptr"], st["indices"].to(torch.int64)
    in_degree = (indptr[1:] - indptr[:-1]).to(torch.int64)
    dst = torch.repeat_interleave(torch.arange(n_inner), in_degree)
    gsrc = st["global_ids"][indices]
    del indices
    owner = torch.from_numpy(np.searchsorted(bounds, gsrc.numpy(), side="right") - 1)
    width = None
    total = None
    total_gcn = None  # sum_u x_u / sqrt(d_out(u)), with out_degree
    src_norm = out_degree[gsrc].clamp(min=1).to(torch.float32).rsqrt() if out_degree is not None else None
    remote_pairs = 0
    remote_rows = 0
    owners_of = torch.zeros(n_inner, dtype=torch.int32)  # other owners among each node's in-neighbours
    for q in torch.unique(owner).tolist():
        sel = (owner == q).nonzero(as_tuple=True)[0]
        feat = _node_table(feat_files[q], feat_key, meta, q).float()
        if total is None:
            width = feat.shape[1]
            total = torch.zeros((n_inner, width), dtype=torch.float32)
            if src_norm is not None:
                total_gcn = torch.zeros((n_inner, width), dtype=torch.float32)
        rows = gsrc[sel] - int(bounds[q])
        # chunked, so the gathered rows of one owner stay a bounded buffer
        step = max(1, (64 << 20) // max(4 * width, 1))
        for a in range(0, sel.numel(), step):
            s = sel[a : a + step]
            rows_x = feat.index_select(0, rows[a : a + step])
            total.index_add_(0, dst[s], rows_x)
            if total_gcn is not None:
                total_gcn.index_add_(0, dst[s], rows_x * src_norm[s].unsqueeze(1))
        if q != p:
            fed = torch.unique(dst[sel])
            owners_of[fed] += 1
            remote_pairs += int(fed.numel())
            remote_rows += int(torch.unique(rows).numel())
        del feat
    if total is None:  # no in-edges at all: the width comes from the own features
        width = _node_table(feat_files[p], feat_key, meta, p).shape[1]
        total = torch.zeros((n_inner, width), dtype=torch.float32)
        if src_norm is not None:
            total_gcn = torch.zeros((n_inner, width), dtype=torch.float32)
    agg = total / in_degree.clamp(min=1).to(torch.float32).unsqueeze(1)
    d = _part_dir(part_config, meta, p) / SIDECAR_DIR
    d.mkdir(exist_ok=True)
    paths = {k: d / f for k, f in SIDECARS.items()}
    _atomic_save_npy(paths["agg"], agg.numpy())
    _atomic_save_npy(paths["in_degree"], in_degree.numpy())
    _atomic_save_npy(paths["remote_owners"], owners_of.numpy())
    if total_gcn is not None:
        paths["gcn"] = d / GCN_FILE
        gcn = total_gcn * in_degree.clamp(min=1).to(torch.float32).rsqrt().unsqueeze(1)
        _atomic_save_npy(paths["gcn"], gcn.numpy())
    return {
        "part": p,
        "rows": n_inner,
        "width": int(width),
        "in_edges": int(dst.numel()),
        "remote_pairs": remote_pairs,
        "remote_rows": remote_rows,
        **paths,
    }


def _atomic_save_npy(path: Path, arr: np.ndarray) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.save(f, arr)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def load_sidecar(part_config: str | Path, part_id: int, rows: Tensor | None = None, what: str = "agg") -> Tensor:
    """Part ``part_id``'s table ``what`` (agg, in_degree, remote_owners, gcn): all rows, or the inner rows ``rows``.

    Memory-mapped: only the asked rows are read.

    Raises:
        ConfigError: the folder was not prepared (run ``python -m dgl_grappa prepare``).
    """
    path = sidecar_path(part_config, part_id, what)
    if not path.is_file():
        flag = " --gcn" if what == "gcn" else ""
        raise ConfigError(
            f"partition {part_config} has no first-hop aggregates ({path} is missing); add them with "
            f"`python -m dgl_grappa prepare --part-config {part_config}{flag}`, or use "
            "--train.first_hop=sampled"
        )
    arr = np.load(path, mmap_mode="r")
    return torch.from_numpy(np.array(arr if rows is None else arr[rows.numpy()]))
