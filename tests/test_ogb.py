"""The OGB node-property graphs by name (``data.name: ogbn-arxiv`` ...): downloaded once from a real
``http.server`` on the loopback serving small archives in OGB's layout that the test writes itself
(:func:`datafiles.write_ogb`), checked, unpacked into ``<data.root>/ogbn_<name>/``, parsed once; offline, a
damaged archive, an incomplete folder and files that are not OGB's each end in one line. The known sizes
(:data:`dgl_grappa.data.ogb.KNOWN`) are set to the fixture's, as the real ones are for the real files."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from datafiles import Server, closed_port_url, write_ogb

from dgl_grappa.config import OGBN_MAG_ETYPES, ConfigError, DataConfig, load_config
from dgl_grappa.data import load_dataset, num_classes
from dgl_grappa.data import ogb as ogb_mod
from dgl_grappa.data.ogb import KNOWN, dataset_dir, load_ogb, ogb_big_graph

unit = pytest.mark.unit


def _known(monkeypatch, name: str, fig: dict) -> None:
    """The fixture's sizes stand in for the real ones (the check is the code's, the figures the test's)."""
    monkeypatch.setitem(
        KNOWN, name, dataclasses.replace(KNOWN[name], nodes=fig["nodes"], classes=fig["classes"], width=fig["width"])
    )


@pytest.fixture
def served(tmp_path, monkeypatch):
    """served(name, **kw) -> (figures, server): the archive of a small ``name`` written and served on the
    loopback, ``$DGL_GRAPPA_OGB_URL`` pointing at it, its sizes known."""
    servers = []

    def start(name: str, known: bool = True, **kw):
        fig = write_ogb(tmp_path / "site", name, **kw)
        if known:
            _known(monkeypatch, name, fig)
        server = Server(tmp_path / "site")
        monkeypatch.setenv("DGL_GRAPPA_OGB_URL", server.__enter__())
        servers.append(server)
        return fig, server

    yield start
    for s in servers:
        s.__exit__(None, None, None)


@unit
def test_arxiv_by_name_is_downloaded_once_checked_and_parsed(tmp_path, served, monkeypatch):
    fig, server = served("ogbn-arxiv")
    root = tmp_path / "data"
    g = load_dataset(DataConfig(name="ogbn-arxiv", root=str(root)))
    assert server.hits == ["/arxiv.zip"]
    assert g.num_nodes() == fig["nodes"] and num_classes(g) == fig["classes"]
    assert torch.allclose(g.ndata["feat"], torch.from_numpy(fig["feat"]), atol=1e-5)  # CSV: 6 decimals
    assert torch.equal(g.ndata["label"], torch.from_numpy(fig["label"]))
    assert tuple(int(g.ndata[k].sum()) for k in ("train_mask", "val_mask", "test_mask")) == fig["split"]
    # every citation both ways, each pair once, as DGL's examples train arxiv
    src, dst = g.edges()
    pairs = set(zip(src.tolist(), dst.tolist()))
    assert all((v, u) in pairs for u, v in pairs) and len(pairs) == g.num_edges()
    folder = dataset_dir("ogbn-arxiv", root)
    assert folder == root / "ogbn_arxiv" and (folder / "raw" / "edge.csv.gz").is_file()
    stamp = json.loads((folder / "dgl_grappa.json").read_text())
    assert stamp["url"].endswith("/arxiv.zip") and len(stamp["sha256"]) == 64
    assert [p.name for p in root.iterdir() if p.name.startswith(".") and p.name != ".ogb.lock"] == []
    # offline now: the second load reads the parsed copy, no request
    monkeypatch.setenv("DGL_GRAPPA_OGB_URL", closed_port_url())
    again = load_dataset(DataConfig(name="ogbn-arxiv", root=str(root)))
    assert torch.equal(again.edges()[0], src) and torch.equal(again.ndata["feat"], g.ndata["feat"])
    for k in ("train_mask", "val_mask", "test_mask"):  # the contract's dtypes, from the parsed copy too
        assert again.ndata[k].dtype == torch.bool and torch.equal(again.ndata[k], g.ndata[k])
    assert again.ndata["label"].dtype == torch.int64 and again.ndata["feat"].dtype == torch.float32
    assert server.hits == ["/arxiv.zip"]


@unit
def test_products_adds_the_reverse_edges_and_reads_its_own_split(tmp_path, served):
    fig, _ = served("ogbn-products", nodes=300)
    g = load_ogb("ogbn-products", tmp_path)
    assert (dataset_dir("ogbn-products", tmp_path) / "split" / "sales_ranking" / "train.csv.gz").is_file()
    assert (
        g.num_nodes() == 300
        and tuple(int(g.ndata[k].sum()) for k in ("train_mask", "val_mask", "test_mask")) == fig["split"]
    )
    assert g.has_edges_between(*g.edges()[::-1]).all()


@unit
def test_offline_one_line_names_the_folder_and_the_files(tmp_path, monkeypatch):
    url = closed_port_url()
    monkeypatch.setenv("DGL_GRAPPA_OGB_URL", url)
    with pytest.raises(ConfigError) as err:
        load_dataset(DataConfig(name="ogbn-products", root=str(tmp_path)))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"ogbn-products: downloading {url}/products.zip failed (")
    assert f"into '{tmp_path / 'ogbn_products'}'" in msg
    for f in ("raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/node-label.csv.gz", "split/sales_ranking/train.csv.gz"):
        assert f in msg
    assert list(tmp_path.iterdir()) == []  # no file, whole or partial, not even the lock
    (tmp_path / "mine").write_text("a file of the user's: the root stays, the lock goes")
    with pytest.raises(ConfigError):
        load_dataset(DataConfig(name="ogbn-products", root=str(tmp_path)))
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]


@unit
def test_a_damaged_archive_is_deleted_and_named(tmp_path, served):
    fig, _ = served("ogbn-arxiv")
    data = bytearray(fig["zip"].read_bytes())
    data[len(data) // 3] ^= 0xFF  # one flipped byte inside a member: its CRC-32 fails
    fig["zip"].write_bytes(bytes(data))
    with pytest.raises(ConfigError) as err:
        load_ogb("ogbn-arxiv", tmp_path / "data")
    msg = str(err.value)
    assert "\n" not in msg and "is damaged" in msg and "it was deleted" in msg
    assert not (tmp_path / "data").exists()  # the folder made for it is gone again


@unit
def test_an_incomplete_folder_is_named_not_replaced(tmp_path, served):
    served("ogbn-arxiv")
    load_ogb("ogbn-arxiv", tmp_path)
    folder = dataset_dir("ogbn-arxiv", tmp_path)
    (folder / "split" / "time" / "valid.csv.gz").unlink()
    (folder / "processed" / ogb_mod.PROCESSED).unlink()
    with pytest.raises(ConfigError) as err:
        load_ogb("ogbn-arxiv", tmp_path)
    assert "lacks split/time/valid.csv.gz of OGB's files" in str(err.value) and str(folder) in str(err.value)


@unit
def test_files_that_are_not_ogbs_are_refused(tmp_path, served):
    served("ogbn-arxiv", known=False)  # the real sizes: 169343 nodes, not the fixture's
    with pytest.raises(ConfigError) as err:
        load_ogb("ogbn-arxiv", tmp_path)
    assert "not OGB's 169343, 40 and 128" in str(err.value) and "\n" not in str(err.value)


@unit
def test_mag_is_heterogeneous_with_the_reverse_relations(tmp_path, served):
    fig, _ = served("ogbn-mag")
    cfg = load_config(
        None, ["--data.name=ogbn-mag", f"--data.root={tmp_path}", "--model.name=rgcn", "--model.embed=true"]
    )
    g = load_dataset(cfg.data)
    assert sorted(g.canonical_etypes) == sorted(tuple(e) for e in OGBN_MAG_ETYPES)
    assert {t: g.num_nodes(t) for t in g.ntypes} == fig["nodes_by_type"]
    for rel, n in fig["edges"].items():
        assert g.num_edges(rel) == n and g.num_edges((rel[2], f"rev_{rel[1]}", rel[0])) == n
    paper = g.nodes["paper"].data
    assert set(paper) == {"feat", "label", "train_mask", "val_mask", "test_mask"}
    assert tuple(int(paper[k].sum()) for k in ("train_mask", "val_mask", "test_mask")) == fig["split"]
    assert all("feat" not in g.nodes[t].data for t in ("author", "field_of_study", "institution"))


@unit
@pytest.mark.parametrize("fortran_edges", [False, True])
def test_papers100m_goes_through_the_memory_mapped_big_graph(tmp_path, served, fortran_edges):
    fig, _ = served("ogbn-papers100M", fortran_edges=fortran_edges)
    big = ogb_big_graph("ogbn-papers100M", tmp_path)
    assert isinstance(big.feat, np.memmap) and big.feat.shape == (fig["nodes"], fig["width"])
    assert np.allclose(big.feat[:], fig["feat"])
    assert np.array_equal(big.label, fig["label"])
    split = big.split
    assert [int((split == c).sum()) for c in range(3)] == list(fig["split"])
    assert bool((big.label[split == 3] == -1).all())  # unlabelled: in no split
    assert big.num_edges == 2 * fig["edges"]
    assert DataConfig(name="ogbn-papers100M", root=str(tmp_path)).name == "ogbn-papers100M"
    g = load_dataset(DataConfig(name="ogbn-papers100M", root=str(tmp_path)))  # small enough to load whole
    assert g.num_nodes() == fig["nodes"] and int(g.ndata["train_mask"].sum()) == fig["split"][0]
    assert torch.equal(g.in_degrees(), torch.from_numpy(big.in_degree))


@unit
def test_papers100m_at_full_size_is_not_loaded_whole(tmp_path, served, monkeypatch):
    served("ogbn-papers100M")
    monkeypatch.setattr(ogb_mod, "BIG_LOAD_LIMIT", 10)
    with pytest.raises(ConfigError) as err:
        load_ogb("ogbn-papers100M", tmp_path)
    assert "too many to load whole" in str(err.value) and "--partition.prebuilt" in str(err.value)


@unit
def test_an_unknown_name_points_to_the_dgl_route():
    with pytest.raises(ConfigError) as err:
        load_config(None, ["--data.name=ogbn-proteins"])
    msg = str(err.value)
    assert "ogbn-arxiv, ogbn-products, ogbn-mag, ogbn-papers100M" in msg
    assert "dgl.save_graphs(path, [g]) and use --data.name=dgl --data.path=path" in msg and "\n" not in msg


def test_arxiv_by_name_trains(tmp_path, served):
    """A small graph in OGB's layout, loaded by name from the loopback server and trained end to end (two
    spawned workers): accuracy far above the majority class."""
    from clitools import train

    fig, server = served("ogbn-arxiv", nodes=1200, classes=4, width=16)
    root = tmp_path / "data"
    load_ogb("ogbn-arxiv", root)  # downloaded and checked here (the known sizes are this process's)
    s = train(
        tmp_path / "run",
        "--data.name=ogbn-arxiv",
        f"--data.root={root}",
        "--partition.num_parts=2",
        "--train.epochs=8",
        "--train.eval_every=8",
        "--train.batch_size=200",
        "--train.fanouts=[5,5]",
        "--model.hidden=32",
    )
    assert s["dataset"] == "ogbn-arxiv" and s["num_parts"] == 2 and s["feature_bytes_per_epoch"] == 0
    majority = np.bincount(fig["label"]).max() / len(fig["label"])
    assert s["test_acc"] > majority + 0.3, (s["test_acc"], majority)
    assert server.hits == ["/arxiv.zip"]
