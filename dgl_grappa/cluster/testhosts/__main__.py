"""``python -m dgl_grappa.cluster.testhosts``: emulated hosts by hand (see :func:`.cli.main`)."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
