"""The benchmark's reports, from the cell JSON files only: statistics, tables, coverage, plots.

A package by job: :mod:`.stats` (statistics), :mod:`.tasks` (what differs between the kinds of job,
one :class:`~dgl_grappa.kinds.Metric` per task, declared by the kinds), :mod:`.results` (a cell
JSON, see :mod:`dgl_grappa.bench.storage` for its schema, read once into a :class:`CellResult`),
:mod:`.rows` (the tables' rows), :mod:`.coverage`, :mod:`.goals`, :mod:`.markdown` and :mod:`.notes`
(the text), :mod:`.plots`, and :mod:`.write` (:func:`render`, :func:`write_report`). Everything but
:func:`write_report` is a pure function of the cells (and an optional plan of the configured
matrix), so it is tested on hand-made cells.

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

Which table, notes and goals a task's rows get is its metric's
:attr:`~dgl_grappa.runtime.grading.Metric.style` ("accuracy" or "ranking"), so that a kind of job
registered later is reported by its own metric: e.g. a regression's RMSE as itself, lower is better,
graded in that direction.
"""

from __future__ import annotations

from ...runtime.grading import LINK_POINTS, LOSS_POINTS, PAIR_POINTS
from ...runtime.metrics import time_to_target
from .coverage import coverage, coverage_text
from .goals import (
    GOALS,
    accuracy_goals,
    link_goals,
    node_goals,
    pair_summary,
    pooled_by_depth,
    speed_goals,
    tta_summary,
)
from .markdown import (
    accuracy_table,
    baseline_text,
    dilation_text,
    goals_table,
    link_table,
    pair_table,
    pairs_section,
    phase_table,
    settings_table,
    speed_table,
    systems_text,
)
from .notes import ACCURACY_NOTES, LINK_NOTES, PAIR_NOTES, PHASE_NOTES, SPEED_NOTES
from .plots import PLOT_PREFIXES, plot_accuracy, plot_speed
from .results import (
    ACC_KEY,
    BASELINE,
    DEFAULTS,
    GROUP_AXES,
    SELECT_AXES,
    TARGET_FRACTION,
    CellResult,
    borrow_baseline,
    grouped,
    ok_systems,
    read_result,
    select,
)
from .rows import accuracy_rows, pair_rows, speed_rows
from .stats import PLATEAU_POINTS, PLATEAU_WINDOW, convergence, mean_std, t_interval, window_test_acc, windows
from .tasks import QUALITY_KEYS, TASKS, accuracy_goal, cell_task, link_met, pair_points, quality_keys
from .write import render, write_report

__all__ = [
    "ACCURACY_NOTES",
    "ACC_KEY",
    "BASELINE",
    "DEFAULTS",
    "GOALS",
    "GROUP_AXES",
    "LINK_NOTES",
    "LINK_POINTS",
    "LOSS_POINTS",
    "PAIR_NOTES",
    "PAIR_POINTS",
    "PHASE_NOTES",
    "PLATEAU_POINTS",
    "PLATEAU_WINDOW",
    "PLOT_PREFIXES",
    "QUALITY_KEYS",
    "SELECT_AXES",
    "SPEED_NOTES",
    "TARGET_FRACTION",
    "TASKS",
    "CellResult",
    "accuracy_goal",
    "accuracy_goals",
    "accuracy_rows",
    "accuracy_table",
    "baseline_text",
    "borrow_baseline",
    "cell_task",
    "convergence",
    "coverage",
    "coverage_text",
    "dilation_text",
    "goals_table",
    "grouped",
    "link_goals",
    "link_met",
    "link_table",
    "mean_std",
    "node_goals",
    "ok_systems",
    "pair_points",
    "pair_rows",
    "pair_summary",
    "pair_table",
    "pairs_section",
    "phase_table",
    "plot_accuracy",
    "plot_speed",
    "pooled_by_depth",
    "quality_keys",
    "read_result",
    "render",
    "select",
    "settings_table",
    "speed_goals",
    "speed_rows",
    "speed_table",
    "systems_text",
    "t_interval",
    "time_to_target",
    "tta_summary",
    "window_test_acc",
    "windows",
    "write_report",
]
