"""The fixed text of the reports: what each column and figure means, under its tables."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

from ...runtime.grading import ACCURACY, LINK_POINTS, PAIR_POINTS, TARGET_FRACTION, Metric
from .stats import PLATEAU_POINTS

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
- **epoch**: the shared epoch clock (`dgl_grappa.runtime.metrics.EpochClock`): \
from a barrier at the epoch's start to the
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


def accuracy_notes(metric: Metric) -> str:
    """The notes that the tables of a metric graded as an accuracy add under the matrix: none for node
    classification's (:data:`ACCURACY_NOTES` and :data:`SPEED_NOTES` describe it), else its figure in the place
    of the test accuracy, its direction and its goal.

    Example:
        >>> from dgl_grappa.runtime.grading import ACCURACY, Metric
        >>> rmse = Metric(name="regress", val_key="val_rmse", test_key="test_rmse", words="RMSE",
        ...               higher_is_better=False)
        >>> accuracy_notes(ACCURACY), "lower is better" in accuracy_notes(rmse)
        ('', True)
    """
    if metric == ACCURACY:
        return ""
    m = metric
    sign = "-" if m.higher_is_better else "+"

    def bound(points: float) -> str:
        return f"{'>=' if m.higher_is_better else '<='} {sign + format(points, 'g') if points else '0'}"

    def amount(points: float) -> str:
        return f"{points:g} {m.points.removesuffix('s') if points == 1 else m.points}"

    target = (
        f"{TARGET_FRACTION * 100:g} % of DistDGL's validation plateau"
        if m.higher_is_better
        else f"DistDGL's validation plateau over {TARGET_FRACTION:g}"
    )
    text = (
        f"- **{m.heading}** (cells whose base config sets `train.task: {m.name}`): **{m.column}** takes the place "
        f"of the test accuracy ({'higher' if m.higher_is_better else 'lower'} is better), the same window mean; "
        f"**Δ vs DistDGL** is in {m.points} (1 point = 0.01 {m.words}), per seed on the same partitioning, mean "
        f"and 95 % t-interval; **goal**: that mean is {bound(m.goal_points)} ({bound(m.deep_goal_points)} at 3 or "
        f"more layers). **converged** and **time to target** race on the validation {m.words}: converged, its mean "
        f"over the last window is at most {amount(PLATEAU_POINTS)} {'above' if m.higher_is_better else 'below'} "
        f"that of the window before; the target, {target}. In the speed report a row that loses more than "
        f"{amount(m.loss_points)} is marked."
    )
    return textwrap.fill(text, width=115, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False) + "\n"


def ranking_notes(metric: Metric) -> str:
    """The notes that the tables of a ranking metric add under the matrix: link prediction's (:data:`LINK_NOTES`),
    whose held-out edges any ranking metric ranks."""
    return LINK_NOTES


STYLE_NOTES: dict[str, Callable[[Metric], str]] = {"accuracy": accuracy_notes, "ranking": ranking_notes}
"""A metric's :attr:`~dgl_grappa.runtime.grading.Metric.style` -> the notes its tables add under the matrix, from
the metric ("" where the reports' own notes describe it)."""
