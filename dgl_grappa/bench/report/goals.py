"""The goals the reports grade, from their rows, and the summary lines beside them.

Each goal is ``{"goal", "met", "figure"}`` (``met`` None = not measured). The accuracy goals
are per task, by its metric's :attr:`~dgl_grappa.runtime.grading.Metric.style` (:data:`GOALS`: the test
figure, memory, bytes, stalls and one-time bytes for a metric graded as an accuracy, node classification's
and a registered kind's alike; the MRR for link prediction's ranking); the speed goals are the same for all.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

from ...runtime.grading import ACCURACY, LOSS_POINTS, RANKING, Metric
from .results import BASELINE, DEFAULTS, TARGET_FRACTION
from .rows import row_name
from .stats import t_interval
from .tasks import TASKS, rows_by_task, rows_metric, tolerance_text

STRICT_POINTS = 0.5
"""The stricter goal of a metric graded as an accuracy (its goal without replication): every row within this
many of the metric's points of DistDGL, in its better direction."""


def _than(metric: Metric, points: float) -> str:
    """A bound relative to DistDGL in the metric's direction and points: ">= DistDGL - 1 point" (an error:
    "<= DistDGL + 1 RMSE point"); no points: ">= DistDGL"."""
    better = ">=" if metric.higher_is_better else "<="
    if not points:
        return f"{better} DistDGL"
    unit = metric.points.removesuffix("s") if points == 1 else metric.points
    return f"{better} DistDGL {'-' if metric.higher_is_better else '+'} {points:g} {unit}"


def _worse(metric: Metric) -> str:
    """The side of zero a worse difference lies on: "below" (an error's: "above")."""
    return "below" if metric.higher_is_better else "above"


def _worst(metric: Metric, rows: list[dict]) -> float:
    """The rows' worst mean difference in the metric's direction (the lowest; an error's: the highest)."""
    return min((r["diff_mean"] for r in rows), key=metric.gain)


def pooled_by_depth(graded: list[dict], metric: Metric = ACCURACY) -> str:
    """The graded rows' mean differences pooled per depth band (2 layers; 3 or more), as text.

    A row's mean over 3 seeds can miss the ">= DistDGL" rule by noise alone; pooling the rows of
    one band (each row one sample, a t-interval over the rows) says whether the misses are a
    systematic loss or scatter around a mean at or above zero. The rows on the worse side of zero
    are counted in ``metric``'s direction ("below 0"; an error's "above 0").

    Returns:
        "; pooled rows: 2 layers +0.10 [-0.05, +0.25] (12 rows), 3-4 layers ..." or "" with no rows.
    """
    parts = []
    for label, keep in (("2 layers", lambda n: n < 3), ("3-4 layers", lambda n: n >= 3)):
        ds = [r["diff_mean"] for r in graded if keep(int(r["layers"]))]
        if not ds:
            continue
        m, lo, hi = t_interval(ds)
        ci = f" [{lo:+.2f}, {hi:+.2f}]" if lo is not None else ""
        worse = sum(metric.gain(d) < 0 for d in ds)
        parts.append(f"{label} {m:+.2f}{ci} ({len(ds)} rows, {worse} {_worse(metric)} 0)")
    return ("; pooled rows (mean of the rows' differences, 95 % CI over rows): " + ", ".join(parts)) if parts else ""


def tta_summary(rows: list[dict]) -> str:
    """One paragraph on the time to target of the graded system (see :data:`~.results.TARGET_FRACTION`).

    Returns:
        "" without any paired time; else how many rows it reaches the target faster than DistDGL in,
        the median and range of the per-row speed-ups, and the rows where it never reaches it.
    """
    graded = DEFAULTS if any(r["system"] == DEFAULTS for r in rows) else None
    mine = [r for r in rows if r["system"] != BASELINE and (graded is None or r["system"] == graded)]
    sp = [r["tta_speedup"] for r in mine if r.get("tta_speedup") is not None]
    if not sp:
        return ""
    missed = [r for r in mine if r.get("tta_reached", 0) < r["seeds"]]
    text = (
        f"**Time to target** ({graded or 'every variant'}; target {TARGET_FRACTION:.0%} of DistDGL's validation "
        f"plateau in the same cell): faster than DistDGL in {sum(x > 1 for x in sp)} of {len(sp)} rows, "
        f"DistDGL's time over this one's median {statistics.median(sp):.2f}x (range {min(sp):.2f}x-{max(sp):.2f}x)"
    )
    if missed:
        text += "; seeds that never reach it: " + ", ".join(
            f"{r['dataset']} {r['partition']}-{r['parts']} {r['model']}-{r['layers']} "
            f"{r['seeds'] - r.get('tta_reached', 0)} of {r['seeds']}"
            for r in missed
        )
    return text + "."


def pair_summary(pair: dict) -> str:
    """One line on a pair (see :func:`~.rows.pair_rows`): rows within :data:`~.tasks.PAIR_POINTS`, the rows'
    differences pooled.

    Returns:
        "N of M rows within 0.5 points; pooled mean diff over rows +x.xx [lo, hi]", the rows below by
        name, the pooling per depth band when the rows span both (:func:`pooled_by_depth`).
    """
    rows = pair["rows"]
    if not rows:
        return f"**{pair['a']} vs {pair['b']}**: no row where both ran ok yet."
    ds = [r["diff_mean"] for r in rows]
    m, lo, hi = t_interval(ds)
    ci = f" [{lo:+.2f}, {hi:+.2f}]" if lo is not None else ""
    below = [r for r in rows if not r["met"]]
    text = (
        f"**{pair['a']} vs {pair['b']}**: {len(rows) - len(below)} of {len(rows)} rows within "
        f"{tolerance_text(rows)}; pooled mean diff over rows {m:+.2f}{ci}"
    )
    if below:
        text += "; below: " + ", ".join(f"{row_name(r)} {r['diff_mean']:+.2f}" for r in below)
    if len({int(r["layers"]) >= 3 for r in rows}) > 1:
        text += pooled_by_depth(rows, rows_metric(rows))
    return text + "."


def _graded(rows: list[dict]) -> tuple[list[dict], str]:
    """The rows the goals grade (the defaults' where present, else every system but DistDGL) and
    the phrase that says so."""
    graded_systems = (
        {DEFAULTS}
        if any(r["system"] == DEFAULTS for r in rows)
        else {r["system"] for r in rows if r["system"] != BASELINE}
    )
    who = f" ({DEFAULTS}: the defaults)" if graded_systems == {DEFAULTS} else ""
    return [r for r in rows if r["system"] in graded_systems], who


def link_goals(rows: list[dict], metric: Metric = RANKING) -> list[dict]:
    """The goal of a ranking metric's rows (``style: ranking``; :func:`~.rows.accuracy_rows` of cells with
    ``train.task: link``): the graded system's test MRR within ``metric.goal_points`` MRR points of DistDGL's
    (link prediction's :data:`~.tasks.LINK_POINTS`), in every row (the mean of its paired per-seed differences)
    and pooled over the rows (one sample per row, a 95 % t-interval over them).

    Example:
        >>> rows = [{"system": "grappa", "task": "link", "met": d >= -2, "diff_mean": d, "paired": 3,
        ...          "dataset": "link5k", "partition": "metis", "parts": 2, "model": "sage", "layers": 2}
        ...         for d in (-1.0, +0.5)]
        >>> [g["met"] for g in link_goals(rows)]
        [True, True]
    """
    mine, who = _graded(rows)
    graded = [r for r in mine if r["met"] is not None]
    unmet = [r for r in graded if not r["met"]]
    m = metric
    tol = f"{m.goal_points:g} points ({m.goal_points / 100:g} {m.words})"
    bound = f"{'>=' if m.higher_is_better else '<='} DistDGL {'-' if m.higher_is_better else '+'} {tol}"
    what = f"{m.heading[:1].lower()}{m.heading[1:]}: test {m.words} {bound}"
    per_row = {
        "goal": f"{what} in every row, mean of the seeds{who}",
        "met": (not unmet) if graded else None,
        "figure": f"{len(graded) - len(unmet)} of {len(graded)} rows within"
        + (f"; worst {_worst(m, graded):+.2f} points" if graded else "")
        + (
            "; not met: " + ", ".join(f"{row_name(r)} {r['diff_mean']:+.2f} (n={r['paired']})" for r in unmet)
            if unmet
            else ""
        ),
    }
    ds = [r["diff_mean"] for r in graded]
    mean, lo, hi = t_interval(ds)
    pooled = {
        "goal": f"{what} pooled over the rows{who}",
        "met": None if mean is None else m.gain(mean) >= -m.goal_points,
        "figure": "no paired rows"
        if mean is None
        else f"pooled mean diff over rows {mean:+.2f} points"
        + (f" [{lo:+.2f}, {hi:+.2f}]" if lo is not None else "")
        + f" ({len(ds)} rows, {sum(m.gain(d) < 0 for d in ds)} {_worse(m)} 0)",
    }
    return [per_row, pooled]


def node_goals(rows: list[dict], metric: Metric = ACCURACY) -> list[dict]:
    """The goals of the rows of a metric graded as an accuracy (``style: accuracy``; node classification's by
    default): its test figure (each row's ``met``, :meth:`~dgl_grappa.runtime.grading.Metric.met`, and the
    stricter :data:`STRICT_POINTS`, in the metric's direction), memory, bytes, stalls, one-time bytes; see
    :func:`accuracy_goals`.

    Example:
        >>> from dgl_grappa.runtime.grading import Metric
        >>> rmse = Metric(name="regress", val_key="val_rmse", test_key="test_rmse", words="RMSE",
        ...               higher_is_better=False)
        >>> rows = [{"system": "mine", "met": rmse.met(d, 2), "diff_mean": d, "paired": 3, "layers": 2,
        ...          "dataset": "syn", "partition": "random", "parts": 2, "model": "sage", "bytes_ratio": None,
        ...          "stall_fraction": None} for d in (-3.0, +0.8)]
        >>> goals = node_goals(rows, rmse)
        >>> goals[0]["goal"]
        'test RMSE <= DistDGL + 1 RMSE point (<= DistDGL at 3-4 layers), mean of the seeds'
        >>> goals[0]["met"], goals[1]["met"], goals[0]["figure"].split("; ")[1]
        (True, False, 'worst +0.80 RMSE points')
    """
    m = metric
    mine, who = _graded(rows)
    graded = [r for r in mine if r["met"] is not None]
    unmet = [r for r in graded if not r["met"]]
    goals = [
        {
            "goal": f"test {m.words} {_than(m, m.goal_points)} ({_than(m, m.deep_goal_points)} at 3-4 layers), "
            f"mean of the seeds{who}",
            "met": (not unmet) if graded else None,
            "figure": f"{len(graded) - len(unmet)} of {len(graded)} rows met"
            + (f"; worst {_worst(m, graded):+.2f} {m.points}" if graded else "")
            + (
                "; not met: "
                + ", ".join(
                    f"{r['dataset']} {r['partition']}-{r['parts']} {r['model']}-{r['layers']} "
                    f"{r['diff_mean']:+.2f} (n={r['paired']})"
                    for r in unmet
                )
                if unmet
                else ""
            )
            + pooled_by_depth(graded, m),
        }
    ]
    # The stricter goal of accuracy without replication: every row within half a point, and at
    # 3-4 layers not below DistDGL pooled over the rows.
    deep = [r["diff_mean"] for r in graded if int(r["layers"]) >= 3]
    strict = [r for r in graded if m.gain(r["diff_mean"]) < -STRICT_POINTS]
    goals.append(
        {
            "goal": f"test {m.words} {_than(m, STRICT_POINTS)} in every row, {_than(m, 0)} pooled at 3-4 layers{who}",
            "met": (not strict and (not deep or m.gain(statistics.fmean(deep)) >= 0)) if graded else None,
            "figure": f"{len(graded) - len(strict)} of {len(graded)} rows within {STRICT_POINTS:g}"
            + (f"; 3-4 layers pooled {statistics.fmean(deep):+.2f} ({len(deep)} rows)" if deep else "")
            + (
                f"; {_worse(m)}: "
                + ", ".join(
                    f"{r['dataset']} {r['partition']}-{r['parts']} {r['model']}-{r['layers']} {r['diff_mean']:+.2f}"
                    for r in strict
                )
                if strict
                else ""
            ),
        }
    )
    held = [r for r in mine if r.get("held_ratio_max") is not None]
    top = max(held, key=lambda r: r["held_ratio_max"], default=None)
    goals.append(
        {
            "goal": f"every worker's node tables (features, aggregates, halo; any precision) <= 1.5 x its own "
            f"feature rows in fp32{who}",
            "met": None if top is None else top["held_ratio_max"] <= 1.5 + 1e-9,
            "figure": "not measured"
            if top is None
            else f"largest {top['held_ratio_max']:.3f} ({top['dataset']} {top['partition']}-{top['parts']} "
            f"{top['model']}-{top['layers']}); "
            f"mean over rows {statistics.fmean(r['held_ratio'] for r in held):.2f}",
        }
    )
    syn = [r for r in mine if r["bytes_ratio"] is not None and str(r.get("data_name", r["dataset"])).startswith("syn")]
    worst = max((r["bytes_ratio"] for r in syn), default=None)
    goals.append(
        {
            "goal": "bytes per epoch (amortised) <= 1/10 of DistDGL's on the hard synthetic graph",
            "met": None if worst is None else worst <= 0.1,
            "figure": "no synthetic rows" if worst is None else f"worst ratio {worst:.4f} (1/{1 / worst:.0f})",
        }
    )
    stalls = [r["stall_fraction"] for r in rows if r["system"] != BASELINE and r["stall_fraction"] is not None]
    grappa_rows = [r for r in rows if r["system"] != BASELINE]
    goals.append(
        {
            "goal": "repartition stall <= 2 % of training time",
            "met": (True if grappa_rows else None) if not stalls else max(stalls) <= 0.02,
            "figure": ("0 %: no run repartitioned (schedule.k = 0)" if grappa_rows else "no rows")
            if not stalls
            else f"worst {max(stalls):.2%}",
        }
    )
    # Sparse labels (papers100M has 1 %): the one-time reads are graded there; other rows are shown.
    once = [r for r in mine if r.get("one_time_epochs") is not None]
    sparse = [r for r in once if r.get("label_frac") is not None and r["label_frac"] <= 0.01 + 1e-12]
    every = (
        (
            f"; every row: median {statistics.median(r['one_time_epochs'] for r in once):.2f}, "
            f"worst {max(r['one_time_epochs'] for r in once):.2f} DistDGL epochs"
        )
        if once
        else ""
    )
    goals.append(
        {
            "goal": "one-time bytes (all workers, once per partitioning) <= 1 DistDGL epoch's bytes, on graphs "
            f"with <= 1 % labels{who}",
            "met": None if not sparse else max(r["one_time_epochs"] for r in sparse) <= 1.0,
            "figure": (
                "no rows with <= 1 % labels"
                if not sparse
                else f"worst {max(r['one_time_epochs'] for r in sparse):.2f} DistDGL epochs over {len(sparse)} rows"
            )
            + every,
        }
    )
    return goals


GOALS: dict[str, Callable[[list[dict], Metric], list[dict]]] = {"accuracy": node_goals, "ranking": link_goals}
"""A metric's :attr:`~dgl_grappa.runtime.grading.Metric.style` -> the accuracy report's goals of its rows, graded
by that metric (every style of :data:`~dgl_grappa.runtime.grading.STYLES` has its goals)."""


def accuracy_goals(rows: list[dict]) -> list[dict]:
    """The accuracy goals from the accuracy rows: each ``{"goal", "met", "figure"}`` (met None = not measured).

    The goals are about the package's defaults: where the rows hold a system named
    :data:`~.results.DEFAULTS` only its rows are graded (other variants, e.g. the old defaults, are
    shown in the matrix but not graded); otherwise every system but the baseline. Each task's rows
    are graded by the goals of its metric's style (:data:`GOALS`: a test figure graded as an accuracy,
    :func:`node_goals`, e.g. node classification's or a registered kind's RMSE; link prediction's MRR,
    :func:`link_goals`); a report with rows of one task only shows that task's goals.
    """
    return [g for name, rs in rows_by_task(rows).items() for g in GOALS[TASKS[name].style](rs, TASKS[name])]


def speed_goals(rows: list[dict]) -> list[dict]:
    """The speed goals from the speed rows: each ``{"goal", "met", "figure"}``."""
    grappa = [r for r in rows if r["system"] != BASELINE and r["speedup"] is not None]
    at = [r for r in grappa if str(r["bandwidth"]).lower() == "1gbit" and r["parts"] == 4]
    fair = [r for r in at if not r["loses_accuracy"]]
    goals = []
    if fair:
        mean = statistics.fmean(r["speedup"] for r in fair)
        geo = math.exp(statistics.fmean(math.log(r["speedup"]) for r in fair))
        best = max(r["speedup"] for r in fair)
        fig = (
            f"mean {mean:.2f}x (geometric {geo:.2f}x), best {best:.2f}x over {len(fair)} rows at 1gbit / 4 parts "
            f"within {LOSS_POINTS:g} point ({len(at) - len(fair)} rows that lose accuracy left out)"
        )
        goals.append(
            {
                "goal": "epoch time DistDGL / Grappa >= 4 on average at 1gbit, 4 parts, equal accuracy",
                "met": mean >= 4,
                "figure": fig,
            }
        )
        goals.append({"goal": "... and >= 13 at best", "met": best >= 13, "figure": f"best {best:.2f}x"})
    else:
        goals.append(
            {
                "goal": "epoch time DistDGL / Grappa >= 4 on average (>= 13 at best) at 1gbit, 4 parts, equal accuracy",
                "met": None,
                "figure": "no such rows yet",
            }
        )
    br = [r["bytes_ratio"] for r in grappa if r["bytes_ratio"] is not None]
    steady = [r["steady_bytes_ratio"] for r in grappa if r.get("steady_bytes_ratio") is not None]
    fig = (
        "no rows"
        if not br
        else (
            f"worst ratio {max(br):.4f} (1/{1 / max(br):.0f}), one-time bytes amortised over each run's epochs"
            + (
                f"; without them (every later epoch) worst {max(steady):.4f} (1/{1 / max(steady):.0f}), "
                f"{sum(x <= 1 / 40 for x in steady)} of {len(steady)} rows <= 1/40"
                if steady
                else ""
            )
        )
    )
    goals.append(
        {
            "goal": "Grappa bytes per epoch <= 1/40 of DistDGL's",
            "met": None if not br else max(br) <= 1 / 40,
            "figure": fig,
        }
    )
    fl = [r["floor_ratio"] for r in grappa if r["floor_ratio"] is not None]
    goals.append(
        {
            "goal": "Grappa epoch <= 1.1x its floor",
            "met": None if not fl else max(fl) <= 1.1,
            "figure": "no summary has floor_s yet" if not fl else f"worst {max(fl):.2f}x",
        }
    )
    return goals
