"""The projection's calibration: what the model knows of a workload, as measured on this machine.

One fit per system (:class:`GrappaFit`, :class:`DistDGLFit`), one per partitioner the DistDGL
runs used (:class:`PartitionFit`), and the workload they share (:class:`Calibration`). Made by
:func:`~dgl_grappa.bench.project.fit.calibrate_from`; read by the model
(:mod:`dgl_grappa.bench.project.model`); written to projection.json as :meth:`Calibration.to_dict`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ...config import ConfigError


class ProjectError(ConfigError):
    """Bad input of ``project`` (one line: the problem and the fix; exit status 2)."""


@dataclass(kw_only=True)
class GrappaFit:
    """Grappa's step, per worker.

    Attributes:
        compute_s: compute seconds a step (the mean over the calibrated part counts).
        compute_by_parts: [P, compute seconds] per calibrated part count (interpolated in log P).
        sample_s: sampling and feature-read seconds a step (what prefetch overlaps).
        backward_s: backward-pass seconds a step.
        prefetch: whether the runs prefetched the next batch (``train.prefetch``).
        corr_bytes: bytes the correction adds to each all-reduce.
        buckets: DDP gradient buckets (each a ring all-reduce).
        wire_overhead: wire bytes per application byte (1 unmeasured).
    """

    compute_s: float
    compute_by_parts: list[list[float]] = field(default_factory=list)
    sample_s: float = 0.0
    backward_s: float = 0.0
    prefetch: bool = False
    corr_bytes: float = 0.0
    buckets: int = 1
    wire_overhead: float = 1.0


@dataclass(kw_only=True)
class DistDGLFit:
    """DistDGL's step, per trainer.

    Attributes:
        compute_s: compute seconds a step without remote rows (c_D).
        row_cost_s: CPU seconds per remote input row that no network removes (c_row).
        round_trips: round trips a step (a sampling RPC per layer, the feature pull, the label pull).
        buckets: DDP gradient buckets.
        wire_overhead: wire bytes per application byte (1 unmeasured).
    """

    compute_s: float
    row_cost_s: float = 0.0
    round_trips: int = 0
    buckets: int = 1
    wire_overhead: float = 1.0


@dataclass(kw_only=True)
class PartitionFit:
    """One partitioner's remote rows, from DistDGL's runs on it.

    Attributes:
        parts0: the smallest measured part count P0.
        input_rows: unique input rows of a step (I).
        remote_fraction0: the share of them another machine owns at P0.
        q0: that share over a random partition's at P0.
        growth: a, the share grows as (P / P0)^a x a random partition's.
        measured_parts: the part counts of the runs.
        rpc_share: sampling RPC bytes per remote feature byte (r).
        seed_imbalance: Grappa's largest part's training nodes over the mean (1: even).
    """

    parts0: int = 2
    input_rows: float
    remote_fraction0: float = 0.0
    q0: float = 1.0
    growth: float = 0.0
    measured_parts: list[int] = field(default_factory=list)
    rpc_share: float = 0.0
    seed_imbalance: float = 1.0


@dataclass(kw_only=True)
class CalibrationRun:
    """One calibration run: where it is, what it ran on, its measured (undilated) epoch."""

    where: str
    system: str
    parts: int
    partition: str | None
    bandwidth: str | None
    latency_ms: float
    link: str
    dilation: float
    measured_epoch_s: float


@dataclass(kw_only=True)
class Calibration:
    """The model's constants for one workload (see :mod:`dgl_grappa.bench.project`).

    Attributes:
        name: the dataset's name.
        workload: what every run must share (dataset, model, depth, width, fan-outs, batch,
            gradient bytes, data settings); None on a hand-made calibration (no check).
        correction: the calibrated Grappa correction (None: any).
        train_nodes: T, training nodes of the graph.
        batch_size: B_s.
        steps_cap: ``train.steps_per_epoch`` (0: none).
        row_bytes: bytes of a feature row in fp32 (4F).
        model_bytes: M, gradient bytes of the model.
        input_rows: unique input rows of a step, over the partitioners.
        compute_scale: multiplies every per-step compute (0.5: machines twice as fast).
        cores_per_host: the calibration runs' cores per host (after dilation), where recorded.
        grappa, distdgl: each system's fit.
        partitions: partitioner -> its fit (the first is the projection's default).
        notes: the assumptions the calibration had to make, one line each.
        runs: the calibration runs.

    Example:
        >>> cal = example_calibration()
        >>> cal.partition(None)[0], cal.grappa.compute_s, cal.to_dict()["distdgl"]["round_trips"]
        ('metis', 0.04, 3)
    """

    name: str = ""
    workload: dict | None = None
    correction: str | None = None
    train_nodes: float
    batch_size: int
    steps_cap: int = 0
    row_bytes: float
    model_bytes: float
    input_rows: float = 0.0
    compute_scale: float = 1.0
    cores_per_host: list[float] = field(default_factory=list)
    grappa: GrappaFit
    distdgl: DistDGLFit
    partitions: dict[str, PartitionFit]
    notes: list[str] = field(default_factory=list)
    runs: list[CalibrationRun] = field(default_factory=list)

    def partition(self, name: str | None) -> tuple[str, PartitionFit]:
        """The named partitioner's fit (the first where None).

        Raises:
            ProjectError: the calibration runs have no such partitioning.
        """
        if name is None:
            name = next(iter(self.partitions))
        if name not in self.partitions:
            raise ProjectError(
                f"project: the calibration runs have no {name!r} partitioning (they have "
                f"{', '.join(self.partitions)}); add a compare run with --partition.method={name} "
                "to --runs"
            )
        return name, self.partitions[name]

    def to_dict(self) -> dict:
        """The calibration as JSON (projection.json's ``calibration``; the fields in their order)."""
        return dataclasses.asdict(self)


def example_calibration(partition: str = "metis", **fields) -> Calibration:
    """A calibration with round numbers, for examples and tests (``fields`` replace its own).

    Example:
        >>> example_calibration("random", steps_cap=5).steps_cap
        5
    """
    q0, rpc = (1.0, 0.14) if partition == "random" else (0.32, 0.06)
    cal = Calibration(
        train_nodes=6e4,
        batch_size=1000,
        row_bytes=256,
        model_bytes=41_280,
        input_rows=42_700,
        grappa=GrappaFit(compute_s=0.04, sample_s=0.004, backward_s=0.02),
        distdgl=DistDGLFit(compute_s=0.05, row_cost_s=5e-6, round_trips=3),
        partitions={partition: PartitionFit(input_rows=42_700, parts0=2, q0=q0, rpc_share=rpc)},
    )
    return dataclasses.replace(cal, **fields)
