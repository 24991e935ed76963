"""The import paths earlier READMEs taught (``dgl_grappa.dropin``, ``dgl_grappa.reducers``) still work for a
release: they warn once, naming the new import, and give the very objects of the new modules."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

import dgl_grappa


def _fresh(name: str):
    """The old module as a first import in a new process finds it (not the copy another test imported)."""
    sys.modules.pop(name, None)
    dgl_grappa.__dict__.pop(name.rsplit(".", 1)[1], None)
    return importlib.import_module(name)


@pytest.mark.unit
@pytest.mark.parametrize(
    "old, new, names",
    [
        ("dgl_grappa.dropin", "dgl_grappa.method.dropin", ("GrappaLoader", "GrappaEdgeLoader")),
        ("dgl_grappa.reducers", "dgl_grappa.method.reducers", ("make_correction", "Correction")),
    ],
)
def test_the_old_path_warns_once_and_gives_the_same_objects(old, new, names):
    module = _fresh(old)
    first, second = names
    with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated: import {first} from {new} ") as seen:
        obj = getattr(module, first)  # what "from <old> import <first>" does
    assert len(seen) == 1 and seen[0].filename == __file__  # attributed to the importing line
    assert obj is getattr(importlib.import_module(new), first)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second warning would raise here
        exec(f"from {old} import {second}", scope := {})
    assert scope[second] is getattr(importlib.import_module(new), second)
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        module.nope  # noqa: B018
