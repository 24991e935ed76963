"""Where a worker's tables live: on the trainer's device when they fit, so that a step reads no host memory.

A Grappa worker's data are all local and small: 1/P of the graph's structure, its feature rows and
first-hop aggregates (in their storage precision), the kept halo, labels and degrees. On a GPU trainer
they are copied to the device once per partitioning (``train.resident``) and the torch sampler draws
there, so a step's sampling, gathers and layers never touch the host. Whether they fit is counted in
device memory as the memory budget counts host memory: the bytes of every table against this worker's
share of the device's free memory (the workers on one GPU split it), with a margin left for the model's
activations.

Example:
    >>> import torch
    >>> residence("auto", torch.device("cpu"), need=10**9)
    'host'
    >>> residence("auto", torch.device("cuda", 0), need=10**9, allowance=4 * 10**9)
    'device'
"""

from __future__ import annotations

import math
import os

import torch
import torch.distributed as dist
from torch import Tensor

from ..config import ConfigError
from .storage import NodeTable

RESIDENCE = ("auto", "host", "device")
"""``train.resident``'s values."""

DEVICE_SHARE = 0.6
"""The share of a GPU's free memory (divided among the workers on it) that resident tables may take; the
rest is left for the model, its activations and the allocator's cache."""


def nbytes(*tables) -> int:
    """Bytes of tensors and :class:`~.storage.NodeTable`\\ s (None counts 0)."""
    total = 0
    for t in tables:
        if isinstance(t, NodeTable):
            total += t.nbytes
        elif isinstance(t, Tensor):
            total += t.numel() * t.element_size()
    return total


def workers_per_device() -> int:
    """How many workers of this job share this worker's GPU (the host's workers over its GPUs)."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "0") or 0)
    if not local:
        local = dist.get_world_size() if dist.is_initialized() else 1
    return max(1, math.ceil(local / max(1, torch.cuda.device_count())))


def device_allowance(device: torch.device) -> int:
    """Bytes of tables this worker may put on ``device``: :data:`DEVICE_SHARE` of its free memory, split among
    the workers that share it."""
    free, _ = torch.cuda.mem_get_info(device)
    return int(free * DEVICE_SHARE / workers_per_device())


def residence(mode: str, device: torch.device, need: int, allowance: int | None = None) -> str:
    """Where the tables go: ``device`` or ``host``.

    Args:
        mode: ``train.resident`` (auto, host or device).
        device: the trainer's device (on the CPU the host is the device: ``host``).
        need: the tables' bytes.
        allowance: the device bytes this worker may take (None: :func:`device_allowance`).

    Raises:
        ConfigError: an unknown mode, or ``device`` when they do not fit.
    """
    if mode not in RESIDENCE:
        raise ConfigError(f"train.resident={mode!r} is not allowed; use one of {', '.join(RESIDENCE)}")
    if device.type == "cpu" or mode == "host":
        return "host"
    room = device_allowance(device) if allowance is None else allowance
    if need <= room:
        return "device"
    if mode == "device":
        raise ConfigError(
            f"train.resident=device: this worker's tables take {need / 2**20:.1f} MiB, its share of "
            f"{device}'s free memory is {room / 2**20:.1f} MiB; use --train.resident=auto (the host "
            "holds them), more parts, or a lower --train.storage precision"
        )
    return "host"


def on(device: torch.device, x):
    """``x`` (a tensor, a :class:`~.storage.NodeTable` or None) held on ``device``."""
    if x is None:
        return None
    return x.to(device)
