"""Deprecated old import path of the drop-in loaders: they live in :mod:`dgl_grappa.method.dropin`.

``from dgl_grappa.dropin import GrappaLoader`` keeps working for this release and warns once
(``DeprecationWarning``) naming the new import; the old path goes in the next release.

Example:
    >>> from dgl_grappa.method.dropin import GrappaLoader  # the import to use instead
"""

import warnings

from .method import dropin as _new

__all__ = list(_new.__all__)
_warned = False


def __getattr__(name: str):
    # A module __getattr__ rather than a warning at import: its stack frame is the importing line, so the
    # warning is attributed to the user's code (and shown there), not to the import machinery.
    global _warned
    if name not in _new.__all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not _warned:
        _warned = True
        warnings.warn(
            f"dgl_grappa.dropin is deprecated: import {name} from dgl_grappa.method.dropin "
            f"(from dgl_grappa.method.dropin import {name})",
            DeprecationWarning,
            stacklevel=2,
        )
    value = globals()[name] = getattr(_new, name)
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
