"""Cora where a user expects it: downloaded on first use into the cache, checked against known checksums,
and offline a one-line error that names the folder and the files. The server is a real ``http.server`` on
the loopback, in a thread of this process, serving the shared copy of the files."""
from __future__ import annotations

import functools
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from dgl_grappa.config import ConfigError, DataConfig
from dgl_grappa.data.fetch import SHA256, fetch_planetoid, planetoid_files
from dgl_grappa.data.planetoid import download_dir, load_planetoid

pytestmark = pytest.mark.unit

SHARED = Path(DataConfig().root)  # the shared copy the other Cora tests read


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test's output stays the test's
        pass


@pytest.fixture
def serve(tmp_path):
    """serve(folder) -> the base URL of a file server on 127.0.0.1 for ``folder`` (stopped after the test)."""
    servers = []

    def start(folder: Path) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        servers.append((server, thread))
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield start
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        assert not thread.is_alive()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DGL_GRAPPA_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _closed_port_url() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)  # a port nobody listens on once closed
    port = server.server_address[1]
    server.server_close()
    return f"http://127.0.0.1:{port}"


def test_cora_is_downloaded_once_into_the_cache_and_loads(tmp_path, cache, serve, monkeypatch):
    monkeypatch.setenv("DGL_GRAPPA_PLANETOID_URL", serve(SHARED))
    g = load_planetoid("cora", tmp_path / "no_copy_here")
    assert (g.num_nodes(), g.num_edges(), g.ndata["feat"].shape[1]) == (2708, 10556, 1433)
    raw = download_dir()
    assert raw == cache / "planetoid" / "raw"
    assert sorted(p.name for p in raw.iterdir() if not p.name.startswith(".")) == sorted(planetoid_files("cora"))
    for name in planetoid_files("cora"):
        assert (raw / name).read_bytes() == (SHARED / name).read_bytes()
    assert [p.name for p in raw.iterdir() if p.name.endswith(".part")] == []
    # Offline now: the cached files serve a second load without a request.
    monkeypatch.setenv("DGL_GRAPPA_PLANETOID_URL", _closed_port_url())
    assert load_planetoid("cora", tmp_path / "no_copy_here").num_nodes() == 2708


def test_a_file_that_is_not_the_known_one_is_refused_and_deleted(tmp_path, cache, serve, monkeypatch):
    mirror = tmp_path / "mirror"
    shutil.copytree(SHARED, mirror)
    (mirror / "ind.cora.graph").write_bytes((SHARED / "ind.cora.graph").read_bytes()[:-1] + b"!")
    monkeypatch.setenv("DGL_GRAPPA_PLANETOID_URL", serve(mirror))
    with pytest.raises(ConfigError) as err:
        load_planetoid("cora", tmp_path / "no_copy_here")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("ind.cora.graph downloaded from http://127.0.0.1:")
    assert f"not the known {SHA256['ind.cora.graph'][:16]}... (it was deleted)" in msg
    raw = download_dir()
    assert not (raw / "ind.cora.graph").exists()
    assert [p.name for p in raw.iterdir() if p.name.endswith(".part")] == []


def test_offline_the_error_names_the_cache_folder_and_the_eight_files(tmp_path, cache, monkeypatch):
    url = _closed_port_url()
    monkeypatch.setenv("DGL_GRAPPA_PLANETOID_URL", url)
    with pytest.raises(ConfigError) as err:
        fetch_planetoid("citeseer", cache / "raw", "citeseer: ")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"citeseer: downloading ind.citeseer.x from {url} failed (")
    assert f"put {', '.join(planetoid_files('citeseer'))} into '{cache / 'raw'}'" in msg
    assert [p.name for p in (cache / "raw").iterdir()] == [".lock"]  # no file, whole or partial
