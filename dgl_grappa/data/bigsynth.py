"""The synthetic DC-SBM at scale: generated in chunks, streamed to disk, bounded memory.

:mod:`.synthetic` builds the whole edge list in memory (fine up to ~10M edges). This module
draws the *same model* (power-law degree-corrected SBM, label = block % classes, features
= noisy class means, so 2-3 hops of aggregation matter) for graphs of 100M+ edges, holding
only O(N) node arrays and one chunk of edges at a time:

* edges are drawn in chunks of ``chunk_edges`` with one RNG per chunk (deterministic from
  the seed), canonicalised to undirected pairs ``lo * N + hi`` and appended to ``B`` bucket
  files by ``lo % B``. A pair always lands in the same bucket, so de-duplication is a
  ``np.unique`` per bucket (an external hash partition, no global sort);
* top-up rounds replace pairs lost to self-loops and duplicates, and a seeded random trim
  removes the overshoot, exactly as :func:`.synthetic.generate_sbm` does in memory;
* every bucket becomes one edge chunk holding both directions of its pairs (symmetric, no
  self-loops, no duplicates);
* features are written row-block by row-block straight into ``feat.npy`` (float32,
  readable with ``np.load(mmap_mode="r")``).

Same seed and chunk sizes give byte-identical files. The output is not the same graph as
``generate_sbm`` with the same config (the random streams are split differently); it is the
same distribution.

Folder layout (``meta.json`` is written last; a folder without it is incomplete)::

    meta.json                 sizes, config, edge-chunk list
    edges/src_00000.npy ...   directed edge chunks (int32 ids when N < 2**31, else int64)
    edges/dst_00000.npy ...
    feat.npy                  float32 [N, F]
    label.npy                 int64 [N]
    block.npy                 int64 [N]  planted block
    split.npy                 int8  [N]  0 train, 1 val, 2 test
    in_degree.npy             int64 [N]  full-graph in-degree (= out-degree: symmetric)
"""

from __future__ import annotations

import json
import math
import shutil
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from ..config import Config, ConfigError, DataConfig, SyntheticConfig, validate
from .common import make_graph
from .synthetic import _MAX_TOPUP_ROUNDS, CLASS_MEAN_NORM, _draw_edges, effective_noise

FORMAT = "dgl_grappa.bigsynth/1"
META = "meta.json"

# Independent RNG streams per purpose; a chunk's RNG is default_rng([seed, stream, ...]).
_STREAM_EDGES, _STREAM_FEAT = 1, 2


def _edge_dtype(n: int) -> np.dtype:
    # int32 ids halve the edge files and their I/O whenever they fit.
    return np.dtype(np.int32) if n < 2**31 else np.dtype(np.int64)


def _write_npy_header(fh, dtype: np.dtype, shape: tuple) -> None:
    """Start a .npy file whose data is then appended with ``ndarray.tofile``."""
    np.lib.format.write_array_header_1_0(
        fh,
        {
            "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
            "fortran_order": False,
            "shape": tuple(int(s) for s in shape),
        },
    )


class BigGraph:
    """Read access to a graph written by :func:`generate_big` (nothing is loaded eagerly).

    Args:
        root: the generator's output folder.

    Example:
        >>> g = BigGraph("runs/scale/graph")                         # doctest: +SKIP
        >>> for first_eid, src, dst in g.edge_chunks(): ...          # doctest: +SKIP
        >>> x = g.read_feat_rows(np.array([0, 5, 7]))                 # doctest: +SKIP
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)
        f = self.root / META
        if not f.is_file():
            raise ConfigError(
                f"{self.root} holds no complete generated graph ({META} missing); "
                "run dgl_grappa.data.bigsynth.generate_big first"
            )
        self.meta = json.loads(f.read_text())
        if self.meta.get("format") != FORMAT:
            raise ConfigError(f"{f}: format {self.meta.get('format')!r}, expected {FORMAT!r}")

    @property
    def num_nodes(self) -> int:
        return int(self.meta["num_nodes"])

    @property
    def num_edges(self) -> int:
        """Directed edges (both directions of every undirected pair)."""
        return int(self.meta["num_edges"])

    @property
    def feat_dim(self) -> int:
        return int(self.meta["feat_dim"])

    @property
    def num_classes(self) -> int:
        return int(self.meta["num_classes"])

    def _npy(self, name: str, mmap: bool = False) -> np.ndarray:
        return np.load(self.root / name, mmap_mode="r" if mmap else None)

    @property
    def feat(self) -> np.ndarray:
        """float32 [N, F], memory-mapped read-only (pages count towards RSS once touched;
        :meth:`read_feat_rows` reads without mapping)."""
        return self._npy("feat.npy", mmap=True)

    @property
    def label(self) -> np.ndarray:
        return self._npy("label.npy")

    @property
    def block(self) -> np.ndarray:
        return self._npy("block.npy")

    @property
    def split(self) -> np.ndarray:
        """int8 [N]: 0 train, 1 val, 2 test."""
        return self._npy("split.npy")

    def mask(self, name: str) -> np.ndarray:
        """Boolean mask ``train_mask``, ``val_mask`` or ``test_mask`` (bool [N])."""
        code = {"train_mask": 0, "val_mask": 1, "test_mask": 2}[name]
        return self.split == code

    @property
    def in_degree(self) -> np.ndarray:
        return self._npy("in_degree.npy")

    def edge_chunks(self) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """Yield ``(first_edge_id, src, dst)`` per chunk, ids as int64, in edge-id order.

        The edge ids of the graph are the positions in this concatenation.
        """
        first = 0
        for c in self.meta["chunks"]:
            src = np.load(self.root / c["src"]).astype(np.int64)
            dst = np.load(self.root / c["dst"]).astype(np.int64)
            yield first, src, dst
            first += src.shape[0]

    def read_feat_rows(self, ids: np.ndarray, block_rows: int = 1 << 16) -> np.ndarray:
        """Feature rows ``ids`` (any order, repeats allowed) as a new float32 [len(ids), F].

        Reads the file in row blocks with plain ``read`` calls instead of a memory map, so
        the resident memory is the result plus one block, not the touched part of the file.

        Args:
            ids: int node ids.
            block_rows: rows per read.

        Returns:
            float32 array, row i = feature of node ids[i].
        """
        ids = np.asarray(ids, dtype=np.int64)
        f_dim = self.feat_dim
        out = np.empty((ids.shape[0], f_dim), dtype=np.float32)
        if ids.size == 0:
            return out
        order = np.argsort(ids, kind="stable")
        sid = ids[order]
        path = self.root / "feat.npy"
        with open(path, "rb") as fh:
            np.lib.format.read_magic(fh)
            np.lib.format.read_array_header_1_0(fh)
            base = fh.tell()
            row_bytes = 4 * f_dim
            # Walk the sorted ids block by block; read only the span the block needs.
            i = 0
            while i < sid.shape[0]:
                blk = sid[i] // block_rows
                j = int(np.searchsorted(sid, (blk + 1) * block_rows, side="left"))
                lo, hi = int(sid[i]), int(sid[j - 1]) + 1
                fh.seek(base + lo * row_bytes)
                rows = np.fromfile(fh, dtype=np.float32, count=(hi - lo) * f_dim).reshape(hi - lo, f_dim)
                out[order[i:j]] = rows[sid[i:j] - lo]
                i = j
        return out

    def to_dgl(self):
        """The whole graph as a DGLGraph with the standard ndata (small graphs only).

        Returns:
            A homogeneous int64 DGLGraph (see :func:`dgl_grappa.data.make_graph`); edge id i
            is the i-th edge of :meth:`edge_chunks`.
        """
        chunks = list(self.edge_chunks())
        src = np.concatenate([c[1] for c in chunks])
        dst = np.concatenate([c[2] for c in chunks])
        return make_graph(
            torch.from_numpy(src),
            torch.from_numpy(dst),
            self.num_nodes,
            feat=torch.from_numpy(np.array(self.feat)),
            label=torch.from_numpy(self.label),
            train_mask=torch.from_numpy(self.mask("train_mask")),
            val_mask=torch.from_numpy(self.mask("val_mask")),
            test_mask=torch.from_numpy(self.mask("test_mask")),
        )


def write_arrays(
    out_dir: str | Path,
    src: np.ndarray,
    dst: np.ndarray,
    *,
    feat: np.ndarray,
    label: np.ndarray,
    split: np.ndarray,
    chunk_edges: int = 4_000_000,
) -> BigGraph:
    """Store an in-memory graph in the on-disk format of :func:`generate_big`.

    For graphs that are not generated here (any direction, no symmetry required), so that
    :mod:`dgl_grappa.partition.bigpart` can partition them; the arrays must fit in memory.

    Args:
        out_dir: output folder.
        src, dst: int [E] edges (edge id = position).
        feat: float [N, F] features.
        label: int [N] labels.
        split: int8 [N] 0 train, 1 val, 2 test.
        chunk_edges: edges per chunk file.

    Returns:
        A :class:`BigGraph` over ``out_dir``.

    Example:
        >>> g = write_arrays("/tmp/g", np.array([0, 1]), np.array([1, 2]), feat=np.zeros((3, 4)),
        ...                  label=np.zeros(3, dtype=np.int64), split=np.zeros(3, dtype=np.int8))  # doctest: +SKIP
    """
    out = Path(out_dir)
    (out / "edges").mkdir(parents=True, exist_ok=True)
    n, f_dim = int(feat.shape[0]), int(feat.shape[1])
    edtype = _edge_dtype(n)
    chunks = []
    for i, a in enumerate(range(0, max(len(src), 1), chunk_edges)):
        name = f"{i:05d}"
        np.save(out / "edges" / f"src_{name}.npy", np.asarray(src[a : a + chunk_edges]).astype(edtype))
        np.save(out / "edges" / f"dst_{name}.npy", np.asarray(dst[a : a + chunk_edges]).astype(edtype))
        chunks.append(
            {
                "src": f"edges/src_{name}.npy",
                "dst": f"edges/dst_{name}.npy",
                "num_edges": int(len(src[a : a + chunk_edges])),
            }
        )
    np.save(out / "feat.npy", np.asarray(feat, dtype=np.float32))
    np.save(out / "label.npy", np.asarray(label, dtype=np.int64))
    np.save(out / "block.npy", np.asarray(label, dtype=np.int64))
    np.save(out / "split.npy", np.asarray(split, dtype=np.int8))
    in_degree = np.bincount(np.asarray(dst, dtype=np.int64), minlength=n).astype(np.int64)
    np.save(out / "in_degree.npy", in_degree)
    meta = {
        "format": FORMAT,
        "num_nodes": n,
        "num_edges": int(len(src)),
        "num_pairs": None,
        "feat_dim": f_dim,
        "num_classes": int(np.max(label)) + 1 if n else 0,
        "edge_dtype": edtype.name,
        "max_degree": int(in_degree.max()) if n else 0,
        "config": None,
        "chunks": chunks,
    }
    (out / META).write_text(json.dumps(meta, indent=1))
    return BigGraph(out)


def _sbm_context(cfg: SyntheticConfig, rng: np.random.Generator) -> tuple[np.ndarray, dict]:
    """Blocks and degree propensities, arranged for :func:`.synthetic._draw_edges`."""
    n, k = int(cfg.num_nodes), int(cfg.num_communities)
    block = rng.permutation(np.arange(n, dtype=np.int64) % k)
    alpha = float(cfg.degree_exponent)
    theta = 1.0 + rng.pareto(alpha, size=n)
    np.minimum(theta, np.sqrt(n) * alpha / (alpha - 1.0), out=theta)
    order = np.argsort(block, kind="stable")
    cum = np.cumsum(theta[order])
    del theta
    counts = np.bincount(block, minlength=k)
    blk_end = np.cumsum(counts)
    blk_start = blk_end - counts
    cum0 = np.concatenate(([0.0], cum))
    ctx = {
        "cum": cum,
        "order": order,
        "block_sorted": block[order],
        "blk_lo": cum0[blk_start],
        "blk_hi": cum0[blk_end],
        "blk_start": blk_start,
        "blk_end": blk_end,
        "homophily": float(cfg.homophily),
    }
    return block, ctx


def _draw_round(rng_key: list[int], need: int, n: int, ctx: dict, chunk_edges: int, bucket_files: list[Path]) -> None:
    """Draw ``need`` candidate pairs in chunks and append their keys to the bucket files."""
    nb = len(bucket_files)
    handles = [open(f, "ab") for f in bucket_files]
    try:
        for c in range(math.ceil(need / chunk_edges)):
            m = min(chunk_edges, need - c * chunk_edges)
            rng = np.random.default_rng(rng_key + [c])
            s, d = _draw_edges(rng, m, ctx)
            keep = s != d
            s, d = s[keep], d[keep]
            lo = np.minimum(s, d)
            keys = lo * n + np.maximum(s, d)
            del s, d
            bucket = lo % nb
            order = np.argsort(bucket, kind="stable")
            keys, bucket = keys[order], bucket[order]
            bounds = np.searchsorted(bucket, np.arange(nb + 1))
            for b in range(nb):
                keys[bounds[b] : bounds[b + 1]].tofile(handles[b])
    finally:
        for h in handles:
            h.close()


def generate_big(
    cfg: SyntheticConfig,
    out_dir: str | Path,
    *,
    chunk_edges: int = 4_000_000,
    feat_rows: int = 1 << 17,
    overwrite: bool = False,
) -> BigGraph:
    """Generate the DC-SBM graph of ``cfg`` on disk, holding O(N) + one chunk in memory.

    Args:
        cfg: the same options as the in-memory generator (sizes, homophily, preset/noise,
            degree exponent, split fractions, seed).
        out_dir: output folder (see the module docstring for its layout).
        chunk_edges: candidate pairs drawn per chunk, and the size of an output edge chunk
            (directed edges); bounds the working memory (~80 bytes per pair while drawing).
        feat_rows: feature rows generated and written per block.
        overwrite: replace an existing complete graph in ``out_dir``.

    Returns:
        A :class:`BigGraph` over ``out_dir``.

    Example:
        >>> from dgl_grappa.config import SyntheticConfig
        >>> g = generate_big(SyntheticConfig(num_nodes=6_000_000, avg_degree=18, feat_dim=128),
        ...                  "runs/scale/graph")                        # doctest: +SKIP
        >>> g.num_edges                                                 # doctest: +SKIP
        108000000
    """
    validate(Config(data=DataConfig(name="synthetic", synthetic=cfg)))
    if chunk_edges < 1 or feat_rows < 1:
        raise ConfigError(f"chunk_edges={chunk_edges} and feat_rows={feat_rows} must be >= 1")
    out = Path(out_dir)
    if (out / META).exists():
        if not overwrite:
            raise ConfigError(f"{out} already holds a generated graph; pass overwrite=True to replace it")
        (out / META).unlink()
    for sub in ("edges", "_pairs"):
        shutil.rmtree(out / sub, ignore_errors=True)
    (out / "edges").mkdir(parents=True)
    (out / "_pairs").mkdir()
    t0 = time.perf_counter()

    n, seed = int(cfg.num_nodes), int(cfg.seed)
    rng = np.random.default_rng(seed)
    block, ctx = _sbm_context(cfg, rng)
    label = block % int(cfg.num_classes)

    target = min(int(round(n * float(cfg.avg_degree) / 2.0)), n * (n - 1) // 2)
    # One output chunk per bucket, each ~chunk_edges directed edges (2 per pair).
    nb = max(1, math.ceil(2 * target / chunk_edges))
    bucket_files = [out / "_pairs" / f"b{b:05d}.bin" for b in range(nb)]
    for f in bucket_files:
        f.touch()
    counts = np.zeros(nb, dtype=np.int64)
    need, rounds = target, 0
    for r in range(_MAX_TOPUP_ROUNDS):
        if need <= 0:
            break
        _draw_round([seed, _STREAM_EDGES, r], need, n, ctx, chunk_edges, bucket_files)
        for b, f in enumerate(bucket_files):
            keys = np.unique(np.fromfile(f, dtype=np.int64))
            keys.tofile(f)
            counts[b] = keys.shape[0]
        rounds = r + 1
        deficit = target - int(counts.sum())
        # Draw a little more than the deficit: part of it will be duplicates again.
        need = int(deficit * 1.25) + 16 if deficit > 0 else 0
    total = int(counts.sum())
    if total < 0.85 * target:
        warnings.warn(
            f"generated mean degree {2 * total / n:.2f} instead of {cfg.avg_degree}: the "
            f"blocks (~{n / cfg.num_communities:.0f} nodes) saturate",
            RuntimeWarning,
            stacklevel=2,
        )
    drop = np.empty(0, dtype=np.int64)
    if total > target:
        # The last top-up overshot: drop a seeded random subset of pairs (global positions).
        drop = np.sort(rng.choice(total, size=total - target, replace=False))
    starts = np.concatenate(([0], np.cumsum(counts)))

    edtype = _edge_dtype(n)
    in_degree = np.zeros(n, dtype=np.int64)
    chunks = []
    for b, f in enumerate(bucket_files):
        keys = np.fromfile(f, dtype=np.int64)
        f.unlink()
        local = drop[(drop >= starts[b]) & (drop < starts[b + 1])] - starts[b]
        if local.size:
            keys = np.delete(keys, local)
        u = keys // n
        v = keys - u * n
        del keys
        src = np.concatenate((u, v)).astype(edtype)
        dst = np.concatenate((v, u)).astype(edtype)
        del u, v
        in_degree += np.bincount(dst, minlength=n)
        name = f"{b:05d}"
        np.save(out / "edges" / f"src_{name}.npy", src)
        np.save(out / "edges" / f"dst_{name}.npy", dst)
        chunks.append({"src": f"edges/src_{name}.npy", "dst": f"edges/dst_{name}.npy", "num_edges": int(src.shape[0])})
        del src, dst
    shutil.rmtree(out / "_pairs", ignore_errors=True)
    del ctx
    t_edges = time.perf_counter() - t0

    # Features: mu[label] + noise * N(0, I), rescaled to ~unit variance (as synthetic.py).
    f_dim, c = int(cfg.feat_dim), int(cfg.num_classes)
    mu = rng.standard_normal((c, f_dim))
    mu *= CLASS_MEAN_NORM / np.maximum(np.linalg.norm(mu, axis=1, keepdims=True), 1e-12)
    mu32 = mu.astype(np.float32)
    noise = effective_noise(cfg)
    scale = np.float32(1.0 / np.sqrt(noise**2 + CLASS_MEAN_NORM**2 / f_dim))
    with open(out / "feat.npy", "wb") as fh:
        _write_npy_header(fh, np.float32, (n, f_dim))
        for i, a in enumerate(range(0, n, feat_rows)):
            b = min(n, a + feat_rows)
            x = np.random.default_rng([seed, _STREAM_FEAT, i]).standard_normal((b - a, f_dim), dtype=np.float32)
            x *= np.float32(noise)
            x += mu32[label[a:b]]
            x *= scale
            x.tofile(fh)
    t_feat = time.perf_counter() - t0 - t_edges

    # Random split by fraction; the remainder after train and val is test.
    perm = rng.permutation(n)
    n_train = max(1, min(int(round(cfg.train_frac * n)), n - 1))
    n_val = max(0, min(int(round(cfg.val_frac * n)), n - n_train - 1))
    split = np.full(n, 2, dtype=np.int8)
    split[perm[:n_train]] = 0
    split[perm[n_train : n_train + n_val]] = 1
    del perm
    np.save(out / "label.npy", label)
    np.save(out / "block.npy", block)
    np.save(out / "split.npy", split)
    np.save(out / "in_degree.npy", in_degree)

    meta = {
        "format": FORMAT,
        "num_nodes": n,
        "num_edges": int(in_degree.sum()),
        "num_pairs": total - int(drop.size),
        "feat_dim": f_dim,
        "num_classes": c,
        "noise": noise,
        "edge_dtype": edtype.name,
        "max_degree": int(in_degree.max()) if n else 0,
        "config": asdict(cfg),
        "chunk_edges": chunk_edges,
        "feat_rows": feat_rows,
        "topup_rounds": rounds,
        "seconds": {"edges": t_edges, "features": t_feat, "total": time.perf_counter() - t0},
        "chunks": chunks,
    }
    (out / META).write_text(json.dumps(meta, indent=1))
    return BigGraph(out)


__all__ = ["BigGraph", "FORMAT", "generate_big", "write_arrays"]
