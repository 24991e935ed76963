"""Weighted gradient aggregation in one all-reduce: sum_i s_i g_i / sum_i n_i.

Every worker i multiplies its bucket by a scale s_i and appends one scalar n_i (its
normaliser) to the same buffer, so the quotient costs no extra collective: the only extra
bytes are one float per bucket. The correction variants only choose s_i and n_i:

- batch-level:  s_i = n_i = a_i (the batch mean of the node weights) -> sum a_i g_i / sum a_i;
- shrinkage:    s_i = n_i = a_i' (a_i pulled towards a target);
- node-level:   the loss is already sum_v w_v l_v, so s_i = 1 and n_i = sum_v w_v.
"""

from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class WeightedState:
    """State of :func:`weighted_allreduce_hook`, set by the trainer before each backward.

    Attributes:
        group: process group of the all-reduce (None = the default group).
        scale: s_i, multiplies this worker's gradient.
        norm: n_i, this worker's share of the denominator.
        bytes_sent: bytes handed to collectives since the last :meth:`take_bytes`.
        scalar_bytes: the part of ``bytes_sent`` that carried correction scalars.
    """

    group: "dist.ProcessGroup | None" = None
    scale: float = 1.0
    norm: float = 1.0
    bytes_sent: int = 0
    scalar_bytes: int = 0

    def take_bytes(self) -> int:
        """Return the byte count and reset it (called once per epoch)."""
        n, self.bytes_sent, self.scalar_bytes = self.bytes_sent, 0, 0
        return n


def weighted_allreduce_hook(state: WeightedState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook returning sum_i scale_i * g_i / sum_i norm_i.

    Example:
        >>> state = WeightedState()
        >>> ddp.register_comm_hook(state, weighted_allreduce_hook)  # doctest: +SKIP
        >>> state.scale = state.norm = 0.8; loss.backward()          # doctest: +SKIP
    """
    grad = bucket.buffer()
    payload = torch.empty(grad.numel() + 1, dtype=grad.dtype, device=grad.device)
    torch.mul(grad, state.scale, out=payload[:-1])
    payload[-1] = state.norm
    state.bytes_sent += payload.numel() * payload.element_size()
    state.scalar_bytes += payload.element_size()
    fut = dist.all_reduce(payload, group=state.group, async_op=True).get_future()

    def finish(f: torch.futures.Future) -> torch.Tensor:
        out = f.value()[0]
        denom = out[-1]
        if not bool(denom > 0):
            # Every worker gave zero weight (e.g. empty batches): no update rather than NaN.
            return torch.zeros_like(grad)
        return grad.copy_(out[:-1]).div_(denom)

    return fut.then(finish)
