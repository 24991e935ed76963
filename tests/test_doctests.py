"""Every example in the package's docstrings runs and prints what it shows (those marked ``+SKIP`` need a
DistDGL job or a cluster and are not run): a docstring's example that drifts from the code fails here."""

from __future__ import annotations

import ast
import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import dgl_grappa

# a package's __main__ runs its command on import (tests/test_entrypoints.py starts those)
MODULES = sorted(
    m.name for m in pkgutil.walk_packages(dgl_grappa.__path__, "dgl_grappa.") if not m.name.endswith(".__main__")
)
PACKAGE = Path(dgl_grappa.__file__).parent


def _runnable_examples(name: str) -> int:
    """Examples in the module's docstrings that are run (a ``>>>`` line without ``+SKIP``), read from its source
    without importing it (collection stays cheap)."""
    rel = name.removeprefix("dgl_grappa").lstrip(".").replace(".", "/")
    path = PACKAGE / rel / "__init__.py" if (PACKAGE / rel).is_dir() else PACKAGE / f"{rel}.py"
    count = 0
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            examples: list[list[str]] = []  # each: its >>> line and its ... lines
            for line in (ast.get_docstring(node, clean=False) or "").splitlines():
                if line.strip().startswith(">>> "):
                    examples.append([line])
                elif line.strip().startswith("...") and examples:
                    examples[-1].append(line)
            count += sum(1 for ex in examples if not any("doctest: +SKIP" in line for line in ex))
    return count


EXAMPLES = {name: n for name in MODULES if (n := _runnable_examples(name))}
"""Modules with examples that run, and how many: the only ones whose doctests are collected."""


@pytest.mark.unit
def test_every_module_of_the_package_is_found():
    assert len(MODULES) > 100 and "dgl_grappa.method.rgcn" in MODULES  # the walk found the package
    assert len(EXAMPLES) > 40 and "dgl_grappa.bench.project.model" in EXAMPLES


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_docstring_examples_run(name):
    res = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS, verbose=False)
    assert res.failed == 0, (
        f"{res.failed} of {res.attempted} docstring examples of {name} failed (run "
        f"`python -m pytest --doctest-modules {name.replace('.', '/')}.py` to see them)"
    )
    assert res.attempted > 0, f"{name}'s examples were not run: doctest found none where the source has some"


# modules whose examples document a contract (the bench's report and plan, the projection, what link
# prediction runs through): at least as many examples as they have now, so that deleting them fails here
SHOWN = {
    "dgl_grappa.bench.report.tasks": 5,
    "dgl_grappa.bench.report.stats": 2,
    "dgl_grappa.bench.report.results": 7,
    "dgl_grappa.bench.report.goals": 2,
    "dgl_grappa.bench.plan": 2,
    "dgl_grappa.bench.project.calibration": 3,
    "dgl_grappa.bench.project.model": 21,
    "dgl_grappa.bench.project.fit": 3,
    "dgl_grappa.bench.project.check": 3,
    "dgl_grappa.bench.project.text": 1,
    "dgl_grappa.bench.project.command": 1,
    "dgl_grappa.method.link": 10,
    "dgl_grappa.method.local_part": 8,
    "dgl_grappa.runtime.evaluation": 5,
    "dgl_grappa.kinds.link": 4,
    "dgl_grappa.distdgl.cli": 2,
}


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(SHOWN))
def test_the_modules_that_show_examples_keep_them(name):
    finder = doctest.DocTestFinder(exclude_empty=True)
    run = [
        ex for t in finder.find(importlib.import_module(name)) for ex in t.examples if not ex.options.get(doctest.SKIP)
    ]
    assert len(run) >= SHOWN[name], f"{name} has {len(run)} docstring examples that run, expected {SHOWN[name]}+"
