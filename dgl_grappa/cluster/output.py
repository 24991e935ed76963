"""Library output into a log file: what DGL, METIS and their C code print goes to the run's log,
the package's own log lines stay on the terminal.

DGL's ``partition_graph`` prints a dozen lines per call from Python (timings, "peak mem", its
own edge-cut count: the edges no part owns, always 0), and METIS prints its own cut count from C
(``LOG(INFO)`` on file descriptor 2). Neither is what the package reports, so
:func:`library_output_to` moves file descriptors 1 and 2 (and with them Python's ``print``)
onto a log file for the span of one call, and restores them in ``finally``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from pathlib import Path

_LOCK = threading.Lock()  # the descriptors are the process's: one redirection at a time


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):  # closed or replaced by a caller
            pass


def _fd(stream) -> int | None:
    """The file descriptor a stream writes to, or None (a notebook's stream, pytest's capture)."""
    try:
        return stream.fileno()
    except (AttributeError, ValueError, OSError):
        return None


@contextlib.contextmanager
def library_output_to(log_path: str | os.PathLike, logger: str = "dgl_grappa"):
    """Send everything printed to stdout/stderr (C and Python) to ``log_path`` for the block.

    File descriptors 1 and 2 point at the file (C code's prints), and so do ``sys.stdout`` and
    ``sys.stderr`` (Python's, also where they are not those descriptors, as in a notebook). The file
    is appended to (created with its folder if missing). The handlers of ``logger`` that wrote to
    descriptor 1 or 2 keep writing to where those pointed, so the package's own lines stay on the
    terminal. Everything is restored on the way out, also when the block raises.

    Example:
        >>> import tempfile
        >>> log = Path(tempfile.mkdtemp()) / "lib.log"
        >>> with library_output_to(log):
        ...     _ = os.write(2, b"METIS says hello\\n")   # as C code writes
        >>> log.read_text()
        'METIS says hello\\n'
    """
    path = Path(log_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _LOCK:
        _flush()
        saved = {fd: os.dup(fd) for fd in (1, 2)}
        terminals, moved = {}, []
        for h in logging.getLogger(logger).handlers:
            fd = _fd(getattr(h, "stream", None)) if isinstance(h, logging.StreamHandler) else None
            if fd in saved:
                if fd not in terminals:
                    terminals[fd] = open(os.dup(saved[fd]), "w", buffering=1, encoding="utf-8", errors="replace")
                moved.append((h, h.setStream(terminals[fd])))
        py_streams = sys.stdout, sys.stderr
        try:
            with open(path, "a", buffering=1, encoding="utf-8", errors="replace") as sink:
                os.dup2(sink.fileno(), 1)
                os.dup2(sink.fileno(), 2)
                sys.stdout = sys.stderr = sink
                try:
                    yield path
                finally:
                    _flush()
                    sys.stdout, sys.stderr = py_streams
        finally:
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            for h, old in moved:
                h.setStream(old)
            for t in terminals.values():
                t.close()
