"""The ``unit`` marker (pytest.ini) means what it says: a marked test starts no process and needs no root.

Read from the source with ``ast``. A module marked as a whole (``pytestmark``) may not use
the helpers below anywhere; a test marked by its decorator may not use them in its body or
decorators, nor in the module's (or conftest's) functions and fixtures it reaches, followed
transitively by name. The helpers are the ways a test here starts processes (the
multi-process helpers, ``subprocess``, the command line in a child) or needs root
(namespaces, test hosts).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parent

SPAWNING_MODULES = {"subprocess", "multiprocessing", "torch.multiprocessing", "clitools", "fault_soak"}
"""Importing one of these (or a name from it) makes every use of the bound name a violation."""

SPAWNING_NAMES = {
    # processes
    "run_distributed",
    "spawn_workers",
    "start_processes",
    "Popen",
    "run_cli",
    "run_isolated",
    "rerun_isolated",
    "run_distdgl",
    "fork",
    # root: namespaces and test hosts
    "check_isolation",
    "require_isolation",
    "isolate_argv",
    "TestHosts",
    "check_hosts_possible",
    "needs_ns",
    "needs_hosts",
    "geteuid",
}
"""Names (or attributes) that start processes or need root, whatever module they come from."""


def _marks_unit(node: ast.expr) -> bool:
    items = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
    return any(ast.unparse(i) == "pytest.mark.unit" for i in items)


def _bound_spawners(tree: ast.AST) -> set[str]:
    """Names that imports anywhere in ``tree`` bind to a spawning module or name."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in SPAWNING_MODULES or a.name.split(".")[0] in SPAWNING_MODULES:
                    out.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            spawning_module = (node.module or "") in SPAWNING_MODULES
            for a in node.names:
                if spawning_module or a.name in SPAWNING_NAMES:
                    out.add(a.asname or a.name)
    return out


def _uses(node: ast.AST, bound: set[str]) -> set[str]:
    """Spawning names used in ``node`` (its own imports included)."""
    bound = bound | _bound_spawners(node)
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and (n.id in bound or n.id in SPAWNING_NAMES):
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and n.attr in SPAWNING_NAMES:
            out.add(ast.unparse(n))
    return out - {"pytest"}


def _referenced(fn: ast.FunctionDef) -> set[str]:
    """Names a function refers to, its parameters (fixtures) included."""
    names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    return names | {a.arg for a in fn.args.args + fn.args.kwonlyargs}


def violations(source: str, conftest: str = "") -> list[str]:
    """``test: what it uses`` for every unit-marked test (or marked module) that starts processes or needs root."""
    tree = ast.parse(source)
    bound = _bound_spawners(tree)
    module_marked = any(
        isinstance(n, ast.Assign)
        and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
        and _marks_unit(n.value)
        for n in tree.body
    )
    if module_marked:  # importing one is enough: nothing in such a module may start a process
        used = _uses(tree, bound) | bound
        return [f"<module>: {', '.join(sorted(used))}"] if used else []
    shared = ast.parse(conftest)
    # Each function with the names its own module's imports bound; the test module's win.
    functions = {n.name: (n, _bound_spawners(shared)) for n in shared.body if isinstance(n, ast.FunctionDef)}
    functions.update({n.name: (n, bound) for n in tree.body if isinstance(n, ast.FunctionDef)})
    out = []
    for name, (fn, _) in functions.items():
        if not name.startswith("test_") or not any(_marks_unit(d) for d in fn.decorator_list):
            continue
        seen, todo, used = set(), [name], set()
        while todo:
            f, its_bound = functions[todo.pop()]
            if f.name in seen:
                continue
            seen.add(f.name)
            used |= _uses(f, its_bound)
            todo += [r for r in _referenced(f) if r in functions and r not in seen]
        if used:
            out.append(f"{name}: {', '.join(sorted(used))}")
    return out


def test_no_unit_test_starts_a_process_or_needs_root():
    conftest = (TESTS / "conftest.py").read_text()
    found = {f.name: violations(f.read_text(), conftest) for f in sorted(TESTS.glob("test_*.py"))}
    assert {k: v for k, v in found.items() if v} == {}


def test_there_are_unit_tests_to_run():
    marked = [
        f.name
        for f in sorted(TESTS.glob("test_*.py"))
        if f.name != Path(__file__).name and "pytest.mark.unit" in f.read_text()
    ]
    assert len(marked) >= 10, marked


HELPER = """
import pytest
from dgl_grappa.cluster.testing import run_distributed


def _worker(rank, world_size):
    pass


def _launch():
    run_distributed(_worker, 2)


@pytest.fixture
def job(tmp_path):
    import subprocess as sp
    return sp.run(["true"])


@pytest.mark.unit
def test_indirect():
    _launch()


@pytest.mark.unit
def test_through_a_fixture(job):
    pass


@pytest.mark.unit
def test_pure():
    assert _worker(0, 1) is None


def test_unmarked_may_spawn():
    _launch()
"""


def test_the_scan_follows_helpers_and_fixtures_and_spares_the_unmarked():
    assert violations(HELPER) == ["test_indirect: run_distributed", "test_through_a_fixture: sp"]


def test_the_scan_flags_a_marked_module_and_a_root_only_test():
    module = "import subprocess\nimport pytest\npytestmark = [pytest.mark.unit]\n\ndef test_a():\n    pass\n"
    assert violations(module) == ["<module>: subprocess"]
    root = (
        "import os\nimport pytest\n\n@pytest.mark.unit\n@needs_ns\ndef test_b():\n    pass\n\n"
        "@pytest.mark.unit\ndef test_c():\n    assert os.geteuid() == 0\n"
    )
    assert violations(root) == ["test_b: needs_ns", "test_c: os.geteuid"]
    fixtures = "import pytest\n\n@pytest.mark.unit\ndef test_d(spawned):\n    pass\n"
    assert violations(fixtures, conftest="from clitools import train\n\ndef spawned():\n    return train()\n") == [
        "test_d: train"
    ]
