"""Every example in the package's docstrings runs and prints what it shows (those marked ``+SKIP`` need a
DistDGL job or a cluster and are not run): a docstring's example that drifts from the code fails here."""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import dgl_grappa

# a package's __main__ runs its command on import (tests/test_entrypoints.py starts those)
MODULES = sorted(m.name for m in pkgutil.walk_packages(dgl_grappa.__path__, "dgl_grappa.")
                 if not m.name.endswith(".__main__"))


@pytest.mark.unit
def test_every_module_of_the_package_is_found():
    assert len(MODULES) > 100 and "dgl_grappa.method.rgcn" in MODULES  # the walk found the package


@pytest.mark.unit
@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    res = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS, verbose=False)
    assert res.failed == 0, f"{res.failed} of {res.attempted} docstring examples of {name} failed (run " \
                            f"`python -m pytest --doctest-modules {name.replace('.', '/')}.py` to see them)"
