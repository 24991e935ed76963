"""A script's own accuracy (or loss), read from what its trainers printed: ``compare.metric``.

A DistDGL script evaluates itself and prints the result; the launcher keeps each trainer's output
(``logs/trainer<i>.log``). The metric is the number in the last line of each trainer's output that
matches a pattern (its one group, or the whole match), averaged over the trainers that printed one:
DGL's node classification examples print every trainer's own share of the test nodes, the link
prediction example prints its one figure on rank 0. The pattern is ``compare.metric``, or for a
script named as one of DGL's distributed examples the pattern of that example's line.

Where a match falls in a trainer's output, against the output's length at the end of each training
epoch (:mod:`.loader_meter` records it), says after which epoch it was printed: that gives the
metric's curve against training time.

Example:
    >>> pattern_for("", "examples/dgl_style/node_classification.py")
    'Test Acc (\\\\d+(?:\\\\.\\\\d+)?)'
    >>> metric_label("Test Acc (\\\\d+(?:\\\\.\\\\d+)?)")
    'Test Acc'
"""

from __future__ import annotations

import re
from pathlib import Path

NUMBER = r"(\d+(?:\.\d+)?)"

DGL_EXAMPLES = {
    # DGL v2.1's distributed examples, by file name: the line each prints after evaluating
    "node_classification.py": "Test Acc " + NUMBER,  # "Part 0, Val Acc 0.71, Test Acc 0.70, ..." per trainer
    "train_dist_transductive.py": "Test Acc " + NUMBER,  # the same line, per trainer
    "entity_classify_dist.py": "Test Acc " + NUMBER,  # "Val Acc 0.90, Test Acc 0.89, ..." on rank 0
    "train_dist_unsupervised.py": "test acc " + NUMBER,  # "eval acc 0.36; test acc 0.37" on rank 0
}
"""The metric pattern of each of DGL's distributed examples (and of their copies in examples/dgl_style/)."""


def pattern_for(configured: str, script: str | None) -> str | None:
    """The metric pattern of a run: ``compare.metric``, else the known one of the script's file name, else None."""
    if configured:
        return configured
    return DGL_EXAMPLES.get(Path(script).name) if script else None


def metric_label(pattern: str | None) -> str:
    """The metric's name in a table: the pattern's literal text before its group ("Test Acc"), else "metric"."""
    if not pattern:
        return "metric"
    head = pattern.split("(", 1)[0]
    words = re.sub(r"\\[dDsSwWbB]|[\\^$.*+?{}\[\]|]", " ", head).strip(" :,;=")
    return " ".join(words.split()) or "metric"


def _value(m: re.Match) -> float | None:
    try:
        return float(m.group(1) if m.re.groups else m.group(0))
    except (TypeError, ValueError):
        return None


def read_metric(log: Path, pattern: str, offsets: list[int | None] | None = None) -> dict:
    """The matches of ``pattern`` in one trainer's output.

    Args:
        log: the trainer's output file.
        pattern: the metric's regular expression.
        offsets: the output's length in bytes at the end of each training epoch (None where unknown).

    Returns:
        ``last``: the number of the last match (None without one); ``after_epoch``: epoch index ->
        the last number printed after that epoch's end and before the next one's (only epochs with
        known offsets; a match before the first epoch's end is not in it).
    """
    try:
        text = log.read_bytes().decode("latin-1")  # one character per byte: positions are the offsets
    except OSError:
        return {"last": None, "after_epoch": {}}
    rx = re.compile(pattern)
    found = [(m.start(), v) for m in rx.finditer(text) if (v := _value(m)) is not None]
    known = [(i, o) for i, o in enumerate(offsets or []) if o is not None]
    after: dict[int, float] = {}
    for pos, v in found:
        done = [i for i, o in known if o <= pos]
        if done:
            after[done[-1]] = v
    return {"last": found[-1][1] if found else None, "after_epoch": after}


def mean(xs: list[float]) -> float | None:
    """The mean of ``xs``, or None when empty."""
    return sum(xs) / len(xs) if xs else None
