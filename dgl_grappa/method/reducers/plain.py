"""Plain gradient averaging (``correction: none``), with the bytes it sends counted.

The arithmetic is the same as PyTorch's default DDP all-reduce (divide by the world size,
then sum), so a model trained with this hook gets exactly the gradients of plain DDP.
"""

from dataclasses import dataclass, field

import torch
import torch.distributed as dist


@dataclass
class PlainState:
    """State of :func:`plain_allreduce_hook`.

    Attributes:
        group: process group of the all-reduce (None = the default group).
        bytes_sent: bytes handed to the all-reduce since the last :meth:`take_bytes`.
        contributors: workers whose gradients count: a worker without training seeds sends
            zeros, and the mean is over the others (None = the whole group).
    """

    group: "dist.ProcessGroup | None" = None
    bytes_sent: int = field(default=0)
    contributors: int | None = None
    """Workers whose gradients count (those with training seeds); None = all of the group."""

    def take_bytes(self) -> int:
        """Return the byte count and reset it (called once per epoch)."""
        n, self.bytes_sent = self.bytes_sent, 0
        return n


def plain_allreduce_hook(state: PlainState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: the mean of the workers' gradients, counted in ``state``.

    Example:
        >>> ddp.register_comm_hook(PlainState(), plain_allreduce_hook)  # doctest: +SKIP
    """
    tensor = bucket.buffer()
    state.bytes_sent += tensor.numel() * tensor.element_size()
    tensor.div_(state.contributors or dist.get_world_size(state.group))
    fut = dist.all_reduce(tensor, group=state.group, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])
