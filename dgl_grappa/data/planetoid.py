"""Cora and CiteSeer through DGL's own citation-graph loaders, strictly offline.

DGL's ``CoraGraphDataset`` / ``CiteseerGraphDataset`` look for their raw files in
``<raw_dir>/<name>_<sha1(url)[:8]>/ind.<name>.*`` where ``<name>`` is ``cora_v2`` for Cora
(DGL renamed it) and ``citeseer`` for CiteSeer, and ``url`` is DGL's download URL (which
itself depends on the ``DGL_REPO`` environment variable). If that folder is missing DGL
downloads a zip; if it exists DGL never touches the network. DGL also writes its processed
cache (``<name>_dgl_graph.bin`` / ``.pkl``) into that same folder.

So we build exactly that folder under a cache directory *outside* the repository, fill it
with symlinks to the user's original ``ind.<dataset>.*`` files in ``data.root`` (never a
copy), and hand DGL the parent as ``raw_dir``. The cache folder is keyed by the resolved
root path, and a stamp of the source files' sizes and mtimes forces DGL to re-process when
the files change, so DGL's processed cache can never serve data from another root.

When ``data.root`` (by default the user's cache, ``~/.cache/dgl_grappa``) holds none of the files, nor
its ``planetoid/raw`` folder, nor ``$DGL_GRAPPA_PLANETOID``, they are downloaded once into
``<data.root>/planetoid/raw`` and checked against known checksums (:mod:`dgl_grappa.data.fetch`); DGL
itself still never goes online.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path

import dgl
from dgl.data import CiteseerGraphDataset, CoraGraphDataset
from dgl.data.citation_graph import CitationGraphDataset
from dgl.data.utils import _get_dgl_url

from ..config import ConfigError, cache_root, default_data_root
from ..env import ENV_PLANETOID
from .common import make_graph
from .fetch import SUFFIXES as PLANETOID_SUFFIXES
from .fetch import fetch_planetoid

# dataset -> (DGL class, the name DGL uses in folder and file names)
_DGL_CLASSES = {
    "cora": (CoraGraphDataset, "cora_v2"),
    "citeseer": (CiteseerGraphDataset, "citeseer"),
}


def download_dir(root: str | os.PathLike | None = None) -> Path:
    """Where the Planetoid files are downloaded when no folder has them: ``<root>/planetoid/raw``.

    Args:
        root: ``data.root``; None for its default (:func:`~dgl_grappa.config.default_data_root`).
    """
    return Path(root if root is not None else default_data_root()).expanduser() / "planetoid" / "raw"


def _find_root(name: str, root: Path) -> Path | None:
    """The first folder holding any of the dataset's files: ``root``, its ``planetoid/raw``, then
    ``$DGL_GRAPPA_PLANETOID``; None when none does."""
    env = os.environ.get(ENV_PLANETOID)
    for folder in (root, download_dir(root), Path(env).expanduser() if env else None):
        if folder is not None and _has_any(name, folder):
            return folder
    return None


def _has_any(name: str, root: Path) -> bool:
    """Whether ``root`` holds at least one of the dataset's files (original or DGL's names)."""
    stems = dict.fromkeys((name, _DGL_CLASSES[name][1]))
    return root.is_dir() and any((root / f"ind.{stem}.{s}").is_file() for stem in stems for s in PLANETOID_SUFFIXES)


def _source_files(name: str, root: Path) -> dict[str, Path]:
    """Map each Planetoid suffix to its file in ``root``; ConfigError if any is missing.

    Both the original names (``ind.cora.x``) and DGL's (``ind.cora_v2.x``) are accepted.
    """
    dgl_name = _DGL_CLASSES[name][1]
    found: dict[str, Path] = {}
    missing: list[str] = []
    for suffix in PLANETOID_SUFFIXES:
        for stem in dict.fromkeys((name, dgl_name)):
            p = root / f"ind.{stem}.{suffix}"
            if p.is_file():
                found[suffix] = p.resolve()
                break
        else:
            missing.append(f"ind.{name}.{suffix}")
    if missing:
        raise ConfigError(
            f"data.root='{root}' lacks {len(missing)} of the {len(PLANETOID_SUFFIXES)} {name} files "
            f"(missing: {', '.join(missing)}); put all ind.{name}.{{{','.join(PLANETOID_SUFFIXES)}}} "
            f"there or set --data.root to the folder that has them"
        )
    return found


def _dgl_folder_name(name: str) -> str:
    """The raw/processed folder name DGL derives for ``name`` (``<name>_<sha1(url)[:8]>``)."""
    dgl_name = _DGL_CLASSES[name][1]
    # Same recipe as DGLDataset._get_hash_url_suffix; the URL honours $DGL_REPO, so the
    # suffix must be computed at load time, not hard-coded.
    url = _get_dgl_url(CitationGraphDataset._urls[dgl_name])
    return f"{dgl_name}_{hashlib.sha1(str(url).encode('utf-8')).hexdigest()[:8]}"


def planetoid_cache_dir(name: str, root: str | os.PathLike) -> Path:
    """Cache folder (``raw_dir`` for DGL) used for dataset ``name`` read from ``root``.

    Args:
        name: ``cora`` or ``citeseer``.
        root: folder with the original ``ind.<name>.*`` files.

    Returns:
        ``<cache_root>/planetoid/<name>-<sha1(resolved root)[:16]>``; distinct roots get
        distinct folders, so one root's processed cache is never read for another.
    """
    resolved = str(Path(root).expanduser().resolve())
    key = hashlib.sha1(resolved.encode("utf-8")).hexdigest()[:16]
    return cache_root() / "planetoid" / f"{name}-{key}"


def _link(target: Path, link: Path) -> None:
    """Make ``link`` a symlink to ``target``, replacing whatever is there atomically."""
    if link.is_symlink() and os.readlink(link) == str(target):
        return
    tmp = link.with_name(f".{link.name}.{os.getpid()}.tmp")
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(target, tmp)
    os.replace(tmp, link)


def _stamp(files: dict[str, Path]) -> str:
    """Fingerprint of the source files (path, size, mtime) to detect changed data."""
    parts = {s: [str(p), p.stat().st_size, p.stat().st_mtime_ns] for s, p in sorted(files.items())}
    return json.dumps(parts, sort_keys=True)


class _OfflineGuard:
    """Mixin that turns any download attempt into an error (defence in depth).

    DGL calls ``download()`` only when its raw folder is missing, which our layout rules
    out; should a future DGL look elsewhere, this fails loudly instead of going online.
    """

    def download(self):  # noqa: D401 - DGL hook
        raise ConfigError(
            f"DGL wanted to download {self.name} into '{self.raw_path}' although dgl_grappa "
            f"prepared its files offline; this DGL version uses another layout: report it"
        )


class _OfflineCora(_OfflineGuard, CoraGraphDataset):
    pass


class _OfflineCiteseer(_OfflineGuard, CiteseerGraphDataset):
    pass


_OFFLINE = {"cora": _OfflineCora, "citeseer": _OfflineCiteseer}


def load_planetoid(name: str, root: str | os.PathLike) -> dgl.DGLGraph:
    """Load Cora or CiteSeer from the original Planetoid files, without network access.

    Args:
        name: ``cora`` or ``citeseer``.
        root: folder with ``ind.<name>.{x,y,tx,ty,allx,ally,graph,test.index}``.

    Returns:
        The standard homogeneous graph (ndata feat, label, train_mask, val_mask,
        test_mask) with DGL's public split (Cora 140/500/1000, CiteSeer 120/500/1000).

    The files are read from the first of ``root``, ``<root>/planetoid/raw`` and ``$DGL_GRAPPA_PLANETOID``
    that holds any of them; when none does, they are downloaded into ``<root>/planetoid/raw`` first (once).

    Raises:
        ConfigError: ``root`` lacks some of the files, or holds none and the download failed.
    """
    if name not in _DGL_CLASSES:
        raise ConfigError(f"data.name={name!r} is not a Planetoid dataset; use cora or citeseer")
    given = Path(root).expanduser()
    root_path = _find_root(name, given)  # a user's incomplete copy is reported, not replaced
    if root_path is None:
        root_path = fetch_planetoid(
            name, download_dir(given), f"{name}: data.root='{given}' holds no Planetoid files and "
        )
    files = _source_files(name, root_path)  # raises before DGL is ever called

    raw_dir = planetoid_cache_dir(name, root_path)
    dgl_dir = raw_dir / _dgl_folder_name(name)
    dgl_name = _DGL_CLASSES[name][1]
    try:
        dgl_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create the dataset cache '{dgl_dir}' ({exc.strerror}); "
            f"set env DGL_GRAPPA_CACHE to a writable folder"
        ) from None

    # Several workers may load the same dataset at once: serialise linking and DGL's
    # process/save so nobody reads a half-written processed cache.
    with open(raw_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for suffix, src in files.items():
            _link(src, dgl_dir / f"ind.{dgl_name}.{suffix}")
        stamp_path = dgl_dir / "dgl_grappa_source.json"
        stamp = _stamp(files)
        fresh = stamp_path.is_file() and stamp_path.read_text() == stamp
        ds = _OFFLINE[name](raw_dir=str(raw_dir), force_reload=not fresh, verbose=False)
        if Path(ds.raw_path) != dgl_dir:  # our layout must be exactly DGL's
            raise RuntimeError(f"DGL read {ds.raw_path}, expected {dgl_dir}")
        if not fresh:
            stamp_path.write_text(stamp)
        g = ds[0]

    nd = g.ndata
    src, dst = g.edges()
    return make_graph(
        src,
        dst,
        g.num_nodes(),
        feat=nd["feat"],
        label=nd["label"],
        train_mask=nd["train_mask"],
        val_mask=nd["val_mask"],
        test_mask=nd["test_mask"],
    )
