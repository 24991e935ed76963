"""The output folders a job names (``run.output_dir``, ``checkpoint.dir``, ``partition.out_dir``), checked before
anything starts.

Both runtimes and the commands above them ask here, so that a folder that cannot be written is a one-line
:class:`~dgl_grappa.config.ConfigError` up front rather than a traceback from a worker halfway through.
A running job also holds its folders (:class:`FolderLock`, :func:`lock_job_folders`): a second job on the
same ``run.output_dir`` or ``checkpoint.dir`` is refused in one line before it reads, removes or writes
anything there.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import json
import os
import socket
import tempfile
from pathlib import Path

from ..config import ConfigError


def check_output_dir(path: str | os.PathLike, key: str) -> None:
    """Raise a one-line ConfigError unless folder ``path`` exists or can be created, and is writable.

    Nothing is left behind: folders created for the test (and a probe file) are removed.

    Args:
        path: the folder.
        key: the setting that names it (for the message), e.g. ``run.output_dir``.

    Example:
        >>> check_output_dir(tempfile.mkdtemp(), "run.output_dir")
    """
    target = Path(path).absolute()
    missing = []
    p = target
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    if not p.is_dir():
        raise ConfigError(f"{key}={path} cannot be created: {p} is a file, not a folder; choose another folder")
    try:
        for d in reversed(missing):
            d.mkdir()
        with tempfile.NamedTemporaryFile(dir=target, prefix=".probe-"):
            pass
    except OSError as exc:
        why = "no space left" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc)).lower()
        raise ConfigError(
            f"{key}={path} cannot be created or written ({why}); choose a writable folder, e.g. --{key}=runs/<name>"
        ) from None
    finally:
        for d in missing:  # deepest first
            try:
                d.rmdir()
            except OSError:
                pass


def replacing(folder: str | os.PathLike, names: list[str]) -> str | None:
    """The log line that says what of an earlier run in ``folder`` a new run replaces, or None if nothing.

    A run writes over its own output folder, as a build writes over its last build; the line says so
    before anything is replaced, so a result worth keeping can still be copied away (or the run
    stopped, or pointed at another folder).

    Example:
        >>> d = Path(tempfile.mkdtemp()); _ = (d / "report.md").write_text("earlier")
        >>> replacing(d, ["report.md", "compare.json"]) == f"replacing the earlier run's report.md in {d}"
        True
    """
    found = [n for n in names if (Path(folder) / n).exists()]
    if not found:
        return None
    return f"replacing the earlier run's {', '.join(found)} in {folder}"


LOCK_NAME = ".dgl_grappa.lock"
"""The lock file a running job holds in each folder it writes (``run.output_dir``, ``checkpoint.dir``)."""


class FolderLock:
    """One job per folder: an exclusive ``flock`` on ``<folder>/.dgl_grappa.lock``, held while the job runs.

    The kernel releases the lock when its holder exits in any way (SIGKILL included), so a lock file
    left by a dead job is simply taken over. The file records the holder's pid, host and start time,
    which is what a refused job is told. Nothing else in the folder is touched by a refused job.

    Args:
        folder: the folder (created if missing).
        key: the setting that names it, for the message (``run.output_dir``, ``checkpoint.dir``).

    Example:
        >>> with FolderLock(tempfile.mkdtemp(), "run.output_dir") as lock:
        ...     lock.held
        True
    """

    def __init__(self, folder: str | os.PathLike, key: str):
        self.folder, self.key = Path(folder), key
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> FolderLock:
        """Take the lock; raise a one-line ConfigError naming the running job when another holds it."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / LOCK_NAME
        # O_CLOEXEC: the job's own child processes do not inherit (and so cannot keep) the lock.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise ConfigError(
                f"{self.key}={self.folder} is in use by another job ({holder}); wait for it to end "
                f"or stop it, or give this job another folder with --{self.key}=<folder>"
            ) from None
        except OSError:
            os.close(fd)
            raise
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Let go of the lock (safe twice); the file stays, empty of meaning once unlocked."""
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    """The running job as the lock file records it: "pid 123 on host h, since 2026-01-01 10:00:00 UTC"."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        return f"pid {info['pid']} on host {info['host']}, since {info['since']}"
    except (ValueError, KeyError, OSError):
        return "its lock file names no holder yet"


def lock_job_folders(out_dir: str | os.PathLike, ckpt_dir: str | os.PathLike | None) -> list[FolderLock]:
    """Lock a job's output folder and (when it lies elsewhere) its checkpoint folder; the locks, held.

    Raises:
        ConfigError: another job holds one of them (nothing is locked then).

    Example:
        >>> d = tempfile.mkdtemp()
        >>> locks = lock_job_folders(d, os.path.join(d, "checkpoints"))
        >>> [lk.key for lk in locks]
        ['run.output_dir']
        >>> for lk in locks: lk.release()
    """
    out = Path(out_dir).absolute()
    wanted = [(out, "run.output_dir")]
    if ckpt_dir:
        ck = Path(ckpt_dir).absolute()
        if ck != out and out not in ck.parents:  # a folder inside the output folder is covered by its lock
            wanted.append((ck, "checkpoint.dir"))
    locks: list[FolderLock] = []
    try:
        for folder, key in wanted:
            locks.append(FolderLock(folder, key).acquire())
    except BaseException:
        for lk in locks:
            lk.release()
        raise
    return locks
