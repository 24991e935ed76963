"""Run a DistDGL script as ``__main__``, this machine's id applied first: how the launcher starts a user's script.

``python -m dgl_grappa.distdgl.runscript SCRIPT [ARGS...]`` behaves as ``python SCRIPT [ARGS...]``
(``sys.argv``, ``sys.path[0]`` = the script's folder, ``__name__ == "__main__"``, the exit status),
with one difference: the package :mod:`dgl_grappa.distdgl` is imported before the script's first
line, which applies the machine-id override (:mod:`.machine_id`) when the launcher set
``DGL_GRAPPA_MACHINE_ID``: the script itself needs no ``import dgl_grappa``. Two more, neither visible
to the script: when the launcher set ``DGL_GRAPPA_EPOCHS``, a trainer measures every pass over its DGL
distributed or drop-in loaders (:mod:`.loader_meter`); and a ``ConfigError`` of the package's (a drop-in
loader on a folder that lacks what it reads, say) ends the script with its one line, ``error: ...``
(after the traceback), and the status the launcher reads as a user error.

The script runs through :func:`runpy.run_path` under the name ``__main__``, so what it pickles by
name resolves wherever the same script runs: a ``DistEmbedding`` initialiser defined in the
script (``__main__.initializer``) is found by the servers, which run this same command with
``DGL_ROLE=server`` as DGL's ``tools/launch.py`` has them, and by DGL's sampler processes,
which multiprocessing starts by re-running the script as ``__mp_main__``.

Example::

    DGL_ROLE=server DGL_SERVER_ID=0 ... python -m dgl_grappa.distdgl.runscript node_classification.py \\
        --graph_name g --ip_config ip_config.txt --part_config parts/g.json
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback

from ..cluster.procs import EXIT_USER_ERROR
from ..config import ConfigError
from . import machine_id  # noqa: F401  (first: applies the override, here and in spawned children)
from .loader_meter import install

MODULE = "dgl_grappa.distdgl.runscript"
"""``python -m`` this module to run a script the way the launcher does (``__name__`` is ``__main__`` then)."""


def main(argv: list[str] | None = None) -> None:
    """Run ``argv[0]`` as ``__main__`` with ``argv[1:]`` as its arguments; its exit status is ours."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(f"usage: python -m {MODULE} SCRIPT [ARGS...]\n\n{__doc__.splitlines()[0]}")
        return
    if not argv or not os.path.isfile(argv[0]):
        what = f"{argv[0]} is not a file" if argv else "no script given"
        sys.exit(f"python -m {MODULE}: {what}; usage: python -m {MODULE} SCRIPT [ARGS...]")
    sys.argv = argv
    # As `python SCRIPT` does: the script's own folder first, so its sibling modules import
    # (DGL's train_dist_transductive.py imports train_dist.py); -m had put the working directory there.
    sys.path[0] = os.path.dirname(os.path.realpath(argv[0]))
    install()  # when the launcher asks (DGL_GRAPPA_EPOCHS): before the script makes a loader
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except ConfigError as exc:  # the package's own one-line errors (the script's are its own)
        traceback.print_exc()
        print(f"{os.path.basename(argv[0])}: error: {exc}", file=sys.stderr, flush=True)
        sys.exit(EXIT_USER_ERROR)


if __name__ == "__main__":
    main()
