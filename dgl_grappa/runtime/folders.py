"""The output folders a job names (``run.output_dir``, ``checkpoint.dir``, ``partition.out_dir``), checked before
anything starts.

Both runtimes and the commands above them ask here, so that a folder that cannot be written is a one-line
:class:`~dgl_grappa.config.ConfigError` up front rather than a traceback from a worker halfway through.
"""
from __future__ import annotations

import errno
import os
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
        raise ConfigError(f"{key}={path} cannot be created or written ({why}); choose a writable folder, "
                          f"e.g. --{key}=runs/<name>") from None
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

