"""Cora where a user expects it: downloaded on first use into ``<data.root>/planetoid/raw``, checked against
known checksums, and offline a one-line error that names the folder and the files. The server is a real
``http.server`` on the loopback, in a thread of this process, serving files in the Planetoid format that the
test writes itself (their checksums stand in for the real ones: the table is the code's, the files the
test's); the real files are checked too where they are found."""

from __future__ import annotations

import shutil

import pytest
from datafiles import Server, closed_port_url, real_planetoid, write_planetoid

from dgl_grappa.config import ConfigError
from dgl_grappa.data import fetch
from dgl_grappa.data.fetch import SHA256, fetch_planetoid, planetoid_files
from dgl_grappa.data.planetoid import download_dir, load_planetoid

pytestmark = pytest.mark.unit


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DGL_GRAPPA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("DGL_GRAPPA_PLANETOID", raising=False)
    return tmp_path / "cache"


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """A folder of Planetoid-format Cora files and their figures; the checksum table knows them."""
    folder = tmp_path / "mirror"
    fig = write_planetoid(folder, "cora")
    for name, sha in fig["sha256"].items():
        monkeypatch.setitem(SHA256, name, sha)
    return folder, fig


def test_cora_is_downloaded_once_into_the_data_root_and_loads(tmp_path, cache, mirror, monkeypatch):
    folder, fig = mirror
    root = tmp_path / "data"
    with Server(folder) as url:
        monkeypatch.setenv("DGL_GRAPPA_PLANETOID_URL", url)
        g = load_planetoid("cora", root)
    assert (g.num_nodes(), g.num_edges(), g.ndata["feat"].shape[1]) == (fig["nodes"], fig["edges"], fig["width"])
    raw = download_dir(root)
    assert raw == root / "planetoid" / "raw"
    assert sorted(p.name for p in raw.iterdir() if not p.name.startswith(".")) == sorted(planetoid_files("cora"))
    for name in planetoid_files("cora"):
        assert (raw / name).read_bytes() == (folder / name).read_bytes()
    assert [p.name for p in raw.iterdir() if p.name.endswith(".part")] == []
    # Offline now: the files in the root's download folder serve a second load without a request.
    monkeypatch.setenv("DGL_GRAPPA_PLANETOID_URL", closed_port_url())
    assert load_planetoid("cora", root).num_nodes() == fig["nodes"]


def test_a_file_that_is_not_the_known_one_is_refused_and_deleted(tmp_path, cache, mirror, monkeypatch):
    folder, _ = mirror
    (folder / "ind.cora.graph").write_bytes((folder / "ind.cora.graph").read_bytes()[:-1] + b"!")
    root = tmp_path / "data"
    with Server(folder) as url, pytest.raises(ConfigError) as err:
        monkeypatch.setenv("DGL_GRAPPA_PLANETOID_URL", url)
        load_planetoid("cora", root)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("ind.cora.graph downloaded from http://127.0.0.1:")
    assert f"not the known {SHA256['ind.cora.graph'][:16]}... (it was deleted)" in msg
    raw = download_dir(root)
    assert not (raw / "ind.cora.graph").exists()
    assert [p.name for p in raw.iterdir() if p.name.endswith(".part")] == []


def test_offline_the_error_names_the_folder_and_the_eight_files(tmp_path, cache, monkeypatch):
    url = closed_port_url()
    monkeypatch.setenv("DGL_GRAPPA_PLANETOID_URL", url)
    with pytest.raises(ConfigError) as err:
        fetch_planetoid("citeseer", cache / "raw", "citeseer: ")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"citeseer: downloading ind.citeseer.x from {url} failed (")
    assert f"put {', '.join(planetoid_files('citeseer'))} into '{cache / 'raw'}'" in msg
    assert not (cache / "raw").exists()  # no file, whole or partial, and no folder made for them


@pytest.mark.planetoid
def test_the_checksum_table_is_the_real_files(tmp_path, monkeypatch):
    """The table itself, against the real files (deselected where they are not found): served and fetched."""
    real = real_planetoid()
    assert real is not None, "the real Planetoid files are not here (conftest deselects this test then)"
    served = tmp_path / "served"
    served.mkdir()
    for name in planetoid_files("cora") + planetoid_files("citeseer"):
        shutil.copy(real / name, served / name)
    with Server(served) as url:
        monkeypatch.setenv("DGL_GRAPPA_PLANETOID_URL", url)
        for name in ("cora", "citeseer"):
            fetch_planetoid(name, tmp_path / "got")
    assert sorted(p.name for p in (tmp_path / "got").iterdir() if p.name.startswith("ind.")) == sorted(fetch.SHA256)
