"""The kinds of job the reports grade, one :class:`Task` each: node classification and link prediction.

Everything that differs between them in a report is here, in :data:`TASKS` (keyed by task
name): the validation and test figures a report reads, how far a row may fall behind the
reference, how a figure is shown and named. The rest of the report asks this table (and the
few helpers below, for a report that mixes tasks) instead of branching on the task.

A cell's task is its config's ``train.task`` (:func:`cell_task`); its rows carry the name
as ``task``.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    """What the reports read and show for one kind of job.

    Attributes:
        name: the task's name (``train.task``), as a row's ``task``.
        val_key: the validation figure that convergence and the time to target race on.
        test_key: the test figure the reports compare (its window mean).
        pair_points: a pair row ("A vs B") is within when its mean difference is >= -this.
        loss_points: the speed report marks a row that loses more than this.
        goal_points: a matrix row meets the goal when its mean difference to DistDGL is
            >= -this, at 1-2 layers ...
        deep_goal_points: ... and >= -this at 3 or more layers.
        scale: a shown test figure is the figure x this (an accuracy in %, an MRR as itself).
        spec: the format of a shown test figure.
        ranking: the task ranks held-out edges: its runs have test hits@k and a share of the
            edges trained on, which its rows and tables carry.
        heading: the title of its tables where another task's come first.

    Example:
        >>> TASKS["link"].test_key, TASKS["link"].show(0.41234), TASKS["node"].show(0.8123)
        ('test_mrr', '0.4123', '81.23')
    """

    name: str
    val_key: str
    test_key: str
    pair_points: float
    loss_points: float
    goal_points: float
    deep_goal_points: float
    scale: float
    spec: str
    ranking: bool
    heading: str

    def met(self, mean_diff_points: float | None, layers: int) -> bool | None:
        """Whether a row's mean difference to the reference (in points) meets the goal; None unmeasured."""
        if mean_diff_points is None:
            return None
        return mean_diff_points >= -(self.deep_goal_points if layers >= 3 else self.goal_points)

    def show(self, x: float | None) -> str:
        """A test figure as a table shows it ("-" for none)."""
        return "-" if x is None else format(x * self.scale if self.scale != 1 else x, self.spec)


LOSS_POINTS = 1.0
"""Speed report: a speedup whose mean accuracy is more than this many points below DistDGL's is marked."""

PAIR_POINTS = 0.5
"""System against system (``bench.pairs``): a row of "A vs B" is within when the mean per-seed
difference A - B is at least minus this many points (A better than B by any margin is within)."""

LINK_POINTS = 2.0
"""Link prediction: a row's test MRR is within the goal when its mean per-seed difference to the
reference is at least minus this many MRR points (0.02 absolute MRR); also the tolerance of a
pair's link rows and of the speed report's "loses accuracy" mark on link rows."""

DEFAULT_TASK = "node"
"""The task of a cell or row that does not say."""

TASKS = {
    "node": Task(name="node", val_key="val_acc", test_key="test_acc", pair_points=PAIR_POINTS,
                 loss_points=LOSS_POINTS, goal_points=1.0, deep_goal_points=0.0, scale=100.0, spec=".2f",
                 ranking=False, heading="Node classification"),
    "link": Task(name="link", val_key="val_mrr", test_key="test_mrr", pair_points=LINK_POINTS,
                 loss_points=LINK_POINTS, goal_points=LINK_POINTS, deep_goal_points=LINK_POINTS, scale=1.0,
                 spec=".4f", ranking=True, heading="Link prediction"),
}
"""Task name -> :class:`Task`, in the order a report shows them."""

QUALITY_KEYS = {name: (t.val_key, t.test_key) for name, t in TASKS.items()}
"""Per task: (the validation figure that convergence and the time to target race on, the test
figure the reports compare)."""


def task_of(name: str | None) -> Task:
    """The :class:`Task` of a row's or cell's task name (:data:`DEFAULT_TASK` where it has none)."""
    return TASKS[name or DEFAULT_TASK]


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
                     if isinstance(s.get("metrics"), dict) and s["metrics"].get("task")), DEFAULT_TASK)
    return task if task in TASKS else DEFAULT_TASK


def quality_keys(cell: dict) -> tuple[str, str]:
    """(validation key, test key) the reports read for a cell: accuracies, or MRRs for link prediction."""
    return QUALITY_KEYS[cell_task(cell)]


def accuracy_goal(mean_diff_points: float | None, layers: int) -> bool | None:
    """The accuracy goal: mean difference to DistDGL >= -1.0 point, >= 0 at 3+ layers.

    Example:
        >>> accuracy_goal(-0.5, 2), accuracy_goal(-0.5, 3)
        (True, False)
    """
    return TASKS["node"].met(mean_diff_points, layers)


def link_met(mean_diff_points: float | None, points: float = LINK_POINTS) -> bool | None:
    """The link goal for one row: its mean test-MRR difference to the reference >= -``points`` MRR points.

    Example:
        >>> link_met(-1.9), link_met(-2.1), link_met(None)
        (True, False, None)
    """
    return None if mean_diff_points is None else mean_diff_points >= -points


def pair_points(task: str) -> float:
    """A pair's tolerance in points: :data:`PAIR_POINTS` of accuracy, :data:`LINK_POINTS` of MRR for link rows."""
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


def _tasks(rows: list[dict]) -> set[str]:
    return {r.get("task", DEFAULT_TASK) for r in rows}


def tolerance_text(rows: list[dict]) -> str:
    """The pair tolerance in words for these rows: accuracy points, MRR points, or both."""
    tasks = _tasks(rows)
    if tasks == {"link"}:
        return f"{LINK_POINTS:g} MRR points"
    if "link" in tasks:
        return f"{PAIR_POINTS:g} points ({LINK_POINTS:g} MRR points on link rows)"
    return f"{PAIR_POINTS:g} points"


def pair_columns(rows: list[dict]) -> tuple[str, str]:
    """A pair table's (figure name, tolerance) for these rows: accuracy in %, MRR, or both."""
    tasks = _tasks(rows)
    what = "test MRR" if tasks == {"link"} else ("test acc % / MRR" if "link" in tasks else "test acc %")
    tol = f"{LINK_POINTS:g}" if tasks == {"link"} else (
        f"{PAIR_POINTS:g} ({LINK_POINTS:g} on MRR)" if "link" in tasks else f"{PAIR_POINTS:g}")
    return what, tol


def quality_axis(rows: list[dict]) -> str:
    """The y label of a plot of these rows' test figure (plotted x 100: accuracy in %, MRR in points)."""
    tasks = _tasks(rows)
    if tasks == {"link"}:
        return "test MRR x 100"
    return "test accuracy (%) / MRR x 100" if "link" in tasks else "test accuracy (%)"


def task_text(cfg: dict, task: str) -> str:
    """A cell's kind of job in a few words, from its config and task: "node", "link", with learnable
    embeddings, on a heterograph.

    Example:
        >>> task_text({"model": {"embed": True}}, "link")
        'link, learnable embeddings'
    """
    out = task
    if (cfg.get("model") or {}).get("embed"):
        out += ", learnable embeddings"
    if (cfg.get("data") or {}).get("name") == "hetsynth":
        out += f", heterogeneous (target {(cfg.get('data') or {}).get('target', '?')})"
    return out
