"""The hook a runtime actually registers: a correction's hook, timed, with a no-op mode for the floor.

:class:`TimedComm` wraps a :class:`~dgl_grappa.method.reducers.correction.Correction`'s hook and
state. Per step it records when DDP handed the last gradient bucket to the hook (the end
of the backward computation, as far as communication is concerned), how long each
collective was in flight, and the payload bytes of every bucket (what an all-reduce of the
same buckets alone must move). With ``noop`` set, the hook returns the local gradient
without communicating: the floor of an epoch (local compute only) is the same job run that
way (see :class:`dgl_grappa.native.floor.FloorProbe`).

The cost is two ``perf_counter`` reads and one future callback per bucket. With
``grad_dtype`` float16 or bfloat16 the correction's hook runs inside PyTorch's compression
wrapper (``fp16_compress_wrapper`` / ``bf16_compress_wrapper``): each bucket is cast down for
the collective and back after, so half the gradient bytes go on the wire.

Example:
    >>> comm = TimedComm(make_correction("batch")); comm.register(ddp)   # doctest: +SKIP
    >>> comm.start_step(); loss.backward(); comm.last_ready              # doctest: +SKIP
"""

# No `from __future__ import annotations`: DDP checks the hook's annotations as objects.
import time

import torch
import torch.distributed as dist

from .correction import with_grad_dtype


class TimedComm:
    """A correction's DDP hook, timed per bucket, switchable to a no-op (the floor).

    Args:
        correction: the correction whose ``state`` and ``hook`` do the real reduction.
        grad_dtype: precision of the all-reduce, "float32" (exact), "float16" or "bfloat16".

    Attributes:
        noop: when True the hook sends nothing and returns the local gradient unchanged.
        last_ready: ``perf_counter`` time at which the last bucket of the step entered the
            hook (0.0 before the first one).
        inflight_s: seconds collectives were in flight since the last :meth:`take_inflight`
            (hook entry to completion, summed over buckets).
        step_payload: bytes each bucket of the current step handed to collectives, in order.
        noop_buckets: buckets the no-op hook returned without communicating.
    """

    def __init__(self, correction, grad_dtype: str = "float32"):
        self.correction = correction
        self.hook = with_grad_dtype(correction.hook, grad_dtype)
        self.noop = False
        self.last_ready = 0.0
        self.inflight_s = 0.0
        self.step_payload = []
        self.noop_buckets = 0

    def register(self, ddp: torch.nn.parallel.DistributedDataParallel) -> None:
        """Install the timed hook on a DDP model (instead of ``correction.register``)."""
        ddp.register_comm_hook(self, timed_hook)

    def start_step(self) -> None:
        """Forget the previous step's buckets (call before ``backward``)."""
        self.last_ready = 0.0
        self.step_payload = []

    def take_inflight(self) -> float:
        s, self.inflight_s = self.inflight_s, 0.0
        return s


def timed_hook(comm: TimedComm, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: ``comm.correction``'s hook, timed; or, with ``comm.noop``, no communication."""
    t0 = time.perf_counter()
    comm.last_ready = t0
    if comm.noop:
        comm.noop_buckets += 1
        fut: torch.futures.Future = torch.futures.Future()
        fut.set_result(bucket.buffer())
        return fut
    state = comm.correction.state
    before = state.bytes_sent
    fut = comm.hook(state, bucket)
    comm.step_payload.append(state.bytes_sent - before)

    def done(f: torch.futures.Future) -> torch.Tensor:
        comm.inflight_s += time.perf_counter() - t0
        return f.value()

    return fut.then(done)
