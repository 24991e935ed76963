"""DGL's partition layout on disk: its names, files and per-part structure.

A folder in DGL's layout is ``<graph>.json`` + ``part<i>/`` (``graph.dgl``, ``node_feat.dgl``, ...),
as ``dgl.distributed.partition_graph`` writes it; these functions read it without DGL's
loader where memory matters.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import shutil
import tempfile
from pathlib import Path

import dgl
import numpy as np
import torch
from torch import Tensor

from ..config import ConfigError

log = logging.getLogger("dgl_grappa")


GRAPH_NAME = "grappa"
HOMOGENEOUS = "_N"  # the node type of a homogeneous graph in DGL's layout (node_map's key, a DistGraph's node data)
STATS_FILE = "grappa_partition.json"
# Node data written into every partition; "in_degree" is the full-graph in-degree, which a
# worker cannot count from its own edges for halo nodes.
NODE_KEYS = ("feat", "label", "train_mask", "val_mask", "test_mask", "in_degree")
# The first-hop aggregates (train.first_hop=exact) are not node data: they sit in files of their
# own next to DGL's (partition/aggregates.py), so DistDGL servers do not load them.
# Bumped when the files ``partition`` writes change (2: the ``agg`` node data; 3: the aggregates
# moved to their own files), so cached partitionings of an older layout are not reused.
LAYOUT_VERSION = 3


def part_config_path(out_dir: str | Path) -> Path:
    """The ``<graph>.json`` that DGL's loaders take, inside a partition folder."""
    return Path(out_dir) / f"{GRAPH_NAME}.json"


def read_stats(out_dir: str | Path) -> dict | None:
    """The statistics ``partition`` wrote into out_dir, or None when there are none."""
    f = Path(out_dir) / STATS_FILE
    if not f.is_file() or not part_config_path(out_dir).is_file():
        return None
    return json.loads(f.read_text())


def part_edges(pg: dgl.DGLGraph) -> tuple[Tensor, Tensor]:
    # A DistDGL server's shared-memory partition may allow CSC only; derive (src, dst) from it then.
    formats = pg.formats()
    if "coo" in formats["created"] or "coo" in formats.get("not created", []):
        return pg.edges()
    indptr, indices, _ = pg.adj_tensors("csc")
    dst = torch.repeat_interleave(torch.arange(indptr.numel() - 1), indptr[1:] - indptr[:-1])
    return indices, dst


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


def node_map(meta: dict) -> list[tuple[int, int]]:
    nm = meta["node_map"]["_N"] if isinstance(meta["node_map"], dict) else meta["node_map"]
    return [(int(lo), int(hi)) for lo, hi in nm]


ORIG_IDS_FILE = "orig_ids.npy"
"""Beside the partition json (written by ``partition``): the original id of every global (shuffled) id."""


def to_original_order(rows: Tensor, part_config: str | Path) -> Tensor:
    """Rows indexed by the partitioning's global (shuffled) ids, reordered to the graph's own node ids.

    Args:
        rows: [num_nodes, ...], row i for global id i.
        part_config: the partitioning's json; its folder holds ``orig_ids.npy``.

    Raises:
        ConfigError: the folder has no ``orig_ids.npy`` (not written by ``python -m dgl_grappa partition``).

    Example:
        >>> to_original_order(torch.tensor([[1.], [2.]]), "runs/x/partitions/0/grappa.json")   # doctest: +SKIP
        tensor([[2.], [1.]])
    """
    return reorder(rows, Path(part_config).parent / ORIG_IDS_FILE)


def reorder(rows: Tensor, orig_ids_file: Path) -> Tensor:
    """Rows indexed by shuffled ids, put in the original order that ``orig_ids_file`` (shuffled id -> original
    id, as ``partition_graph(return_mapping=True)`` gives it) names.

    Raises:
        ConfigError: the file is missing (a folder not written by ``python -m dgl_grappa partition``).
    """
    if not orig_ids_file.is_file():
        raise ConfigError(
            f"{orig_ids_file} is missing: the rows cannot be put back in the graph's node order; "
            "partition with `python -m dgl_grappa partition` (it writes the original ids)"
        )
    orig = torch.from_numpy(np.load(orig_ids_file)).to(torch.int64)
    out = torch.empty_like(rows)
    out[orig] = rows
    return out


def part_paths(part_config: str | Path, part_id: int) -> tuple[dict, Path, Path]:
    part_config = Path(part_config)
    meta = json.loads(part_config.read_text())
    files = meta[f"part-{part_id}"]
    base = part_config.parent
    graph_file, feat_file = Path(files["part_graph"]), Path(files["node_feats"])
    return (
        meta,
        (graph_file if graph_file.is_absolute() else base / graph_file),
        (feat_file if feat_file.is_absolute() else base / feat_file),
    )


def read_part_structure(
    part_config: str | Path, part_id: int, halo: str = "drop", *, in_edges_of_inner: bool = False
) -> dict:
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
    meta, graph_file, _ = part_paths(part_config, part_id)
    pg = dgl.load_graphs(str(graph_file))[0][0]
    inner = pg.ndata["inner_node"].bool()
    num_inner = int(inner.sum())
    if not bool(inner[:num_inner].all()):
        raise RuntimeError("unexpected partition layout: inner nodes are not first")
    gids = pg.ndata[dgl.NID].to(torch.int64)
    owner = pg.ndata["part_id"].to(torch.int64) if "part_id" in pg.ndata else torch.full_like(gids, part_id)
    n_all = pg.num_nodes()
    src, dst = part_edges(pg)
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
    return {
        "indptr": indptr,
        "indices": indices,
        "num_nodes": n,
        "num_inner": num_inner,
        "global_ids": gids,
        "owner": owner,
        "edge_order_sorted": is_sorted,
        "num_parts": len(node_map(meta)),
    }


def _dgl_file_bytes(tensors: dict) -> int:
    """The size ``dgl.data.utils.save_tensors`` gives a file of these tensors (names, dtypes, shapes).

    The format's overhead depends on the names, dtypes and dimensions only, so it is measured on
    one-element stand-ins of the same kinds and added to the tensors' own bytes.
    """
    small = {k: torch.zeros((1,) * v.dim(), dtype=v.dtype) for k, v in tensors.items()}
    with tempfile.TemporaryDirectory(prefix="dgl_grappa-size-") as d:
        dgl.data.utils.save_tensors(str(Path(d) / "t.dgl"), small)
        overhead = (Path(d) / "t.dgl").stat().st_size - sum(v.element_size() for v in small.values())
    return overhead + sum(v.numel() * v.element_size() for v in tensors.values())


def part_node_counts(meta: dict, part_id: int) -> dict[str, int]:
    """Nodes of each type that part ``part_id`` owns, from the partition json's ``node_map``.

    Example:
        >>> part_node_counts({"node_map": {"_N": [[0, 150], [150, 300]]}}, 1)
        {'_N': 150}
    """
    nm = meta["node_map"]
    nm = nm if isinstance(nm, dict) else {"_N": nm}
    return {ntype: int(ranges[part_id][1]) - int(ranges[part_id][0]) for ntype, ranges in nm.items()}


def read_node_tensors(feat_file: str | Path, meta: dict | None = None, part_id: int | None = None) -> dict:
    """A part's ``node_feat.dgl`` (keys as DGL writes them, ``<ntype>/<name>``), checked before any use.

    DGL's reader takes a truncated file silently (the missing rows come back as zeros or
    garbage) or fails deep inside its C code; here the file must be exactly as long as its
    tensors, and, given the partition json, every tensor must have a row per node the part owns.

    Args:
        feat_file: the part's node data file.
        meta: the partition json's content (optional): its ``node_map`` gives the rows.
        part_id: the part the file belongs to (with ``meta``).

    Raises:
        ConfigError: one line naming the file: unreadable, truncated or padded, or rows that
            disagree with the partition json.

    Example:
        >>> d = tempfile.mkdtemp(); f = f"{d}/node_feat.dgl"
        >>> _ = dgl.data.utils.save_tensors(f, {"_N/feat": torch.zeros(3, 2)})
        >>> read_node_tensors(f, {"node_map": {"_N": [[0, 3]]}}, 0)["_N/feat"].shape
        torch.Size([3, 2])
    """
    feat_file = Path(feat_file)
    fix = "re-create the partition folder (or copy it again)"
    try:
        tensors = dict(dgl.data.utils.load_tensors(str(feat_file)))
    except Exception as exc:  # noqa: BLE001 - DGL fails on a broken file with AttributeError, DGLError, ...
        raise ConfigError(
            f"{feat_file} cannot be read by DGL ({type(exc).__name__}): the file is truncated or corrupt; {fix}"
        ) from None
    size, want = feat_file.stat().st_size, _dgl_file_bytes(tensors)
    if size != want:
        raise ConfigError(
            f"{feat_file} is {size} bytes but the tensors it declares take {want}: the file is "
            f"truncated or corrupt; {fix}"
        )
    if meta is not None and part_id is not None:
        counts = part_node_counts(meta, part_id)
        for key, t in tensors.items():
            ntype = key.split("/", 1)[0] if "/" in key else "_N"
            rows = counts.get(ntype)
            if rows is not None and t.dim() > 0 and t.shape[0] != rows:
                raise ConfigError(
                    f"{feat_file}: node data {key!r} has {t.shape[0]} rows but the partition json "
                    f"gives part {part_id} {rows} {ntype} nodes; {fix}"
                )
    return tensors


class WriteFailed(ConfigError):
    """A write into a folder failed (disk full, ...) and what it wrote was removed; ``why`` says how it failed."""

    def __init__(self, msg: str, why: str):
        super().__init__(msg)
        self.why = why


def _write_failure(exc: BaseException, folder: Path) -> str | None:
    """Why writing into ``folder`` failed, when ``exc`` is a failed write (else None): "the disk is full", ..."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return "the disk is full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else (exc.strerror or str(exc)).lower()
    if isinstance(exc, dgl.DGLError) and "Write incomplete" in str(exc):  # DGL's C++ writer, errno lost
        try:
            full = shutil.disk_usage(folder).free < (1 << 20)
        except OSError:
            full = False
        return "the disk is full" if full else "a write was incomplete"
    return None


@contextlib.contextmanager
def undone_on_write_failure(folder: str | Path, what: str, fix: str, other_fix: str = ""):
    """Run a block that writes into ``folder``; if a write fails (disk full, ...) remove what it wrote and raise
    a one-line :class:`WriteFailed` (a ConfigError).

    Files and folders that were there before are kept (one that the block rewrote in place cannot be
    put back: the partitioning is rebuilt next time, as a broken one is); everything new goes, temporary
    files included.

    Args:
        folder: where the block writes.
        what: the work, for the message ("partitioning into runs/x/partitions/0").
        fix: the advice for a full disk, e.g. "free space or set --partition.out_dir=<a folder with room>".
        other_fix: the advice for any other failed write (read-only, not permitted); default: ``fix``.

    Example:
        >>> with undone_on_write_failure(tempfile.mkdtemp(), "writing the parts", "free space"):
        ...     pass
    """
    folder = Path(folder)
    existed = folder.exists()
    before = set(folder.rglob("*")) if existed else set()
    try:
        yield
    except (OSError, dgl.DGLError, WriteFailed) as exc:
        # a nested block's failure (already cleaned up there) is this block's too
        why = exc.why if isinstance(exc, WriteFailed) else _write_failure(exc, folder)
        if why is None:
            raise
        if not existed:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            for p in sorted(set(folder.rglob("*")) - before, key=lambda q: len(q.parts), reverse=True):
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
        advice = fix if why == "the disk is full" or not other_fix else other_fix
        raise WriteFailed(f"{what} failed: {why}; what it had written was removed; {advice}", why) from None
