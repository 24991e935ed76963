"""The models' message passing in plain PyTorch operations, chosen by ``train.kernels``.

DGL keeps what it serves (partitions, the CPU sampler, DistDGL, the drop-in); a sampled block's
structure goes to the trainer's device as plain tensors (:mod:`.plain`) and the layers
(:mod:`.layers`, :mod:`.rgcn`) run on it with PyTorch operations, so a GPU trainer needs only the
CUDA build of torch, not one of DGL. The torch layers keep the DGL layers' parameters (names,
shapes, initialisation): a checkpoint of either kernel loads into the other.

``train.kernels``: ``dgl`` (DGL's layers), ``torch`` (these), or ``auto``: the torch kernels on a
GPU (the registry's DGL cannot run there) and on the CPU whichever :data:`AUTO_CPU` names (the
faster in ``benchmarks/kernels/``).

Example:
    >>> from dgl_grappa.config import ModelConfig
    >>> model = build_model_for(ModelConfig(name="sage", num_layers=2, hidden=16), 8, 3, "torch")
    >>> type(model.layers[0]).__name__
    'TorchSAGE'
"""

from __future__ import annotations

from torch import nn

from ...config import ConfigError, ModelConfig
from ..models import build_model
from ..rgcn import build_rgcn
from .layers import TORCH_LAYERS
from .plain import PlainGraph, PlainHetero, to_plain
from .rgcn import TorchRelGraphLayer

__all__ = [
    "KERNELS",
    "AUTO_CPU",
    "resolve_kernels",
    "build_model_for",
    "build_rgcn_for",
    "place_blocks",
    "to_plain",
    "PlainGraph",
    "PlainHetero",
    "TORCH_LAYERS",
    "TorchRelGraphLayer",
]

KERNELS = ("auto", "dgl", "torch")

AUTO_CPU = "dgl"
"""``train.kernels: auto`` on the CPU: the kernel whose epochs were faster in benchmarks/kernels/README.md."""


def resolve_kernels(kernels: str, device: str) -> str:
    """The kernel a run uses: ``dgl`` or ``torch``.

    Args:
        kernels: ``train.kernels`` (auto, dgl or torch).
        device: ``run.device`` (cpu or cuda).

    Raises:
        ConfigError: an unknown value, or dgl on cuda (the registry's DGL is CPU-only).

    Example:
        >>> resolve_kernels("auto", "cuda")
        'torch'
    """
    if kernels not in KERNELS:
        raise ConfigError(f"train.kernels={kernels!r} is not allowed; use one of {', '.join(KERNELS)}")
    if kernels == "auto":
        return "torch" if device == "cuda" else AUTO_CPU
    return kernels


def build_model_for(cfg: ModelConfig, in_feats: int, num_classes: int, kernels: str) -> nn.Module:
    """:func:`~dgl_grappa.method.models.build_model` with the layers of ``kernels`` (``dgl`` or ``torch``)."""
    return build_model(cfg, in_feats, num_classes, classes=TORCH_LAYERS if kernels == "torch" else None)


def build_rgcn_for(cfg, in_dims: dict, out_dim: int, etypes: list, target: str, kernels: str) -> nn.Module:
    """:func:`~dgl_grappa.method.rgcn.build_rgcn` with the layers of ``kernels`` (``dgl`` or ``torch``)."""
    return build_rgcn(
        cfg, in_dims, out_dim, etypes, target, layer_cls=TorchRelGraphLayer if kernels == "torch" else None
    )


def place_blocks(blocks, device, kernels: str, hetero: bool = False):
    """A batch's blocks as the layers of ``kernels`` read them, on ``device``.

    ``torch``: their structure as plain tensors (:func:`~.plain.to_plain`), moved to the device (the CPU
    sampler's DGL needs no device of its own); ``dgl``: the DGL blocks, moved where the device is not the CPU
    (that needs DGL's CUDA build).

    Example:
        >>> import dgl, torch
        >>> type(place_blocks([dgl.rand_graph(4, 6)], torch.device("cpu"), "torch")[0]).__name__
        'PlainGraph'
    """
    if kernels == "torch":
        plain = to_plain(blocks, hetero=hetero or None)
        if device.type == "cpu":
            return plain
        return [b.to(device, non_blocking=True) for b in plain] if isinstance(plain, list) else plain.to(device)
    if device.type == "cpu":
        return blocks
    return [b.to(device) for b in blocks] if isinstance(blocks, (list, tuple)) else blocks.to(device)
