"""The OGB node-property graphs by name: ogbn-arxiv, ogbn-products, ogbn-mag, ogbn-papers100M.

These are the graphs DGL's distributed examples train (ogbn-products, ogbn-mag; ogbn-papers100M at
scale). They are read from OGB's own on-disk layout, the folder ``<data.root>/ogbn_<name>/`` that the
``ogb`` package's ``NodePropPredDataset(name, root=data.root)`` writes (``raw/`` and ``split/``), so a
copy made with ``ogb`` serves as it is. When the folder is not there, OGB's archive (``arxiv.zip``, ...)
is downloaded once from OGB's server (``$DGL_GRAPPA_OGB_URL`` replaces the base), with a progress bar on
stderr, and checked before it is unpacked: every member's CRC-32 (``zipfile``), then the graph against
its known size (:data:`KNOWN`: nodes, classes, feature width). OGB publishes no checksum of its
archives, so the archive's SHA-256 is recorded in ``dgl_grappa.json`` in the folder, to compare with
another copy. Offline, the error is one line naming the files to put into which folder.

What each becomes (the package's standard contract, :mod:`dgl_grappa.data`):

* ogbn-arxiv, ogbn-products: a homogeneous graph with ``feat``, ``label`` and the three masks from
  OGB's split; every edge in both directions (OGB's loader adds the reverse edges of products itself;
  DGL's examples add those of the arxiv citations), duplicates removed. Parsed once, then read from
  ``processed/dgl_grappa.bin``.
* ogbn-mag: a heterogeneous graph (authors, fields of study, institutions, papers) with OGB's four
  relations and their reverses ``rev_<name>`` (:data:`~dgl_grappa.config.OGBN_MAG_ETYPES`); ``feat``,
  ``label`` and masks on papers. Trained with ``model.name: rgcn`` and ``model.embed: true``.
* ogbn-papers100M: converted once, streaming, into the big-graph folder of
  :mod:`dgl_grappa.data.bigsynth` (``<folder>/big/``: edge chunks, ``feat.npy`` read memory-mapped, never
  loaded whole; unlabelled nodes in no split), which :mod:`dgl_grappa.partition.bigpart` cuts into DGL's
  layout for ``partition.prebuilt``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

import dgl
import numpy as np
import torch

from ..config import OGBN_MAG_ETYPES, ConfigError
from ..env import ENV_OGB_URL
from .bigsynth import FORMAT as BIG_FORMAT
from .bigsynth import META as BIG_META
from .bigsynth import BigGraph, _write_npy_header
from .common import make_graph
from .fetch import lock_folder

OGB_URL = "http://snap.stanford.edu/ogb/data/nodeproppred"
"""Where OGB's archives are fetched from (``<base>/arxiv.zip``, ...), unless ``$DGL_GRAPPA_OGB_URL``."""
TIMEOUT_S = 60.0
"""Seconds one connection or one read may wait."""
PROCESSED = "dgl_grappa.bin"
"""The parsed graph, in ``<folder>/processed/``: later loads read it instead of the CSV files."""
STAMP = "dgl_grappa.json"
"""What was downloaded (URL, SHA-256 of the archive) and parsed, in the dataset's folder."""
BIG_LOAD_LIMIT = 20_000_000
"""Nodes above which ogbn-papers100M is not loaded whole (it is trained from its partitions)."""


@dataclass(frozen=True)
class OgbInfo:
    """One OGB node-property dataset: its archive, folder, layout and known size (OGB's ``master.csv``)."""

    archive: str
    """The archive's name on OGB's server, without ``.zip``; its top folder has the same name."""
    nodes: int
    """Nodes (ogbn-mag: papers, the labelled type)."""
    classes: int
    width: int
    """Feature width."""
    split: str
    """The folder of OGB's standard split, ``split/<split>/``."""
    layout: str
    """``csv`` (homogeneous CSV files), ``hetero`` (per type and relation) or ``binary`` (``data.npz``)."""

    def folder(self, name: str) -> str:
        """The dataset's folder name under ``data.root``, as OGB names it (``ogbn_arxiv``)."""
        return name.replace("-", "_")

    def required(self) -> list[str]:
        """The files OGB's layout must hold (paths inside the dataset's folder)."""
        split = f"split/{self.split}/" + ("paper/" if self.layout == "hetero" else "")
        files = {
            "csv": ["raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/node-label.csv.gz", "raw/num-node-list.csv.gz"],
            "hetero": [
                "raw/num-node-dict.csv.gz",
                "raw/triplet-type-list.csv.gz",
                "raw/node-feat/paper/node-feat.csv.gz",
                "raw/node-label/paper/node-label.csv.gz",
            ],
            "binary": ["raw/data.npz", "raw/node-label.npz"],
        }[self.layout]
        return files + [f"{split}{k}.csv.gz" for k in ("train", "valid", "test")]


KNOWN = {
    "ogbn-arxiv": OgbInfo("arxiv", 169_343, 40, 128, "time", "csv"),
    "ogbn-products": OgbInfo("products", 2_449_029, 47, 100, "sales_ranking", "csv"),
    "ogbn-mag": OgbInfo("mag", 736_389, 349, 128, "time", "hetero"),
    "ogbn-papers100M": OgbInfo("papers100M-bin", 111_059_956, 172, 128, "time", "binary"),
}
"""Each dataset's archive, layout and size (nodes, classes, feature width), checked after every parse."""


def base_url() -> str:
    """The URL the archives are fetched from: ``$DGL_GRAPPA_OGB_URL``, else :data:`OGB_URL`."""
    return (os.environ.get(ENV_OGB_URL) or OGB_URL).rstrip("/")


def dataset_dir(name: str, root: str | os.PathLike) -> Path:
    """The folder of dataset ``name`` under ``root`` (``data.root``), in OGB's naming.

    Example:
        >>> dataset_dir("ogbn-products", "/data").as_posix()
        '/data/ogbn_products'
    """
    return Path(root).expanduser() / KNOWN[name].folder(name)


def _missing(name: str, folder: Path) -> list[str]:
    return [f for f in KNOWN[name].required() if not (folder / f).is_file()]


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


class _Progress:
    """Bytes received so far, on stderr: tqdm's bar where stderr is a terminal, a line every 10 % otherwise."""

    def __init__(self, total: int | None, label: str):
        self.total, self.label, self.done, self.shown = total, label, 0, -1
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=label, leave=False)

    def update(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.total:
            tenth = 10 * self.done // self.total
            if tenth > self.shown:
                self.shown = tenth
                print(f"[data] {self.label}: {_size(self.done)} of {_size(self.total)}", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _download(url: str, dest: Path, label: str) -> str:
    """Write ``url`` to ``dest``; its SHA-256."""
    h = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp, open(dest, "wb") as out:
        size = resp.headers.get("Content-Length")
        progress = _Progress(int(size) if size and size.isdigit() else None, label)
        try:
            while chunk := resp.read(1 << 20):
                h.update(chunk)
                out.write(chunk)
                progress.update(len(chunk))
        finally:
            progress.close()
    return h.hexdigest()


def fetch_ogb(name: str, root: str | os.PathLike) -> Path:
    """Make ``<root>/ogbn_<name>/`` hold OGB's files of ``name``, downloading and unpacking the archive when
    the folder is not there; the folder.

    Several processes may ask at once: one downloads while the others wait on the root's lock. An archive
    is unpacked into a temporary folder and renamed into place whole, so a folder that is there is complete
    unless a user put an incomplete one there (then its missing files are named, nothing is replaced).

    Raises:
        ConfigError: the download failed (the one line names the folder and the files to put there), the
            archive is damaged (it is deleted), or a folder that is there lacks some of the files.
    """
    info = KNOWN[name]
    root = Path(root).expanduser()
    folder = dataset_dir(name, root)
    files = ", ".join(info.required())
    if folder.is_dir():
        missing = _missing(name, folder)
        if missing:
            raise ConfigError(
                f"{name}: '{folder}' lacks {', '.join(missing)} of OGB's files; complete it (the "
                f"ogb package writes it with NodePropPredDataset('{name}', root='{root}')), or delete "
                "it to download it again"
            )
        return folder
    lock, undo = lock_folder(root, ".ogb.lock")
    url = f"{base_url()}/{info.archive}.zip"
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if folder.is_dir():  # another process unpacked it while this one waited
            return fetch_ogb(name, root)
        part = root / f".{info.archive}.zip.{os.getpid()}.part"
        work = root / f".{info.archive}.{os.getpid()}.unpack"
        try:
            print(f"[data] {name}: downloading {url} into '{root}' (once)", file=sys.stderr)
            t0 = time.monotonic()
            sha = _download(url, part, f"{info.archive}.zip")
            with zipfile.ZipFile(part) as z:
                bad = z.testzip()
                if bad is not None:
                    raise zipfile.BadZipFile(f"member {bad} fails its CRC-32")
                z.extractall(work)
            top = work / info.archive
            if not top.is_dir():
                raise zipfile.BadZipFile(f"it has no {info.archive}/ folder")
            missing = _missing(name, top)
            if missing:
                raise zipfile.BadZipFile(f"it lacks {', '.join(missing)}")
            (top / STAMP).write_text(json.dumps({"url": url, "sha256": sha, "seconds": time.monotonic() - t0}))
            os.replace(top, folder)
        except (OSError, urllib.error.URLError, ValueError, zipfile.BadZipFile) as exc:
            part.unlink(missing_ok=True)
            shutil.rmtree(work, ignore_errors=True)
            undo()  # the disk as the download found it
            damaged = isinstance(exc, zipfile.BadZipFile)
            reason = " ".join(str(getattr(exc, "reason", None) or exc).split())
            if damaged:
                raise ConfigError(
                    f"{name}: the archive {url} is damaged ({reason}; it was deleted); download it "
                    f"again, or unpack OGB's {info.archive}.zip into '{root}' as {folder.name}/"
                ) from None
            raise ConfigError(
                f"{name}: downloading {url} failed ({reason}); put OGB's files ({files}) into "
                f"'{folder}' (unpack {info.archive}.zip there), or set --data.root to a folder that "
                f"holds {folder.name}/"
            ) from None
        finally:
            part.unlink(missing_ok=True)
            shutil.rmtree(work, ignore_errors=True)
    print(f"[data] {name}: unpacked into '{folder}'", file=sys.stderr)
    return folder


def _csv(path: Path, dtype=np.int64) -> np.ndarray:
    import pandas as pd  # a dependency of dgl; imported here, where a CSV is read

    return pd.read_csv(path, compression="gzip", header=None, dtype=dtype).values


def _split(folder: Path, info: OgbInfo, n: int) -> np.ndarray:
    """int8 [n]: 0 train, 1 valid, 2 test, 3 in no split."""
    sub = folder / "split" / info.split / ("paper" if info.layout == "hetero" else "")
    split = np.full(n, 3, dtype=np.int8)
    for code, k in enumerate(("train", "valid", "test")):
        split[_csv(sub / f"{k}.csv.gz").reshape(-1)] = code
    return split


def _check(name: str, folder: Path, nodes: int, classes: int, width: int) -> None:
    info = KNOWN[name]
    got, want = (nodes, classes, width), (info.nodes, info.classes, info.width)
    if got != want:
        raise ConfigError(
            f"{name} in '{folder}' has {nodes} nodes, {classes} classes and {width} features, not "
            f"OGB's {info.nodes}, {info.classes} and {info.width}: these are not OGB's files; delete "
            "the folder to download it again"
        )


def _both_ways(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every edge in both directions, each pair once."""
    key = np.unique(np.concatenate([src * n + dst, dst * n + src]))
    return torch.from_numpy(key // n), torch.from_numpy(key % n)


def _parse_csv(name: str, folder: Path) -> dgl.DGLGraph:
    info = KNOWN[name]
    raw = folder / "raw"
    n = int(_csv(raw / "num-node-list.csv.gz").reshape(-1)[0])
    edges = _csv(raw / "edge.csv.gz")
    feat = _csv(raw / "node-feat.csv.gz", np.float32)
    label = _csv(raw / "node-label.csv.gz", np.float64).reshape(-1)
    label = np.where(np.isnan(label), -1, label).astype(np.int64)
    _check(name, folder, n, int(label.max()) + 1, feat.shape[1])
    split = _split(folder, info, n)
    src, dst = _both_ways(edges[:, 0], edges[:, 1], n)
    return make_graph(
        src,
        dst,
        n,
        feat=torch.from_numpy(feat),
        label=torch.from_numpy(label),
        train_mask=torch.from_numpy(split == 0),
        val_mask=torch.from_numpy(split == 1),
        test_mask=torch.from_numpy(split == 2),
    )


def _parse_hetero(name: str, folder: Path) -> dgl.DGLGraph:
    import pandas as pd

    info = KNOWN[name]
    raw = folder / "raw"
    counts = {t: int(v) for t, v in pd.read_csv(raw / "num-node-dict.csv.gz", compression="gzip").iloc[0].items()}
    data = {}
    for src_t, rel, dst_t in (tuple(r) for r in _csv(raw / "triplet-type-list.csv.gz", str)):
        e = _csv(raw / "relations" / f"{src_t}___{rel}___{dst_t}" / "edge.csv.gz")
        s, d = torch.from_numpy(e[:, 0]), torch.from_numpy(e[:, 1])
        data[(src_t, rel, dst_t)] = (s, d)
        data[(dst_t, f"rev_{rel}", src_t)] = (d, s)
    want = {tuple(e) for e in OGBN_MAG_ETYPES}
    if set(data) != want:
        raise ConfigError(
            f"{name} in '{folder}' has the relations {sorted(data)}, not OGB's; delete the folder to download it again"
        )
    g = dgl.heterograph(data, num_nodes_dict=counts, idtype=torch.int64)
    feat = _csv(raw / "node-feat" / "paper" / "node-feat.csv.gz", np.float32)
    label = _csv(raw / "node-label" / "paper" / "node-label.csv.gz").reshape(-1).copy()
    _check(name, folder, counts["paper"], int(label.max()) + 1, feat.shape[1])
    split = _split(folder, info, counts["paper"])
    paper = g.nodes["paper"].data
    paper["feat"] = torch.from_numpy(feat)
    paper["label"] = torch.from_numpy(label)
    for code, k in enumerate(("train_mask", "val_mask", "test_mask")):
        paper[k] = torch.from_numpy(split == code)
    return g


def _masks_as_bool(g: dgl.DGLGraph) -> dgl.DGLGraph:
    """The split masks as bool again (``dgl.save_graphs`` stores a bool tensor as uint8)."""
    for t in g.ntypes:
        data = g.nodes[t].data
        for k in ("train_mask", "val_mask", "test_mask"):
            if k in data:
                data[k] = data[k].to(torch.bool)
    return g


def load_ogb(name: str, root: str | os.PathLike) -> dgl.DGLGraph:
    """Load an OGB node-property graph by name from ``root`` (``data.root``), downloading it once.

    Args:
        name: ``ogbn-arxiv``, ``ogbn-products``, ``ogbn-mag`` or ``ogbn-papers100M``.
        root: the folder that holds (or gets) ``ogbn_<name>/`` in OGB's layout.

    Returns:
        The standard graph (:mod:`dgl_grappa.data`): homogeneous for arxiv, products and papers100M (this one
        only when small: see :data:`BIG_LOAD_LIMIT`), heterogeneous for mag.

    Raises:
        ConfigError: the files could not be downloaded, are incomplete, or are not OGB's.

    Example:
        >>> g = load_ogb("ogbn-arxiv", "~/.cache/dgl_grappa")      # doctest: +SKIP
        >>> g.num_nodes(), g.ndata["feat"].shape[1]                 # doctest: +SKIP
        (169343, 128)
    """
    if name not in KNOWN:
        raise ConfigError(f"data.name={name!r} is not an OGB node-property graph; use one of {', '.join(KNOWN)}")
    info = KNOWN[name]
    if info.layout == "binary":
        big = ogb_big_graph(name, root)
        if big.num_nodes > BIG_LOAD_LIMIT:
            raise ConfigError(
                f"{name} has {big.num_nodes} nodes, too many to load whole; cut its memory-mapped "
                f"copy '{big.root}' with dgl_grappa.partition.bigpart.write_partitions and train with "
                "--partition.prebuilt=<that folder> (docs/scaling.md)"
            )
        return big.to_dgl()
    folder = fetch_ogb(name, root)
    processed = folder / "processed" / PROCESSED
    if processed.is_file():
        return _masks_as_bool(dgl.load_graphs(str(processed))[0][0])
    print(f"[data] {name}: parsing OGB's files in '{folder}' (once)", file=sys.stderr)
    g = _parse_hetero(name, folder) if info.layout == "hetero" else _parse_csv(name, folder)
    processed.parent.mkdir(exist_ok=True)
    tmp = processed.with_name(f".{PROCESSED}.{os.getpid()}")
    dgl.save_graphs(str(tmp), [g])
    os.replace(tmp, processed)
    return g


def _npz_member(z: zipfile.ZipFile, key: str, fortran_ok: bool = False):
    """An open stream of ``key.npy`` in an npz archive, past its header; (stream, shape, dtype, fortran)."""
    f = z.open(f"{key}.npy")
    version = np.lib.format.read_magic(f)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read(f)
    if fortran and not fortran_ok and len(shape) > 1 and min(shape) > 1:
        raise ConfigError(
            f"{key} in {z.filename} is stored in Fortran order, which cannot be read row by row; "
            "these are not OGB's files: delete the folder to download it again"
        )
    return f, shape, dtype, fortran


def _read_rows(f, count: int, row_items: int, dtype: np.dtype) -> np.ndarray:
    need = count * row_items * dtype.itemsize
    buf = f.read(need)
    if len(buf) != need:
        raise ConfigError(f"{f.name} ends early; the archive is incomplete: delete the folder and download it again")
    return np.frombuffer(buf, dtype=dtype).reshape(count, row_items) if row_items > 1 else np.frombuffer(buf, dtype)


def ogb_big_graph(name: str, root: str | os.PathLike, *, chunk: int = 1 << 24) -> BigGraph:
    """ogbn-papers100M's memory-mapped copy (converted once from OGB's ``raw/data.npz``, streaming): a
    :class:`~dgl_grappa.data.bigsynth.BigGraph` in ``<folder>/big/``.

    The features are copied row block by row block into ``feat.npy`` (float32), which is then read with a
    memory map; the edges are written in chunks, each chunk's files used a second time swapped for the
    reverse edges (no second copy); labels are -1 on nodes without one, which are in no split.

    Example:
        >>> big = ogb_big_graph("ogbn-papers100M", "/data")          # doctest: +SKIP
        >>> big.feat.shape                                           # doctest: +SKIP
        (111059956, 128)
    """
    info = KNOWN[name]
    folder = fetch_ogb(name, root)
    out = folder / "big"
    if (out / BIG_META).is_file():
        return BigGraph(out)
    print(f"[data] {name}: converting OGB's data.npz into the memory-mapped folder '{out}' (once)", file=sys.stderr)
    work = folder / f".big.{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "edges").mkdir(parents=True)
    with zipfile.ZipFile(folder / "raw" / "data.npz") as z:
        f, _, dtype, _ = _npz_member(z, "num_nodes_list")
        n = int(_read_rows(f, 1, 1, dtype)[0])
        f, shape, dtype, _ = _npz_member(z, "node_feat")
        width = int(shape[1])
        with open(work / "feat.npy", "wb") as out_f:
            _write_npy_header(out_f, np.float32, (n, width))
            for a in range(0, n, chunk // max(width, 1)):
                rows = min(chunk // max(width, 1), n - a)
                _read_rows(f, rows, width, dtype).astype(np.float32).tofile(out_f)
        f, (_, e), dtype, pairs = _npz_member(z, "edge_index", fortran_ok=True)
        edtype = np.dtype(np.int32) if n < 2**31 else np.dtype(np.int64)
        names = []
        # [2, E] in C order: every source, then every destination; in Fortran order: (source, destination) pairs
        for row in ("pairs",) if pairs else ("src", "dst"):
            for i, a in enumerate(range(0, e, chunk)):
                part = _read_rows(f, min(chunk, e - a), 2 if pairs else 1, dtype).astype(edtype)
                for side, col in (("src", part[:, 0]), ("dst", part[:, 1])) if pairs else ((row, part),):
                    np.save(work / "edges" / f"{side}_{i:05d}.npy", col)
                if row != "dst":
                    names.append((f"edges/src_{i:05d}.npy", f"edges/dst_{i:05d}.npy", len(part)))
    in_degree = np.zeros(n, dtype=np.int64)
    for s, d, _ in names:  # every edge both ways: each endpoint gains one in-edge
        in_degree += np.bincount(np.load(work / d), minlength=n) + np.bincount(np.load(work / s), minlength=n)
    with zipfile.ZipFile(folder / "raw" / "node-label.npz") as z:
        f, shape, dtype, _ = _npz_member(z, "node_label")
        y = _read_rows(f, int(np.prod(shape)), 1, dtype).astype(np.float64)
    label = np.where(np.isnan(y), -1, y).astype(np.int64)
    classes = int(label.max()) + 1
    _check(name, folder, n, classes, width)
    np.save(work / "label.npy", label)
    np.save(work / "block.npy", label)
    np.save(work / "split.npy", _split(folder, info, n))
    np.save(work / "in_degree.npy", in_degree)
    chunks = [{"src": s, "dst": d, "num_edges": k} for s, d, k in names] + [
        {"src": d, "dst": s, "num_edges": k} for s, d, k in names
    ]
    meta = {
        "format": BIG_FORMAT,
        "num_nodes": n,
        "num_edges": 2 * e,
        "num_pairs": None,
        "feat_dim": width,
        "num_classes": classes,
        "edge_dtype": edtype.name,
        "max_degree": int(in_degree.max()) if n else 0,
        "config": {"source": name},
        "chunks": chunks,
    }
    (work / BIG_META).write_text(json.dumps(meta, indent=1))  # last: a folder without it is incomplete
    os.replace(work, out)
    return BigGraph(out)


__all__ = [
    "BIG_LOAD_LIMIT",
    "KNOWN",
    "OGB_URL",
    "OgbInfo",
    "base_url",
    "dataset_dir",
    "fetch_ogb",
    "load_ogb",
    "ogb_big_graph",
]
