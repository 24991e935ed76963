"""How the reports grade the kinds of job: one :class:`~dgl_grappa.kinds.Metric` per task, declared by the kinds.

Everything that differs between the kinds of job in a report (node classification, link prediction, a
kind registered later) is the kinds' :class:`~dgl_grappa.kinds.Metric` (:data:`TASKS`, keyed by task
name: the validation and test figures a report reads, how far a row may fall behind the reference,
how a figure is shown and named, and its ``style``: which table, notes and goals its rows get). The
rest of the report asks this table (and the few helpers below, for a report that mixes tasks)
instead of branching on the task.

A cell's task is its config's ``train.task`` (:func:`cell_task`); its rows carry the name
as ``task``.
"""

from __future__ import annotations

from ...config.data import HETERO_DATASETS
from ...kinds import METRICS, Metric
from ...runtime.grading import LINK_POINTS

TASKS: dict[str, Metric] = METRICS
"""Task name -> how its kinds of job are graded (:class:`~dgl_grappa.kinds.Metric`, declared by each kind;
the registry's :data:`~dgl_grappa.kinds.METRICS`, kinds registered later included), in the order a report shows
them."""

DEFAULT_TASK = next(iter(TASKS))
"""The task of a cell or row that does not say (the registry's first: node classification)."""

QUALITY_KEYS = {name: (t.val_key, t.test_key) for name, t in TASKS.items()}
"""Per task of the package's kinds: (the validation figure that convergence and the time to target race on, the
test figure the reports compare); :func:`quality_keys` asks the registry as it is."""


def task_of(name: str | None) -> Metric:
    """The :class:`~dgl_grappa.kinds.Metric` of a row's or cell's task name (:data:`DEFAULT_TASK` where it has none)."""
    return TASKS[name or DEFAULT_TASK]


def cell_task(cell: dict) -> str:
    """A cell's task (a key of :data:`TASKS`): its config's ``train.task``.

    A cell without its config (hand-made, or from before configs were stored) has the task a
    finished system's summary names (``task``); a cell that names none, or a task no registered
    kind has, has :data:`DEFAULT_TASK`.

    Example:
        >>> cell_task({"config": {"train": {"task": "link"}}}), cell_task({"systems": {}})
        ('link', 'node')
    """
    task = ((cell.get("config") or {}).get("train") or {}).get("task")
    if task is None:
        task = next(
            (
                s["metrics"]["task"]
                for s in (cell.get("systems") or {}).values()
                if isinstance(s.get("metrics"), dict) and s["metrics"].get("task")
            ),
            DEFAULT_TASK,
        )
    return task if task in TASKS else DEFAULT_TASK


def quality_keys(cell: dict) -> tuple[str, str]:
    """(validation key, test key) the reports read for a cell: its task's metric's (accuracies, MRRs, ...)."""
    m = TASKS[cell_task(cell)]
    return m.val_key, m.test_key


def accuracy_goal(mean_diff_points: float | None, layers: int) -> bool | None:
    """The accuracy goal: mean difference to DistDGL >= -1.0 point, >= 0 at 3+ layers.

    Example:
        >>> accuracy_goal(-0.5, 2), accuracy_goal(-0.5, 3)
        (True, False)
    """
    return TASKS[DEFAULT_TASK].met(mean_diff_points, layers)


def link_met(mean_diff_points: float | None, points: float = LINK_POINTS) -> bool | None:
    """The link goal for one row: its mean test-MRR difference to the reference >= -``points`` MRR points.

    Example:
        >>> link_met(-1.9), link_met(-2.1), link_met(None)
        (True, False, None)
    """
    return None if mean_diff_points is None else mean_diff_points >= -points


def pair_points(task: str) -> float:
    """A pair's tolerance in points: its task's metric's (:data:`PAIR_POINTS` of accuracy, :data:`LINK_POINTS` of
    MRR for link rows)."""
    return task_of(task).pair_points


def rows_by_task(rows: list[dict]) -> dict[str, list[dict]]:
    """The rows per task, in :data:`TASKS` order, tasks without rows left out (all of them
    without rows: ``{DEFAULT_TASK: []}``, so that an empty report still shows the default's sections).

    Example:
        >>> list(rows_by_task([{"task": "link"}])), rows_by_task([])
        (['link'], {'node': []})
    """
    out = {name: [r for r in rows if r.get("task", DEFAULT_TASK) == name] for name in TASKS}
    out = {name: rs for name, rs in out.items() if rs}
    return out or {DEFAULT_TASK: []}


def _metrics(rows: list[dict]) -> list[Metric]:
    """The metrics of these rows' tasks, in :data:`TASKS` order (the first is the one the text names first)."""
    tasks = {r.get("task", DEFAULT_TASK) for r in rows}
    return [m for name, m in TASKS.items() if name in tasks] or [TASKS[DEFAULT_TASK]]


def rows_metric(rows: list[dict]) -> Metric:
    """The metric of these rows (of one task: a table's; mixed: the first task's in :data:`TASKS` order; none:
    the default task's).

    Example:
        >>> rows_metric([{"task": "link"}]).test_key, rows_metric([]).test_key
        ('test_mrr', 'test_acc')
    """
    return _metrics(rows)[0]


def tolerance_text(rows: list[dict]) -> str:
    """The pair tolerance in words for these rows: accuracy points, MRR points, or both."""
    first, *rest = _metrics(rows)
    text = f"{first.pair_points:g} {first.points}"
    if rest:
        text += " (" + "; ".join(f"{m.pair_points:g} {m.points} on {m.name} rows" for m in rest) + ")"
    return text


def pair_columns(rows: list[dict]) -> tuple[str, str]:
    """A pair table's (figure name, tolerance) for these rows: accuracy in %, MRR, or both."""
    first, *rest = _metrics(rows)
    what = " / ".join([first.column] + [m.words for m in rest])
    tol = f"{first.pair_points:g}" + (
        " (" + "; ".join(f"{m.pair_points:g} on {m.words}" for m in rest) + ")" if rest else ""
    )
    return what, tol


def quality_axis(rows: list[dict]) -> str:
    """The y label of a plot of these rows' test figure (plotted x 100: accuracy in %, MRR in points)."""
    first, *rest = _metrics(rows)
    return " / ".join([first.axis] + [m.axis.removeprefix("test ") for m in rest])


def quality_words(rows: list[dict]) -> str:
    """These rows' test figure in words: "test accuracy", "test MRR", or both ("test accuracy / MRR")."""
    first, *rest = _metrics(rows)
    return " / ".join([f"test {first.words}"] + [m.words for m in rest])


def task_text(cfg: dict, task: str) -> str:
    """A cell's kind of job in a few words, from its config and task: the task's name, with learnable
    embeddings, on a heterograph.

    Example:
        >>> task_text({"model": {"embed": True}}, "link")
        'link, learnable embeddings'
    """
    out = task
    if (cfg.get("model") or {}).get("embed"):
        out += ", learnable embeddings"
    if (cfg.get("data") or {}).get("name") in HETERO_DATASETS:
        out += f", heterogeneous (target {(cfg.get('data') or {}).get('target', '?')})"
    return out
