"""Reading a cell for the reports: its JSON (:mod:`dgl_grappa.bench.storage`) as a :class:`CellResult`.

A report reads each cell's finished runs once (:func:`read_result`: the window means over their
records, the time-to-target race against DistDGL), then every row, goal and plot reads the
result. Also here: which cells a report shows (:func:`select`, :func:`grouped`), in which order
its systems come, and DistDGL runs borrowed from another partitioner's cell (:func:`borrow_baseline`).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ...kinds import Metric
from ...runtime.grading import TARGET_FRACTION
from ...runtime.metrics import time_to_target
from .stats import window_test_acc, windows
from .tasks import TASKS, cell_task

BASELINE = "distdgl"
"""The system every ratio and difference refers to."""
DEFAULTS = "grappa"
"""The system name of Grappa with the package's defaults (the one the accuracy goals grade)."""

ACC_KEY = "test_acc_window"
"""The accuracy the reports compare: the mean test accuracy of the global evaluations in the
last :data:`~dgl_grappa.bench.report.stats.PLATEAU_WINDOW` of a run's epochs
(:func:`~dgl_grappa.bench.report.stats.window_test_acc`; the final evaluation where a run has no
per-epoch records). On Planetoid-size test sets with small batches one evaluation swings by 3-5
points from one evaluation to the next, for DistDGL and Grappa alike (measured: Cora, the last
five evaluations of one run span 0.729-0.808); the window's mean is the same statistic for every
system and far less noisy."""

# Time to a target: the target of a cell is TARGET_FRACTION of DistDGL's validation plateau in that cell (the mean
# of its last window of evaluations), so both systems of a cell race to the same number, one DistDGL reaches by
# construction.

GROUP_AXES = ("dataset", "partition", "parts", "model", "layers", "bandwidth")
"""A row of either report: one value of each of these axes, over seeds."""

SELECT_AXES = ("dataset", "partition", "parts", "model", "layers", "bandwidth", "seed")
"""The axes of a cell (its id is made of them)."""


@dataclass(frozen=True)
class CellResult:
    """One cell as the reports read it, made once from its JSON by :func:`read_result`.

    Attributes:
        cell_id: the cell's id (None in a hand-made cell without one).
        axes: its axes (``dataset``, ``partition``, ``parts``, ``model``, ``layers``,
            ``bandwidth``, ``seed``, ``dataset_config``, ``data_name``, ...).
        task: what it trains (:data:`~dgl_grappa.bench.report.tasks.TASKS`).
        config: its resolved config (``{}`` where the file has none).
        partition: its partitioning's statistics (``num_nodes``, ``edge_cut``, ...).
        systems: name -> the stored entry of every system, whatever its status (a DistDGL run
            borrowed from another cell carries ``borrowed_from``).
        finished: name -> metrics of the systems that finished ("ok"): every scalar of the run's
            summary and :func:`~dgl_grappa.bench.execute.derive_metrics`, plus ``phase_<name>``
            (the summary's per-phase seconds), ``budgeted_ratio_max`` (a heterograph's),
            :data:`ACC_KEY` (the test figure's window mean; the test MRR for link prediction),
            ``hits_window`` (link prediction: the test hits@k's) and ``time_to_target_s``.
            Read-only.
    """

    cell_id: str | None
    axes: dict
    task: Metric
    config: dict
    partition: dict
    systems: dict[str, dict]
    finished: dict[str, dict]


def read_result(cell: dict) -> CellResult:
    """A cell JSON as a :class:`CellResult` (the cell is not changed).

    Example:
        >>> run = {"status": "ok", "metrics": {"test_acc": 0.8}, "records": []}
        >>> r = read_result({"cell_id": "c", "axes": {"seed": 0}, "systems": {"distdgl": run}})
        >>> r.task.name, r.finished["distdgl"]["test_acc_window"]
        ('node', 0.8)
    """
    task = TASKS[cell_task(cell)]
    systems = dict(cell.get("systems") or {})
    return CellResult(
        cell_id=cell.get("cell_id"),
        axes=cell.get("axes") or {},
        task=task,
        config=cell.get("config") or {},
        partition=cell.get("partition") or {},
        systems=systems,
        finished=_finished(systems, task),
    )


def _finished(systems: dict[str, dict], task: Metric) -> dict[str, dict]:
    """name -> metrics of the finished systems, with :data:`ACC_KEY` and the time to target filled in."""
    out = {}
    base = systems.get(BASELINE) or {}
    base_last, _ = windows(base.get("records"), task.val_key) if base.get("status") == "ok" else ([], [])
    target = task.target(statistics.fmean(base_last), TARGET_FRACTION) if base_last else None
    for n, s in systems.items():
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
        win = window_test_acc(s.get("records"), key=task.test_key)
        m[ACC_KEY] = win if win is not None else m.get(task.test_key)
        if task.ranking:
            hits = window_test_acc(s.get("records"), key="test_hits")
            m["hits_window"] = hits if hits is not None else m.get("test_hits")
        m["time_to_target_s"] = (
            time_to_target(s.get("records"), target, task.val_key, setup_s=_setup_s(s), metric=task) if target else None
        )
        out[n] = m
    return out


def _setup_s(system: dict) -> float:
    """The slowest worker's one-time load (``load_s`` in the run summary's workers; 0 where none)."""
    workers = (system.get("summary") or {}).get("workers") or []
    return max((float(w.get("load_s") or 0.0) for w in workers if isinstance(w, dict)), default=0.0)


def ok_systems(cell: dict | CellResult) -> dict[str, dict]:
    """name -> metrics of the systems of a cell that finished ("ok"), with :data:`ACC_KEY` filled in
    (:attr:`CellResult.finished`).

    For link prediction :data:`ACC_KEY` holds the test MRR (the same window mean as the test
    accuracy), ``hits_window`` the test hits@k, and the time to target races on the validation MRR.
    """
    return (cell if isinstance(cell, CellResult) else read_result(cell)).finished


def _cell_id(cell: dict | CellResult) -> str | None:
    return cell.cell_id if isinstance(cell, CellResult) else cell.get("cell_id")


def in_plan(cells: list[dict], plan: dict | None) -> list[dict]:
    """The cells (JSON or results) that are in the configured matrix (all of them without a plan)."""
    if plan is None:
        return cells
    return [c for c in cells if _cell_id(c) in plan["cells"]]


def select(cells: Iterable[dict | CellResult], plan: dict | None = None) -> list[CellResult]:
    """The cells of the plan (all without one) as results: cell JSONs are read
    (:func:`read_result`), results pass through."""
    return [c if isinstance(c, CellResult) else read_result(c) for c in in_plan(list(cells), plan)]


def sort_key(key: tuple) -> tuple:
    """Axis values in order: numbers first, by value, then the rest as text."""
    return tuple((0, v) if isinstance(v, (int, float)) else (1, str(v)) for v in key)


def grouped(cells: list[CellResult]) -> dict[tuple, list[CellResult]]:
    """Cells by row key (:data:`GROUP_AXES`), each list ordered by seed."""
    out: dict[tuple, list[CellResult]] = defaultdict(list)
    for c in cells:
        out[tuple(c.axes.get(a) for a in GROUP_AXES)].append(c)
    return {
        k: sorted(v, key=lambda c: c.axes.get("seed", 0))
        for k, v in sorted(out.items(), key=lambda kv: sort_key(kv[0]))
    }


def systems_order(cells: list[CellResult], plan: dict | None) -> list[str]:
    """The systems in a report's order: the plan's, then any other the cells have; DistDGL first."""
    names: list[str] = list(plan.get("systems", [])) if plan else []
    for c in cells:
        for n in c.systems:
            if n not in names:
                names.append(n)
    return baseline_first(names)


def baseline_first(names: list[str]) -> list[str]:
    """``names`` with DistDGL (where among them) moved to the front."""
    if BASELINE in names:
        names.remove(BASELINE)
        names.insert(0, BASELINE)
    return names


def network(bandwidth) -> str:
    """A cell's network axis in words: its bandwidth, or "unshaped"."""
    return bandwidth if bandwidth else "unshaped"


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

    refs = {
        other_axes(c): c
        for c in cells
        if c["axes"].get("partition") == partition
        and ((c.get("systems") or {}).get(BASELINE) or {}).get("status") == "ok"
    }
    out = []
    for c in cells:
        base = (c.get("systems") or {}).get(BASELINE) or {}
        ref = refs.get(other_axes(c))
        if c["axes"].get("partition") != partition and base.get("status") != "ok" and ref is not None:
            c = {
                **c,
                "systems": {
                    **(c.get("systems") or {}),
                    BASELINE: {**ref["systems"][BASELINE], "borrowed_from": ref.get("cell_id")},
                },
            }
        out.append(c)
    return out


def borrowed(cells: list[CellResult], system: str) -> bool:
    """Whether ``system``'s runs in these cells are all borrowed (:func:`borrow_baseline`)."""
    runs = [c.systems.get(system) or {} for c in cells]
    return bool(runs) and all(r.get("borrowed_from") for r in runs if r)
