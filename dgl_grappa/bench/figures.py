"""How compare's tables write a figure: ratios to the baseline, seconds, footnotes folded to the terminal's width."""

from __future__ import annotations

import textwrap

TERMINAL_WIDTH = 100
"""The terminal table fits this many columns (report.md has every column)."""


def ratio(x: float | None, base: float | None) -> float | None:
    """``x / base``, or None when either is missing or the base is 0."""
    if x is None or base is None or base == 0:
        return None
    return x / base


def fmt_ratio(r: float | None) -> str:
    """A ratio in report.md's columns ("0.476x"), "-" without one."""
    return "-" if r is None else f"{r:.3g}x"


def short_ratio(r: float | None, kind: str = "time") -> str:
    """A ratio to the baseline as a reader compares it, in at most 12 characters: a time as a speed-up
    ("2.1x faster", "1.3x slower"), bytes as a share ("1/25", "3.1x"); empty when there is none.

    Example:
        >>> [short_ratio(r) for r in (0.476, 1.0, 1.03, 2.345, None)]
        ['2.1x faster', 'same', '1.0x slower', '2.3x slower', '']
        >>> [short_ratio(r, "bytes") for r in (0.0403, 0.00006, 1.0, 25.3)]
        ['1/25', '1/17000', 'same', '25x']
    """
    if r is None:
        return ""
    if 0.995 <= r <= 1.005:
        return "same"
    if kind == "time":
        return f"{_factor(1 / r)}x faster" if r < 1 else f"{_factor(r)}x slower"
    return f"1/{_factor(1 / r)}" if r < 1 else f"{_factor(r)}x"


def _factor(f: float) -> str:
    """A factor above 1 without an exponent: one decimal below 10, two significant digits above (1.0, 2.3,
    25, 150, 17000)."""
    return f"{f:.1f}" if f < 10 else f"{f:.0f}" if f < 100 else f"{float(f'{f:.2g}'):.0f}"


def seconds(t: float, decimals: int) -> str:
    """Seconds in at most 7 characters: ``decimals`` places below 10 s, one fewer per digit above."""
    places = max(0, decimals - max(0, len(str(int(t))) - 1))
    return f"{t:.{places}f} s"


def wrap(text: str, width: int) -> str:
    """``text`` broken at spaces into lines of at most ``width`` characters (a footnote under a table)."""
    return "\n".join(textwrap.wrap(text, width, subsequent_indent="  ", break_on_hyphens=False))
