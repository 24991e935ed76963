"""The RGCN layer with its message passing in PyTorch operations (``train.kernels: torch``).

:class:`TorchRelGraphLayer` is :class:`~dgl_grappa.method.rgcn.RelGraphLayer` (same parameters, names and
initialisation) with ``forward`` over a :class:`~.plain.PlainHetero`: per relation r = (s, name, d) the mean
of the relation's in-neighbours' rows times W_r (DGL's ``GraphConv(norm="right")``), summed over the
relations into a type, plus the type's self-loop and bias.

Example:
    >>> import dgl, torch
    >>> g = dgl.heterograph({("a", "r", "b"): ([0, 1], [0, 0]), ("b", "rev", "a"): ([0, 0], [0, 1])})
    >>> layer = TorchRelGraphLayer({"a": 3, "b": 4}, 8, g.canonical_etypes)
    >>> layer(g, {"a": torch.randn(2, 3), "b": torch.randn(1, 4)})["b"].shape
    torch.Size([1, 8])
"""

from __future__ import annotations

from torch import Tensor

from ..rgcn import RelGraphLayer
from .plain import PlainHetero, mean_src

__all__ = ["TorchRelGraphLayer"]


def _hetero(g) -> PlainHetero:
    return g if isinstance(g, PlainHetero) else PlainHetero.from_dgl(g)


class TorchRelGraphLayer(RelGraphLayer):
    """One RGCN layer over plain tensors; see the module docstring."""

    def forward(self, g, x: dict[str, Tensor], agg: dict | None = None) -> dict[str, Tensor]:
        """Rows of every destination type of ``g`` from the rows ``x`` of its sources (``agg``: as the parent's)."""
        g = _hetero(g)
        x_dst = {t: x[t][: g.num_dst[t]] for t in g.dsttypes if t in x} if g.is_block else x
        out = {}
        for t, xd in x_dst.items():
            out[t] = self.loop[t](xd)
        for e, rel in g.rels.items():
            # HeteroGraphConv's rule: a relation counts where its source has rows and its destination is computed
            if e[0] not in x or e[2] not in x_dst:
                continue
            w = self.conv.mods[str(e)].weight
            h = x[e[0]]
            term = mean_src(rel, h @ w) if h.shape[-1] > w.shape[1] else mean_src(rel, h) @ w
            out[e[2]] = out[e[2]] + term
        for e, rows in (agg or {}).items():
            out[e[2]] = out[e[2]] + rows @ self.conv.mods[str(tuple(e))].weight
        return out

    def idle(self, g, x: dict[str, Tensor]) -> list[Tensor]:
        return super().idle(_hetero(g), x)
