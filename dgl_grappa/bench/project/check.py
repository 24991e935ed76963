"""The check: the projection against emulated runs, each at its own P, link and latency (``project --check``)."""

from __future__ import annotations

from pathlib import Path

from .calibration import Calibration, DistDGLFit, GrappaFit, PartitionFit, ProjectError  # noqa: F401 (examples)
from .fit import facts_under
from .model import GBIT, grappa_compute, project

TARGET = 0.15
"""The check's target: projected epoch within 15 % of the measured one."""


def check(cal: Calibration, paths: list[str | Path]) -> list[dict]:
    """:func:`check_rows` for every run under ``paths`` (compare folders of emulated runs).

    Example:
        >>> rows = check(cal, ["runs/emulated-p4-1gbit"])             # doctest: +SKIP
        >>> print(format_check(rows))                                 # doctest: +SKIP
    """
    return check_rows(cal, facts_under(paths))


def check_rows(cal: Calibration, facts: list[dict]) -> list[dict]:
    """Projected against measured epoch (and wire bytes) of runs (:func:`run_facts`), each at its own P, link, L.

    Measured times are divided by the run's ``network_dilation`` (as :func:`run_facts` does).

    Returns:
        Per run: ``where``, ``system``, ``parts``, ``partition``, ``bandwidth``, ``latency_ms``,
        ``link``, ``dilation``, ``cores_per_host``, ``measured_epoch_s``, ``projected_epoch_s``,
        ``error`` ((projected - measured) / measured), ``measured_wire``, ``projected_wire``
        (all hosts, per epoch) and ``wire_error``; for Grappa ``cpu_ratio``, the run's CPU
        seconds a step over the calibrated compute a step at its P (above 1: its hosts computed
        the same step slower than the calibration's worker on a core of its own, e.g. hosts
        time-slicing a core), and ``error_at_run_cpu``, the error with the projection's
        compute scaled by it (None without CPU seconds).

    Example:
        >>> cal = Calibration(train_nodes=4000, batch_size=1000, row_bytes=256, model_bytes=1000,
        ...                   grappa=GrappaFit(compute_s=0.02), distdgl=DistDGLFit(compute_s=0.05, round_trips=4),
        ...                   partitions={"metis": PartitionFit(input_rows=9000, q0=0.5)})
        >>> f = {"system": "grappa", "where": "emu", "parts": 2, "partition": "metis", "epoch_s": 0.05,
        ...      "dilation": 2.0, "cores_per_host": 1.0, "wire_bytes_per_epoch": None,
        ...      "link": {"bandwidth": None, "bandwidth_Bps": None, "latency_s": 0.0, "mode": "per_host"}}
        >>> round(check_rows(cal, [f])[0]["error"], 3)     # 2 steps x 20 ms against 50 ms measured
        -0.2
    """
    rows = []
    for f in facts:
        if f["system"] == "grappa" and cal.correction and f.get("correction") != cal.correction:
            continue  # another Grappa variant of the compare run: not what was calibrated
        if cal.workload is not None and f["workload"] != cal.workload:
            raise ProjectError(
                f"project: '{f['where']}' trains another workload than the calibration runs (data, "
                f"model, fan-outs, batch or width differ); pass --check runs of the calibrated workload"
            )
        ln = f["link"]
        gbit = ln["bandwidth_Bps"] / GBIT if ln["bandwidth_Bps"] else None
        r = project(cal, f["parts"], gbit, ln["latency_s"] * 1e6, partition=f["partition"], link=ln["mode"])
        proj = r[f"{f['system']}_epoch_s"]
        cpu_ratio = at_run_cpu = None
        if f["system"] == "grappa" and f.get("cpu_step_s"):
            # Only Grappa's compute is one process's CPU (DistDGL's servers do part of its work).
            compute = grappa_compute(cal, f["parts"]) * cal.compute_scale
            cpu_ratio = f["cpu_step_s"] / compute
            adjusted = proj + (cpu_ratio - 1.0) * compute * r["grappa_steps"]
            at_run_cpu = (adjusted - f["epoch_s"]) / f["epoch_s"] if f["epoch_s"] else None
        wire = f["wire_bytes_per_epoch"]
        pwire = r[f"{f['system']}_bytes_per_epoch"] * f["parts"]
        rows.append(
            {
                "where": f["where"],
                "system": f["system"],
                "parts": f["parts"],
                "partition": f["partition"],
                "bandwidth": ln["bandwidth"],
                "latency_ms": ln["latency_s"] * 1e3,
                "link": ln["mode"],
                "dilation": f["dilation"],
                "cores_per_host": f["cores_per_host"],
                "measured_epoch_s": f["epoch_s"],
                "projected_epoch_s": proj,
                "error": (proj - f["epoch_s"]) / f["epoch_s"] if f["epoch_s"] else None,
                "measured_wire": wire,
                "projected_wire": pwire,
                "wire_error": (pwire - wire) / wire if wire else None,
                "cpu_ratio": cpu_ratio,
                "error_at_run_cpu": at_run_cpu,
            }
        )
    return rows
