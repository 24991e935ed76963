"""Tests of dgl_grappa.data: Planetoid offline loading, the synthetic DC-SBM, user graphs."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

os.environ.setdefault("DGLBACKEND", "pytorch")

import dgl  # noqa: E402
import dgl.data.dgl_dataset  # noqa: E402
import dgl.data.utils  # noqa: E402
from datafiles import real_planetoid, write_planetoid  # noqa: E402

from dgl_grappa.config import ConfigError, DataConfig, SyntheticConfig  # noqa: E402
from dgl_grappa.data import STANDARD_KEYS, generate_sbm, load_dataset, num_classes, planetoid_cache_dir
from dgl_grappa.data.planetoid import PLANETOID_SUFFIXES  # noqa: E402

pytestmark = pytest.mark.unit


class NetworkAttempt(AssertionError):
    """Raised by the patched DGL downloader: any network attempt fails the test."""


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path_factory):
    """No test may download, and none may write into the user's real cache."""

    def _no_download(*args, **kwargs):
        raise NetworkAttempt(f"DGL tried to download: {args} {kwargs}")

    # dgl_dataset imported `download` by name, so patch both references.
    monkeypatch.setattr(dgl.data.utils, "download", _no_download)
    monkeypatch.setattr(dgl.data.dgl_dataset, "download", _no_download)
    cache = tmp_path_factory.getbasetemp() / "grappa_cache"  # shared across tests: reuse DGL's processed files
    monkeypatch.setenv("DGL_GRAPPA_CACHE", str(cache))


@pytest.fixture
def fixture_cora(tmp_path):
    """A small graph in the Planetoid format, in a folder of its own: (folder, its figures)."""
    root = tmp_path / "planetoid"
    return root, write_planetoid(root, "cora")


def _check_standard(g: dgl.DGLGraph) -> None:
    assert g.is_homogeneous and g.idtype == torch.int64
    assert set(g.ndata.keys()) == set(STANDARD_KEYS)
    n = g.num_nodes()
    assert g.ndata["feat"].dtype == torch.float32 and g.ndata["feat"].dim() == 2
    assert g.ndata["feat"].shape[0] == n
    assert g.ndata["label"].dtype == torch.int64 and g.ndata["label"].shape == (n,)
    for k in ("train_mask", "val_mask", "test_mask"):
        assert g.ndata[k].dtype == torch.bool and g.ndata[k].shape == (n,)


# ---------------------------------------------------------------------------------------
# Planetoid
# ---------------------------------------------------------------------------------------


@pytest.mark.planetoid
@pytest.mark.parametrize(
    "name,nodes,edges,feats,classes,split",
    [
        ("cora", 2708, 10556, 1433, 7, (140, 500, 1000)),
        ("citeseer", 3327, 9228, 3703, 6, (120, 500, 1000)),
    ],
)
def test_planetoid_statistics(name, nodes, edges, feats, classes, split, tmp_path, monkeypatch):
    # data.root has none of the files: they come from $DGL_GRAPPA_PLANETOID, not from a download
    root = real_planetoid()
    monkeypatch.setenv("DGL_GRAPPA_PLANETOID", str(root))
    g = load_dataset(DataConfig(name=name, root=str(tmp_path)))
    _check_standard(g)
    assert g.num_nodes() == nodes
    assert g.num_edges() == edges
    assert g.ndata["feat"].shape[1] == feats
    assert num_classes(g) == classes
    got = tuple(int(g.ndata[k].sum()) for k in ("train_mask", "val_mask", "test_mask"))
    assert got == split
    m = g.ndata["train_mask"].int() + g.ndata["val_mask"].int() + g.ndata["test_mask"].int()
    assert int(m.max()) <= 1  # splits are disjoint
    # The second load comes from DGL's processed cache and must be identical.
    g2 = load_dataset(DataConfig(name=name, root=str(tmp_path)))
    assert torch.equal(g.edges()[0], g2.edges()[0]) and torch.equal(g.edges()[1], g2.edges()[1])
    for k in STANDARD_KEYS:
        assert torch.equal(g.ndata[k], g2.ndata[k])
    # Nothing but symlinks to the originals in the raw folder: no copy of the dataset.
    raw = next(p for p in planetoid_cache_dir(name, root).iterdir() if p.is_dir())
    links = [p for p in raw.iterdir() if p.name.startswith("ind.")]
    assert len(links) == len(PLANETOID_SUFFIXES) and all(p.is_symlink() for p in links)
    assert not (tmp_path / "planetoid").exists()  # nothing was downloaded


def test_planetoid_fixture_loads_with_dgls_split(fixture_cora):
    root, fig = fixture_cora
    g = load_dataset(DataConfig(name="cora", root=str(root)))
    _check_standard(g)
    assert (g.num_nodes(), g.num_edges(), g.ndata["feat"].shape[1]) == (fig["nodes"], fig["edges"], fig["width"])
    assert num_classes(g) == fig["classes"]
    assert tuple(int(g.ndata[k].sum()) for k in ("train_mask", "val_mask", "test_mask")) == fig["split"]


def test_planetoid_found_in_the_roots_download_folder_and_the_env_folder(tmp_path, monkeypatch):
    fig = write_planetoid(tmp_path / "root" / "planetoid" / "raw", "cora")  # where a download puts them
    assert load_dataset(DataConfig(name="cora", root=str(tmp_path / "root"))).num_nodes() == fig["nodes"]
    fig = write_planetoid(tmp_path / "elsewhere", "cora", others=600)
    monkeypatch.setenv("DGL_GRAPPA_PLANETOID", str(tmp_path / "elsewhere"))
    assert load_dataset(DataConfig(name="cora", root=str(tmp_path / "empty"))).num_nodes() == fig["nodes"]


def test_data_root_defaults_to_the_users_cache_not_the_checkout(monkeypatch, tmp_path):
    monkeypatch.delenv("DGL_GRAPPA_DATA", raising=False)
    monkeypatch.setenv("DGL_GRAPPA_CACHE", str(tmp_path / "c"))
    assert DataConfig().root == str(tmp_path / "c")
    monkeypatch.delenv("DGL_GRAPPA_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert DataConfig().root == str(tmp_path / "x" / "dgl_grappa")
    monkeypatch.setenv("DGL_GRAPPA_DATA", str(tmp_path / "d"))
    assert DataConfig().root == str(tmp_path / "d")
    assert "shared" not in Path(DataConfig().root).parts


def test_planetoid_missing_root_names_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("DGL_GRAPPA_PLANETOID", raising=False)
    missing = tmp_path / "no_such_folder"
    with pytest.raises(ConfigError) as err:
        load_dataset(DataConfig(name="cora", root=str(missing)))
    msg = str(err.value)
    assert str(missing) in msg and "ind.cora.x" in msg and "\n" not in msg


def test_planetoid_partial_root_lists_missing_files(tmp_path):
    write_planetoid(tmp_path / "full", "citeseer")
    root = tmp_path / "partial"
    root.mkdir()
    for suffix in ("x", "y", "graph"):
        (root / f"ind.citeseer.{suffix}").symlink_to(tmp_path / "full" / f"ind.citeseer.{suffix}")
    with pytest.raises(ConfigError) as err:
        load_dataset(DataConfig(name="citeseer", root=str(root)))
    msg = str(err.value)
    assert str(root) in msg
    for suffix in ("tx", "ty", "allx", "ally", "test.index"):
        assert f"ind.citeseer.{suffix}" in msg
    assert "missing: ind.citeseer.x," not in msg  # present files are not reported


def test_planetoid_cache_keyed_by_root_and_content(fixture_cora, tmp_path):
    original, fig = fixture_cora
    root = tmp_path / "mycora"
    root.mkdir()
    for suffix in PLANETOID_SUFFIXES:
        if suffix != "test.index":
            (root / f"ind.cora.{suffix}").symlink_to(original / f"ind.cora.{suffix}")
    lines = (original / "ind.cora.test.index").read_text().split()
    (root / "ind.cora.test.index").write_text("\n".join(lines) + "\n")
    assert planetoid_cache_dir("cora", root) != planetoid_cache_dir("cora", original)

    g = load_dataset(DataConfig(name="cora", root=str(root)))
    assert int(g.ndata["test_mask"].sum()) == fig["split"][2]
    # Change the data under the same root: DGL's processed cache must not be reused.
    (root / "ind.cora.test.index").write_text("\n".join(lines[:-1]) + "\n")
    st = (root / "ind.cora.test.index").stat()
    os.utime(root / "ind.cora.test.index", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    g = load_dataset(DataConfig(name="cora", root=str(root)))
    assert int(g.ndata["test_mask"].sum()) == fig["split"][2] - 1


# ---------------------------------------------------------------------------------------
# Synthetic
# ---------------------------------------------------------------------------------------


def _small(**kw) -> SyntheticConfig:
    base = dict(num_nodes=5000, avg_degree=10.0, num_communities=32, num_classes=8, feat_dim=16)
    base.update(kw)
    return SyntheticConfig(**base)


def test_synthetic_deterministic():
    a = load_dataset(DataConfig(name="synthetic", synthetic=_small(seed=3)))
    b = load_dataset(DataConfig(name="synthetic", synthetic=_small(seed=3)))
    c = load_dataset(DataConfig(name="synthetic", synthetic=_small(seed=4)))
    for x, y in zip(a.edges(), b.edges()):
        assert torch.equal(x, y)
    for k in STANDARD_KEYS:
        assert torch.equal(a.ndata[k], b.ndata[k])
    assert not torch.equal(a.ndata["feat"], c.ndata["feat"])
    assert a.num_edges() != c.num_edges() or not torch.equal(a.edges()[0], c.edges()[0])


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"avg_degree": 4.0, "homophily": 0.5, "degree_exponent": 1.5},
        {"num_nodes": 300, "avg_degree": 8.0, "num_communities": 8, "homophily": 1.0},
    ],
)
def test_synthetic_structure(kw):
    cfg = _small(**kw)
    g = load_dataset(DataConfig(name="synthetic", synthetic=cfg))
    _check_standard(g)
    n = cfg.num_nodes
    assert g.num_nodes() == n
    assert g.ndata["feat"].shape == (n, cfg.feat_dim)
    mean_deg = g.num_edges() / n
    assert abs(mean_deg - cfg.avg_degree) <= 0.15 * cfg.avg_degree, mean_deg

    src, dst = (t.numpy() for t in g.edges())
    assert not np.any(src == dst)  # no self-loops
    fwd = np.unique(src * n + dst)
    assert fwd.shape[0] == src.shape[0]  # no duplicate edges
    assert np.array_equal(fwd, np.unique(dst * n + src))  # the reverse of every edge is there

    a = generate_sbm(cfg)
    assert np.array_equal(a.label, a.block % cfg.num_classes)
    assert a.block.min() >= 0 and a.block.max() < cfg.num_communities
    assert np.array_equal(g.ndata["label"].numpy(), a.label)
    assert num_classes(g) == cfg.num_classes

    masks = np.stack([g.ndata[k].numpy() for k in ("train_mask", "val_mask", "test_mask")])
    assert np.array_equal(masks.sum(0), np.ones(n))  # disjoint and covering
    assert abs(masks[0].sum() - cfg.train_frac * n) <= 1
    assert abs(masks[1].sum() - cfg.val_frac * n) <= 1

    if cfg.homophily == 1.0:
        assert np.array_equal(a.block[src], a.block[dst])


def _ncm_accuracy(x, y, train, test, c):
    """Nearest-class-mean classifier: means from train nodes, accuracy on test nodes."""
    mu = np.stack([x[train & (y == k)].mean(0) for k in range(c)])
    d = (x[test] ** 2).sum(1, keepdims=True) - 2.0 * x[test] @ mu.T + (mu**2).sum(1)
    return float((d.argmin(1) == y[test]).mean())


def _mean_aggregate(g: dgl.DGLGraph, x: np.ndarray, hops: int) -> np.ndarray:
    """x <- A_mean x, ``hops`` times, with A = adjacency + self-loop, row-normalised."""
    n = g.num_nodes()
    src, dst = (t.numpy() for t in g.edges())
    a = sp.csr_matrix((np.ones(src.shape[0]), (dst, src)), shape=(n, n)) + sp.eye(n, format="csr")
    p = sp.diags(1.0 / np.asarray(a.sum(1)).ravel()) @ a
    for _ in range(hops):
        x = p @ x
    return x


def test_synthetic_hard_preset_leaves_room_for_aggregation():
    cfg = SyntheticConfig(preset="hard")  # the defaults: 20k nodes, 16 classes, 64 dims
    g = load_dataset(DataConfig(name="synthetic", synthetic=cfg))
    x = g.ndata["feat"].numpy().astype(np.float64)
    y = g.ndata["label"].numpy()
    tr, te = g.ndata["train_mask"].numpy(), g.ndata["test_mask"].numpy()
    acc_feat = _ncm_accuracy(x, y, tr, te, cfg.num_classes)
    acc_2hop = _ncm_accuracy(_mean_aggregate(g, x, 2), y, tr, te, cfg.num_classes)
    print(f"hard preset: features-only {acc_feat:.3f}, 2-hop mean {acc_2hop:.3f}")
    assert acc_feat < 0.6
    assert acc_2hop >= acc_feat + 0.25


def test_synthetic_presets_set_noise():
    easy = load_dataset(DataConfig(name="synthetic", synthetic=_small(preset="easy")))
    x, y = easy.ndata["feat"].numpy(), easy.ndata["label"].numpy()
    tr, te = easy.ndata["train_mask"].numpy(), easy.ndata["test_mask"].numpy()
    assert _ncm_accuracy(x, y, tr, te, 8) > 0.9  # easy: features nearly solve it
    # custom honours cfg.noise; the named presets ignore it.
    a = generate_sbm(_small(preset="custom", noise=0.0))
    assert np.allclose(np.linalg.norm(a.feat, axis=1), np.linalg.norm(a.feat[0]))
    b = generate_sbm(_small(preset="hard", noise=0.0))
    norms = np.linalg.norm(b.feat, axis=1)
    assert norms.std() / norms.mean() > 0.05  # the preset's noise is there although cfg.noise=0
    # features come out at about unit variance per dimension, whatever the noise
    assert 0.8 < b.feat.std() < 1.2


def test_synthetic_saturated_blocks_warn():
    # 300 nodes in 32 blocks (~9 nodes each) cannot give degree 20 inside the blocks.
    with pytest.warns(RuntimeWarning, match="saturate"):
        a = generate_sbm(_small(num_nodes=300, avg_degree=20.0, homophily=1.0))
    assert a.src.shape[0] / 300 < 17


def test_synthetic_invalid_config_is_config_error():
    with pytest.raises(ConfigError, match="homophily"):
        load_dataset(DataConfig(name="synthetic", synthetic=_small(homophily=1.5)))


# ---------------------------------------------------------------------------------------
# User graph (dgl.save_graphs)
# ---------------------------------------------------------------------------------------


def _user_graph(n=50):
    g = dgl.rand_graph(n, 200)
    gen = torch.Generator().manual_seed(0)
    g.ndata["x"] = torch.randn(n, 7, dtype=torch.float64, generator=gen)
    g.ndata["y"] = torch.randint(0, 4, (n,), dtype=torch.int32, generator=gen)
    split = torch.arange(n) % 3
    g.ndata["tr"] = (split == 0).to(torch.uint8)
    g.ndata["va"] = (split == 1).to(torch.int64)
    g.ndata["te"] = split == 2
    g.ndata["extra"] = torch.zeros(n)
    g.edata["w"] = torch.ones(g.num_edges())
    return g


def _user_cfg(path, **kw):
    base = dict(
        name="dgl",
        path=str(path),
        feat_key="x",
        label_key="y",
        train_mask_key="tr",
        val_mask_key="va",
        test_mask_key="te",
    )
    base.update(kw)
    return DataConfig(**base)


def test_user_graph_round_trip(tmp_path):
    g = _user_graph()
    path = tmp_path / "g.bin"
    dgl.save_graphs(str(path), [g])
    out = load_dataset(_user_cfg(path))
    _check_standard(out)
    assert out.num_nodes() == g.num_nodes() and out.num_edges() == g.num_edges()
    for x, y in zip(out.edges(), g.edges()):
        assert torch.equal(x, y.to(torch.int64))
    assert torch.allclose(out.ndata["feat"], g.ndata["x"].float())
    assert torch.equal(out.ndata["label"], g.ndata["y"].long())
    assert torch.equal(out.ndata["train_mask"], g.ndata["tr"].bool())
    assert torch.equal(out.ndata["val_mask"], g.ndata["va"].bool())
    assert torch.equal(out.ndata["test_mask"], g.ndata["te"])
    assert num_classes(out) == int(g.ndata["y"].max()) + 1


def test_user_graph_missing_key_lists_present_keys(tmp_path):
    path = tmp_path / "g.bin"
    dgl.save_graphs(str(path), [_user_graph()])
    with pytest.raises(ConfigError) as err:
        load_dataset(_user_cfg(path, label_key="labels"))
    msg = str(err.value)
    assert "'labels'" in msg and "label_key" in msg
    for key in ("x", "y", "tr", "va", "te", "extra"):
        assert key in msg


def test_user_graph_errors(tmp_path):
    missing = tmp_path / "nope.bin"
    with pytest.raises(ConfigError, match=str(missing)):
        load_dataset(_user_cfg(missing))

    two = tmp_path / "two.bin"
    dgl.save_graphs(str(two), [_user_graph(), _user_graph()])
    with pytest.raises(ConfigError, match="2 graphs"):
        load_dataset(_user_cfg(two))

    hetero = dgl.heterograph({("a", "r", "b"): (torch.tensor([0, 1]), torch.tensor([1, 0]))})
    het = tmp_path / "het.bin"
    dgl.save_graphs(str(het), [hetero])
    with pytest.raises(ConfigError, match="heterogeneous"):
        load_dataset(_user_cfg(het))

    bad = _user_graph()
    bad.ndata["tr"] = torch.full((bad.num_nodes(),), 2)
    badp = tmp_path / "bad.bin"
    dgl.save_graphs(str(badp), [bad])
    with pytest.raises(ConfigError, match="0/1"):
        load_dataset(_user_cfg(badp))

    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a dgl file")
    with pytest.raises(ConfigError, match="dgl.save_graphs"):
        load_dataset(_user_cfg(junk))

    with pytest.raises(ConfigError, match="data.path"):
        load_dataset(DataConfig(name="dgl", path=""))
