"""What users start and import: every ``python -m`` entry (new names, and the DistDGL entries users'
scripts call) and the public API of ``import dgl_grappa``."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Every module a user or a launcher starts with ``python -m``, and what its usage line names.
ENTRIES = {
    "dgl_grappa": "python -m dgl_grappa",
    "dgl_grappa.distdgl": "python -m dgl_grappa.distdgl",  # users' scripts call it: unchanged
    "dgl_grappa.distdgl.train": "--ip_config",  # the DistDGL trainer (TRAINER_MODULE)
    "dgl_grappa.distdgl.runscript": "SCRIPT [ARGS...]",  # how the launcher runs a user's script
    "dgl_grappa.cluster.guard": "python -m dgl_grappa.cluster.guard",
    "dgl_grappa.cluster.testhosts": "python -m dgl_grappa.cluster.testhosts",
    "dgl_grappa.cluster.netns": "python -m dgl_grappa.cluster.netns",
    "dgl_grappa.cluster.liveness": "python -m dgl_grappa.cluster.liveness",  # a worker's reporter, beside it
}


@pytest.mark.parametrize("module", sorted(ENTRIES))
def test_every_python_m_entry_starts(module):
    p = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert ENTRIES[module] in p.stdout, p.stdout[:500]


def test_the_modules_that_run_as_main_are_the_listed_entries():
    """A new ``if __name__ == "__main__"`` module must be listed above (and so be tested)."""
    from pathlib import Path

    pkg = Path(__file__).resolve().parent.parent / "dgl_grappa"
    found = set()
    for f in pkg.rglob("*.py"):
        if 'if __name__ == "__main__"' in f.read_text():
            parts = f.relative_to(pkg.parent).with_suffix("").parts
            found.add(".".join(parts[:-1] if parts[-1] == "__main__" else parts))
    assert found == set(ENTRIES)


def test_import_dgl_grappa_loads_nothing_heavy_and_the_api_resolves():
    code = (
        "import sys, dgl_grappa; heavy = [m for m in ('torch', 'dgl', 'yaml', 'numpy') if m in sys.modules]; "
        "print(heavy); print(sorted(dgl_grappa.__all__))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    heavy, api = p.stdout.strip().splitlines()
    assert heavy == "[]"
    assert api == str(
        sorted(
            [
                "GrappaEdgeLoader",
                "GrappaHeteroLoader",
                "GrappaLoader",
                "LoaderOptions",
                "load_config",
                "make_correction",
                "prepare",
                "run_worker",
            ]
        )
    )


def test_the_distdgl_launcher_starts_without_torch_or_dgl():
    """The process that starts and supervises a DistDGL job's servers and trainers (``python -m dgl_grappa.distdgl
    _launch``) imports neither: they would delay every job's first server by seconds."""
    code = (
        "import sys, dgl_grappa.distdgl.cli, dgl_grappa.distdgl.launcher; "
        "print([m for m in ('torch', 'dgl') if m in sys.modules])"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "[]", p.stdout + p.stderr[-2000:]


@pytest.mark.unit
def test_the_public_api_is_the_modules_objects():
    import dgl_grappa
    from dgl_grappa.config import load_config
    from dgl_grappa.method.dropin import GrappaEdgeLoader, GrappaHeteroLoader, GrappaLoader, LoaderOptions
    from dgl_grappa.method.reducers import make_correction
    from dgl_grappa.native.trainer import run_worker
    from dgl_grappa.partition.aggregates import prepare

    assert (
        dgl_grappa.GrappaLoader,
        dgl_grappa.make_correction,
        dgl_grappa.load_config,
        dgl_grappa.run_worker,
        dgl_grappa.prepare,
    ) == (GrappaLoader, make_correction, load_config, run_worker, prepare)
    assert (dgl_grappa.GrappaEdgeLoader, dgl_grappa.GrappaHeteroLoader) == (GrappaEdgeLoader, GrappaHeteroLoader)
    assert dgl_grappa.LoaderOptions is LoaderOptions
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        dgl_grappa.nope  # noqa: B018
