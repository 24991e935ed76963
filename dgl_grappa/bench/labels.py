"""The systems' names in words, for tables and plots a reader sees.

Runs are named by key in files (``distdgl``, ``grappa-none``, ``distdgl-grappa``): stable,
short, part of compare.json and the benchmark cells. A reader needs words: which system, and
for Grappa which gradient correction when it is not the package's default.
"""

from __future__ import annotations

from ..config import GrappaConfig
from ..kinds import metric_of
from ..runtime.grading import TARGET_FRACTION

CORRECTIONS = {
    "none": "plain gradient averaging",
    "batch": "batch-level correction",
    "node": "node-level correction",
    "shrinkage": "shrinkage correction",
}
"""``grappa.correction`` in words."""

DEFAULT_CORRECTION = GrappaConfig().correction


def system_label(name: str, short: bool = False) -> str:
    """A system's key in words: ``DistDGL``, ``Grappa``, ``Grappa, batch-level correction``.

    Grappa with the default correction is plain "Grappa"; another correction is named
    (``short``: by its key, for a narrow table). A key this function does not know is
    a benchmark's own system name, returned with its prefix in words.

    Example:
        >>> system_label("distdgl"), system_label("grappa-none"), system_label("grappa-batch")
        ('DistDGL', 'Grappa', 'Grappa, batch-level correction')
        >>> system_label("grappa-batch", short=True), system_label("distdgl-grappa"), system_label("grappa-old")
        ('Grappa (batch)', 'DistDGL + Grappa drop-in', 'Grappa (old)')
        >>> system_label("distdgl-grappa", short=True)
        'DistDGL+drop-in'
    """
    if name == "distdgl":
        return "DistDGL"
    if name == "distdgl-grappa":
        return "DistDGL+drop-in" if short else "DistDGL + Grappa drop-in"
    if name == "grappa":
        return "Grappa"
    if name.startswith("grappa-"):
        variant = name[len("grappa-") :]
        if variant == DEFAULT_CORRECTION:
            return "Grappa"
        if variant in CORRECTIONS and not short:
            return f"Grappa, {CORRECTIONS[variant]}"
        return f"Grappa ({variant})"
    return name


def systems_legend(names: list[str]) -> str:
    """One line naming each key in words (report.md, under its table).

    Example:
        >>> systems_legend(["distdgl", "grappa-none"])
        '`distdgl`: DistDGL; `grappa-none`: Grappa (plain gradient averaging, the default)'
    """
    parts = []
    for n in names:
        text = system_label(n)
        if n.startswith("grappa-") and n[len("grappa-") :] == DEFAULT_CORRECTION:
            text += f" ({CORRECTIONS[DEFAULT_CORRECTION]}, the default)"
        parts.append(f"`{n}`: {text}")
    return "; ".join(parts)


def target_text(result: dict) -> str:
    """How compare's target of "time to target" was chosen, in words (a compare.json from before it was recorded:
    the automatic rule).

    Example:
        >>> target_text({"target_acc": 0.9663, "target_rule": "98 % of DistDGL's best validation accuracy, 0.9860"})
        "target 0.966: 98 % of DistDGL's best validation accuracy, 0.9860"
    """
    rule = result.get("target_rule") or f"{TARGET_FRACTION * 100:.0f} % of the baseline's best validation figure"
    return f"target {result['target_acc']:.3f}: {rule}"


def result_metric(result: dict) -> dict:
    """How a compare.json's runs are graded (:meth:`Metric.describe <dgl_grappa.runtime.grading.Metric.describe>`:
    names, direction, figures with their labels): as it recorded it, else its task's registered metric."""
    return result.get("metric") or metric_of(result.get("task")).describe(result)
