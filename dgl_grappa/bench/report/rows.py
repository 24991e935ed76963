"""The rows of the reports: per (dataset, partitioner, parts, model, layers, network) and system, over seeds.

:func:`accuracy_rows` and :func:`speed_rows` against DistDGL, :func:`pair_rows` one system
against another (``bench.pairs``). Each takes cell JSONs or :class:`~.results.CellResult` s
(a JSON is read once per call; :func:`~dgl_grappa.bench.report.write_report` reads each once per report).
"""

from __future__ import annotations

import statistics

from .results import ACC_KEY, BASELINE, GROUP_AXES, CellResult, borrowed, grouped, select, systems_order
from .stats import convergence, mean_std, ratio, t_interval


def _metric(cells: list[CellResult], system: str, key: str) -> list[float]:
    xs = []
    for c in cells:
        m = c.finished.get(system)
        if m is not None and m.get(key) is not None:
            xs.append(float(m[key]))
    return xs


def _held_ratio(cells: list[CellResult], system: str) -> list[float]:
    """Per seed, the largest worker's node tables over its own fp32 feature rows.

    Runs from before the memory budget held every table in fp32: for those the feature-width
    rows per inner node (``rows_per_inner_max``) are that ratio. What the budget bounds is
    graded, not what lies outside it by design: on a heterogeneous graph the tables of its
    featured type (``hetero.budgeted_ratio_max``), and runs with learnable node rows
    (``model.embed``: rows and optimizer state, not features) not at all.
    """
    xs = []
    for c in cells:
        m = c.finished.get(system)
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


def _peak_rss(cells: list[CellResult], system: str) -> list[float]:
    """Per seed, the largest worker's (DistDGL: machine's, server + trainer) peak resident memory."""
    xs = []
    for c in cells:
        m = c.finished.get(system) or {}
        v = m.get("machine_peak_rss_bytes_max") or m.get("peak_rss_bytes_max")
        if v is not None:
            xs.append(float(v))
    return xs


def _both(cells: list[CellResult], system: str, base: str, key: str) -> list[tuple[float, float]]:
    """Per seed (system's, base's) value of ``key`` where both are ok in the same cell and have it."""
    out = []
    for c in cells:
        a, b = c.finished.get(system), c.finished.get(base)
        if a and b and a.get(key) is not None and b.get(key) is not None:
            out.append((float(a[key]), float(b[key])))
    return out


def _paired(cells: list[CellResult], system: str, key: str, scale: float = 1.0, base: str = BASELINE) -> list[float]:
    """Per-seed differences system - base (both ok in the same cell), times ``scale``."""
    return [(a - b) * scale for a, b in _both(cells, system, base, key)]


def _paired_ratio(
    cells: list[CellResult], system: str, key: str, base_over_system: bool = False, base_key: str | None = None
) -> list[float]:
    """Per seed, ``system``'s ``key`` over DistDGL's ``base_key`` (default: the same key), or the inverse."""
    out = []
    bk = base_key or key
    for c in cells:
        a, b = c.finished.get(system), c.finished.get(BASELINE)
        if a and b:
            r = ratio(b.get(bk), a.get(key)) if base_over_system else ratio(a.get(key), b.get(bk))
            if r is not None:
                out.append(r)
    return out


def _converged(cells: list[CellResult], system: str) -> tuple[int, int]:
    """(converged runs, judged runs) of ``system`` over the cells."""
    judged = conv = 0
    for c in cells:
        s = c.systems.get(system) or {}
        if s.get("status") != "ok":
            continue
        r = convergence(s.get("records"), key=c.task.val_key, higher_is_better=c.task.higher_is_better)
        if r is not None:
            judged += 1
            conv += int(r["converged"])
    return conv, judged


def _label_fraction(cells: list[CellResult]) -> float | None:
    """The training-label share of a generated graph's config (None for other datasets)."""
    data = (cells[0].config.get("data") or {}) if cells else {}
    frac = (data.get("synthetic") or {}).get("train_frac") if data.get("name") == "synthetic" else None
    return None if frac is None else float(frac)


def _ranking_figures(cells: list[CellResult], system: str) -> dict:
    """A link row's own columns: mean test hits@k, k, and the share of the training graph's edges the
    system trained on (with its halo; and with the halo dropped, where the runs say)."""
    k = next(
        ((c.config.get("link") or {}).get("hits_k") for c in cells if (c.config.get("link") or {}).get("hits_k")), None
    )
    return {
        "hits": mean_std(_metric(cells, system, "hits_window"))[0],
        "hits_k": k,
        "usable_edges": mean_std(_metric(cells, system, "usable_edge_fraction"))[0],
        "usable_edges_drop": mean_std(_metric(cells, system, "usable_edge_fraction_halo_drop"))[0],
    }


def accuracy_rows(cells: list[dict | CellResult], plan: dict | None = None) -> list[dict]:
    """One row per (group, system) with at least one finished seed.

    Returns:
        dicts with the group axes, ``system``, ``seeds`` (finished), ``acc_mean``/``acc_std``
        (fraction), ``base_acc_mean``, ``diff_mean``/``diff_lo``/``diff_hi`` (points,
        paired, None for the baseline), ``paired`` (number of paired seeds), ``met``
        (None for the baseline), ``bytes`` (amortised bytes per epoch, mean), ``bytes_ratio``
        (mean of per-seed ratios to DistDGL), ``edge_cut``, ``stall_fraction``,
        ``restart_fraction``, ``epoch_time_s``, ``task`` (``node`` or ``link``: then ``acc_*`` and
        ``diff_*`` are the test MRR and its differences in MRR points, ``met`` is the link goal,
        :func:`~.tasks.link_met`, and ``hits``, ``hits_k``, ``usable_edges``, ``usable_edges_drop`` are set).
    """
    cells = select(cells, plan)
    rows = []
    for key, cs in grouped(cells).items():
        axes = dict(zip(GROUP_AXES, key))
        task = cs[0].task
        base_mean, _ = mean_std(_metric(cs, BASELINE, ACC_KEY))
        for name in systems_order(cs, plan):
            accs = _metric(cs, name, ACC_KEY)
            if not accs or (name == BASELINE and borrowed(cs, name)):
                continue
            m, s = mean_std(accs)
            row = {
                **axes,
                "task": task.name,
                "system": name,
                "seeds": len(accs),
                "acc_mean": m,
                "acc_std": s,
                "base_acc_mean": base_mean,
                "diff_mean": None,
                "diff_lo": None,
                "diff_hi": None,
                "paired": 0,
                "met": None,
                "bytes": mean_std(_metric(cs, name, "bytes_per_epoch_amortised"))[0],
                "bytes_ratio": mean_std(_paired_ratio(cs, name, "bytes_per_epoch_amortised"))[0],
                "edge_cut": mean_std(_metric(cs, name, "edge_cut"))[0],
                "stall_fraction": mean_std(_metric(cs, name, "stall_fraction"))[0],
                "restart_fraction": mean_std(_metric(cs, name, "restart_fraction"))[0],
                "epoch_time_s": mean_std(_metric(cs, name, "epoch_time_s"))[0],
                "one_time_bytes": mean_std(_metric(cs, name, "one_time_bytes"))[0],
                # what a partitioning's one-time reads cost, in DistDGL epochs of the same cell
                "one_time_epochs": mean_std(_paired_ratio(cs, name, "one_time_bytes", base_key="bytes_per_epoch"))[0],
                "label_frac": _label_fraction(cs),
                "rows_per_inner": mean_std(_metric(cs, name, "rows_per_inner_max"))[0],
                "held_ratio": mean_std(_held_ratio(cs, name))[0],
                "held_ratio_max": max(_held_ratio(cs, name), default=None),
                "peak_rss": mean_std(_peak_rss(cs, name))[0],
                "converged": _converged(cs, name),
                "tta_s": mean_std(_metric(cs, name, "time_to_target_s"))[0],
                "tta_reached": len(_metric(cs, name, "time_to_target_s")),
                "tta_speedup": mean_std(_paired_ratio(cs, name, "time_to_target_s", base_over_system=True))[0],
            }
            if task.ranking:
                row.update(_ranking_figures(cs, name))
            if name != BASELINE:
                d = _paired(cs, name, ACC_KEY, scale=100.0)
                row["paired"] = len(d)
                row["diff_mean"], row["diff_lo"], row["diff_hi"] = t_interval(d)
                row["met"] = task.met(row["diff_mean"], int(axes["layers"]))
            rows.append(row)
    return rows


def row_name(axes: dict) -> str:
    """A row in one phrase, as the goals name it: "cora random-4 sage-2" (and its network when shaped)."""
    bw = f" {axes['bandwidth']}" if axes.get("bandwidth") else ""
    return f"{axes['dataset']} {axes['partition']}-{axes['parts']} {axes['model']}-{axes['layers']}{bw}"


def pair_rows(cells: list[dict | CellResult], a: str, b: str, plan: dict | None = None) -> dict:
    """System ``a`` against system ``b`` (an entry of ``bench.pairs``), row by row as against DistDGL.

    Returns:
        ``{"a", "b", "rows", "skipped"}``: ``rows`` one dict per row where a seed has both ok,
        with the group axes, ``paired`` (the seeds where both ran ok), ``a_acc``/``b_acc``
        (fraction, means over those seeds, so that their difference is the mean difference even
        where one system failed a seed), ``diff_mean``/``diff_lo``/``diff_hi`` (points: the per-seed
        a - b, its mean and 95 % t-interval), ``task`` and ``met`` (``diff_mean >= -PAIR_POINTS``;
        on link rows, where the figures are test MRRs, ``>= -LINK_POINTS``; the task's metric's
        ``pair_points``, in its better direction: an error's ``<= +pair_points``);
        ``skipped`` the names of the rows without such a seed.
    """
    rows, skipped = [], []
    for key, cs in grouped(select(cells, plan)).items():
        axes = dict(zip(GROUP_AXES, key))
        both = _both(cs, a, b, ACC_KEY)
        if not both:
            skipped.append(row_name(axes))
            continue
        m, lo, hi = t_interval(_paired(cs, a, ACC_KEY, scale=100.0, base=b))
        task = cs[0].task
        rows.append(
            {
                **axes,
                "task": task.name,
                "paired": len(both),
                "a_acc": statistics.fmean(x for x, _ in both),
                "b_acc": statistics.fmean(y for _, y in both),
                "diff_mean": m,
                "diff_lo": lo,
                "diff_hi": hi,
                "met": task.within(m, task.pair_points),
            }
        )
    return {"a": a, "b": b, "rows": rows, "skipped": skipped}


def _phase_keys(cells: list[CellResult], system: str) -> list[str]:
    """The ``phase_*`` metrics that every ok run of ``system`` in ``cells`` has."""
    runs = [m for c in cells if (m := c.finished.get(system)) is not None]
    if not runs:
        return []
    return sorted(set.intersection(*({k for k in m if k.startswith("phase_")} for m in runs)))


def speed_rows(cells: list[dict | CellResult], plan: dict | None = None) -> list[dict]:
    """One row per (group, system), seeds averaged (ratios are per seed, then averaged).

    Returns:
        dicts with the group axes, ``system``, ``seeds``, ``epoch_time_s``,
        ``base_epoch_time_s``, ``speedup`` (DistDGL epoch / this epoch), ``bytes``,
        ``bytes_ratio`` (this / DistDGL), ``acc``, ``base_acc``, ``acc_diff`` (points),
        ``loses_accuracy`` (acc_diff < -:data:`~dgl_grappa.runtime.grading.LOSS_POINTS`; the task's metric's
        ``loss_points``, in its worse direction: an error's ``> +loss_points``), ``floor_s`` and
        ``floor_ratio`` (epoch / floor; None when no summary has a floor), ``train_time_s``,
        ``task``; link rows: ``acc``/``base_acc`` are test MRRs, ``loses_accuracy`` is a loss of
        more than :data:`~.tasks.LINK_POINTS` MRR points, and the link figures of :func:`accuracy_rows` are set.
    """
    cells = select(cells, plan)
    rows = []
    for key, cs in grouped(cells).items():
        axes = dict(zip(GROUP_AXES, key))
        task = cs[0].task
        for name in systems_order(cs, plan):
            ep = _metric(cs, name, "epoch_time_s")
            if not ep or (name == BASELINE and borrowed(cs, name)):
                continue
            # the floor as the speed goals define it: local compute (no-op reducer) + the all-reduce alone
            floors = _metric(cs, name, "floor_s")
            floor_ratios = [e / f for e, f in zip(ep, floors) if f] if len(floors) == len(ep) else []
            d = _paired(cs, name, ACC_KEY, scale=100.0) if name != BASELINE else []
            diff = mean_std(d)[0]
            rows.append(
                {
                    **axes,
                    "task": task.name,
                    "system": name,
                    "seeds": len(ep),
                    "epoch_time_s": mean_std(ep)[0],
                    "base_epoch_time_s": mean_std(_metric(cs, BASELINE, "epoch_time_s"))[0],
                    "speedup": mean_std(_paired_ratio(cs, name, "epoch_time_s", base_over_system=True))[0],
                    "bytes": mean_std(_metric(cs, name, "bytes_per_epoch_amortised"))[0],
                    "bytes_ratio": mean_std(_paired_ratio(cs, name, "bytes_per_epoch_amortised"))[0],
                    # every epoch after the one-time reads (what a longer run tends to)
                    "steady_bytes_ratio": mean_std(_paired_ratio(cs, name, "bytes_per_epoch"))[0],
                    "acc": mean_std(_metric(cs, name, ACC_KEY))[0],
                    "base_acc": mean_std(_metric(cs, BASELINE, ACC_KEY))[0],
                    "acc_diff": diff,
                    "loses_accuracy": None if diff is None else not task.within(diff, task.loss_points),
                    "floor_s": mean_std(floors)[0] if floors else None,
                    "floor_ratio": mean_std(floor_ratios)[0] if floor_ratios else None,
                    "train_time_s": mean_std(_metric(cs, name, "train_time_s"))[0],
                    "phases": {k[len("phase_") :]: mean_std(_metric(cs, name, k))[0] for k in _phase_keys(cs, name)},
                    **(_ranking_figures(cs, name) if task.ranking else {}),
                }
            )
    return rows


def attach_data_name(rows: list[dict], cells: list[CellResult]) -> None:
    """Give each row its dataset's ``data_name`` (the generator or loader behind the dataset's name)."""
    names = {c.axes["dataset"]: c.axes.get("data_name", c.axes["dataset"]) for c in cells}
    for r in rows:
        r["data_name"] = names.get(r["dataset"], r["dataset"])
