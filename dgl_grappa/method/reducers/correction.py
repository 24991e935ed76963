"""The coverage corrections: how a worker's batch loss and hook state are formed.

Each variant turns the per-node losses of a batch and the node weights w_v (coverage
clamped to [w_min, 1], see :mod:`dgl_grappa.method.coverage`) into the scalar this worker
back-propagates, and sets the state of the DDP communication hook it owns:

========== ===================== ==========================================================
variant    loss on worker i      what the all-reduce yields
========== ===================== ==========================================================
none       mean_v l_v            mean_i g_i (plain DDP)
batch      mean_v l_v            sum_i a_i g_i / sum_i a_i,      a_i = mean_{v in B_i} w_v
shrinkage  mean_v l_v            sum_i a'_i g_i / sum_i a'_i,    a'_i = (1-lam) a_i + lam t
node       sum_v w_v l_v         sum_i grad(loss_i) / sum_i sum_v w_v (self-normalised IS)
========== ===================== ==========================================================

with t = 1 or the mean of a_i over workers (one extra scalar all-reduce per step).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist
from torch import Tensor
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from .. import coverage as cov
from .plain import PlainState, plain_allreduce_hook
from .weighted import WeightedState, weighted_allreduce_hook

GRAD_DTYPES = ("float32", "float16", "bfloat16")


def with_grad_dtype(hook: Callable, grad_dtype: str = "float32") -> Callable:
    """``hook`` with its all-reduce in ``grad_dtype``: PyTorch's fp16 / bf16 compression wrapper
    around it (each bucket cast down for the collective and back after: half the bytes), or
    the hook itself for float32.

    Example:
        >>> h = with_grad_dtype(plain_allreduce_hook, "bfloat16")   # doctest: +SKIP
    """
    if grad_dtype not in GRAD_DTYPES:
        raise ValueError(f"grad_dtype={grad_dtype!r}; use one of {', '.join(GRAD_DTYPES)}")
    wrap = {"float16": default_hooks.fp16_compress_wrapper, "bfloat16": default_hooks.bf16_compress_wrapper}
    return wrap[grad_dtype](hook) if grad_dtype in wrap else hook


class Correction:
    """Base class: owns a hook state; ``prime`` sets it for a batch, ``loss`` forms the batch loss.

    Every runtime drives a correction the same way: the native trainer through
    :meth:`loss` (which primes), the drop-in loader through :meth:`prime` alone (the
    script's loss stays its own plain mean). Either way every worker primes once per step,
    so collectives a variant makes while priming (shrinkage towards the mean) stay matched.

    Attributes:
        name: the variant's config name.
        state: the DDP comm-hook state (has ``bytes_sent`` and ``take_bytes()``).
        hook: the DDP comm-hook function.
        last_weight: the batch weight of the last primed batch (for logs).
    """

    name = "base"

    def __init__(self, state, hook: Callable):
        self.state = state
        self.hook = hook
        self.last_weight = float("nan")
        self.contributors: int | None = None  # None = every worker of the group has seeds

    def register(self, ddp: torch.nn.parallel.DistributedDataParallel, grad_dtype: str = "float32") -> None:
        """Install this correction's hook on a DDP model.

        Args:
            ddp: the model.
            grad_dtype: precision of the all-reduce (:func:`with_grad_dtype`; ``grappa.grad_dtype``).
        """
        ddp.register_comm_hook(self.state, with_grad_dtype(self.hook, grad_dtype))

    def take_bytes(self) -> int:
        """Bytes handed to collectives since the last call."""
        return self.state.take_bytes()

    def set_contributors(self, n: int) -> None:
        """How many workers have training seeds (the others take every step with weight 0).

        Only averages over workers need it (``none``'s mean, ``shrinkage``'s mean target):
        the weighted variants give an empty batch weight 0 in numerator and denominator.
        """
        self.contributors = n

    def prime(self, w: Tensor) -> None:  # pragma: no cover - abstract
        """Set the hook state for the next backward pass of a batch with node weights ``w``.

        Args:
            w: node weight of every seed of the batch (may be empty).
        """
        raise NotImplementedError

    def _batch_loss(self, per_node_loss: Tensor, w: Tensor) -> Tensor:
        return per_node_loss.mean()

    def loss(self, per_node_loss: Tensor, w: Tensor) -> Tensor:
        """Prime the hook state and return the scalar to back-propagate for this batch.

        Args:
            per_node_loss: loss of every seed of the batch (reduction="none").
            w: node weight of every seed, same shape.
        """
        self.prime(w)
        if per_node_loss.numel() == 0:
            # Keeps the autograd graph (all parameters get zero gradients) so DDP's buckets fire.
            return per_node_loss.sum() * 0.0
        return self._batch_loss(per_node_loss, w)


class NoCorrection(Correction):
    """Plain gradient averaging (the ablation without weighted aggregation)."""

    name = "none"

    def __init__(self, group=None):
        super().__init__(PlainState(group=group), plain_allreduce_hook)

    def set_contributors(self, n: int) -> None:
        super().set_contributors(n)
        self.state.contributors = n  # the mean is over the workers that had seeds

    def prime(self, w: Tensor) -> None:
        self.last_weight = 1.0 if w.numel() else 0.0


class BatchCorrection(Correction):
    """Batch-level minimum-distance weights: sum_i a_i g_i / sum_i a_i."""

    name = "batch"

    def __init__(self, group=None):
        super().__init__(WeightedState(group=group), weighted_allreduce_hook)

    def batch_weight(self, w: Tensor) -> float:
        """a_i of a batch with node weights ``w``."""
        return float(cov.batch_weight(w))

    def prime(self, w: Tensor) -> None:
        a = self.batch_weight(w)
        if w.numel() == 0:
            a = 0.0  # an empty batch adds nothing to the denominator
        self.state.scale = self.state.norm = a
        self.last_weight = a


class ShrinkageCorrection(BatchCorrection):
    """Batch weights shrunk towards a target: a' = (1 - lam) a + lam * t."""

    name = "shrinkage"

    def __init__(self, lam: float, target: str = "mean", group=None):
        super().__init__(group)
        if target not in ("mean", "one"):
            raise ValueError(f"shrink target {target!r} must be 'mean' or 'one'")
        self.lam = lam
        self.target = target

    def batch_weight(self, w: Tensor) -> float:
        a = cov.batch_weight(w) if w.numel() else torch.zeros((), dtype=torch.float32)
        if self.target == "one":
            return float(cov.shrink(a, self.lam, 1.0))
        # The mean over workers needs one scalar all-reduce before the backward pass; every
        # worker makes it for every batch, an empty one included (adding 0), so collectives
        # stay matched; the mean is over the workers that have seeds.
        t = a.reshape(1).clone()
        dist.all_reduce(t, group=self.state.group)
        nbytes = t.numel() * t.element_size()
        self.state.bytes_sent += nbytes
        self.state.scalar_bytes += nbytes
        abar = t / (self.contributors or dist.get_world_size(self.state.group))
        return float(cov.shrink(a, self.lam, abar[0]))


class NodeCorrection(Correction):
    """Self-normalised node-level importance sampling: sum_i sum_v w_v grad l_v / sum_i sum_v w_v."""

    name = "node"

    def __init__(self, group=None):
        super().__init__(WeightedState(group=group), weighted_allreduce_hook)

    def prime(self, w: Tensor) -> None:
        self.state.scale = 1.0
        self.state.norm = float(w.to(torch.float32).sum())
        self.last_weight = float(w.mean()) if w.numel() else 0.0

    def _batch_loss(self, per_node_loss: Tensor, w: Tensor) -> Tensor:
        return (w.to(per_node_loss.dtype) * per_node_loss).sum()


def make_correction(name: str, lam: float = 0.5, shrink_target: str = "mean", group=None) -> Correction:
    """Build the correction named by ``grappa.correction``.

    Args:
        name: none | batch | node | shrinkage.
        lam, shrink_target: shrinkage parameters (ignored by the others).
        group: process group of the all-reduce (None = default).

    Returns:
        A :class:`Correction`; call ``register(ddp)`` once, then ``loss(l, w)`` (or, with a
        loss of your own, ``prime(w)``) every step.

    Example:
        >>> corr = make_correction("batch")                      # doctest: +SKIP
        >>> corr.register(ddp)                                   # doctest: +SKIP
        >>> corr.loss(F.cross_entropy(out, y, reduction="none"), w).backward()  # doctest: +SKIP
    """
    if name == "none":
        return NoCorrection(group)
    if name == "batch":
        return BatchCorrection(group)
    if name == "shrinkage":
        return ShrinkageCorrection(lam, shrink_target, group)
    if name == "node":
        return NodeCorrection(group)
    raise ValueError(f"unknown correction {name!r}; use none, batch, node or shrinkage")
