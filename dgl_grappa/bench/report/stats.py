"""The reports' statistics: means and t-intervals, a run's window means, convergence, time to a target.

Pure functions of numbers and of a run's per-epoch records (its metrics.jsonl).
"""

from __future__ import annotations

import math
import statistics

from scipy.stats import t as student_t

PLATEAU_WINDOW = 0.2
"""Convergence: the evaluations in the last 20 % of a run's epochs are compared with those of the 20 % before."""

PLATEAU_POINTS = 1.0
"""Convergence: a run has converged when its mean validation accuracy over the last window is at most
this many points above the window before (still rising by more = not converged; falling = past its peak)."""


def mean_std(xs: list[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (None for no values; std None for one value)."""
    if not xs:
        return None, None
    m = float(statistics.fmean(xs))
    return m, (float(statistics.stdev(xs)) if len(xs) > 1 else None)


def t_interval(xs: list[float], confidence: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """Mean and two-sided Student-t confidence interval of the mean.

    Args:
        xs: samples (e.g. paired per-seed differences).
        confidence: coverage of the interval.

    Returns:
        (mean, low, high); low/high None with fewer than two samples.

    Example:
        >>> [round(v, 3) for v in t_interval([1.0, 2.0, 3.0])]
        [2.0, -0.484, 4.484]
    """
    if not xs:
        return None, None, None
    m, s = mean_std(xs)
    if len(xs) < 2:
        return m, None, None
    half = float(student_t.ppf(0.5 + confidence / 2, len(xs) - 1)) * s / math.sqrt(len(xs))
    return m, m - half, m + half


def ratio(x, base):
    """x / base, None where either is None or base is 0."""
    if x is None or base is None or base == 0:
        return None
    return x / base


def windows(records: list[dict] | None, key: str, window: float = PLATEAU_WINDOW) -> tuple[list[float], list[float]]:
    """The values of ``key`` evaluated in the last ``window`` of a run's epochs, and in the window before.

    Returns:
        (last, previous): lists of floats, empty where no record of that window holds ``key``.
    """
    evals = [
        (int(r["epoch"]), float(r[key])) for r in records or [] if r.get(key) is not None and r.get("epoch") is not None
    ]
    if not evals:
        return [], []
    epochs = max(int(r["epoch"]) for r in records if r.get("epoch") is not None) + 1
    w = max(1, int(round(window * epochs)))
    return ([v for e, v in evals if e >= epochs - w], [v for e, v in evals if epochs - 2 * w <= e < epochs - w])


def window_test_acc(records: list[dict] | None, window: float = PLATEAU_WINDOW, key: str = "test_acc") -> float | None:
    """Mean test accuracy (or ``key``, e.g. ``test_mrr``) of the evaluations in the last ``window`` of
    the epochs; None without any.

    Example:
        >>> window_test_acc([{"epoch": e, "test_acc": a} for e, a in [(7, 0.5), (8, 0.7), (9, 0.9)]])
        0.8
    """
    last, _ = windows(records, key, window)
    return statistics.fmean(last) if last else None


def convergence(
    records: list[dict] | None, window: float = PLATEAU_WINDOW, key: str = "val_acc", higher_is_better: bool = True
) -> dict | None:
    """Whether a run's validation accuracy has reached its plateau (see :data:`PLATEAU_POINTS`).

    Args:
        records: the run's per-epoch records (``epoch``, ``val_acc`` where evaluated).
        window: share of the epochs per window.
        key: the validation figure (``val_mrr`` for link prediction: the same rule in MRR points).
        higher_is_better: the figure's direction: for an error (False) the rule is on its fall, the
            improvement, so that a run whose error still falls by more has not converged.

    Returns:
        ``{"converged": bool, "rise_points": last window's mean - previous window's, in points (an error's:
        the previous - the last), "last_val": mean val accuracy of the last window}``, or None when either
        window holds no evaluation.
    """
    last, prev = windows(records, key, window)
    if not last or not prev:
        return None
    rise = (statistics.fmean(last) - statistics.fmean(prev)) * 100
    rise = rise if higher_is_better else -rise
    return {"converged": rise <= PLATEAU_POINTS, "rise_points": rise, "last_val": statistics.fmean(last)}
