"""Gradient reducers: DDP communication hooks and the per-variant corrections that drive them."""

from .correction import Correction, make_correction
from .plain import PlainState, plain_allreduce_hook
from .timed import TimedComm, timed_hook
from .weighted import WeightedState, weighted_allreduce_hook

__all__ = [
    "Correction",
    "make_correction",
    "PlainState",
    "plain_allreduce_hook",
    "TimedComm",
    "timed_hook",
    "WeightedState",
    "weighted_allreduce_hook",
]
