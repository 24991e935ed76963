"""The Planetoid files (Cora, CiteSeer) downloaded on first use into a cache folder, as DGL's and PyG's
datasets do, each checked against its known SHA-256.

The eight ``ind.<name>.*`` files come one by one from the Planetoid authors' repository, the URLs PyG's
``Planetoid`` dataset uses (:data:`PLANETOID_URL`; ``$DGL_GRAPPA_PLANETOID_URL`` replaces the base, e.g.
a mirror). Those are the original files under their original names, the very ones a user may keep in
``data.root``, so one checksum table serves both and a mismatch names the file. (DGL's own download is a
zip of the same files renamed ``ind.cora_v2.*``: one more format to unpack for nothing.)

Each file is written under a temporary name, its SHA-256 compared with :data:`SHA256`, and only then
renamed into place: a file that does not match is deleted and reported in one line, and an interrupted
download leaves no file that looks complete. Every wait is bounded: :data:`TIMEOUT_S` per connection or
read, :data:`DEADLINE_S` for the whole download.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Callable

from ..config import ConfigError
from ..env import ENV_PLANETOID_URL

PLANETOID_URL = "https://github.com/kimiyoung/planetoid/raw/master/data"
"""Where the files are fetched from (``<base>/ind.cora.x``, ...), unless ``$DGL_GRAPPA_PLANETOID_URL``."""
TIMEOUT_S = 30.0
"""Seconds one connection or one read may wait."""
DEADLINE_S = 600.0
"""Seconds the whole download (the eight files) may take."""

SHA256 = {
    "ind.citeseer.allx": "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668",
    "ind.citeseer.ally": "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95",
    "ind.citeseer.graph": "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7",
    "ind.citeseer.test.index": "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4",
    "ind.citeseer.tx": "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21",
    "ind.citeseer.ty": "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce",
    "ind.citeseer.x": "d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6",
    "ind.citeseer.y": "8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924",
    "ind.cora.allx": "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",
    "ind.cora.ally": "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",
    "ind.cora.graph": "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",
    "ind.cora.test.index": "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",
    "ind.cora.tx": "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",
    "ind.cora.ty": "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",
    "ind.cora.x": "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",
    "ind.cora.y": "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",
}
"""SHA-256 of each original Planetoid file (the authors' release, MIT licence)."""
SUFFIXES = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")
"""The eight files of a dataset: ``ind.<name>.<suffix>``."""


def planetoid_files(name: str) -> list[str]:
    """The file names of dataset ``name``.

    Example:
        >>> planetoid_files("cora")[:3]
        ['ind.cora.x', 'ind.cora.y', 'ind.cora.tx']
    """
    return [f"ind.{name}.{s}" for s in SUFFIXES]


def base_url() -> str:
    """The URL the files are fetched from: ``$DGL_GRAPPA_PLANETOID_URL``, else :data:`PLANETOID_URL`."""
    return (os.environ.get(ENV_PLANETOID_URL) or PLANETOID_URL).rstrip("/")


def _fetch_one(url: str, dest: Path, deadline: float) -> str:
    """Write ``url`` to ``dest`` (a temporary name); its SHA-256."""
    h = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp, open(dest, "wb") as out:
        while chunk := resp.read(1 << 16):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the download took over {DEADLINE_S:.0f} s")
            h.update(chunk)
            out.write(chunk)
    return h.hexdigest()


def fetch_planetoid(name: str, folder: Path, explain: str = "") -> Path:
    """Make ``folder`` hold the eight verified files of ``name``, downloading those it lacks.

    Several processes may ask at once: one downloads while the others wait on the folder's lock.

    Args:
        name: ``cora`` or ``citeseer``.
        folder: the cache folder the files go in.
        explain: why the files are needed here (the start of the offline error).

    Returns:
        ``folder``.

    Raises:
        ConfigError: the files could not be downloaded (the one line names ``folder`` and the files to
            put there), or a downloaded file is not the known one (it is deleted).
    """
    files = planetoid_files(name)
    lock, undo = lock_folder(folder, ".lock")
    url = base_url()
    deadline = time.monotonic() + DEADLINE_S
    try:
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            _fetch_all(files, folder, url, deadline, explain)
    except ConfigError:
        undo()
        raise
    return folder


def lock_folder(folder: Path, lock: str) -> tuple[IO, Callable[[], None]]:
    """Make ``folder`` (and its parents) and open its lock file ``lock`` for a download into it.

    Returns:
        (the open lock file, undo): ``undo()`` after a failed download removes the lock file (unless it was
        there before) and the folders made here, where nothing else is in them: the disk as the download found it.

    Raises:
        ConfigError: the folder cannot be made or written.
    """
    made = [p for p in (folder, *folder.parents) if not p.exists()]  # deepest first
    lock_was_there = (folder / lock).exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fh = open(folder / lock, "w")
    except OSError as exc:
        raise ConfigError(
            f"cannot create the data folder '{folder}' ({exc.strerror}); set --data.root or env "
            "DGL_GRAPPA_DATA to a writable folder"
        ) from None

    def undo() -> None:
        if not lock_was_there:
            (folder / lock).unlink(missing_ok=True)
        for p in made:
            try:
                p.rmdir()
            except OSError:
                break

    return fh, undo


def _fetch_all(files: list[str], folder: Path, url: str, deadline: float, explain: str) -> None:
    """Download the files ``folder`` lacks, each checked before it is renamed into place."""
    for fname in files:
        dest = folder / fname
        if dest.is_file():
            continue  # renamed into place only after its checksum matched
        tmp = folder / f".{fname}.{os.getpid()}.part"
        try:
            got = _fetch_one(f"{url}/{fname}", tmp, deadline)
        except (OSError, urllib.error.URLError, ValueError) as exc:
            tmp.unlink(missing_ok=True)
            reason = " ".join(str(getattr(exc, "reason", None) or exc).split())
            raise ConfigError(
                f"{explain}downloading {fname} from {url} failed ({reason}); put {', '.join(files)} into "
                f"'{folder}' (or set --data.root / env DGL_GRAPPA_PLANETOID to a folder that has them)"
            ) from None
        except BaseException:  # an interrupt: no partial file stays behind
            tmp.unlink(missing_ok=True)
            raise
        if got != SHA256[fname]:
            tmp.unlink()
            raise ConfigError(
                f"{fname} downloaded from {url} has SHA-256 {got[:16]}..., not the known "
                f"{SHA256[fname][:16]}... (it was deleted); the server sent another file: check "
                f"env DGL_GRAPPA_PLANETOID_URL, or put the original {', '.join(files)} into '{folder}'"
            )
        os.replace(tmp, dest)


__all__ = [
    "DEADLINE_S",
    "PLANETOID_URL",
    "SHA256",
    "SUFFIXES",
    "TIMEOUT_S",
    "base_url",
    "fetch_planetoid",
    "lock_folder",
    "planetoid_files",
]
