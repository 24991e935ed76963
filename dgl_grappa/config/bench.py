"""The ``compare`` and ``bench`` sections: side-by-side runs and the benchmark matrix."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from .errors import ConfigError, require


@dataclass
class CompareConfig:
    """``python -m dgl_grappa compare``: DistDGL and Grappa side by side."""

    variants: list[Literal["none", "batch", "node", "shrinkage"]] = field(default_factory=lambda: ["none"])
    """Grappa corrections to run (one Grappa run each, named grappa-<correction>) after the DistDGL
    baseline; none (plain averaging) is the package default."""
    distdgl: bool = True
    """Run the DistDGL baseline (the ratios are relative to it)."""
    dropin: bool = False
    """Also run the drop-in script with --grappa (DistDGL servers, local-only loader)."""
    target_acc: float = 0.0
    """Validation accuracy for time-to-accuracy; 0 = 0.98 x DistDGL's best val accuracy."""
    script: str = ""
    """DistDGL trainer script of your own; empty = the package's trainer (python -m dgl_grappa.distdgl.train)."""
    script_args: str = ""
    """The script's own arguments, passed verbatim (nothing added): placeholders {ip_config},
    {part_config}, {graph_name}, {out_dir}, {config}, {grappa}; empty = the package's arguments.
    With a script, ``compare`` runs it unmodified and converted (``dropin_script``) on the same partitions."""
    dropin_script: str = ""
    """The converted copy of ``script`` (the drop-in loader in it), run with the same ``script_args``;
    empty = ``script`` itself with ``--grappa`` in place of ``{grappa}`` in its arguments."""
    metric: str = ""
    """A regular expression for the line of the script's output that holds its accuracy or loss, the
    number in its one group (or the whole match), e.g. ``"Test Acc (\\d+\\.\\d+)"``; empty = the
    pattern of DGL's example of that file name (node_classification.py, train_dist_unsupervised.py,
    train_dist_transductive.py, entity_classify_dist.py), else none (times and bytes only)."""

    def check(self) -> None:
        """Something to run, a target accuracy that is a fraction, a metric pattern that compiles."""
        require(
            self.distdgl or bool(self.variants) or self.dropin,
            "compare has nothing to run; list at least one variant, e.g. --compare.variants=[batch]",
        )
        require(
            0.0 <= self.target_acc <= 1.0, f"compare.target_acc={self.target_acc} must be in [0, 1] (0 = automatic)"
        )
        require(
            not self.dropin_script or bool(self.script),
            f"compare.dropin_script={self.dropin_script} is the converted copy of compare.script, which is "
            "not set: name the unmodified script with --compare.script=PATH",
        )
        if self.metric:
            try:
                groups = re.compile(self.metric).groups
            except re.error as exc:
                raise ConfigError(
                    f"compare.metric={self.metric!r} is not a regular expression ({exc}); "
                    "e.g. --compare.metric='Test Acc (\\d+\\.\\d+)'"
                ) from None
            require(
                groups <= 1,
                f"compare.metric={self.metric!r} has {groups} groups; put the number in one "
                "group, e.g. 'Test Acc (\\d+\\.\\d+)', and use (?:...) for any other",
            )


@dataclass
class BenchConfig:
    """``python -m dgl_grappa bench``: a matrix of cells, every system of a cell on one partitioning.

    A cell is one point of the product datasets x partitions x parts x models x layers x
    bandwidths x seeds (an empty axis = the base config's value). Axis overrides on the
    command line select what runs now; the report always covers the matrix of the file.
    See dgl_grappa/bench/matrix.py.
    """

    datasets: list[str] = field(default_factory=list)
    """Base config files, one per dataset (e.g. configs/bench/cora.yaml): every setting
    that is not an axis (hyper-parameters, epochs, timeouts) comes from there."""
    partitions: list[str] = field(default_factory=list)
    """partition.method values; empty = the base config's."""
    parts: list[int] = field(default_factory=list)
    """partition.num_parts values; empty = the base config's."""
    models: list[str] = field(default_factory=list)
    """model.name values; empty = the base config's."""
    layers: list[int] = field(default_factory=list)
    """model.num_layers values; empty = the base config's."""
    fanouts: list[str] = field(default_factory=list)
    """Entry i = train.fanouts for i+1 layers, comma-separated, e.g. ["10", "10,25",
    "10,15,25"]; empty (or no entry for a depth) = the base config's when its depth matches."""
    seeds: list[int] = field(default_factory=lambda: [0])
    """Each seed sets train.seed and partition.seed (partition, initialisation, sampling)."""
    bandwidths: list[str] = field(default_factory=lambda: [""])
    """network.bandwidth values ("" or "unshaped" = no shaping, e.g. 1gbit, 200mbit)."""
    systems: list[str] = field(default_factory=lambda: ["distdgl", "grappa"])
    """"NAME" or "NAME: --a.b=v --c.d=w" (quote it in YAML). NAME distdgl = the DistDGL
    baseline (the reference of every ratio), distdgl-grappa = the drop-in script with
    --grappa, any other name = a Grappa train run; the overrides apply to that system only
    and may not touch what the systems of a cell share (data, partition, network, run.output_dir)."""
    overrides: list[str] = field(default_factory=list)
    """--a.b=v overrides applied to every cell (before the axes), e.g. ["--train.epochs=5"];
    non-bench overrides given on the bench command line are appended here."""
    out_dir: str = ""
    """Where cells/<cell>.json, runs/<cell>/<system>/ and partitions/<hash>/ go; empty = run.output_dir."""
    report: str = ""
    """Markdown report regenerated from the cell JSON files (plots in a folder beside it,
    named after it); empty = <out_dir>/report.md."""
    report_kind: Literal["accuracy", "speed"] = "accuracy"
    """accuracy: mean/std over seeds and paired differences to DistDGL with a 95 % interval;
    speed: epoch-time, bytes and floor ratios per cell, accuracy next to speed."""
    pairs: list[str] = field(default_factory=list)
    """Accuracy report: further systems graded against each other, not against DistDGL, one
    entry "A vs B" each (names of bench.systems, e.g. "distdgl-grappa vs grappa"): per row the
    per-seed difference A - B with a 95 % interval, within 0.5 points when its mean is >= -0.5."""
    report_only: bool = False
    """Regenerate the report from the JSON files without running anything."""
    preamble: str = ""
    """Markdown file put at the top of the report (hand-written text kept across regenerations)."""
    baseline_partition: str = ""
    """A partitioner whose DistDGL runs are the reference of every row (e.g. metis: DistDGL at
    its best, against Grappa on LDG and random partitions too): a cell of another partitioner
    without a DistDGL run of its own borrows the one of the cell with this partitioner and
    otherwise the same axes and seed; the report says so. Empty = each cell its own."""
    partial: list[str] = field(default_factory=list)
    """Names of systems that run on part of the matrix only (e.g. an old default kept for
    comparison): the plain command leaves them out (select them with --bench.systems=[name]
    and axis overrides), and a cell counts as done without them."""
    extra: list[str] = field(default_factory=list)
    """Further sub-matrices of the same bench and report, one per entry: axis values over the
    ones above, e.g. "parts=[8] layers=[2] bandwidths=[1gbit]" (keys: datasets, partitions,
    parts, models, layers, bandwidths, seeds). The matrix is the union; a command-line
    selection applies to these too."""
    archive: str = ""
    """Folder kept in the repository (e.g. benchmarks/accuracy/cells) that holds a gzip'd copy of
    every cell file, so that results outlive the machine and its out_dir: a cell found there
    counts as done (resuming on a fresh clone runs only what is missing) and is reported like
    those in out_dir, which win where both have a cell; out_dir's cells that it lacks are
    copied in when the bench starts. Empty = out_dir only."""

    def check(self) -> None:
        """Pairs belong to the accuracy report (their entries are read against ``systems`` by :func:`parse_pairs`)."""
        require(
            not self.pairs or self.report_kind == "accuracy",
            f"bench.pairs={self.pairs} is set but bench.report_kind={self.report_kind}: pairs grade test "
            "accuracy; set --bench.report_kind=accuracy or leave bench.pairs empty",
        )


PAIR = re.compile(r"\s*(\S+)\s+vs\s+(\S+)\s*")
"""An entry of ``bench.pairs``: two system names and "vs" between them."""


def parse_pairs(entries: list[str], names: list[str]) -> list[tuple[str, str]]:
    """The ``bench.pairs`` entries as (A, B) system names.

    Args:
        entries: "A vs B" strings.
        names: the names of ``bench.systems`` (before any ':').

    Raises:
        ConfigError: an entry not of that form, naming a system not in ``names``, or one system twice.
    """
    out = []
    for entry in entries:
        m = PAIR.fullmatch(str(entry))
        if m is None:
            raise ConfigError(
                f'bench.pairs entry {entry!r} is not "A vs B"; write e.g. "distdgl-grappa vs grappa" '
                "with two names of bench.systems"
            )
        for n in m.groups():
            if n not in names:
                raise ConfigError(
                    f"bench.pairs entry {entry!r} names {n!r}, which is not in bench.systems "
                    f"({', '.join(names)}); pair only names of bench.systems"
                )
        if m.group(1) == m.group(2):
            raise ConfigError(
                f"bench.pairs entry {entry!r} pairs {m.group(1)!r} with itself; name two different "
                "systems of bench.systems"
            )
        out.append((m.group(1), m.group(2)))
    return out
