"""Projection: each system's epoch time on clusters this machine cannot emulate, calibrated on runs made here.

``python -m dgl_grappa project --runs RUN_DIR`` reads the summaries of ``compare`` runs
(both systems), takes from them what a step costs each system in compute and what it puts
on the wire, and projects the epoch time of DistDGL and Grappa at P machines (one worker
and one NIC each) with a link of B bytes per second per machine and a one-way latency L.
docs/projection.md is the user's page; the formulas, per worker and step:

* Grappa:  ``t_G = c_G + o_G x 2 (P-1)/P x (M + c) / B + k x 2 (P-1) x L``
  (one ring all-reduce of the M gradient bytes and the c correction bytes in k DDP
  buckets; with ``train.prefetch`` the next batch's sampling s_G runs during the backward
  pass b_G and the all-reduce: ``t_G = c_G - s_G - b_G + max(b_G + net, s_G)``).
* DistDGL: ``t_D = c_D + c_row x R + o_D x [R (4F + 8)(1 + r) + 2 (P-1)/P x M] / B
  + 2 (l + q) x L + k x 2 (P-1) x L``, R = rho(P) x I remote input rows (I unique
  input rows a step, rho the share another machine owns), r the sampling RPC bytes per
  feature byte, l sampling round trips (one per layer) and q feature and label pulls; no
  overlap (the trainer samples, pulls, computes and all-reduces one after the other).
* epoch = S(P) x t, S(P) = ceil(T / (P B_s)) steps (T training nodes, B_s the batch; Grappa
  times its measured seed imbalance), capped by ``train.steps_per_epoch``.

The bytes are :mod:`dgl_grappa.bench.capacity`'s (:func:`~dgl_grappa.bench.capacity.grappa_step_bytes`,
:func:`~dgl_grappa.bench.capacity.distdgl_step_bytes`), o_G and o_D the measured wire bytes
per application byte (TCP/IP framing). rho(P) for a random partition follows
:func:`~dgl_grappa.bench.capacity.random_remote_fraction` through the measured point; for a
structure-aware one (METIS, LDG) it keeps the measured share of a random partition's remote
rows, times (P / P0)^a (a = 0 unless runs at two part counts fit it, or ``--remote-growth``).

Calibration (:func:`calibrate`, a :class:`Calibration` with one fit per system): c_G and
c_D + c_row R are each run's measured step time
(divided by its ``network_dilation``) minus the model's network time at that run's own P,
link and latency, so a projection at a calibration run's point gives its measured time
back. c_G is kept per calibrated part count and interpolated in log P (a worker's part, and
with it its step, shrinks with P on graphs not much larger than a batch's input rows); with
DistDGL runs at different remote rows per step (a 1-part run, two part counts, or two
partitioners) c_D and c_row are fitted by least squares, else c_row = 0.

The package by job: :mod:`.calibration` (the dataclasses), :mod:`.model` (the formulas, pure
functions of a calibration), :mod:`.fit` (a run's facts, the fits), :mod:`.check` (against
emulated runs), :mod:`.text` (what the terminal shows) and :mod:`.command` (the command).
"""

from __future__ import annotations

from .calibration import (
    Calibration,
    CalibrationRun,
    DistDGLFit,
    GrappaFit,
    PartitionFit,
    ProjectError,
    example_calibration,
)
from .check import TARGET, check, check_rows
from .command import ProjectOptions, cmd_project, load_options
from .fit import SYSTEMS, calibrate, calibrate_from, find_summaries, fit_distdgl, fit_grappa, fit_partitions, run_facts
from .model import (
    BUCKET_BYTES,
    FIRST_BUCKET_BYTES,
    GBIT,
    ddp_buckets,
    distdgl_step,
    grappa_compute,
    grappa_step,
    link_seconds,
    project,
    project_grid,
    remote_fraction,
    seeds_per_step,
    steps_per_epoch,
)
from .text import format_calibration, format_check, format_table

__all__ = [
    "BUCKET_BYTES",
    "FIRST_BUCKET_BYTES",
    "GBIT",
    "SYSTEMS",
    "TARGET",
    "Calibration",
    "CalibrationRun",
    "DistDGLFit",
    "GrappaFit",
    "PartitionFit",
    "ProjectError",
    "ProjectOptions",
    "calibrate",
    "calibrate_from",
    "check",
    "check_rows",
    "cmd_project",
    "ddp_buckets",
    "distdgl_step",
    "example_calibration",
    "find_summaries",
    "fit_distdgl",
    "fit_grappa",
    "fit_partitions",
    "format_calibration",
    "format_check",
    "format_table",
    "grappa_compute",
    "grappa_step",
    "link_seconds",
    "load_options",
    "project",
    "project_grid",
    "remote_fraction",
    "run_facts",
    "seeds_per_step",
    "steps_per_epoch",
]
