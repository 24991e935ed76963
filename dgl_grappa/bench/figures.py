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


def short_ratio(r: float | None) -> str:
    """A ratio to the baseline in at most 6 characters ("0.48x", "0.048x", "25x", "<0.01x"); empty when
    there is none.

    Example:
        >>> [short_ratio(r) for r in (0.476, 0.0403, 0.0006, 1.0, 2.345, 25.3, 1234.0, None)]
        ['0.48x', '0.04x', '<0.01x', '1x', '2.3x', '25x', '1234x', '']
    """
    if r is None:
        return ""
    if r < 0.01:
        return "<0.01x"
    return f"{r:.0f}x" if r >= 10 else f"{r:.2g}x" if r >= 0.1 else f"{r:.1g}x"


def seconds(t: float, decimals: int) -> str:
    """Seconds in at most 7 characters: ``decimals`` places below 10 s, one fewer per digit above."""
    places = max(0, decimals - max(0, len(str(int(t))) - 1))
    return f"{t:.{places}f} s"


def wrap(text: str, width: int) -> str:
    """``text`` broken at spaces into lines of at most ``width`` characters (a footnote under a table)."""
    return "\n".join(textwrap.wrap(text, width, subsequent_indent="  ", break_on_hyphens=False))
