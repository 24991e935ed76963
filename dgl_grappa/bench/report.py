"""The benchmark's reports, from the cell JSON files only: statistics, tables, coverage, plots.

Everything above :func:`write_report` is a pure function of plain dicts (the cell JSON
files of :mod:`dgl_grappa.bench.matrix`, see its docstring for the schema, and an optional plan
of the configured matrix), so it is tested on hand-made cells.

Two kinds:

* ``accuracy`` (the accuracy goals): per (dataset, partitioner, parts, model, layers[, network]) and
  system, test accuracy mean +- std over seeds; for every system but DistDGL the paired
  per-seed difference to DistDGL in points with a 95 % t-interval, "met" when the mean
  difference is >= -1.0 point (>= 0 at 3 or more layers); bytes per epoch (amortised) and
  their ratio to DistDGL; plots of accuracy vs layers and accuracy vs bytes per epoch; with
  ``bench.pairs``, further systems graded against each other the same way (e.g. the drop-in
  against the native runtime, within :data:`PAIR_POINTS`).
* ``speed`` (the speed goals): per cell (seeds averaged) and system, epoch time and the speedup
  DistDGL / system, bytes per epoch and their ratio, test accuracy next to it (a speedup
  that loses more than 1 point is marked), epoch / floor where a summary carries
  ``floor_s``; plots of the speedups, accuracy vs training time, bytes per epoch.

Link prediction (a cell whose config has ``train.task: link``) is graded on the ranking of
held-out edges instead of accuracy, in both kinds: the test MRR takes the place of the test
accuracy (the same window mean, differences in MRR points, 1 point = 0.01 MRR), the
validation MRR that of the validation accuracy (convergence, the time to target), and its
rows get their own tables with the test hits@k and the share of edges each system trained
on; the goal is :data:`LINK_POINTS` (see :func:`link_goals`).
"""
from __future__ import annotations

import contextlib
import math
import statistics
from collections import defaultdict
from pathlib import Path

from ..runtime import metrics

BASELINE = "distdgl"
"""The system every ratio and difference refers to."""
DEFAULTS = "grappa"
"""The system name of Grappa with the package's defaults (the one the accuracy goals grade)."""

ACC_KEY = "test_acc_window"
"""The accuracy the reports compare: the mean test accuracy of the global evaluations in the
last :data:`PLATEAU_WINDOW` of a run's epochs (:func:`window_test_acc`; the final evaluation
where a run has no per-epoch records). On Planetoid-size test sets with small batches one
evaluation swings by 3-5 points from one evaluation to the next, for DistDGL and Grappa alike
(measured: Cora, the last five evaluations of one run span 0.729-0.808); the window's mean is
the same statistic for every system and far less noisy."""

GROUP_AXES = ("dataset", "partition", "parts", "model", "layers", "bandwidth")
"""A row of either report: one value of each of these axes, over seeds."""

SELECT_AXES = ("dataset", "partition", "parts", "model", "layers", "bandwidth", "seed")
"""The axes of a cell (its id is made of them)."""

LOSS_POINTS = 1.0
"""Speed report: a speedup whose mean accuracy is more than this many points below DistDGL's is marked."""

PLATEAU_WINDOW = 0.2
"""Convergence: the evaluations in the last 20 % of a run's epochs are compared with those of the 20 % before."""

PLATEAU_POINTS = 1.0
"""Convergence: a run has converged when its mean validation accuracy over the last window is at most
this many points above the window before (still rising by more = not converged; falling = past its peak)."""

PAIR_POINTS = 0.5
"""System against system (``bench.pairs``): a row of "A vs B" is within when the mean per-seed
difference A - B is at least minus this many points (A better than B by any margin is within)."""

LINK_POINTS = 2.0
"""Link prediction: a row's test MRR is within the goal when its mean per-seed difference to the
reference is at least minus this many MRR points (0.02 absolute MRR); also the tolerance of a
pair's link rows and of the speed report's "loses accuracy" mark on link rows."""

QUALITY_KEYS = {"node": ("val_acc", "test_acc"), "link": ("val_mrr", "test_mrr")}
"""Per task: (the validation figure that convergence and the time to target race on, the test
figure the reports compare)."""

TARGET_FRACTION = 0.98
"""Time to a target: the target of a cell is this fraction of DistDGL's validation accuracy
plateau in that cell (the mean of its last :data:`PLATEAU_WINDOW` of evaluations), so both
systems of a cell race to the same number, one DistDGL reaches by construction."""


# ---------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------

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
    """
    if not xs:
        return None, None, None
    m, s = mean_std(xs)
    if len(xs) < 2:
        return m, None, None
    from scipy.stats import t

    half = float(t.ppf(0.5 + confidence / 2, len(xs) - 1)) * s / math.sqrt(len(xs))
    return m, m - half, m + half


def accuracy_goal(mean_diff_points: float | None, layers: int) -> bool | None:
    """The accuracy goal: mean difference to DistDGL >= -1.0 point, >= 0 at 3+ layers."""
    if mean_diff_points is None:
        return None
    return mean_diff_points >= (0.0 if layers >= 3 else -1.0)


def windows(records: list[dict] | None, key: str, window: float = PLATEAU_WINDOW) -> tuple[list[float], list[float]]:
    """The values of ``key`` evaluated in the last ``window`` of a run's epochs, and in the window before.

    Returns:
        (last, previous): lists of floats, empty where no record of that window holds ``key``.
    """
    evals = [(int(r["epoch"]), float(r[key])) for r in records or []
             if r.get(key) is not None and r.get("epoch") is not None]
    if not evals:
        return [], []
    epochs = max(int(r["epoch"]) for r in records if r.get("epoch") is not None) + 1
    w = max(1, int(round(window * epochs)))
    return ([v for e, v in evals if e >= epochs - w], [v for e, v in evals if epochs - 2 * w <= e < epochs - w])


def convergence(records: list[dict] | None, window: float = PLATEAU_WINDOW, key: str = "val_acc") -> dict | None:
    """Whether a run's validation accuracy has reached its plateau (see :data:`PLATEAU_POINTS`).

    Args:
        records: the run's per-epoch records (``epoch``, ``val_acc`` where evaluated).
        window: share of the epochs per window.
        key: the validation figure (``val_mrr`` for link prediction: the same rule in MRR points).

    Returns:
        ``{"converged": bool, "rise_points": last window's mean - previous window's, in points,
        "last_val": mean val accuracy of the last window}``, or None when either window holds
        no evaluation.
    """
    last, prev = windows(records, key, window)
    if not last or not prev:
        return None
    rise = (statistics.fmean(last) - statistics.fmean(prev)) * 100
    return {"converged": rise <= PLATEAU_POINTS, "rise_points": rise, "last_val": statistics.fmean(last)}


def _converged(cells: list[dict], system: str) -> tuple[int, int]:
    """(converged runs, judged runs) of ``system`` over the cells."""
    judged = conv = 0
    for c in cells:
        s = (c.get("systems") or {}).get(system) or {}
        if s.get("status") != "ok":
            continue
        r = convergence(s.get("records"), key=quality_keys(c)[0])
        if r is not None:
            judged += 1
            conv += int(r["converged"])
    return conv, judged


def time_to_target(records: list[dict] | None, target: float, setup_s: float = 0.0,
                   key: str = "val_acc") -> float | None:
    """:func:`dgl_grappa.runtime.metrics.time_to_target` (training seconds until the first evaluation with
    validation accuracy >= ``target``, records in epoch order) plus ``setup_s``, one-time seconds
    counted before the first epoch (Grappa: the slowest worker's partition and halo load, which a
    DistDGL trainer does not have); None when no evaluation reaches the target. ``key`` is the
    validation figure (``val_mrr`` for link prediction).

    Example:
        >>> recs = [{"epoch": 0, "epoch_time_s": 2.0, "val_acc": 0.5}, {"epoch": 1, "epoch_time_s": 3.0, "val_acc": 0.8}]
        >>> time_to_target(recs, 0.75, setup_s=1.0)
        6.0
    """
    t = metrics.time_to_target(records or [], target, key)
    return None if t is None else setup_s + t


def _setup_s(system: dict) -> float:
    """The slowest worker's one-time load (``load_s`` in the run summary's workers; 0 where none)."""
    workers = (system.get("summary") or {}).get("workers") or []
    return max((float(w.get("load_s") or 0.0) for w in workers if isinstance(w, dict)), default=0.0)


def _ratio(x, base):
    if x is None or base is None or base == 0:
        return None
    return x / base


# ---------------------------------------------------------------------------------------
# Reading cells
# ---------------------------------------------------------------------------------------

def window_test_acc(records: list[dict] | None, window: float = PLATEAU_WINDOW, key: str = "test_acc") -> float | None:
    """Mean test accuracy (or ``key``, e.g. ``test_mrr``) of the evaluations in the last ``window`` of
    the epochs; None without any.

    Example:
        >>> window_test_acc([{"epoch": e, "test_acc": a} for e, a in [(7, 0.5), (8, 0.7), (9, 0.9)]])
        0.8
    """
    last, _ = windows(records, key, window)
    return statistics.fmean(last) if last else None


def cell_task(cell: dict) -> str:
    """``"link"`` for a cell whose config trains link prediction (``train.task: link``), else ``"node"``.

    A cell without its config (hand-made, or from before configs were stored) counts as link
    prediction when a finished system's summary says so (``task: link``).

    Example:
        >>> cell_task({"config": {"train": {"task": "link"}}}), cell_task({"systems": {}})
        ('link', 'node')
    """
    task = (((cell.get("config") or {}).get("train") or {}).get("task"))
    if task is None:
        task = next((s["metrics"]["task"] for s in (cell.get("systems") or {}).values()
                     if isinstance(s.get("metrics"), dict) and s["metrics"].get("task")), "node")
    return "link" if task == "link" else "node"


def quality_keys(cell: dict) -> tuple[str, str]:
    """(validation key, test key) the reports read for a cell: accuracies, or MRRs for link prediction."""
    return QUALITY_KEYS[cell_task(cell)]


_OK_MEMO: dict[int, tuple[dict, dict]] | None = None
"""Inside :func:`_reading_once`: id(cell) -> (cell, its :func:`ok_systems`)."""


@contextlib.contextmanager
def _reading_once():
    """Within it, each cell's :func:`ok_systems` (window means over its records, the time-to-target
    race) is computed once: a report reads it for every row, metric and plot (thousands of times
    for a matrix of a few hundred runs). The result is read-only for its callers."""
    global _OK_MEMO
    outer = _OK_MEMO
    _OK_MEMO = {} if outer is None else outer
    try:
        yield
    finally:
        _OK_MEMO = outer


def ok_systems(cell: dict) -> dict[str, dict]:
    """name -> metrics of the systems of a cell that finished ("ok"), with :data:`ACC_KEY` filled in.

    For link prediction :data:`ACC_KEY` holds the test MRR (the same window mean as the test
    accuracy), ``hits_window`` the test hits@k, and the time to target races on the validation MRR.
    """
    if _OK_MEMO is not None:
        hit = _OK_MEMO.get(id(cell))
        if hit is not None and hit[0] is cell:  # the cell is held, so its id is not reused
            return hit[1]
    out = _ok_systems(cell)
    if _OK_MEMO is not None:
        _OK_MEMO[id(cell)] = (cell, out)
    return out


def _ok_systems(cell: dict) -> dict[str, dict]:
    out = {}
    val_key, test_key = quality_keys(cell)
    link = val_key == "val_mrr"
    base = (cell.get("systems") or {}).get(BASELINE) or {}
    base_last, _ = windows(base.get("records"), val_key) if base.get("status") == "ok" else ([], [])
    target = TARGET_FRACTION * statistics.fmean(base_last) if base_last else None
    for n, s in (cell.get("systems") or {}).items():
        if s.get("status") != "ok":
            continue
        m = dict(s.get("metrics") or {})
        # the epoch's per-phase seconds (summary "phases", median over epochs) as phase_<name>_s
        phases = (s.get("summary") or {}).get("phases")
        if isinstance(phases, dict):
            m.update({f"phase_{k}": v for k, v in phases.items() if isinstance(v, (int, float))})
        hetero = (s.get("summary") or {}).get("hetero")
        if isinstance(hetero, dict) and hetero.get("budgeted_ratio_max") is not None:
            m["budgeted_ratio_max"] = hetero["budgeted_ratio_max"]
        win = window_test_acc(s.get("records"), key=test_key)
        m[ACC_KEY] = win if win is not None else m.get(test_key)
        if link:
            hits = window_test_acc(s.get("records"), key="test_hits")
            m["hits_window"] = hits if hits is not None else m.get("test_hits")
        m["time_to_target_s"] = (time_to_target(s.get("records"), target, _setup_s(s), key=val_key)
                                 if target else None)
        out[n] = m
    return out


def _in_plan(cells: list[dict], plan: dict | None) -> list[dict]:
    if plan is None:
        return cells
    return [c for c in cells if c.get("cell_id") in plan["cells"]]


def _group_key(axes: dict) -> tuple:
    return tuple(axes.get(a) for a in GROUP_AXES)


def _systems_order(cells: list[dict], plan: dict | None) -> list[str]:
    names: list[str] = list(plan.get("systems", [])) if plan else []
    for c in cells:
        for n in c.get("systems") or {}:
            if n not in names:
                names.append(n)
    if BASELINE in names:
        names.remove(BASELINE)
        names.insert(0, BASELINE)
    return names


def _sort_key(key: tuple) -> tuple:
    return tuple((0, v) if isinstance(v, (int, float)) else (1, str(v)) for v in key)


def grouped(cells: list[dict]) -> dict[tuple, list[dict]]:
    """Cells by row key (:data:`GROUP_AXES`), each list ordered by seed."""
    out: dict[tuple, list[dict]] = defaultdict(list)
    for c in cells:
        out[_group_key(c["axes"])].append(c)
    return {k: sorted(v, key=lambda c: c["axes"].get("seed", 0)) for k, v in sorted(out.items(), key=lambda kv: _sort_key(kv[0]))}


def _metric(cells: list[dict], system: str, key: str) -> list[float]:
    xs = []
    for c in cells:
        m = ok_systems(c).get(system)
        if m is not None and m.get(key) is not None:
            xs.append(float(m[key]))
    return xs


def _held_ratio(cells: list[dict], system: str) -> list[float]:
    """Per seed, the largest worker's node tables over its own fp32 feature rows.

    Runs from before the memory budget held every table in fp32: for those the feature-width
    rows per inner node (``rows_per_inner_max``) are that ratio. What the budget bounds is
    graded, not what lies outside it by design: on a heterogeneous graph the tables of its
    featured type (``hetero.budgeted_ratio_max``), and runs with learnable node rows
    (``model.embed``: rows and optimizer state, not features) not at all.
    """
    xs = []
    for c in cells:
        m = ok_systems(c).get(system)
        if m is None:
            continue
        v = m.get("budgeted_ratio_max")
        if v is None and m.get("embed") is True:
            continue
        if v is None:
            v = m.get("resident_ratio_max")
        if v is None:
            v = m.get("rows_per_inner_max")
        if v is not None:
            xs.append(float(v))
    return xs


def _peak_rss(cells: list[dict], system: str) -> list[float]:
    """Per seed, the largest worker's (DistDGL: machine's, server + trainer) peak resident memory."""
    xs = []
    for c in cells:
        m = ok_systems(c).get(system) or {}
        v = m.get("machine_peak_rss_bytes_max") or m.get("peak_rss_bytes_max")
        if v is not None:
            xs.append(float(v))
    return xs


def _both(cells: list[dict], system: str, base: str, key: str) -> list[tuple[float, float]]:
    """Per seed (system's, base's) value of ``key`` where both are ok in the same cell and have it."""
    out = []
    for c in cells:
        ok = ok_systems(c)
        a, b = ok.get(system), ok.get(base)
        if a and b and a.get(key) is not None and b.get(key) is not None:
            out.append((float(a[key]), float(b[key])))
    return out


def _paired(cells: list[dict], system: str, key: str, scale: float = 1.0, base: str = BASELINE) -> list[float]:
    """Per-seed differences system - base (both ok in the same cell), times ``scale``."""
    return [(a - b) * scale for a, b in _both(cells, system, base, key)]


def _paired_ratio(cells: list[dict], system: str, key: str, base_over_system: bool = False,
                  base_key: str | None = None) -> list[float]:
    """Per seed, ``system``'s ``key`` over DistDGL's ``base_key`` (default: the same key), or the inverse."""
    out = []
    bk = base_key or key
    for c in cells:
        ok = ok_systems(c)
        a, b = ok.get(system), ok.get(BASELINE)
        if a and b:
            r = _ratio(b.get(bk), a.get(key)) if base_over_system else _ratio(a.get(key), b.get(bk))
            if r is not None:
                out.append(r)
    return out


def _label_fraction(cells: list[dict]) -> float | None:
    """The training-label share of a generated graph's config (None for other datasets)."""
    data = ((cells[0].get("config") or {}).get("data") or {}) if cells else {}
    frac = (data.get("synthetic") or {}).get("train_frac") if data.get("name") == "synthetic" else None
    return None if frac is None else float(frac)


def borrow_baseline(cells: list[dict], partition: str) -> list[dict]:
    """Cells where every row's reference is DistDGL on ``partition`` (``bench.baseline_partition``).

    A cell of another partitioner without an ok DistDGL run gets a copy of the DistDGL run of
    the cell with ``partition`` and the same other axes (seed included), marked
    ``borrowed_from`` (that cell's id): ratios, differences and the time-to-target race then
    refer to it, and the rows leave the borrowed run out (it is shown in its own row). The
    input is not changed.

    Example:
        >>> run = {"status": "ok", "metrics": {"epoch_time_s": 2.0}}
        >>> m = {"cell_id": "m", "axes": {"partition": "metis", "seed": 0}, "systems": {"distdgl": run}}
        >>> r = {"cell_id": "r", "axes": {"partition": "random", "seed": 0}, "systems": {}}
        >>> borrow_baseline([m, r], "metis")[1]["systems"]["distdgl"]["borrowed_from"]
        'm'
    """
    def other_axes(c: dict) -> tuple:
        return tuple(sorted((k, str(v)) for k, v in c["axes"].items() if k not in ("partition", "partition_fp")))

    refs = {other_axes(c): c for c in cells
            if c["axes"].get("partition") == partition
            and ((c.get("systems") or {}).get(BASELINE) or {}).get("status") == "ok"}
    out = []
    for c in cells:
        base = (c.get("systems") or {}).get(BASELINE) or {}
        ref = refs.get(other_axes(c))
        if c["axes"].get("partition") != partition and base.get("status") != "ok" and ref is not None:
            c = {**c, "systems": {**(c.get("systems") or {}),
                                  BASELINE: {**ref["systems"][BASELINE], "borrowed_from": ref.get("cell_id")}}}
        out.append(c)
    return out


def _borrowed(cells: list[dict], system: str) -> bool:
    """Whether ``system``'s runs in these cells are all borrowed (:func:`borrow_baseline`)."""
    runs = [(c.get("systems") or {}).get(system) or {} for c in cells]
    return bool(runs) and all(r.get("borrowed_from") for r in runs if r)


# ---------------------------------------------------------------------------------------
# Rows
# ---------------------------------------------------------------------------------------

def accuracy_rows(cells: list[dict], plan: dict | None = None) -> list[dict]:
    """One row per (group, system) with at least one finished seed.

    Returns:
        dicts with the group axes, ``system``, ``seeds`` (finished), ``acc_mean``/``acc_std``
        (fraction), ``base_acc_mean``, ``diff_mean``/``diff_lo``/``diff_hi`` (points,
        paired, None for the baseline), ``paired`` (number of paired seeds), ``met``
        (None for the baseline), ``bytes`` (amortised bytes per epoch, mean), ``bytes_ratio``
        (mean of per-seed ratios to DistDGL), ``edge_cut``, ``stall_fraction``,
        ``restart_fraction``, ``epoch_time_s``, ``task`` (``node`` or ``link``: then ``acc_*`` and
        ``diff_*`` are the test MRR and its differences in MRR points, ``met`` is the link goal,
        :func:`link_met`, and ``hits``, ``hits_k``, ``usable_edges``, ``usable_edges_drop`` are set).
    """
    cells = _in_plan(cells, plan)
    rows = []
    for key, cs in grouped(cells).items():
        axes = dict(zip(GROUP_AXES, key))
        task = cell_task(cs[0])
        base_mean, _ = mean_std(_metric(cs, BASELINE, ACC_KEY))
        for name in _systems_order(cs, plan):
            accs = _metric(cs, name, ACC_KEY)
            if not accs or (name == BASELINE and _borrowed(cs, name)):
                continue
            m, s = mean_std(accs)
            row = {**axes, "task": task, "system": name, "seeds": len(accs), "acc_mean": m, "acc_std": s,
                   "base_acc_mean": base_mean, "diff_mean": None, "diff_lo": None, "diff_hi": None,
                   "paired": 0, "met": None,
                   "bytes": mean_std(_metric(cs, name, "bytes_per_epoch_amortised"))[0],
                   "bytes_ratio": mean_std(_paired_ratio(cs, name, "bytes_per_epoch_amortised"))[0],
                   "edge_cut": mean_std(_metric(cs, name, "edge_cut"))[0],
                   "stall_fraction": mean_std(_metric(cs, name, "stall_fraction"))[0],
                   "restart_fraction": mean_std(_metric(cs, name, "restart_fraction"))[0],
                   "epoch_time_s": mean_std(_metric(cs, name, "epoch_time_s"))[0],
                   "one_time_bytes": mean_std(_metric(cs, name, "one_time_bytes"))[0],
                   # what a partitioning's one-time reads cost, in DistDGL epochs of the same cell
                   "one_time_epochs": mean_std(_paired_ratio(cs, name, "one_time_bytes",
                                                             base_key="bytes_per_epoch"))[0],
                   "label_frac": _label_fraction(cs),
                   "rows_per_inner": mean_std(_metric(cs, name, "rows_per_inner_max"))[0],
                   "held_ratio": mean_std(_held_ratio(cs, name))[0],
                   "held_ratio_max": max(_held_ratio(cs, name), default=None),
                   "peak_rss": mean_std(_peak_rss(cs, name))[0],
                   "converged": _converged(cs, name),
                   "tta_s": mean_std(_metric(cs, name, "time_to_target_s"))[0],
                   "tta_reached": len(_metric(cs, name, "time_to_target_s")),
                   "tta_speedup": mean_std(_paired_ratio(cs, name, "time_to_target_s", base_over_system=True))[0]}
            if task == "link":
                row.update(_link_figures(cs, name))
            if name != BASELINE:
                d = _paired(cs, name, ACC_KEY, scale=100.0)
                row["paired"] = len(d)
                row["diff_mean"], row["diff_lo"], row["diff_hi"] = t_interval(d)
                row["met"] = (link_met(row["diff_mean"]) if task == "link"
                              else accuracy_goal(row["diff_mean"], int(axes["layers"])))
            rows.append(row)
    return rows


def link_met(mean_diff_points: float | None, points: float = LINK_POINTS) -> bool | None:
    """The link goal for one row: its mean test-MRR difference to the reference >= -``points`` MRR points.

    Example:
        >>> link_met(-1.9), link_met(-2.1), link_met(None)
        (True, False, None)
    """
    return None if mean_diff_points is None else mean_diff_points >= -points


def _link_figures(cells: list[dict], system: str) -> dict:
    """A link row's own columns: mean test hits@k, k, and the share of the training graph's edges the
    system trained on (with its halo; and with the halo dropped, where the runs say)."""
    k = next((((c.get("config") or {}).get("link") or {}).get("hits_k") for c in cells
              if ((c.get("config") or {}).get("link") or {}).get("hits_k")), None)
    return {"hits": mean_std(_metric(cells, system, "hits_window"))[0], "hits_k": k,
            "usable_edges": mean_std(_metric(cells, system, "usable_edge_fraction"))[0],
            "usable_edges_drop": mean_std(_metric(cells, system, "usable_edge_fraction_halo_drop"))[0]}


def _row_name(axes: dict) -> str:
    """A row in one phrase, as the goals name it: "cora random-4 sage-2" (and its network when shaped)."""
    bw = f" {axes['bandwidth']}" if axes.get("bandwidth") else ""
    return f"{axes['dataset']} {axes['partition']}-{axes['parts']} {axes['model']}-{axes['layers']}{bw}"


def pair_rows(cells: list[dict], a: str, b: str, plan: dict | None = None) -> dict:
    """System ``a`` against system ``b`` (an entry of ``bench.pairs``), row by row as against DistDGL.

    Returns:
        ``{"a", "b", "rows", "skipped"}``: ``rows`` one dict per row where a seed has both ok,
        with the group axes, ``paired`` (the seeds where both ran ok), ``a_acc``/``b_acc``
        (fraction, means over those seeds, so that their difference is the mean difference even
        where one system failed a seed), ``diff_mean``/``diff_lo``/``diff_hi`` (points: the per-seed
        a - b, its mean and 95 % t-interval), ``task`` and ``met`` (``diff_mean >= -PAIR_POINTS``;
        on link rows, where the figures are test MRRs, ``>= -LINK_POINTS``);
        ``skipped`` the names of the rows without such a seed.
    """
    rows, skipped = [], []
    for key, cs in grouped(_in_plan(cells, plan)).items():
        axes = dict(zip(GROUP_AXES, key))
        both = _both(cs, a, b, ACC_KEY)
        if not both:
            skipped.append(_row_name(axes))
            continue
        m, lo, hi = t_interval(_paired(cs, a, ACC_KEY, scale=100.0, base=b))
        task = cell_task(cs[0])
        rows.append({**axes, "task": task, "paired": len(both), "a_acc": statistics.fmean(x for x, _ in both),
                     "b_acc": statistics.fmean(y for _, y in both), "diff_mean": m, "diff_lo": lo, "diff_hi": hi,
                     "met": m >= -pair_points(task)})
    return {"a": a, "b": b, "rows": rows, "skipped": skipped}


def pair_points(task: str) -> float:
    """A pair's tolerance in points: :data:`PAIR_POINTS` of accuracy, :data:`LINK_POINTS` of MRR for link rows."""
    return LINK_POINTS if task == "link" else PAIR_POINTS


def _phase_keys(cells: list[dict], system: str) -> list[str]:
    """The ``phase_*`` metrics that every ok run of ``system`` in ``cells`` has."""
    runs = [m for c in cells if (m := ok_systems(c).get(system)) is not None]
    if not runs:
        return []
    return sorted(set.intersection(*({k for k in m if k.startswith("phase_")} for m in runs)))


def speed_rows(cells: list[dict], plan: dict | None = None) -> list[dict]:
    """One row per (group, system), seeds averaged (ratios are per seed, then averaged).

    Returns:
        dicts with the group axes, ``system``, ``seeds``, ``epoch_time_s``,
        ``base_epoch_time_s``, ``speedup`` (DistDGL epoch / this epoch), ``bytes``,
        ``bytes_ratio`` (this / DistDGL), ``acc``, ``base_acc``, ``acc_diff`` (points),
        ``loses_accuracy`` (acc_diff < -:data:`LOSS_POINTS`), ``floor_s`` and
        ``floor_ratio`` (epoch / floor; None when no summary has a floor), ``train_time_s``,
        ``task``; link rows: ``acc``/``base_acc`` are test MRRs, ``loses_accuracy`` is a loss of
        more than :data:`LINK_POINTS` MRR points, and the link figures of :func:`accuracy_rows` are set.
    """
    cells = _in_plan(cells, plan)
    rows = []
    for key, cs in grouped(cells).items():
        axes = dict(zip(GROUP_AXES, key))
        task = cell_task(cs[0])
        loss = LINK_POINTS if task == "link" else LOSS_POINTS
        for name in _systems_order(cs, plan):
            ep = _metric(cs, name, "epoch_time_s")
            if not ep or (name == BASELINE and _borrowed(cs, name)):
                continue
            # the floor as the speed goals define it: local compute (no-op reducer) + the all-reduce alone
            floors = _metric(cs, name, "floor_s")
            floor_ratios = [e / f for e, f in zip(ep, floors) if f] if len(floors) == len(ep) else []
            d = _paired(cs, name, ACC_KEY, scale=100.0) if name != BASELINE else []
            diff = mean_std(d)[0]
            rows.append({
                **axes, "task": task, "system": name, "seeds": len(ep), "epoch_time_s": mean_std(ep)[0],
                "base_epoch_time_s": mean_std(_metric(cs, BASELINE, "epoch_time_s"))[0],
                "speedup": mean_std(_paired_ratio(cs, name, "epoch_time_s", base_over_system=True))[0],
                "bytes": mean_std(_metric(cs, name, "bytes_per_epoch_amortised"))[0],
                "bytes_ratio": mean_std(_paired_ratio(cs, name, "bytes_per_epoch_amortised"))[0],
                # every epoch after the one-time reads (what a longer run tends to)
                "steady_bytes_ratio": mean_std(_paired_ratio(cs, name, "bytes_per_epoch"))[0],
                "acc": mean_std(_metric(cs, name, ACC_KEY))[0],
                "base_acc": mean_std(_metric(cs, BASELINE, ACC_KEY))[0],
                "acc_diff": diff, "loses_accuracy": None if diff is None else diff < -loss,
                "floor_s": mean_std(floors)[0] if floors else None,
                "floor_ratio": mean_std(floor_ratios)[0] if floor_ratios else None,
                "train_time_s": mean_std(_metric(cs, name, "train_time_s"))[0],
                "phases": {k[len("phase_"):]: mean_std(_metric(cs, name, k))[0] for k in _phase_keys(cs, name)},
                **(_link_figures(cs, name) if task == "link" else {}),
            })
    return rows


# ---------------------------------------------------------------------------------------
# Coverage and goals
# ---------------------------------------------------------------------------------------

def coverage(cells: list[dict], plan: dict | None = None) -> dict:
    """How much of the configured matrix the JSON files hold.

    Args:
        cells: cell dicts (stale systems already marked so by the caller).
        plan: ``{"cells": {cell_id: {"axes": {...}, "systems": [...]}}, "axes": {axis: [values]}}``;
            None = the cells themselves are the matrix.

    Returns:
        ``cells_total`` (in the matrix), ``cells_done`` (every planned system ok but the
        plan's ``partial`` ones),
        ``cells_partial`` (some ok), ``runs_total``/``runs_ok``/``runs_failed``/``runs_stale``,
        ``systems``: name -> [cells where it ran ok, cells that plan it],
        ``outside`` (cell files not in the matrix), ``axes``: axis -> {"configured": [...],
        "done": [...]} (values with at least one done cell), ``failed``: [(cell, system, reason)].
    """
    by_id = {c.get("cell_id"): c for c in cells}
    if plan is None:
        planned = {cid: {"axes": c["axes"], "systems": list((c.get("systems") or {}).keys())} for cid, c in by_id.items()}
        axes_cfg = {a: sorted({c["axes"].get(a) for c in cells}, key=lambda v: _sort_key((v,))) for a in SELECT_AXES}
    else:
        planned, axes_cfg = plan["cells"], plan["axes"]
    out = {"cells_total": len(planned), "cells_done": 0, "cells_partial": 0, "runs_total": 0, "runs_ok": 0,
           "runs_failed": 0, "runs_stale": 0, "outside": sorted(set(by_id) - set(planned), key=str), "failed": []}
    done_axes: dict[str, set] = defaultdict(set)
    per_system: dict[str, list[int]] = {}
    partial = set((plan or {}).get("partial") or ())
    for cid, p in planned.items():
        c = by_id.get(cid) or {}
        systems = c.get("systems") or {}
        ok = 0
        required = [n for n in p["systems"] if n not in partial]
        for name in p["systems"]:
            out["runs_total"] += name in required
            st = (systems.get(name) or {}).get("status")
            tally = per_system.setdefault(name, [0, 0])
            tally[1] += 1
            if st == "ok":
                ok += name in required
                tally[0] += 1
            elif st == "failed":
                out["runs_failed"] += 1
                out["failed"].append((cid, name, systems[name].get("reason")))
            elif st == "stale":
                out["runs_stale"] += 1
        out["runs_ok"] += ok
        if required and ok == len(required):
            out["cells_done"] += 1
            for a in SELECT_AXES:
                done_axes[a].add(p["axes"].get(a))
        elif ok:
            out["cells_partial"] += 1
    out["systems"] = per_system
    out["partial"] = sorted(partial)
    out["axes"] = {a: {"configured": list(axes_cfg.get(a, [])),
                       "done": [v for v in axes_cfg.get(a, []) if v in done_axes[a]]} for a in SELECT_AXES}
    return out


def pooled_by_depth(graded: list[dict]) -> str:
    """The graded rows' mean differences pooled per depth band (2 layers; 3 or more), as text.

    A row's mean over 3 seeds can miss the ">= DistDGL" rule by noise alone; pooling the rows of
    one band (each row one sample, a t-interval over the rows) says whether the misses are a
    systematic loss or scatter around a mean at or above zero.

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
        below = sum(d < 0 for d in ds)
        parts.append(f"{label} {m:+.2f}{ci} ({len(ds)} rows, {below} below 0)")
    return ("; pooled rows (mean of the rows' differences, 95 % CI over rows): " + ", ".join(parts)) if parts else ""


def tta_summary(rows: list[dict]) -> str:
    """One paragraph on the time to target of the graded system (see :data:`TARGET_FRACTION`).

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
    text = (f"**Time to target** ({graded or 'every variant'}; target {TARGET_FRACTION:.0%} of DistDGL's validation "
            f"plateau in the same cell): faster than DistDGL in {sum(x > 1 for x in sp)} of {len(sp)} rows, "
            f"DistDGL's time over this one's median {statistics.median(sp):.2f}x (range {min(sp):.2f}x-{max(sp):.2f}x)")
    if missed:
        text += "; seeds that never reach it: " + ", ".join(
            f"{r['dataset']} {r['partition']}-{r['parts']} {r['model']}-{r['layers']} "
            f"{r['seeds'] - r.get('tta_reached', 0)} of {r['seeds']}" for r in missed)
    return text + "."


def pair_summary(pair: dict) -> str:
    """One line on a pair (see :func:`pair_rows`): rows within :data:`PAIR_POINTS`, the rows' differences pooled.

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
    text = (f"**{pair['a']} vs {pair['b']}**: {len(rows) - len(below)} of {len(rows)} rows within "
            f"{_tolerance(rows)}; pooled mean diff over rows {m:+.2f}{ci}")
    if below:
        text += "; below: " + ", ".join(f"{_row_name(r)} {r['diff_mean']:+.2f}" for r in below)
    if len({int(r["layers"]) >= 3 for r in rows}) > 1:
        text += pooled_by_depth(rows)
    return text + "."


def _tolerance(rows: list[dict]) -> str:
    """The pair tolerance in words for these rows: accuracy points, MRR points, or both."""
    tasks = {r.get("task", "node") for r in rows}
    if tasks == {"link"}:
        return f"{LINK_POINTS:g} MRR points"
    if "link" in tasks:
        return f"{PAIR_POINTS:g} points ({LINK_POINTS:g} MRR points on link rows)"
    return f"{PAIR_POINTS:g} points"


def accuracy_goals(rows: list[dict]) -> list[dict]:
    """The accuracy goals from the accuracy rows: each ``{"goal", "met", "figure"}`` (met None = not measured).

    The goals are about the package's defaults: where the rows hold a system named
    :data:`DEFAULTS` only its rows are graded (other variants, e.g. the old defaults, are shown
    in the matrix but not graded); otherwise every system but the baseline. Node-classification
    rows are graded on accuracy (:func:`node_goals`), link-prediction rows on MRR
    (:func:`link_goals`); a report with rows of one task only shows that task's goals.
    """
    node, link = _by_task(rows)
    return (node_goals(node) if node or not link else []) + (link_goals(link) if link else [])


def _graded(rows: list[dict]) -> tuple[list[dict], str]:
    """The rows the goals grade (the defaults' where present, else every system but DistDGL) and
    the phrase that says so."""
    graded_systems = {DEFAULTS} if any(r["system"] == DEFAULTS for r in rows) else \
        {r["system"] for r in rows if r["system"] != BASELINE}
    who = f" ({DEFAULTS}: the defaults)" if graded_systems == {DEFAULTS} else ""
    return [r for r in rows if r["system"] in graded_systems], who


def link_goals(rows: list[dict]) -> list[dict]:
    """The link-prediction goal from link rows (:func:`accuracy_rows` of cells with ``train.task: link``):
    the graded system's test MRR within :data:`LINK_POINTS` MRR points of DistDGL's, in every row
    (the mean of its paired per-seed differences) and pooled over the rows (one sample per row, a
    95 % t-interval over them).

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
    tol = f"{LINK_POINTS:g} points ({LINK_POINTS / 100:g} MRR)"
    per_row = {"goal": f"link prediction: test MRR >= DistDGL - {tol} in every row, mean of the seeds{who}",
               "met": (not unmet) if graded else None,
               "figure": f"{len(graded) - len(unmet)} of {len(graded)} rows within"
               + (f"; worst {min(r['diff_mean'] for r in graded):+.2f} points" if graded else "")
               + ("; not met: " + ", ".join(f"{_row_name(r)} {r['diff_mean']:+.2f} (n={r['paired']})"
                                            for r in unmet) if unmet else "")}
    ds = [r["diff_mean"] for r in graded]
    m, lo, hi = t_interval(ds)
    pooled = {"goal": f"link prediction: test MRR >= DistDGL - {tol} pooled over the rows{who}",
              "met": None if m is None else m >= -LINK_POINTS,
              "figure": "no paired rows" if m is None else
              f"pooled mean diff over rows {m:+.2f} points" + (f" [{lo:+.2f}, {hi:+.2f}]" if lo is not None else "")
              + f" ({len(ds)} rows, {sum(d < 0 for d in ds)} below 0)"}
    return [per_row, pooled]


def node_goals(rows: list[dict]) -> list[dict]:
    """The goals of node-classification rows (accuracy, memory, bytes, stalls, one-time bytes); see
    :func:`accuracy_goals`."""
    mine, who = _graded(rows)
    graded = [r for r in mine if r["met"] is not None]
    unmet = [r for r in graded if not r["met"]]
    goals = [{"goal": f"test accuracy >= DistDGL - 1 point (>= DistDGL at 3-4 layers), mean of the seeds{who}",
              "met": (not unmet) if graded else None,
              "figure": f"{len(graded) - len(unmet)} of {len(graded)} rows met"
              + (f"; worst {min(r['diff_mean'] for r in graded):+.2f} points" if graded else "")
              + ("; not met: " + ", ".join(f"{r['dataset']} {r['partition']}-{r['parts']} {r['model']}-{r['layers']} "
                                           f"{r['diff_mean']:+.2f} (n={r['paired']})" for r in unmet) if unmet else "")
              + pooled_by_depth(graded)}]
    # The stricter goal of accuracy without replication: every row within half a point, and at
    # 3-4 layers not below DistDGL pooled over the rows.
    deep = [r["diff_mean"] for r in graded if int(r["layers"]) >= 3]
    strict = [r for r in graded if r["diff_mean"] < -0.5]
    goals.append({"goal": f"test accuracy >= DistDGL - 0.5 points in every row, >= DistDGL pooled at 3-4 layers{who}",
                  "met": (not strict and (not deep or statistics.fmean(deep) >= 0)) if graded else None,
                  "figure": f"{len(graded) - len(strict)} of {len(graded)} rows within 0.5"
                  + (f"; 3-4 layers pooled {statistics.fmean(deep):+.2f} ({len(deep)} rows)" if deep else "")
                  + ("; below: " + ", ".join(f"{r['dataset']} {r['partition']}-{r['parts']} {r['model']}-{r['layers']} "
                                             f"{r['diff_mean']:+.2f}" for r in strict) if strict else "")})
    held = [r for r in mine if r.get("held_ratio_max") is not None]
    top = max(held, key=lambda r: r["held_ratio_max"], default=None)
    goals.append({"goal": f"every worker's node tables (features, aggregates, halo; any precision) <= 1.5 x its own "
                          f"feature rows in fp32{who}",
                  "met": None if top is None else top["held_ratio_max"] <= 1.5 + 1e-9,
                  "figure": "not measured" if top is None else
                  f"largest {top['held_ratio_max']:.3f} ({top['dataset']} {top['partition']}-{top['parts']} "
                  f"{top['model']}-{top['layers']}); mean over rows {statistics.fmean(r['held_ratio'] for r in held):.2f}"})
    syn = [r for r in mine if r["bytes_ratio"] is not None
           and str(r.get("data_name", r["dataset"])).startswith("syn")]
    worst = max((r["bytes_ratio"] for r in syn), default=None)
    goals.append({"goal": "bytes per epoch (amortised) <= 1/10 of DistDGL's on the hard synthetic graph",
                  "met": None if worst is None else worst <= 0.1,
                  "figure": "no synthetic rows" if worst is None else f"worst ratio {worst:.4f} (1/{1 / worst:.0f})"})
    stalls = [r["stall_fraction"] for r in rows if r["system"] != BASELINE and r["stall_fraction"] is not None]
    grappa_rows = [r for r in rows if r["system"] != BASELINE]
    goals.append({"goal": "repartition stall <= 2 % of training time",
                  "met": (True if grappa_rows else None) if not stalls else max(stalls) <= 0.02,
                  "figure": ("0 %: no run repartitioned (schedule.k = 0)" if grappa_rows else "no rows")
                  if not stalls else f"worst {max(stalls):.2%}"})
    # Sparse labels (papers100M has 1 %): the one-time reads are graded there; other rows are shown.
    once = [r for r in mine if r.get("one_time_epochs") is not None]
    sparse = [r for r in once if r.get("label_frac") is not None and r["label_frac"] <= 0.01 + 1e-12]
    every = (f"; every row: median {statistics.median(r['one_time_epochs'] for r in once):.2f}, "
             f"worst {max(r['one_time_epochs'] for r in once):.2f} DistDGL epochs") if once else ""
    goals.append({"goal": "one-time bytes (all workers, once per partitioning) <= 1 DistDGL epoch's bytes, on graphs "
                          f"with <= 1 % labels{who}",
                  "met": None if not sparse else max(r["one_time_epochs"] for r in sparse) <= 1.0,
                  "figure": ("no rows with <= 1 % labels" if not sparse else
                             f"worst {max(r['one_time_epochs'] for r in sparse):.2f} DistDGL epochs over "
                             f"{len(sparse)} rows") + every})
    return goals


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
        fig = (f"mean {mean:.2f}x (geometric {geo:.2f}x), best {best:.2f}x over {len(fair)} rows at 1gbit / 4 parts "
               f"within {LOSS_POINTS:g} point ({len(at) - len(fair)} rows that lose accuracy left out)")
        goals.append({"goal": "epoch time DistDGL / Grappa >= 4 on average at 1gbit, 4 parts, equal accuracy",
                      "met": mean >= 4, "figure": fig})
        goals.append({"goal": "... and >= 13 at best", "met": best >= 13, "figure": f"best {best:.2f}x"})
    else:
        goals.append({"goal": "epoch time DistDGL / Grappa >= 4 on average (>= 13 at best) at 1gbit, 4 parts, "
                              "equal accuracy", "met": None, "figure": "no such rows yet"})
    br = [r["bytes_ratio"] for r in grappa if r["bytes_ratio"] is not None]
    steady = [r["steady_bytes_ratio"] for r in grappa if r.get("steady_bytes_ratio") is not None]
    fig = "no rows" if not br else (
        f"worst ratio {max(br):.4f} (1/{1 / max(br):.0f}), one-time bytes amortised over each run's epochs"
        + (f"; without them (every later epoch) worst {max(steady):.4f} (1/{1 / max(steady):.0f}), "
           f"{sum(x <= 1 / 40 for x in steady)} of {len(steady)} rows <= 1/40" if steady else ""))
    goals.append({"goal": "Grappa bytes per epoch <= 1/40 of DistDGL's", "met": None if not br else max(br) <= 1 / 40,
                  "figure": fig})
    fl = [r["floor_ratio"] for r in grappa if r["floor_ratio"] is not None]
    goals.append({"goal": "Grappa epoch <= 1.1x its floor", "met": None if not fl else max(fl) <= 1.1,
                  "figure": "no summary has floor_s yet" if not fl else f"worst {max(fl):.2f}x"})
    return goals


# ---------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------

def _f(x, fmt: str, none: str = "-") -> str:
    return none if x is None else format(x, fmt)


def _bytes(n) -> str:
    from ..runtime.metrics import format_bytes

    return format_bytes(n)


def _quality_fmt(task: str):
    """How a row's test figure is shown: an accuracy in % (2 decimals), an MRR as itself (4 decimals)."""
    if task == "link":
        return lambda x: _f(x, ".4f")
    return lambda x: _f(None if x is None else x * 100, ".2f")


def _mark(met) -> str:
    return "-" if met is None else ("met" if met else "**not met**")


def _bw(v) -> str:
    return v if v else "unshaped"


def _table(head: list[str], lines: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in lines]
    return "\n".join(out)


def accuracy_table(rows: list[dict]) -> str:
    """The accuracy matrix as markdown (accuracies in %, differences in points)."""
    multi_bw = len({r["bandwidth"] for r in rows}) > 1
    extra_stall = any(r["stall_fraction"] is not None for r in rows)
    memory = any(r.get("held_ratio") is not None or r.get("peak_rss") is not None for r in rows)
    tta = any(r.get("tta_reached") for r in rows)
    head = ["dataset", "partitioner", "parts", "model", "layers"] + (["network"] if multi_bw else []) + [
        "system", "seeds", "test acc % (mean ± std)", "Δ vs DistDGL, points (95 % CI)", "goal",
        "bytes/epoch (amortised)", "bytes ratio", "edge cut"] + (["stall"] if extra_stall else []) + (
        ["one-time bytes", "held / own rows", "peak RSS"] if memory else []) + ["converged"] + (
        ["time to target s (reached)", "DistDGL / system time to target"] if tta else [])
    lines = []
    for r in rows:
        acc = _f(r["acc_mean"] * 100, ".2f") + ("" if r["acc_std"] is None else f" ± {r['acc_std'] * 100:.2f}")
        diff, goal = _diff_cells(r)
        line = [str(r["dataset"]), str(r["partition"]), str(r["parts"]), str(r["model"]), str(r["layers"])]
        line += [_bw(r["bandwidth"])] if multi_bw else []
        line += [r["system"], str(r["seeds"]), acc, diff, goal, _bytes(r["bytes"]),
                 "1" if r["system"] == BASELINE else _f(r["bytes_ratio"], ".4f"), _f(r["edge_cut"], ".3f")]
        line += [_f(r["stall_fraction"], ".2%")] if extra_stall else []
        if memory:
            line += [_bytes(r.get("one_time_bytes")) if r.get("one_time_bytes") else "-",
                     _f(r.get("held_ratio"), ".2f"), _bytes(r.get("peak_rss")) if r.get("peak_rss") else "-"]
        conv, judged = r.get("converged") or (0, 0)
        line += [f"{conv}/{judged}" if judged else "-"]
        if tta:
            line += [f"{_f(r.get('tta_s'), '.1f')} ({r.get('tta_reached', 0)}/{r['seeds']})",
                     "1" if r["system"] == BASELINE else _f(r.get("tta_speedup"), ".2f") + ("x" if r.get("tta_speedup") else "")]
        lines.append(line)
    return _table(head, lines)


def _diff_cells(r: dict) -> tuple[str, str]:
    """A matrix row's difference to DistDGL (mean and 95 % interval, in points) and its goal mark."""
    if r["system"] == BASELINE:
        return "(reference)", ""
    if r["diff_mean"] is None:
        return "no paired DistDGL run", "-"
    ci = "" if r["diff_lo"] is None else f" [{r['diff_lo']:+.2f}, {r['diff_hi']:+.2f}]"
    return f"{r['diff_mean']:+.2f}{ci}", _mark(r["met"])


def link_table(rows: list[dict]) -> str:
    """The link-prediction rows of the accuracy matrix as markdown: test MRR (as itself), its paired
    difference to DistDGL in MRR points (1 point = 0.01 MRR) with the link goal, test hits@k, the
    share of edges trained on (with the halo dropped in parentheses), epoch time, bytes, memory,
    convergence on the validation MRR and the time to a validation-MRR target."""
    multi_bw = len({r["bandwidth"] for r in rows}) > 1
    k = next((r.get("hits_k") for r in rows if r.get("hits_k")), None)
    tta = any(r.get("tta_reached") for r in rows)
    head = ["dataset", "partitioner", "parts", "model", "layers"] + (["network"] if multi_bw else []) + [
        "system", "seeds", "test MRR (mean ± std)", "Δ vs DistDGL, MRR points (95 % CI)",
        f"within {LINK_POINTS:g}", f"test hits@{k or 'k'}", "edges trained on (halo dropped)", "epoch",
        "bytes/epoch (amortised)", "bytes ratio", "edge cut", "peak RSS", "converged"] + (
        ["time to val-MRR target s (reached)", "DistDGL / system time to target"] if tta else [])
    lines = []
    for r in rows:
        mrr = _f(r["acc_mean"], ".4f") + ("" if r["acc_std"] is None else f" ± {r['acc_std']:.4f}")
        diff, goal = _diff_cells(r)
        used = "-" if r.get("usable_edges") is None else f"{r['usable_edges']:.1%}" + (
            "" if r.get("usable_edges_drop") is None else f" ({r['usable_edges_drop']:.1%})")
        line = [str(r["dataset"]), str(r["partition"]), str(r["parts"]), str(r["model"]), str(r["layers"])]
        line += [_bw(r["bandwidth"])] if multi_bw else []
        conv, judged = r.get("converged") or (0, 0)
        line += [r["system"], str(r["seeds"]), mrr, diff, goal, _f(r.get("hits"), ".4f"), used,
                 _f(r.get("epoch_time_s"), ".3f") + (" s" if r.get("epoch_time_s") is not None else ""),
                 _bytes(r["bytes"]), "1" if r["system"] == BASELINE else _f(r["bytes_ratio"], ".4f"),
                 _f(r["edge_cut"], ".3f"), _bytes(r.get("peak_rss")) if r.get("peak_rss") else "-",
                 f"{conv}/{judged}" if judged else "-"]
        if tta:
            line += [f"{_f(r.get('tta_s'), '.1f')} ({r.get('tta_reached', 0)}/{r['seeds']})",
                     "1" if r["system"] == BASELINE else _f(r.get("tta_speedup"), ".2f") + ("x" if r.get("tta_speedup") else "")]
        lines.append(line)
    return _table(head, lines)


def speed_table(rows: list[dict], link: bool = False) -> str:
    """The speed matrix as markdown; floor columns only when some summary has a floor. With
    ``link`` (link-prediction rows) the quality columns are the test MRR, its difference in MRR
    points, the test hits@k and the share of edges trained on."""
    floors = any(r["floor_ratio"] is not None for r in rows)
    head = ["dataset", "partitioner", "parts", "model", "layers", "network", "system", "seeds", "epoch",
            "speedup", "bytes/epoch (amortised)", "bytes ratio", "ratio w/o one-time"]
    if link:
        k = next((r.get("hits_k") for r in rows if r.get("hits_k")), None)
        head += ["test MRR", "Δ MRR, points", f"test hits@{k or 'k'}", "edges trained on"]
    else:
        head += ["test acc %", "Δ acc, points"]
    head += ["floor", "epoch / floor"] if floors else []
    head += ["note"]
    lines = []
    for r in rows:
        base = r["system"] == BASELINE
        note = ""
        if r["loses_accuracy"]:
            note = (f"**loses MRR** ({r['acc_diff']:+.2f} points)" if link
                    else f"**loses accuracy** ({r['acc_diff']:+.2f} points)")
        line = [str(r["dataset"]), str(r["partition"]), str(r["parts"]), str(r["model"]), str(r["layers"]),
                _bw(r["bandwidth"]), r["system"], str(r["seeds"]), _f(r["epoch_time_s"], ".3f") + " s",
                "(reference)" if base else _f(r["speedup"], ".2f", "-") + ("" if r["speedup"] is None else "x"),
                _bytes(r["bytes"]), "1" if base else _f(r["bytes_ratio"], ".4f"),
                "1" if base else _f(r.get("steady_bytes_ratio"), ".4f")]
        if link:
            line += [_f(r["acc"], ".4f"), "" if base else _f(r["acc_diff"], "+.2f"), _f(r.get("hits"), ".4f"),
                     _f(r.get("usable_edges"), ".1%")]
        else:
            line += [_f(None if r["acc"] is None else r["acc"] * 100, ".2f"), "" if base else _f(r["acc_diff"], "+.2f")]
        if floors:
            line += [_f(r["floor_s"], ".3f"), _f(r["floor_ratio"], ".2f")]
        lines.append(line + [note])
    return _table(head, lines)


def phase_table(rows: list[dict]) -> str:
    """Where an epoch goes: per row, each phase's share of the epoch (slowest worker's clock).

    The phases are :data:`dgl_grappa.runtime.metrics.PHASE_KEYS` (seconds per epoch of the median
    epoch, rank 0's worker); ``wait`` is the time that worker waited for the slowest one,
    ``overlap`` what ran concurrently (prefetching), so the shares add up to 100 % minus
    the overlap. Rows without phases (runs from before they were logged) are left out.
    """
    from ..runtime.metrics import PHASE_KEYS  # torch comes with it: only when a report is written

    shown = [k for k in PHASE_KEYS if k != "overlap_s"]
    head = ["dataset", "partitioner", "parts", "model", "layers", "network", "system", "epoch"] + [
        k[:-2] + " %" for k in shown]
    lines = []
    for r in rows:
        ph = r.get("phases") or {}
        total = sum(ph.get(k, 0.0) for k in shown) - ph.get("overlap_s", 0.0)
        if not ph or total <= 0:
            continue
        lines.append([str(r["dataset"]), str(r["partition"]), str(r["parts"]), str(r["model"]), str(r["layers"]),
                      _bw(r["bandwidth"]), r["system"], _f(total, ".3f") + " s"]
                     + [f"{100 * ph.get(k, 0.0) / total:.0f}" for k in shown])
    return _table(head, lines) if lines else "(no run logged its phases)"


def pair_table(pair: dict) -> str:
    """One pair's rows as markdown (accuracies in %, the difference in points)."""
    a, b, rows = pair["a"], pair["b"], pair["rows"]
    multi_bw = len({r["bandwidth"] for r in rows}) > 1
    tasks = {r.get("task", "node") for r in rows}
    what = "test MRR" if tasks == {"link"} else ("test acc % / MRR" if "link" in tasks else "test acc %")
    tol = f"{LINK_POINTS:g}" if tasks == {"link"} else (
        f"{PAIR_POINTS:g} ({LINK_POINTS:g} on MRR)" if "link" in tasks else f"{PAIR_POINTS:g}")
    head = ["dataset", "partitioner", "parts", "model", "layers"] + (["network"] if multi_bw else []) + [
        "paired seeds", f"{a} {what}", f"{b} {what}", f"{a} − {b}, points (95 % CI)", f"within {tol}"]
    lines = []
    for r in rows:
        ci = "" if r["diff_lo"] is None else f" [{r['diff_lo']:+.2f}, {r['diff_hi']:+.2f}]"
        line = [str(r["dataset"]), str(r["partition"]), str(r["parts"]), str(r["model"]), str(r["layers"])]
        line += [_bw(r["bandwidth"])] if multi_bw else []
        q = _quality_fmt(r.get("task", "node"))
        line += [str(r["paired"]), q(r["a_acc"]), q(r["b_acc"]), f"{r['diff_mean']:+.2f}{ci}", _mark(r["met"])]
        lines.append(line)
    return _table(head, lines)


def pairs_section(cells: list[dict], pairs: list[tuple[str, str]]) -> list[str]:
    """The "System against system" section of the accuracy report (no lines without pairs).

    Per pair its summary line, its table and, where rows lack a seed with both systems ok, a
    note that names them (they are not in the table nor the count).
    """
    if not pairs:
        return []
    out = ["## System against system", ""]
    for a, b in pairs:
        pair = pair_rows(cells, a, b)
        out += [f"### {a} vs {b}", "", pair_summary(pair), ""]
        if pair["rows"]:
            out += [pair_table(pair), ""]
        if pair["skipped"]:
            out += [f"{len(pair['skipped'])} row(s) skipped, without a seed where both ran ok: "
                    + ", ".join(pair["skipped"]) + ".", ""]
    return out + [PAIR_NOTES]


def goals_table(goals: list[dict]) -> str:
    return _table(["goal", "status", "figure"], [[g["goal"], _mark(g["met"]), g["figure"]] for g in goals])


def coverage_text(cov: dict) -> str:
    """Coverage as markdown lines."""
    lines = [f"- cells done: **{cov['cells_done']} of {cov['cells_total']}** in the configured matrix "
             f"({cov['cells_partial']} partly done); runs ok {cov['runs_ok']} of {cov['runs_total']}, "
             f"failed {cov['runs_failed']}, stale {cov['runs_stale']} (ran with a config that has changed since)"]
    if cov.get("systems"):
        lines.append("- cells each system ran in: " + ", ".join(
            f"{name} {ok} of {n}" + (" (partial: run on a subset)" if name in cov.get("partial", ()) else "")
            for name, (ok, n) in cov["systems"].items()))
    for a, v in cov["axes"].items():
        conf = [_bw(x) if a == "bandwidth" else x for x in v["configured"]]
        done = [_bw(x) if a == "bandwidth" else x for x in v["done"]]
        lines.append(f"- {a}: configured {', '.join(map(str, conf)) or '-'}; with a done cell: "
                     f"{', '.join(map(str, done)) or 'none'}")
    if cov["outside"]:
        lines.append(f"- {len(cov['outside'])} cell file(s) in the output folder are outside this matrix and not shown")
    if cov["failed"]:
        lines.append("- failed runs (rerun the command to retry them):")
        for cid, name, reason in cov["failed"][:30]:
            lines.append(f"  - `{cid}` {name}: {reason}")
        if len(cov["failed"]) > 30:
            lines.append(f"  - ... and {len(cov['failed']) - 30} more")
    return "\n".join(lines)


def settings_table(cells: list[dict]) -> str:
    """Per dataset: base config and the fixed hyper-parameters the runs used (first finished cell)."""
    seen: dict[str, dict] = {}
    for c in cells:
        if c["axes"]["dataset"] not in seen and ok_systems(c):
            seen[c["axes"]["dataset"]] = c
    head = ["dataset", "base config", "task", "nodes", "epochs", "batch", "hidden", "dropout", "lr", "weight decay",
            "eval every"]
    lines = []
    for name, c in seen.items():
        cfg = c.get("config") or {}
        t, m = cfg.get("train", {}), cfg.get("model", {})
        lines.append([name, f"`{c['axes'].get('dataset_config', '')}`", _task_text(c),
                      str((c.get("partition") or {}).get("num_nodes", "-")),
                      str(t.get("epochs", "-")), str(t.get("batch_size", "-")), str(m.get("hidden", "-")),
                      str(m.get("dropout", "-")), str(t.get("lr", "-")), str(t.get("weight_decay", "-")),
                      str(t.get("eval_every", "-"))])
    return _table(head, lines) if lines else "(no finished cell yet)"


def _task_text(cell: dict) -> str:
    """A cell's kind of job in a few words: "node", "link", with learnable embeddings, on a heterograph."""
    cfg = cell.get("config") or {}
    out = cell_task(cell)
    if (cfg.get("model") or {}).get("embed"):
        out += ", learnable embeddings"
    if (cfg.get("data") or {}).get("name") == "hetsynth":
        out += f", heterogeneous (target {(cfg.get('data') or {}).get('target', '?')})"
    return out


def systems_text(plan: dict | None, cells: list[dict]) -> str:
    entries = (plan or {}).get("system_entries")
    if not entries:
        names = _systems_order(cells, plan)
        entries = names
    return "\n".join(f"- `{e}`" for e in entries)


ACCURACY_NOTES = """\
- **test acc**: global evaluations (whole graph, full neighbourhoods) of rank 0's model; per run the mean of
  those in the last 20 % of the epochs (one evaluation after the last epoch where a run kept no records).
- **Δ vs DistDGL**: per seed, this system's test accuracy minus DistDGL's on the same partitioning (same seed:
  same partition, initialisation seed and sampling seed), in points; mean over the seeds and a two-sided 95 %
  Student-t interval (n - 1 degrees of freedom; none with one seed).
- **goal** (the accuracy goal): met when the mean difference is >= -1.0 point, and >= 0 at 3 or more layers.
- **bytes/epoch (amortised)**: bytes on the wire per training epoch (loopback of the run's private network
  namespace, median over epochs; the application's own count where not measured), plus one-time bytes (a
  summary's `one_time_bytes_total`, else the halo feature bytes the workers read at load time) divided by the
  epochs; **bytes ratio**: per seed this system's over DistDGL's, averaged.
- **edge cut**: fraction of edges whose ends lie in different parts.
- **one-time bytes**: what a run's workers move once per partitioning, all workers together (summary
  `one_time_bytes_total`: halo feature, in-degree and first-hop aggregate rows, or the rows an owner needs to
  compute its nodes' aggregates); already included, divided by the epochs, in bytes/epoch.
  **held / own rows**: memory, the bytes of the feature-width node tables the largest worker holds (features,
  first-hop aggregates, kept halo rows, in their stored precision; DistDGL: a machine's KVStore shard) over
  its own nodes' feature rows in fp32 (1.00 = its own features only); runs from before the memory budget held
  every table in fp32, and show their feature-width rows per inner node. **peak RSS**: the largest worker's
  peak resident memory (VmHWM; DistDGL: a machine's server plus its trainer), mean over the seeds.
- **converged** (runs with an evaluation in both windows): the mean validation accuracy of the evaluations in
  the last 20 % of the epochs is at most 1 point above that of the 20 % before (a run still rising by more is
  not converged; one that falls is past its peak).
- **time to target**: training seconds (the epochs' shared clock, evaluation excluded) until a run's first
  evaluation whose validation accuracy reaches 98 % of DistDGL's validation plateau in the same cell (the mean of
  its last 20 % of evaluations); Grappa's count starts with its slowest worker's one-time partition and halo
  load; DistDGL's server start-up is not counted. Mean over the seeds that reached it (reached / seeds);
  **DistDGL / system**: per seed, DistDGL's time over this system's, averaged over seeds where both reached it.
  These runs are on an unshaped loopback network on 2 shared cores: the speed report has the shaped times.
"""

SPEED_NOTES = """\
- **epoch**: the shared epoch clock (`dgl_grappa.runtime.metrics.EpochClock`): from a barrier at the epoch's start to the
  end of its slowest worker, evaluation excluded; median over the epochs of a run.
- **speedup**: DistDGL's epoch time over this system's, per seed on the same partitioning, averaged.
- **bytes/epoch (amortised)**, **bytes ratio**: as in the accuracy report (wire bytes per epoch + one-time bytes /
  epochs; this system's over DistDGL's); **ratio w/o one-time**: the same ratio of the wire bytes per epoch alone
  (what each epoch after the one-time reads costs, the figure a long run tends to).
- **Δ acc**: test accuracy minus DistDGL's, in points; a speedup that loses more than 1 point is marked.
- **floor**, **epoch / floor**: shown when the runs' summaries carry `floor_s` (`run.floor`): what a Grappa
  epoch cannot beat, measured in the same run: the same steps with a no-op reducer (local compute on the
  worker's part) plus the same number of all-reduces of the same buckets alone.
"""


PHASE_NOTES = """\
- Each phase's share of the epoch (rank 0's worker, the median epoch of a run; seeds averaged): **sample**
  (drawing the batch's blocks; DistDGL: the loader's `next()` with its sampling RPCs), **gather** (input feature
  rows; DistDGL: the KVStore pull), **forward**, **backward** (DistDGL: DDP's bucketed all-reduce runs inside
  it), **allreduce** (Grappa: its reducer's collectives, timed), **optimizer**, **other**, **wait** (for the
  slowest worker at the epoch's end). The same fields are in every run's metrics.jsonl, per epoch.
"""


LINK_NOTES = f"""\
- **Link prediction** (cells whose base config sets `train.task: link`): **test MRR** is the mean reciprocal
  rank of the held-out test edges, each scored against the same sampled negatives for every system (rank 0's
  encoder on the whole training graph; `dgl_grappa.runtime.evaluation.evaluate_link`), per run the mean of the
  evaluations in the last 20 % of the epochs, as the test accuracy; **Δ vs DistDGL** is in MRR points (1 point
  = 0.01 MRR), per seed on the same partitioning, mean and 95 % t-interval; **within {LINK_POINTS:g}** (the link
  goal): that mean is >= -{LINK_POINTS:g} points (0.02 MRR). **test hits@k**: the share of test edges ranked in
  the top k, the same window mean. **edges trained on**: the share of the training graph's edges that are some
  worker's positive (Grappa with its halo; in parentheses with the halo dropped; DistDGL trains on every edge).
  **converged** and **time to target** race on the validation MRR (98 % of DistDGL's validation-MRR plateau in
  the same cell). In the speed report a Grappa row that loses more than {LINK_POINTS:g} MRR points is marked.
"""

PAIR_NOTES = f"""\
- **A − B**: per seed, A's test accuracy minus B's in the same cell (same partitioning, same seed), in
  points; mean over the seeds where both ran ok and its 95 % Student-t interval, as Δ vs DistDGL in the
  matrix. **within {PAIR_POINTS:g}**: the mean is >= -{PAIR_POINTS:g} (A may be better by any margin; on link-prediction
  rows the figures are test MRRs and the tolerance is {LINK_POINTS:g} MRR points, 0.02 MRR). The
  test accuracies are each system's mean over the same paired seeds (the matrix's are over each system's
  finished seeds). **pooled**: the rows' mean differences, one sample per row, with a 95 % t-interval over
  the rows.
"""


def render(kind: str, cells: list[dict], plan: dict | None, *, command: str, regenerate: str,
           preamble: str = "", plots: list[str] | None = None, pairs: list[tuple[str, str]] | None = None,
           baseline_partition: str = "") -> str:
    """The whole markdown report.

    Args:
        kind: "accuracy" or "speed".
        cells: cell dicts (stale systems marked ``status: stale`` by the caller).
        plan: the configured matrix (see :func:`coverage`), or None.
        command: the command that runs the matrix.
        regenerate: the command that regenerated this report.
        preamble: hand-written markdown put after the header.
        plots: relative paths of the plot images to show.
        pairs: (A, B) system names graded against each other (``bench.pairs``; accuracy only).
        baseline_partition: DistDGL's partitioner for every row (:func:`borrow_baseline`), or "".

    Returns:
        The markdown text.
    """
    cov = coverage(cells, plan)  # what ran, before any borrowing
    if baseline_partition:
        cells = borrow_baseline(cells, baseline_partition)
    shown = _in_plan(cells, plan)
    title = "Accuracy: Grappa vs DistDGL" if kind == "accuracy" else "Speed: Grappa vs DistDGL"
    parts = [f"<!-- Generated by `{regenerate}` from the cell JSON files; edits here are overwritten "
             "(hand-written text belongs in bench.preamble). -->", "", f"# {title}", ""]
    if preamble.strip():
        parts += [preamble.strip(), ""]
    parts += ["## Coverage", "", f"Matrix: `{command}`", "", coverage_text(cov), "",
              "## Settings", "", "Systems (name: overrides of the base config):", "", systems_text(plan, shown), "",
              "Fixed per dataset (from its base config):", "", settings_table(shown), ""]
    parts += [line for line in (baseline_text(shown, baseline_partition), dilation_text(shown)) if line]
    if kind == "accuracy":
        rows = accuracy_rows(shown, None)
        _attach_data_name(rows, shown)
        node, link = _by_task(rows)
        matrix = ["## Matrix", ""]
        if node or not link:
            matrix += [accuracy_table(node) if node else "(no finished run yet)", ""]
        if link:
            matrix += (["### Link prediction", ""] if node else []) + [link_table(link), ""]
        parts += ["## Accuracy goals", "", goals_table(accuracy_goals(rows)), "",
                  tta_summary(rows), ""] + pairs_section(shown, pairs or []) + matrix + [
                  ACCURACY_NOTES] + ([LINK_NOTES] if link else [])
    else:
        rows = speed_rows(shown, None)
        node, link = _by_task(rows)
        matrix = ["## Matrix", ""]
        if node or not link:
            matrix += [speed_table(node) if node else "(no finished run yet)", ""]
        if link:
            matrix += (["### Link prediction", ""] if node else []) + [speed_table(link, link=True), ""]
        parts += ["## Speed goals", "", goals_table(speed_goals(rows)), ""] + matrix + [
                  SPEED_NOTES] + ([LINK_NOTES] if link else []) + [
                  "## Where an epoch goes", "", phase_table(rows), "", PHASE_NOTES]
    if plots:
        parts += ["## Plots", ""] + [f"![{Path(p).stem}]({p})\n" for p in plots]
    return "\n".join(parts).rstrip() + "\n"


def baseline_text(cells: list[dict], partition: str) -> str:
    """A settings paragraph on borrowed DistDGL runs (:func:`borrow_baseline`), or "" when none is."""
    borrowed = sorted({c["axes"].get("partition") for c in cells
                       if ((c.get("systems") or {}).get(BASELINE) or {}).get("borrowed_from")}, key=str)
    if not partition or not borrowed:
        return ""
    return (f"DistDGL, the reference of every row, ran on {partition} partitions (`bench.baseline_partition`): the "
            f"rows of {', '.join(borrowed)} partitions compare with its run in the {partition} cell of the same "
            "dataset, parts, model, depth, network and seed, which is listed once, in its own row.\n")


def dilation_text(cells: list[dict]) -> str:
    """A settings paragraph on test hosts' time dilation (``network_dilation`` of the runs), or ""."""
    seen = defaultdict(set)
    for c in cells:
        for s in (c.get("systems") or {}).values():
            d = (s.get("metrics") or {}).get("network_dilation")
            if s.get("status") == "ok" and d and float(d) != 1.0:
                seen[float(d)].add(f"{c['axes'].get('parts')} parts")
    if not seen:
        return ""
    per = "; ".join(f"D = {d:g} at {', '.join(sorted(v))}" for d, v in sorted(seen.items()))
    return (f"Times are as measured on test hosts with time dilation ({per}): each host had 1/D of a core and its "
            "link ran at bandwidth / D, so every time here is D times the emulated cluster's (divide by D); ratios "
            "and bytes are not affected (docs/cluster.md).\n")


def _by_task(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(node-classification rows, link-prediction rows)."""
    return ([r for r in rows if r.get("task", "node") != "link"], [r for r in rows if r.get("task") == "link"])


def _attach_data_name(rows: list[dict], cells: list[dict]) -> None:
    names = {c["axes"]["dataset"]: c["axes"].get("data_name", c["axes"]["dataset"]) for c in cells}
    for r in rows:
        r["data_name"] = names.get(r["dataset"], r["dataset"])


# ---------------------------------------------------------------------------------------
# Plots (matplotlib, Agg)
# ---------------------------------------------------------------------------------------

PLOT_PREFIXES = ("acc_vs_layers_", "acc_vs_bytes_", "speedup", "acc_vs_time", "bytes_per_epoch")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    """Lay out, write (110 dpi) and close a report figure; its path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_accuracy(rows: list[dict], out: Path) -> list[Path]:
    """acc_vs_layers_<dataset>_p<parts>.png (rows: models, columns: partitioners; a line per
    system, std as error bars) and acc_vs_bytes_<dataset>.png (log x)."""
    plt = _plt()
    files = []
    for (ds, parts) in sorted({(r["dataset"], r["parts"]) for r in rows}, key=_sort_key):
        rs = [r for r in rows if r["dataset"] == ds and r["parts"] == parts]
        models = sorted({r["model"] for r in rs})
        parts_m = sorted({r["partition"] for r in rs})
        fig, axs = plt.subplots(len(models), len(parts_m), figsize=(4.2 * len(parts_m), 3.2 * len(models)),
                                squeeze=False, sharey=True)
        for i, m in enumerate(models):
            for j, p in enumerate(parts_m):
                ax = axs[i][j]
                for sysname in _ordered_systems(rs):
                    pts = sorted((r["layers"], r["acc_mean"] * 100, (r["acc_std"] or 0) * 100) for r in rs
                                 if r["model"] == m and r["partition"] == p and r["system"] == sysname)
                    if pts:
                        x, y, e = zip(*pts)
                        ax.errorbar(x, y, yerr=e, marker="o", ms=4, capsize=3, label=sysname)
                ax.set_title(f"{m}, {p}", fontsize=9)
                ax.set_xlabel("layers")
                ax.set_xticks(sorted({r["layers"] for r in rs}))
                ax.grid(alpha=0.3)
                if j == 0:
                    ax.set_ylabel(_quality_axis(rs))
        axs[0][0].legend(fontsize=7)
        fig.suptitle(f"{ds}, {parts} parts: accuracy vs layers (mean ± std over seeds)", fontsize=10)
        f = _save(fig, out / f"acc_vs_layers_{ds}_p{parts}.png")
        files.append(f)
    for ds in sorted({r["dataset"] for r in rows}):
        rs = [r for r in rows if r["dataset"] == ds and r["bytes"]]
        if not rs:
            continue
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        markers = "os^Dv<>p*h"
        for k, sysname in enumerate(_ordered_systems(rs)):
            pts = [r for r in rs if r["system"] == sysname]
            ax.errorbar([r["bytes"] for r in pts], [r["acc_mean"] * 100 for r in pts],
                        yerr=[(r["acc_std"] or 0) * 100 for r in pts], fmt=markers[k % len(markers)], ms=5,
                        capsize=2, label=sysname)
        ax.set_xscale("log")
        ax.set_xlabel("bytes per epoch, amortised (log)")
        ax.set_ylabel(_quality_axis(rs))
        ax.set_title(f"{ds}: accuracy vs bytes per epoch (each point: one partitioner/parts/model/layers)", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        f = _save(fig, out / f"acc_vs_bytes_{ds}.png")
        files.append(f)
    return files


def _quality_axis(rows: list[dict]) -> str:
    """The y label of a plot of these rows' test figure (plotted x 100: accuracy in %, MRR in points)."""
    tasks = {r.get("task", "node") for r in rows}
    if tasks == {"link"}:
        return "test MRR x 100"
    return "test accuracy (%) / MRR x 100" if "link" in tasks else "test accuracy (%)"


def _ordered_systems(rows: list[dict]) -> list[str]:
    names = []
    for r in rows:
        if r["system"] not in names:
            names.append(r["system"])
    if BASELINE in names:
        names.remove(BASELINE)
        names.insert(0, BASELINE)
    return names


def _row_label(r: dict) -> str:
    return f"{r['dataset']} {r['partition']} p{r['parts']} {r['model']} L{r['layers']} {_bw(r['bandwidth'])}"


def plot_speed(rows: list[dict], out: Path) -> list[Path]:
    """speedup.png (a bar per cell and system; red edge = loses accuracy), acc_vs_time.png
    (test accuracy vs training time, DistDGL joined to each system of its cell) and
    bytes_per_epoch.png (log scale)."""
    plt = _plt()
    files = []
    g = [r for r in rows if r["system"] != BASELINE and r["speedup"] is not None]
    if g:
        fig, ax = plt.subplots(figsize=(7.5, 0.28 * len(g) + 1.5))
        y = range(len(g))
        colors = {bw: c for bw, c in zip(sorted({_bw(r["bandwidth"]) for r in g}), ("C0", "C1", "C2", "C3", "C4"))}
        ax.barh(list(y), [r["speedup"] for r in g], color=[colors.get(_bw(r["bandwidth"]), "C5") for r in g],
                edgecolor=["red" if r["loses_accuracy"] else "none" for r in g], linewidth=1.5)
        ax.set_yticks(list(y))
        ax.set_yticklabels([f"{_row_label(r)} {r['system']}" for r in g], fontsize=6)
        ax.axvline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("speedup: DistDGL epoch / system epoch (red edge: loses > 1 point)")
        ax.invert_yaxis()
        ax.grid(alpha=0.3, axis="x")
        f = _save(fig, out / "speedup.png")
        files.append(f)
    base = {_row_label(r): r for r in rows if r["system"] == BASELINE}
    pts = [r for r in rows if r["acc"] is not None and r["train_time_s"]]
    if pts:
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        for k, sysname in enumerate(_ordered_systems(pts)):
            rs = [r for r in pts if r["system"] == sysname]
            ax.scatter([r["train_time_s"] for r in rs], [r["acc"] * 100 for r in rs], s=18, label=sysname,
                       color=f"C{k}")
            if sysname != BASELINE:
                for r in rs:
                    b = base.get(_row_label(r))
                    if b is not None and b["acc"] is not None and b["train_time_s"]:
                        ax.plot([b["train_time_s"], r["train_time_s"]], [b["acc"] * 100, r["acc"] * 100],
                                color="grey", lw=0.5, alpha=0.6)
        ax.set_xscale("log")
        ax.set_xlabel("training time (s, all epochs, evaluation excluded; log)")
        ax.set_ylabel(_quality_axis(pts))
        ax.set_title("accuracy vs training time (grey: same cell)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        f = _save(fig, out / "acc_vs_time.png")
        files.append(f)
    cellkeys = list(dict.fromkeys(_row_label(r) for r in rows if r["bytes"]))
    if cellkeys:
        names = _ordered_systems(rows)
        fig, ax = plt.subplots(figsize=(7.5, 0.3 * len(cellkeys) * max(1, len(names)) / 2 + 1.5))
        h = 0.8 / max(1, len(names))
        for k, sysname in enumerate(names):
            by = {_row_label(r): r["bytes"] for r in rows if r["system"] == sysname and r["bytes"]}
            ys = [i + k * h for i, ck in enumerate(cellkeys) if ck in by]
            ax.barh(ys, [by[ck] for ck in cellkeys if ck in by], height=h, label=sysname, color=f"C{k}")
        ax.set_yticks([i + 0.4 - h / 2 for i in range(len(cellkeys))])
        ax.set_yticklabels(cellkeys, fontsize=6)
        ax.set_xscale("log")
        ax.set_xlabel("bytes per epoch, amortised (log)")
        ax.invert_yaxis()
        ax.grid(alpha=0.3, axis="x")
        ax.legend(fontsize=8)
        f = _save(fig, out / "bytes_per_epoch.png")
        files.append(f)
    return files


def write_report(kind: str, cells: list[dict], plan: dict | None, path: str | Path, *, command: str,
                 regenerate: str, preamble: str = "", pairs: list[tuple[str, str]] | None = None,
                 baseline_partition: str = "") -> Path:
    """Write the markdown report and its plots (in the folder ``<report dir>/<report stem>/``).

    Old plot files of ours in that folder are removed first, so no stale image stays. With
    ``baseline_partition`` the cells borrow their DistDGL run first (:func:`borrow_baseline`).

    Returns:
        The report's path.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    plot_dir = path.parent / path.stem
    plot_dir.mkdir(parents=True, exist_ok=True)
    for old in plot_dir.glob("*.png"):
        if old.name.startswith(PLOT_PREFIXES):
            old.unlink()
    with _reading_once():
        shown = _in_plan(borrow_baseline(cells, baseline_partition) if baseline_partition else cells, plan)
        if kind == "accuracy":
            files = plot_accuracy(accuracy_rows(shown), plot_dir)
        else:
            files = plot_speed(speed_rows(shown), plot_dir)
        rel = [f"{path.stem}/{f.name}" for f in files]
        path.write_text(render(kind, cells, plan, command=command, regenerate=regenerate, preamble=preamble,
                               plots=rel, pairs=pairs, baseline_partition=baseline_partition))
    return path
