"""Small dataset files that tests write themselves, in the formats the loaders read from real downloads,
and a loopback file server for them (the download tests need no network and no ``../shared``).

* :func:`write_planetoid`: the eight Planetoid ``ind.<name>.*`` files (pickled scipy and numpy objects,
  as the Planetoid authors released them), read by DGL's own citation loaders;
* :func:`write_ogb`: an OGB node-property archive (``arxiv.zip``, ``mag.zip``, ``papers100M-bin.zip``)
  with the folder layout and file formats of OGB's release;
* :func:`serve`: a ``http.server`` on 127.0.0.1 in a thread of the test process.

Where a test needs the real Cora and CiteSeer files (their statistics), :func:`real_planetoid` finds them.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import pickle
import threading
import zipfile
from collections import defaultdict
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import scipy.sparse as sp

SUFFIXES = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")


SHARED_PLANETOID = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "planetoid"
"""The copy of the real files beside the checkout, where the project's machines and CI keep it."""


def real_planetoid() -> Path | None:
    """The folder with the real Cora and CiteSeer files: ``$DGL_GRAPPA_PLANETOID``, else the shared copy
    beside the checkout; None when neither has them (a fresh clone: the tests that need them are left out)."""
    env = os.environ.get("DGL_GRAPPA_PLANETOID")
    for folder in (Path(env) if env else None, SHARED_PLANETOID):
        if folder is not None and all(
            (folder / f"ind.{n}.{s}").is_file() for n in ("cora", "citeseer") for s in SUFFIXES
        ):
            return folder
    return None


def write_planetoid(
    folder: Path,
    name: str = "cora",
    *,
    train: int = 140,
    others: int = 560,
    test: int = 100,
    classes: int = 4,
    width: int = 12,
    seed: int = 0,
) -> dict:
    """The eight ``ind.<name>.*`` files of a small graph in the Planetoid format, into ``folder``.

    DGL's loader takes the first ``train`` nodes for training and the next 500 for validation, so
    ``train + others`` must be at least ``train + 500``. The test nodes are listed shuffled in
    ``test.index`` (as in the release), their features and labels in that order.

    Returns:
        ``{"nodes", "edges" (directed, both ways, no self-loops), "classes", "width", "split", "sha256"}``.
    """
    rng = np.random.default_rng(seed)
    n_all = train + others
    n = n_all + test
    labels = rng.integers(0, classes, size=n)
    onehot = np.eye(classes)[labels]
    feat = (rng.random((n, width)) < 0.3).astype(np.float32)
    feat[np.arange(n), labels % width] = 1.0  # every row has a word: DGL row-normalises
    test_ids = rng.permutation(np.arange(n_all, n))  # the listed order; the rows below follow it
    graph = defaultdict(list)
    pairs = set()
    for u in range(n):
        for v in rng.integers(0, n, size=3):
            v = int(v)
            if v != u:
                pairs.add((min(u, v), max(u, v)))
    for u, v in sorted(pairs):
        graph[u].append(v)
        graph[v].append(u)
    objects = {
        "x": sp.csr_matrix(feat[:train]),
        "y": onehot[:train],
        "allx": sp.csr_matrix(feat[:n_all]),
        "ally": onehot[:n_all],
        "tx": sp.csr_matrix(feat[test_ids]),
        "ty": onehot[test_ids],
        "graph": graph,
    }
    folder.mkdir(parents=True, exist_ok=True)
    for key, obj in objects.items():
        with open(folder / f"ind.{name}.{key}", "wb") as f:
            pickle.dump(obj, f, protocol=2)
    (folder / f"ind.{name}.test.index").write_text("".join(f"{i}\n" for i in test_ids))
    sha = {f"ind.{name}.{s}": hashlib.sha256((folder / f"ind.{name}.{s}").read_bytes()).hexdigest() for s in SUFFIXES}
    return {
        "nodes": n,
        "edges": 2 * len(pairs),
        "classes": classes,
        "width": width,
        "split": (train, 500, test),
        "sha256": sha,
    }


def _csv_gz(path: Path, rows: np.ndarray, fmt: str = "%d") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = np.asarray(rows)
    with gzip.open(path, "wt") as f:
        np.savetxt(f, rows.reshape(len(rows), -1), fmt=fmt, delimiter=",")


def _splits(n: int, rng: np.random.Generator, labelled: np.ndarray | None = None) -> dict[str, np.ndarray]:
    ids = rng.permutation(np.arange(n) if labelled is None else labelled)
    a, b = int(0.6 * len(ids)), int(0.8 * len(ids))
    return {"train": np.sort(ids[:a]), "valid": np.sort(ids[a:b]), "test": np.sort(ids[b:])}


def write_ogb(
    folder: Path,
    name: str,
    *,
    nodes: int = 600,
    classes: int = 5,
    width: int = 8,
    seed: int = 0,
    fortran_edges: bool = False,
) -> dict:
    """An OGB node-property archive of a small graph, ``<folder>/<download name>.zip``, in OGB's layout.

    ``name`` is ``ogbn-arxiv`` or ``ogbn-products`` (CSV files: ``raw/edge.csv.gz``, ``raw/node-feat.csv.gz``,
    ``raw/node-label.csv.gz``, ``raw/num-node-list.csv.gz``, ``raw/num-edge-list.csv.gz``,
    ``split/<split>/{train,valid,test}.csv.gz``), ``ogbn-mag`` (the heterogeneous CSV layout: per-type
    ``raw/node-feat/<type>/``, per-relation ``raw/relations/<src>___<rel>___<dst>/``, ``raw/num-node-dict.csv.gz``,
    ``raw/triplet-type-list.csv.gz``, labels and splits of papers) or ``ogbn-papers100M`` (the binary layout:
    ``raw/data.npz``, ``raw/node-label.npz`` with NaN for unlabelled nodes, ``split/time/*.csv.gz``). Labels
    follow a planted class per node, and edges mostly stay in their class, so a model can learn them.
    ``fortran_edges``: papers100M's ``edge_index`` [2, E] stored in Fortran order (source, destination pairs).

    Returns:
        ``{"zip": path, "nodes", "edges", "classes", "width", "split": (train, valid, test)}`` (for
        ogbn-mag: of papers, ``edges`` of the four relations as stored, ``nodes_by_type``).
    """
    rng = np.random.default_rng(seed)
    short = {
        "ogbn-arxiv": "arxiv",
        "ogbn-products": "products",
        "ogbn-mag": "mag",
        "ogbn-papers100M": "papers100M-bin",
    }[name]
    top = folder / "build" / short
    label = rng.integers(0, classes, size=nodes)
    centres = rng.normal(0, 3, size=(classes, width))
    feat = (centres[label] + rng.normal(0, 1, size=(nodes, width))).astype(np.float32)

    def homophilous_edges(n_src: int, src_label: np.ndarray, dst_label: np.ndarray, per: int) -> np.ndarray:
        by_class = [np.flatnonzero(dst_label == c) for c in range(classes)]
        src, dst = [], []
        for u in range(n_src):
            for _ in range(per):
                same = by_class[src_label[u]]
                v = rng.choice(same) if rng.random() < 0.85 and len(same) else rng.integers(0, len(dst_label))
                src.append(u)
                dst.append(int(v))
        return np.stack([np.array(src), np.array(dst)], axis=1)

    out = {"nodes": nodes, "classes": classes, "width": width}
    if name == "ogbn-mag":
        n_auth, n_inst, n_field = nodes // 2, 20, 30
        auth_label = rng.integers(0, classes, size=n_auth)
        field_label = rng.integers(0, classes, size=n_field)
        rels = {
            ("author", "affiliated_with", "institution"): np.stack(
                [np.arange(n_auth), rng.integers(0, n_inst, size=n_auth)], axis=1
            ),
            ("author", "writes", "paper"): homophilous_edges(n_auth, auth_label, label, 3),
            ("paper", "cites", "paper"): homophilous_edges(nodes, label, label, 4),
            ("paper", "has_topic", "field_of_study"): homophilous_edges(nodes, label, field_label, 2),
        }
        counts = {"author": n_auth, "field_of_study": n_field, "institution": n_inst, "paper": nodes}
        raw = top / "raw"
        raw.mkdir(parents=True, exist_ok=True)
        with gzip.open(raw / "num-node-dict.csv.gz", "wt") as f:
            f.write(",".join(counts) + "\n" + ",".join(str(v) for v in counts.values()) + "\n")
        with gzip.open(raw / "triplet-type-list.csv.gz", "wt") as f:
            f.write("".join(",".join(t) + "\n" for t in rels))
        for t, e in rels.items():
            d = raw / "relations" / "___".join(t)
            _csv_gz(d / "edge.csv.gz", e)
            _csv_gz(d / "num-edge-list.csv.gz", np.array([len(e)]))
            _csv_gz(d / "edge_reltype.csv.gz", np.zeros(len(e), dtype=np.int64))
        _csv_gz(raw / "node-feat" / "paper" / "node-feat.csv.gz", feat, fmt="%.6f")
        _csv_gz(raw / "node-feat" / "paper" / "node_year.csv.gz", np.full(nodes, 2019))
        _csv_gz(raw / "node-label" / "paper" / "node-label.csv.gz", label)
        sp_ = _splits(nodes, rng)
        for k, ids in sp_.items():
            _csv_gz(top / "split" / "time" / "paper" / f"{k}.csv.gz", ids)
        out.update(edges={t: len(e) for t, e in rels.items()}, nodes_by_type=counts)
    elif name == "ogbn-papers100M":
        e = homophilous_edges(nodes, label, label, 4)
        labelled = np.sort(rng.choice(nodes, size=nodes // 2, replace=False))  # the rest: NaN (no label)
        y = np.full((nodes, 1), np.nan, dtype=np.float32)
        y[labelled, 0] = label[labelled]
        raw = top / "raw"
        raw.mkdir(parents=True, exist_ok=True)
        index = e.T.astype(np.int64)
        np.savez_compressed(
            raw / "data.npz",
            edge_index=np.asfortranarray(index) if fortran_edges else np.ascontiguousarray(index),
            node_feat=feat,
            num_nodes_list=np.array([nodes]),
            num_edges_list=np.array([len(e)]),
            node_year=np.full((nodes, 1), 2019),
        )
        np.savez_compressed(raw / "node-label.npz", node_label=y)
        sp_ = _splits(nodes, rng, labelled)
        for k, ids in sp_.items():
            _csv_gz(top / "split" / "time" / f"{k}.csv.gz", ids)
        out.update(edges=len(e), label=np.where(np.isnan(y[:, 0]), -1, y[:, 0]).astype(np.int64))
    else:
        e = homophilous_edges(nodes, label, label, 4)
        raw = top / "raw"
        _csv_gz(raw / "edge.csv.gz", e)
        _csv_gz(raw / "node-feat.csv.gz", feat, fmt="%.6f")
        _csv_gz(raw / "node-label.csv.gz", label)
        _csv_gz(raw / "num-node-list.csv.gz", np.array([nodes]))
        _csv_gz(raw / "num-edge-list.csv.gz", np.array([len(e)]))
        if name == "ogbn-arxiv":
            _csv_gz(raw / "node_year.csv.gz", np.full(nodes, 2019))
        split = "time" if name == "ogbn-arxiv" else "sales_ranking"
        sp_ = _splits(nodes, rng)
        for k, ids in sp_.items():
            _csv_gz(top / "split" / split / f"{k}.csv.gz", ids)
        out.update(edges=len(e), label=label)
    (top / "RELEASE_v1.txt").write_text("fixture\n")
    archive = folder / f"{short}.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(top.rglob("*")):
            z.write(p, p.relative_to(top.parent).as_posix())
    out.update(zip=archive, split=tuple(len(sp_[k]) for k in ("train", "valid", "test")), feat=feat)
    return out


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test's output stays the test's
        pass


class Server:
    """``with Server(folder) as url:`` a file server for ``folder`` on 127.0.0.1 (stopped on exit); ``hits``
    lists the paths it was asked for."""

    def __init__(self, folder: Path):
        self.hits: list[str] = []
        hits = self.hits

        class Handler(_Quiet):
            def do_GET(self):
                hits.append(self.path)
                super().do_GET()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()


def closed_port_url() -> str:
    """A URL on the loopback where nobody listens (a download meets 'connection refused' at once)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    port = server.server_address[1]
    server.server_close()
    return f"http://127.0.0.1:{port}"
