"""Package layout: imports run one way (config -> data/partition -> method core -> runtimes -> compare/CLI).

The import graph is read from the source with ``ast``: module-level and function-level
imports alike (a function-level import closes a loop as surely as a top-level one, only
later), relative imports resolved, and an import of ``a.b.c`` counted as an import of
the packages ``a.b`` too (Python runs their ``__init__`` first, so their re-exports are
imports of whoever imports the submodule). A loop is a strongly connected component of
more than one module (Tarjan).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dgl_grappa"


def _module_name(path: Path, top: Path) -> str:
    parts = path.relative_to(top.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (anywhere in its body).

    Args:
        package_dir: folder of a top-level package (holds ``__init__.py``).

    Returns:
        An edge set per module of the package (dotted names, packages by their own name).
    """
    files = {_module_name(f, package_dir): f for f in package_dir.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        # The package a relative import starts from: the module's own for an __init__.
        here = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = here.split(".")
                    pkg = pkg[: len(pkg) - node.level + 1]
                    base = ".".join(pkg + ([base] if base else []))
                # "from pkg import name": name may be a submodule or an attribute.
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in files:
                    t = t.rpartition(".")[0]
                if not t:
                    continue  # outside the package
                # Importing a.b.c runs a.b's __init__ first, unless a.b is already one of
                # this module's own enclosing packages (those are initialising already).
                mine = set(_ancestors(mod))
                for u in _ancestors(t) + [t]:
                    if u != mod and u not in mine:
                        edges[mod].add(u)
    return edges


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


# The direction, as layers of folders, bottom first: a module may import its own folder or a
# lower layer's, never a higher one. Each entry is a sub-package of dgl_grappa or one of its
# top-level modules; every folder and top-level module must be placed (the test names any
# that is not), and ARCHITECTURE.md's layer table must say the same (test below).
LAYERS = [
    ["config", "env"],  # 0 the config tree, the environment variables
    ["cluster"],  # 1 processes, hosts, networks
    ["data"],  # 2 datasets
    ["partition"],  # 3 partitionings in DGL's layout
    ["method", "dropin", "reducers"],  # 4 the method (dropin, reducers: its old import paths, deprecated)
    ["runtime"],  # 5 what both runtimes share: metrics, checkpoints, evaluation, repartitioning
    ["kinds"],  # 6 the kinds of job: node, link, heterogeneous (one interface, a registry)
    ["native", "distdgl"],  # 7 the two runtimes, side by side
    ["bench"],  # 8 compare, the benchmark matrix, reports, the capacity model
    ["cli", "__main__"],  # 9 the command line
]
# Layers whose members stand side by side: none imports another (the DistDGL baseline
# does not lean on Grappa's trainer, nor the trainer on DistDGL).
SIDE_BY_SIDE = {7}


def top_level_units(package_dir: Path) -> list[str]:
    """The package's sub-packages and top-level modules: the units that LAYERS places."""
    units = [d.name for d in package_dir.iterdir() if (d / "__init__.py").is_file()]
    units += [f.stem for f in package_dir.glob("*.py") if f.name != "__init__.py"]
    return sorted(units)


def _place(mod: str) -> tuple[int, str] | tuple[None, None]:
    """(layer, top-level unit inside the package) of a module."""
    rel = mod.split(".", 1)[1] if "." in mod else ""
    unit = rel.split(".", 1)[0]
    for layer, names in enumerate(LAYERS):
        if unit in names:
            return layer, unit
    return None, None


def _layer(mod: str) -> int | None:
    return _place(mod)[0]


def against_the_direction(edges: dict[str, set[str]]) -> list[str]:
    """Imports of a higher layer, or between two side-by-side members of one layer."""
    out = []
    for m, targets in edges.items():
        (lm, nm) = _place(m)
        for t in targets:
            (lt, nt) = _place(t)
            if lm is None or lt is None:
                continue
            if lt > lm or (lt == lm and lm in SIDE_BY_SIDE and nt != nm):
                out.append(f"{m} (layer {lm}) imports {t} (layer {lt})")
    return sorted(out)


@pytest.mark.unit
def test_every_folder_and_top_level_module_has_a_layer():
    placed = [n for names in LAYERS for n in names]
    units = top_level_units(PACKAGE)
    assert sorted(set(units) - set(placed)) == [], "place these in LAYERS (tests/test_layout.py)"
    assert sorted(set(placed) - set(units)) == [], "LAYERS names units the package does not have"
    assert len(placed) == len(set(placed)), "a unit is in two layers"


@pytest.mark.unit
def test_architecture_md_shows_the_same_layers():
    """ARCHITECTURE.md's layer table (rows ``| N | `unit`, `unit` | ... |``) is LAYERS."""
    import re

    rows = {}
    for line in (ROOT / "ARCHITECTURE.md").read_text().splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|([^|]*)\|", line)
        if m:
            rows[int(m.group(1))] = sorted(re.findall(r"`([A-Za-z_]+)/?`", m.group(2)))
    assert rows == {i: sorted(names) for i, names in enumerate(LAYERS)}


@pytest.mark.unit
def test_imports_run_one_way():
    edges = import_graph(PACKAGE)
    unplaced = sorted(m for m in edges if m != "dgl_grappa" and _layer(m) is None)
    assert unplaced == [], f"place these modules in LAYERS: {unplaced}"
    wrong = against_the_direction(edges)
    assert wrong == [], "imports against the direction:\n" + "\n".join(wrong)


# The test-host harness (emulated hosts for tests and benchmarks) is a package inside cluster/,
# off the production launch path: outside the harness only the module that resolves
# launch.remote=netns imports it (ARCHITECTURE.md, layer 1).
HARNESS = "dgl_grappa.cluster.testhosts"
HARNESS_IMPORTERS = ["dgl_grappa.cluster.access"]


def harness_importers(edges: dict[str, set[str]], harness: str = HARNESS) -> list[str]:
    """Modules outside ``harness`` that import it or one of its modules."""
    inside = lambda m: m == harness or m.startswith(harness + ".")  # noqa: E731
    return sorted(m for m, targets in edges.items() if not inside(m) and any(inside(t) for t in targets))


@pytest.mark.unit
def test_only_the_launch_choice_imports_the_test_host_harness():
    assert harness_importers(import_graph(PACKAGE)) == HARNESS_IMPORTERS
    # the check sees an import anywhere in a module, e.g. one inside a function of remote.py
    edges = {
        "dgl_grappa.cluster.remote": {"dgl_grappa.cluster.testhosts.job"},
        "dgl_grappa.cluster.testhosts.cli": {"dgl_grappa.cluster.testhosts.job"},
    }
    assert harness_importers(edges) == ["dgl_grappa.cluster.remote"]


@pytest.mark.unit
def test_the_direction_check_flags_an_upward_and_a_sideways_import():
    edges = {
        "dgl_grappa.method.coverage": {"dgl_grappa.native.trainer"},  # the method -> a runtime
        "dgl_grappa.distdgl.metering": {"dgl_grappa.native.trainer", "dgl_grappa.runtime.evaluation"},
        "dgl_grappa.native.trainer": {"dgl_grappa.runtime.evaluation"},
    }
    assert against_the_direction(edges) == [
        "dgl_grappa.distdgl.metering (layer 7) imports dgl_grappa.native.trainer (layer 7)",
        "dgl_grappa.method.coverage (layer 4) imports dgl_grappa.native.trainer (layer 7)",
    ]


@pytest.mark.unit
def test_the_package_has_no_import_cycle():
    cycles = import_cycles(import_graph(PACKAGE))
    assert cycles == [], "modules that import each other (directly or through others): " + "; ".join(
        " <-> ".join(c) for c in cycles
    )


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root / "pkg"


@pytest.mark.unit
def test_the_checker_finds_a_loop_through_a_function_level_import(tmp_path):
    pkg = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from .b import f\n",
            "pkg/b.py": "def f():\n    from . import c\n",
            "pkg/c.py": "import pkg.a\n",
            "pkg/d.py": "from .a import f\n",  # imports into the loop, not part of it
        },
    )
    assert import_cycles(import_graph(pkg)) == [["pkg.a", "pkg.b", "pkg.c"]]


@pytest.mark.unit
def test_the_checker_counts_init_reexports_and_resolves_parent_relative_imports(tmp_path):
    pkg = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/core.py": "def helper():\n    from .side.x import g\n",
            "pkg/side/__init__.py": "from .y import h\n",  # re-export: side -> side.y
            "pkg/side/x.py": "g = 1\n",
            "pkg/side/y.py": "from ..core import helper\n",  # y -> core -> side (its __init__) -> y
        },
    )
    assert import_cycles(import_graph(pkg)) == [["pkg.core", "pkg.side", "pkg.side.y"]]


@pytest.mark.unit
def test_the_checker_does_not_count_a_package_importing_its_own_submodules(tmp_path):
    pkg = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/sub/__init__.py": "from .cli import main\n",
            "pkg/sub/cli.py": "from .job import run\n",
            "pkg/sub/job.py": "def run():\n    pass\n",
        },
    )
    assert import_cycles(import_graph(pkg)) == []


def test_the_wheel_ships_the_distdgl_trainer(tmp_path):
    """A normal (non-editable) install must be able to run the DistDGL baseline: the trainer is a module.

    Built the way ``pip install .`` builds it (in an isolated build environment: the venv's
    setuptools < 70, which dgl 2.1 needs, has no bdist_wheel without the ``wheel`` package).
    """
    from dgl_grappa.distdgl.job import TRAINER_MODULE

    src = tmp_path / "src"  # a copy, so the build leaves no build/ folder in the checkout
    shutil.copytree(PACKAGE, src / "dgl_grappa", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "setup.py", src)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--disable-pip-version-check",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("dgl_grappa-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    trainer = TRAINER_MODULE.replace(".", "/") + ".py"
    assert trainer in names, sorted(n for n in names if n.startswith("dgl_grappa/distdgl/"))
    # ... and everything it is started through: the launcher's and the trainer's entry points.
    assert {"dgl_grappa/distdgl/__main__.py", "dgl_grappa/cluster/netns.py", "dgl_grappa/cluster/procs.py"} <= names
    assert not any(n.startswith(("scripts/", "tests/")) for n in names)
