"""How a kind of job is graded: its :class:`Metric` (the figures its evaluation records, which way is better,
their names in words), and the two the package's kinds share, :data:`ACCURACY` and :data:`RANKING`.

Everything downstream of an evaluation asks the run's metric instead of knowing the kinds: the summary
fields (:meth:`Metric.summary`), the terminal lines (:meth:`Metric.line`), the time to target
(:meth:`Metric.target`, :meth:`Metric.reached`), compare's tables and plots and the benchmark reports
(:attr:`Metric.words`, :attr:`Metric.figures`, the tolerances, :attr:`Metric.style`). A kind of job names its metric
(``JobKind.metric``); a kind graded otherwise declares a :class:`Metric` of its own.

Example:
    >>> rmse = Metric(name="regression", val_key="val_rmse", test_key="test_rmse", words="RMSE",
    ...               higher_is_better=False)
    >>> rmse.best([0.9, 0.4, 0.6]), round(rmse.target(0.4, 0.98), 4), rmse.reached(0.405, 0.4082)
    (0.4, 0.4082, True)
    >>> rmse.line({"val_rmse": 0.5, "test_rmse": 0.52})
    'val RMSE 0.5000  test RMSE 0.5200'
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    """One figure a metric shows: its key in the records and summary, and its label.

    ``label`` may name other summary fields in braces (``"test hits@{hits_k}"``); ``spec`` formats the
    value; ``paren`` is a second key shown in parentheses after it (e.g. the same figure without the halo).
    """

    key: str
    label: str
    spec: str = ".4f"
    paren: str | None = None

    def text(self, values: dict) -> str:
        """The figure's value in ``values`` as a table cell ("-" for none)."""
        v = values.get(self.key)
        if v is None:
            return "-"
        out = format(v, self.spec)
        if self.paren is not None and values.get(self.paren) is not None:
            out += f" ({format(values[self.paren], self.spec)})"
        return out

    def name(self, context: dict | None = None) -> str:
        """The label, its braces filled from ``context`` ("k" where the context lacks the field)."""
        return self.label.format_map(_Blank(context or {}))


class _Blank(dict):
    """A label's context: a field it lacks reads "k" (``hits@k``)."""

    def __missing__(self, key):
        return "k"


def _plain(f: Figure, context: dict) -> dict:
    return {"key": f.key, "label": f.name(context), "spec": f.spec, "paren": f.paren}


TARGET_FRACTION = 0.98
"""The time to target's target: this share of the baseline's best validation figure (compare: of its best
evaluation; the benchmark reports: of its plateau), as far past it for an error (:meth:`Metric.target`)."""

LOSS_POINTS = 1.0
"""Speed report: a speedup whose mean accuracy is more than this many points below DistDGL's is marked."""

PAIR_POINTS = 0.5
"""System against system (``bench.pairs``): a row of "A vs B" is within when the mean per-seed
difference A - B is at least minus this many points (A better than B by any margin is within)."""

LINK_POINTS = 2.0
"""Link prediction: a row's test MRR is within the goal when its mean per-seed difference to the
reference is at least minus this many MRR points (0.02 absolute MRR); also the tolerance of a
pair's link rows and of the speed report's "loses accuracy" mark on link rows."""


STYLES = ("accuracy", "ranking")
"""The ways a report presents and grades a metric (:attr:`Metric.style`): each has its table, notes and goals in
the benchmark reports."""


@dataclass(frozen=True)
class Metric:
    """How a kind of job is graded: the figures it is evaluated on, which way is better, and how close is close.

    Kinds share one when they are graded alike (node classification on any graph: :data:`ACCURACY`;
    link prediction: :data:`RANKING`); the summaries, the terminal lines, compare and the reports ask a run's
    kind for it.

    Attributes:
        name: the metric family's name (a kind's ``task``), as a report row's ``task``.
        val_key: the validation figure that convergence, the best value and the time to target race on.
        test_key: the test figure the reports compare (its window mean).
        words: the figure in words ("accuracy", "MRR"): "validation accuracy", "test MRR".
        short: its short name in terminal lines ("acc": "val acc"); empty: ``words``.
        higher_is_better: which way is better (an accuracy: higher; an error: lower).
        summary_keys: the figures of the last evaluation that summary.json keeps (empty: the val and test keys).
        figures: what a terminal line and compare's tables show, in order (empty: the val and test figures).
        extra: further figures of a run's summary that compare's report shows after them (link prediction: the
            share of edges trained on).
        notes: how compare's report says its figures are measured, one markdown line each (braces: summary fields,
            as in the figures' labels); empty: one line of the default.
        pair_points: a pair row ("A vs B") is within when its mean difference is >= -this (in the better direction).
        loss_points: the speed report marks a row that loses more than this.
        goal_points: a matrix row meets the goal when its mean difference to DistDGL is
            >= -this, at 1-2 layers ...
        deep_goal_points: ... and >= -this at 3 or more layers.
        scale: a shown test figure is the figure x this (an accuracy in %, an MRR as itself).
        spec: the format of a shown test figure.
        ranking: the figures rank held-out edges: the runs have test hits@k and a share of the
            edges trained on, which report rows and tables carry.
        style: how the benchmark reports present and grade it, one of :data:`STYLES`: ``"accuracy"`` (one test
            figure per row, as :meth:`show` shows it, graded by :meth:`met` in the direction of ``higher_is_better``,
            beside the system's memory, bytes and stall goals) or ``"ranking"`` (the MRR of held-out edges with
            hits@k and the edges trained on, within ``goal_points``); empty (the default): ``"ranking"`` where
            ``ranking`` is set, else ``"accuracy"``.
        heading: the title of its tables where another metric's come first (empty: ``words``).
        points: the reports' unit of a difference (an accuracy's "points"; "MRR points", 0.01 MRR); empty:
            "<words> points".
        column: the reports' name of a test-figure column ("test acc %"); empty: "test <short>".
        axis: a report plot's name of the test figure, plotted x 100 ("test accuracy (%)"); empty:
            "test <words> x 100".

    Example:
        >>> RANKING.test_key, RANKING.show(0.41234), ACCURACY.show(0.8123), RANKING.style
        ('test_mrr', '0.4123', '81.23', 'ranking')
    """

    name: str
    val_key: str
    test_key: str
    words: str = ""
    short: str = ""
    higher_is_better: bool = True
    summary_keys: tuple[str, ...] = ()
    figures: tuple[Figure, ...] = ()
    extra: tuple[Figure, ...] = ()
    notes: tuple[str, ...] = ()
    pair_points: float = PAIR_POINTS
    loss_points: float = LOSS_POINTS
    goal_points: float = 1.0
    deep_goal_points: float = 0.0
    scale: float = 1.0
    spec: str = ".4f"
    ranking: bool = False
    style: str = ""
    heading: str = ""
    points: str = ""
    column: str = ""
    axis: str = ""

    def __post_init__(self):
        if not self.style:
            object.__setattr__(self, "style", "ranking" if self.ranking else "accuracy")
        if self.style not in STYLES:
            raise ValueError(f"Metric {self.name!r}: style {self.style!r} is not one of {', '.join(STYLES)}")
        short = self.short or self.words or self.val_key
        if not self.short:
            object.__setattr__(self, "short", short)
        if not self.words:
            object.__setattr__(self, "words", short)
        for name, default in (
            ("heading", self.words),
            ("points", f"{self.words} points"),
            ("column", f"test {short}"),
            ("axis", f"test {self.words} x 100"),
        ):
            if not getattr(self, name):
                object.__setattr__(self, name, default)
        if not self.summary_keys:
            object.__setattr__(self, "summary_keys", (self.val_key, self.test_key))
        if not self.figures:
            object.__setattr__(
                self, "figures", (Figure(self.val_key, f"val {short}"), Figure(self.test_key, f"test {short}"))
            )
        if not self.notes:
            object.__setattr__(
                self,
                "notes",
                (
                    f"- **val / test {short}**: one global evaluation of rank 0's model on "
                    "the whole graph after the last epoch.",
                ),
            )

    @property
    def best_key(self) -> str:
        """summary.json's field of the best validation figure (``best_val_acc``)."""
        return f"best_{self.val_key}"

    def better(self, a: float, b: float) -> bool:
        """Whether ``a`` is at least as good as ``b``."""
        return a >= b if self.higher_is_better else a <= b

    def best(self, values) -> float | None:
        """The best of ``values`` (None for none)."""
        values = list(values)
        if not values:
            return None
        return max(values) if self.higher_is_better else min(values)

    def gain(self, diff: float | None) -> float | None:
        """A difference A - B turned so that positive is better (an error's difference changes sign)."""
        return None if diff is None else (diff if self.higher_is_better else -diff)

    def target(self, best: float, fraction: float) -> float:
        """The time-to-target's target from the baseline's best validation figure: ``fraction`` of it (an error:
        the best over ``fraction``, as far above it as the share is below)."""
        return fraction * best if self.higher_is_better else best / fraction

    def reached(self, value: float | None, target: float) -> bool:
        """Whether a validation figure ``value`` is at or past ``target``."""
        return value is not None and self.better(value, target)

    def summary(self, records: list[dict]) -> dict:
        """summary.json's figures from the epoch records: :attr:`summary_keys` of the last evaluation (None each
        when no epoch was evaluated) and the best validation figure (:attr:`best_key`)."""
        evals = [r for r in records if r.get(self.val_key) is not None]
        final = evals[-1] if evals else {}
        out = {k: final.get(k) for k in self.summary_keys}
        out[self.best_key] = self.best(r[self.val_key] for r in evals)
        return out

    def line(self, summary: dict, sep: str = "  ", context: dict | None = None) -> str:
        """The figures of ``summary`` (a summary.json, or an epoch's record) in one line, those it lacks left out:
        ``val acc 0.8123  test acc 0.8000``. ``context`` fills the labels' braces (the summary by default)."""
        ctx = summary if context is None else context
        return sep.join(f"{f.name(ctx)} {f.text(summary)}" for f in self.figures if f.key in summary)

    def describe(self, context: dict | None = None) -> dict:
        """What a report of runs graded by this metric needs, as plain data (compare.json's ``metric``): the names,
        the direction, and the figures with their labels filled from ``context`` (the run's summary fields)."""
        ctx = context or {}
        return {
            "name": self.name,
            "words": self.words,
            "short": self.short,
            "val_key": self.val_key,
            "test_key": self.test_key,
            "best_key": self.best_key,
            "higher_is_better": self.higher_is_better,
            "figures": [_plain(f, ctx) for f in self.figures],
            "extra": [_plain(f, ctx) for f in self.extra],
            "notes": [n.format_map(_Blank(ctx)) for n in self.notes],
        }

    def met(self, mean_diff_points: float | None, layers: int) -> bool | None:
        """Whether a row's mean difference to the reference (in points) meets the goal; None unmeasured."""
        if mean_diff_points is None:
            return None
        return self.gain(mean_diff_points) >= -(self.deep_goal_points if layers >= 3 else self.goal_points)

    def within(self, mean_diff_points: float | None, points: float) -> bool | None:
        """Whether a mean difference (in points) is no worse than ``points``; None unmeasured."""
        return None if mean_diff_points is None else self.gain(mean_diff_points) >= -points

    def show(self, x: float | None) -> str:
        """A test figure as a table shows it ("-" for none)."""
        return "-" if x is None else format(x * self.scale if self.scale != 1 else x, self.spec)


ACCURACY = Metric(
    name="node",
    val_key="val_acc",
    test_key="test_acc",
    words="accuracy",
    short="acc",
    pair_points=PAIR_POINTS,
    loss_points=LOSS_POINTS,
    goal_points=1.0,
    deep_goal_points=0.0,
    scale=100.0,
    spec=".2f",
    ranking=False,
    style="accuracy",
    heading="Node classification",
    points="points",
    column="test acc %",
    axis="test accuracy (%)",
)
"""Node classification: accuracy of the val and test nodes, within 1 point at 1-2 layers, at or above at 3+."""

RANKING = Metric(
    name="link",
    val_key="val_mrr",
    test_key="test_mrr",
    words="MRR",
    summary_keys=("val_mrr", "val_hits", "test_mrr", "test_hits"),
    figures=(Figure("val_mrr", "val MRR"), Figure("test_mrr", "test MRR"), Figure("test_hits", "test hits@{hits_k}")),
    extra=(
        Figure(
            "usable_edge_fraction", "edges trained on (halo dropped)", ".1%", paren="usable_edge_fraction_halo_drop"
        ),
    ),
    notes=(
        "- **val / test MRR, test hits@{hits_k}**: one global evaluation of rank 0's encoder on the "
        "whole training graph after the last epoch (`dgl_grappa.runtime.evaluation.evaluate_link`, the "
        "same function for every system): each held-out edge (u, v) scored h_u . h_v against its "
        "sampled negatives (u, v'), the same edges and negatives for every system; MRR is the mean "
        "reciprocal rank, hits@{hits_k} the share ranked in the top {hits_k}.",
        "- **edges trained on**: the share of the training graph's edges that are a worker's positive: "
        "Grappa's workers train on the edges into their own nodes whose source they hold (in "
        "parentheses: with the halo dropped, only both ends owned); DistDGL trains on every edge.",
    ),
    pair_points=LINK_POINTS,
    loss_points=LINK_POINTS,
    goal_points=LINK_POINTS,
    deep_goal_points=LINK_POINTS,
    scale=1.0,
    spec=".4f",
    ranking=True,
    style="ranking",
    heading="Link prediction",
    points="MRR points",
    column="test MRR",
    axis="test MRR x 100",
)
"""Link prediction: MRR of held-out edges against sampled negatives, within 2 MRR points."""
