"""Deprecated old import path of the gradient reducers: they live in :mod:`dgl_grappa.method.reducers`.

``from dgl_grappa.reducers import make_correction`` keeps working for this release and warns once
(``DeprecationWarning``) naming the new import; the old path goes in the next release.

Example:
    >>> from dgl_grappa.method.reducers import make_correction  # the import to use instead
"""

import warnings

from .method import reducers as _new

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
            f"dgl_grappa.reducers is deprecated: import {name} from dgl_grappa.method.reducers "
            f"(from dgl_grappa.method.reducers import {name})",
            DeprecationWarning,
            stacklevel=2,
        )
    value = globals()[name] = getattr(_new, name)
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
