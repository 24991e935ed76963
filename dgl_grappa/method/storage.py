"""Feature-width node tables in a chosen precision: what a worker keeps resident, and its bytes.

A worker's largest tables are feature-width: its nodes' features, their first-hop
aggregates, and the kept halo's rows of both. :class:`NodeTable` stores such a table in
``fp32``, ``fp16``, ``bf16``, ``int8`` or ``int4`` (symmetric levels, one fp32 scale per row;
int4 packs two values per byte) and hands rows back in fp32, so the model never sees the
storage precision. The error of a stored value is bounded per row (:func:`max_error`): 0 for
fp32, a relative 2^-11 (fp16) or 2^-8 (bf16) of the value, and half a quantisation step,
``max|row| / 254`` for int8 and ``max|row| / 14`` for int4. For scale: the input dropout of
training (p = 0.5) perturbs every value by far more than int4 does.

Example:
    >>> x = torch.randn(1000, 64)
    >>> t = NodeTable.store(x, "int8")
    >>> t.nbytes == 1000 * 64 + 1000 * 4                 # int8 rows + one fp32 scale per row
    True
    >>> bool(((t.gather(torch.arange(1000)) - x).abs() <= max_error(x, "int8")[:, None]).all())
    True
"""

from __future__ import annotations

import torch
from torch import Tensor

PRECISIONS = ("fp32", "fp16", "bf16", "int8", "int4")
"""Storage precisions, from the most to the least exact."""

_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
_LEVELS = {"int8": 127, "int4": 7}


def row_bytes(width: int, precision: str) -> float:
    """Bytes one stored row of ``width`` values takes (int8 includes its fp32 scale)."""
    if precision == "int8":
        return width + 4.0
    if precision == "int4":
        return (width + 1) // 2 + 4.0
    return width * torch.empty((), dtype=_DTYPES[precision]).element_size()


def max_error(x: Tensor, precision: str) -> Tensor:
    """Per row of ``x``, a bound on |stored - original| for any element, in ``precision``.

    fp16 and bf16 round to nearest (relative error 2^-11 and 2^-8 of the element; bounded
    here by the row's largest magnitude, plus fp16's smallest subnormal step); int8 rounds
    to the nearest of 255 levels spanning [-max|row|, max|row|].
    """
    top = x.abs().amax(dim=1) if x.numel() else torch.zeros(x.shape[0])
    if precision == "fp32":
        return torch.zeros_like(top)
    if precision == "fp16":
        return top * 2.0**-11 + 2.0**-24
    if precision == "bf16":
        return top * 2.0**-8
    if precision in _LEVELS:
        return top / (2 * _LEVELS[precision]) * (1 + 1e-6)
    raise ValueError(f"storage precision {precision!r} is not one of {', '.join(PRECISIONS)}")


class NodeTable:
    """Rows of one feature-width node table in a storage precision; ``gather`` returns fp32.

    Build with :meth:`store`. ``nbytes`` is what the table holds in memory (values and, for
    int8, the per-row scales).
    """

    def __init__(self, values: Tensor, precision: str, scale: Tensor | None = None, width: int | None = None):
        self.values = values
        self.precision = precision
        self.scale = scale
        self.width = values.shape[1] if width is None else width

    @classmethod
    def store(cls, x: Tensor, precision: str = "fp32") -> "NodeTable":
        """Store fp32 rows ``x`` [n, F] in ``precision`` (fp32 keeps the tensor itself, no copy)."""
        if precision not in PRECISIONS:
            raise ValueError(f"storage precision {precision!r} is not one of {', '.join(PRECISIONS)}")
        x = x.float()
        if precision == "fp32":
            return cls(x, precision)
        if precision in _DTYPES:
            return cls(x.to(_DTYPES[precision]), precision)
        levels = _LEVELS[precision]
        top = x.abs().amax(dim=1) if x.shape[1] else torch.zeros(x.shape[0])
        scale = torch.where(top > 0, top / levels, torch.ones_like(top))
        q = torch.round(x / scale[:, None]).clamp_(-levels, levels).to(torch.int8)
        if precision == "int4":  # two values per byte: (q + 8) in the low and high nibble
            if q.shape[1] % 2:
                q = torch.cat([q, torch.zeros((q.shape[0], 1), dtype=torch.int8)], dim=1)
            u = (q + 8).to(torch.uint8)
            q = u[:, 0::2] | (u[:, 1::2] << 4)
        return cls(q, precision, scale.float(), width=x.shape[1])

    @classmethod
    def empty(cls, n: int, width: int, precision: str) -> "NodeTable":
        """A table of ``n`` rows to fill with :meth:`put` (so no fp32 copy of the whole table is ever made)."""
        proto = cls.store(torch.zeros((1, width)), precision)
        values = torch.empty((n, *proto.values.shape[1:]), dtype=proto.values.dtype)
        scale = torch.ones(n, dtype=torch.float32) if proto.scale is not None else None
        return cls(values, precision, scale, width=width)

    def put(self, rows: Tensor, x: Tensor) -> None:
        """Store fp32 rows ``x`` at row indices ``rows`` (a tensor, or a slice)."""
        part = NodeTable.store(x, self.precision)
        self.values[rows] = part.values
        if self.scale is not None:
            self.scale[rows] = part.scale

    @classmethod
    def cat(cls, tables: list["NodeTable"]) -> "NodeTable":
        """The rows of ``tables`` (one precision) one after the other."""
        precision = tables[0].precision
        if any(t.precision != precision for t in tables):
            raise ValueError("NodeTable.cat: the tables are stored in different precisions")
        scale = torch.cat([t.scale for t in tables]) if tables[0].scale is not None else None
        return cls(torch.cat([t.values for t in tables]), precision, scale, width=tables[0].width)

    def to(self, device) -> "NodeTable":
        """The same rows held on ``device`` (the table itself where it is there already)."""
        device = torch.device(device)
        if self.values.device == device:
            return self
        scale = self.scale.to(device) if self.scale is not None else None
        return NodeTable(self.values.to(device), self.precision, scale, width=self.width)

    @property
    def device(self) -> torch.device:
        return self.values.device

    @property
    def shape(self) -> torch.Size:
        return torch.Size((self.values.shape[0], self.width))

    @property
    def nbytes(self) -> int:
        n = self.values.numel() * self.values.element_size()
        if self.scale is not None:
            n += self.scale.numel() * self.scale.element_size()
        return n

    def gather(self, ids: Tensor) -> Tensor:
        """fp32 rows ``ids`` (``index_select``: row copies, much faster than advanced indexing on CPU)."""
        rows = self.values.index_select(0, ids)
        if self.precision == "fp32":
            return rows
        if self.precision == "int4":
            lo, hi = (rows & 0x0F).to(torch.int8) - 8, (rows >> 4).to(torch.int8) - 8
            rows = torch.stack([lo, hi], dim=2).reshape(rows.shape[0], -1)[:, : self.width]
        rows = rows.float()
        if self.scale is not None:
            rows.mul_(self.scale.index_select(0, ids)[:, None])
        return rows

    def __getitem__(self, ids: Tensor) -> Tensor:
        return self.gather(ids)

    def full(self) -> Tensor:
        """Every row in fp32 (for full-graph steps and tests)."""
        return self.gather(torch.arange(self.values.shape[0]))
