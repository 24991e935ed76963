"""The DistDGL trainer (with the drop-in ``--grappa`` flag), as a script: a thin entry point.

The trainer itself is the module :mod:`dgl_grappa.distdgl.train` (it ships with the
package; ``python -m dgl_grappa.distdgl --config C`` runs it). This file is for users who
start a script of their own: ``--compare.script=scripts/distdgl_train.py`` runs exactly
the same trainer, and a copy of ``dgl_grappa/distdgl/train.py`` is the place to start.
"""

# First: importing dgl_grappa.distdgl gives each trainer its machine id on a one-host cluster.
import dgl_grappa.distdgl  # noqa: F401
from dgl_grappa.distdgl.train import main

if __name__ == "__main__":
    main()
