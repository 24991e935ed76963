"""The projection (dgl_grappa/bench/project.py): the formula's limits, calibration from hand-made
summaries with known numbers, the check, and the command line's one-line errors."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from dgl_grappa import cli
from dgl_grappa.bench import project as pj
from dgl_grappa.bench.capacity import random_remote_fraction, ring_factor

pytestmark = pytest.mark.unit

GB = 1.25e8  # bytes per second of 1 Gbit/s


def _cal(partition="random", *, prefetch=False, input_rows=20_000, row_bytes=256, q0=1.0, growth=0.0):
    """A calibration with round numbers (as :func:`pj.calibrate_from` returns one)."""
    return pj.Calibration(
        name="x",
        train_nodes=64_000,
        batch_size=1000,
        steps_cap=0,
        row_bytes=row_bytes,
        model_bytes=40_000,
        input_rows=input_rows,
        compute_scale=1.0,
        grappa=pj.GrappaFit(
            compute_s=0.030,
            sample_s=0.010,
            backward_s=0.012,
            prefetch=prefetch,
            corr_bytes=4,
            buckets=1,
            wire_overhead=1.05,
        ),
        distdgl=pj.DistDGLFit(compute_s=0.040, row_cost_s=4e-6, round_trips=4, buckets=1, wire_overhead=1.08),
        partitions={
            partition: pj.PartitionFit(
                parts0=2,
                input_rows=input_rows,
                remote_fraction0=0.3,
                q0=q0,
                growth=growth,
                rpc_share=0.1,
                seed_imbalance=1.0,
            )
        },
    )


# ---------------------------------------------------------------------------------------
# The formula's limits
# ---------------------------------------------------------------------------------------


def test_infinite_bandwidth_and_zero_latency_leave_compute_only():
    cal = _cal()
    for p in (4, 16, 64):
        r = pj.project(cal, p, None, 0.0)
        rows = pj.remote_fraction(cal, p) * cal.input_rows
        assert r["grappa_network_s"] == 0 and r["distdgl_network_s"] == 0
        assert r["grappa_epoch_s"] == pytest.approx(r["grappa_steps"] * 0.030)
        assert r["distdgl_epoch_s"] == pytest.approx(r["distdgl_steps"] * (0.040 + 4e-6 * rows))
        # a fast enough link converges to the same
        fast = pj.project(cal, p, 1e9, 0.0)
        assert fast["distdgl_epoch_s"] == pytest.approx(r["distdgl_epoch_s"], rel=1e-6)
    # and with prefetch the compute is the non-overlapped one's, minus nothing
    r = pj.project(_cal(prefetch=True), 8, None, 0.0)
    assert r["grappa_epoch_s"] == pytest.approx(r["grappa_steps"] * (0.030 - 0.010 - 0.012 + 0.012))


def test_network_time_is_bytes_over_bandwidth_plus_latency_terms():
    cal = _cal()
    p, lat = 8, 100e-6
    g = pj.grappa_step(cal, p, GB, lat)
    assert g["bytes"] == pytest.approx(1.05 * ring_factor(p) * (40_000 + 4))
    assert g["latency_terms"] == 2 * (p - 1)  # one bucket, gloo's ring
    assert g["network_s"] == pytest.approx(g["bytes"] / GB + 2 * (p - 1) * lat)
    d = pj.distdgl_step(cal, p, GB, lat)
    rows = d["remote_rows"]
    assert d["bytes"] == pytest.approx(1.08 * (rows * (256 + 8) * 1.1 + ring_factor(p) * 40_000))
    assert d["latency_terms"] == 2 * 4 + 2 * (p - 1)  # 4 round trips (2 layers, 2 pulls) + the all-reduce
    assert d["network_s"] == pytest.approx(d["bytes"] / GB + d["latency_terms"] * lat)
    assert d["step_s"] == pytest.approx(d["compute_s"] + d["network_s"])  # DistDGL: no overlap
    # a shared link carries every worker's bytes
    shared = pj.grappa_step(cal, p, GB, lat, link="shared")
    assert shared["network_s"] == pytest.approx(p * g["bytes"] / GB + 2 * (p - 1) * lat)


def test_grappa_bytes_do_not_depend_on_the_graph():
    base = pj.grappa_step(_cal(), 16, GB, 50e-6)
    for other in (_cal("metis", q0=0.3), _cal(input_rows=500_000, row_bytes=4096), _cal(input_rows=10)):
        g = pj.grappa_step(other, 16, GB, 50e-6)
        assert g["bytes"] == base["bytes"] and g["step_s"] == base["step_s"]
    # only P moves them, as 2 (P-1) / P
    b = [pj.grappa_step(_cal(), p, GB)["bytes"] for p in (2, 4, 64)]
    assert [x / b[0] for x in b] == pytest.approx([1.0, 1.5, 2 * 63 / 64])


def test_distdgl_grows_with_p_on_random_partitions_as_the_remote_fraction():
    cal = _cal("random")
    parts = [2, 4, 8, 16, 32, 64]
    rho = [pj.remote_fraction(cal, p) for p in parts]
    # every input row but the seeds is remote with probability (P-1)/P
    assert rho == pytest.approx([(p - 1) / p * (20_000 - 1000) / 20_000 for p in parts])
    steps = [pj.distdgl_step(cal, p, GB, 50e-6) for p in parts]
    per_step = [s["step_s"] for s in steps]
    assert per_step == sorted(per_step) and per_step[-1] > per_step[0]
    # its remote rows grow as (P-1)/P: x 2 (2 -> 64 parts: 1/2 -> 63/64)
    assert steps[-1]["remote_rows"] / steps[0]["remote_rows"] == pytest.approx((63 / 64) / (1 / 2))
    # the part of its step beyond the all-reduce (compute and network of remote rows) grows as they do
    ar = [ring_factor(p) * 40_000 * 1.08 / GB + 2 * (p - 1) * 50e-6 for p in parts]
    fixed = 0.040 + 4 * 2 * 50e-6  # compute and round trips, whatever P
    rest = [s["step_s"] - a - fixed for s, a in zip(steps, ar)]
    assert [x / rest[0] for x in rest] == pytest.approx([r / rho[0] for r in rho])
    assert pj.remote_fraction(cal, 1) == 0 and pj.distdgl_step(cal, 1, GB, 50e-6)["network_s"] == 0


def test_structure_aware_remote_fraction_keeps_its_share_or_grows_as_fitted():
    flat = _cal("metis", q0=0.4)
    for p in (2, 8, 64):
        assert pj.remote_fraction(flat, p) == pytest.approx(0.4 * random_remote_fraction(p, 20_000, 1000))
    grow = _cal("metis", q0=0.4, growth=0.5)
    assert pj.remote_fraction(grow, 8) == pytest.approx(0.4 * 2 * random_remote_fraction(8, 20_000, 1000))
    # never above a random partition's
    assert pj.remote_fraction(grow, 64) == pytest.approx(random_remote_fraction(64, 20_000, 1000))


def test_steps_per_epoch_split_the_training_nodes_and_respect_the_cap():
    cal = _cal()
    assert pj.steps_per_epoch(cal, 4, "distdgl") == 16 and pj.steps_per_epoch(cal, 64, "grappa") == 1
    cal.partitions["random"].seed_imbalance = 1.2
    assert pj.steps_per_epoch(cal, 4, "grappa") == math.ceil(1.2 * 16)
    assert pj.steps_per_epoch(cal, 1, "grappa") == 64  # one part: no imbalance
    cal.steps_cap = 5
    assert pj.steps_per_epoch(cal, 4, "distdgl") == 5


def test_prefetch_hides_the_allreduce_behind_sampling():
    on, off = _cal(prefetch=True), _cal()
    slow = 1e5  # bytes per second: the all-reduce takes longer than sampling
    a, b = pj.grappa_step(on, 4, GB)["step_s"], pj.grappa_step(off, 4, GB)["step_s"]
    assert a < b  # sampling (10 ms) overlaps the backward (12 ms) + a short all-reduce
    net = pj.grappa_step(on, 4, slow)["network_s"]
    assert pj.grappa_step(on, 4, slow)["step_s"] == pytest.approx(0.030 - 0.010 + net)


# ---------------------------------------------------------------------------------------
# Calibration from hand-made summaries with known numbers
# ---------------------------------------------------------------------------------------

T, B, M, ROW, LAYERS = 8000, 1000, 40_000, 256, 2


def _link(rate, lat_ms, dilation):
    return {
        "remote": "netns",
        "link": {"mode": "per_host", "bandwidth": rate, "latency_ms": lat_ms},
        "network_dilation": dilation,
        "host_cpu_share": 1.0 / dilation,
    }


def _config(prefetch=False):
    return {
        "model": {"hidden": 64},
        "train": {"fanouts": [10, 25], "batch_size": B, "steps_per_epoch": 0, "prefetch": prefetch},
        "network": {"bandwidth": "", "latency_ms": 0},
    }


def _common(system, parts, partition, epoch, steps, dilation, rate, lat_ms):
    s = {
        "system": system,
        "dataset": "synthetic",
        "model": "sage",
        "num_layers": LAYERS,
        "num_parts": parts,
        "partition_method": partition,
        "steps_per_epoch": steps,
        "epochs": 3,
        "epoch_time_s": epoch,
        "model_grad_bytes": M,
        "config": _config(),
        "network_dilation": dilation,
    }
    if rate is not None or lat_ms:
        s["cluster"] = _link(rate, lat_ms, dilation)
    return s


def _grappa(parts, partition="metis", *, compute=0.02, rate="1gbit", lat_ms=0.1, dilation=1.0, overhead=1.05):
    """A Grappa summary whose step takes ``compute`` + its all-reduce on the given link, dilated."""
    steps = math.ceil(T / parts / B)
    net = 0.0
    if parts > 1:
        bw = float(rate.rstrip("gbit")) * GB if rate else None
        net = (overhead * ring_factor(parts) * M / bw if bw else 0.0) + 2 * (parts - 1) * lat_ms / 1e3
    s = _common("grappa", parts, partition, dilation * steps * (compute + net), steps, dilation, rate, lat_ms)
    app = ring_factor(parts) * M * steps * parts
    s.update(
        {
            "grad_bytes_per_epoch": M * steps,
            "phases": {"sample_s": 0.1, "gather_s": 0.0, "backward_s": 0.2},
            "wire_bytes_per_epoch": overhead * app if parts > 1 else None,
            "app_bytes_per_epoch": app,
            "workers": [{"train_seeds": T // parts, "inner_nodes": 1000, "own_fp32_bytes": 1000 * ROW}] * parts,
        }
    )
    return s


def _distdgl(
    parts,
    partition="metis",
    *,
    inputs=20_000,
    remote=0.3,
    compute=0.05,
    row_cost=0.0,
    rpc=0.1,
    rate="1gbit",
    lat_ms=0.1,
    dilation=1.0,
    overhead=1.08,
):
    """A DistDGL summary: ``inputs`` unique input rows a step, ``remote`` of them remote, its step
    ``compute`` + ``row_cost`` x remote rows + the network on the given link, dilated."""
    steps = math.ceil(math.ceil(T / parts) / B)
    rows = remote * inputs if parts > 1 else 0.0
    feat = rows * (ROW + 8)
    net = 0.0
    if parts > 1:
        bw = float(rate.rstrip("gbit")) * GB if rate else None
        nbytes = overhead * (feat * (1 + rpc) + ring_factor(parts) * M)
        net = (nbytes / bw if bw else 0.0) + (2 * (LAYERS + 2) + 2 * (parts - 1)) * lat_ms / 1e3
    step = compute + row_cost * rows + net
    s = _common("distdgl", parts, partition, dilation * steps * step, steps, dilation, rate, lat_ms)
    app = (feat * (1 + rpc) + ring_factor(parts) * M) * steps * parts
    seeds = T / parts / steps
    s.update(
        {
            "grad_bytes_per_epoch": M * steps,
            "feature_bytes_per_epoch": feat * steps,
            "rpc_bytes_per_epoch": rpc * feat * steps,
            "pull_rows_total": 3 * parts * steps * (inputs + seeds),
            "phases": {"sample_s": 0.1},
            "wire_bytes_per_epoch": overhead * app if parts > 1 else None,
            "app_bytes_per_epoch": app,
            "workers": [{}] * parts,
        }
    )
    return s


def _facts(*summaries):
    return [pj.run_facts(s, None, f"run{i}") for i, s in enumerate(summaries)]


def test_run_facts_read_a_summary_undilated():
    f = pj.run_facts(_distdgl(2, dilation=2.0, lat_ms=0.5))
    assert f["dilation"] == 2.0 and f["cores_per_host"] == 1.0
    assert f["steps"] == 4 and f["step_s"] == pytest.approx(f["epoch_s"] / 4)
    assert f["link"] == {"bandwidth": "1gbit", "bandwidth_Bps": GB, "latency_s": 0.5e-3, "mode": "per_host"}
    assert f["feature_step_bytes"] == pytest.approx(0.3 * 20_000 * 264)
    assert f["pull_rows_step"] == pytest.approx(20_000 + 1000)
    assert f["wire_overhead"] == pytest.approx(1.08) and f["label_pull"]
    g = pj.run_facts(_grappa(2))
    assert g["row_bytes"] == ROW and g["train_seeds"] == [4000, 4000] and g["sample_s"] == pytest.approx(0.1 / 4)
    assert pj.run_facts({**_grappa(2), "system": "distdgl-grappa"}) is None  # the drop-in is neither system
    # without test hosts: the job's one shaped loopback, shared by all workers
    s = _grappa(2, rate=None, lat_ms=0)
    s["config"]["network"]["bandwidth"] = "200mbit"
    assert pj.run_facts(s)["link"]["mode"] == "shared" and pj.run_facts(s)["link"]["bandwidth_Bps"] == 25e6


def test_calibration_recovers_known_numbers_and_gives_the_measured_point_back():
    runs = (_grappa(2, dilation=2.0), _distdgl(2, dilation=2.0))
    cal = pj.calibrate_from(_facts(*runs))
    assert cal.train_nodes == T and cal.batch_size == B and cal.row_bytes == ROW
    assert cal.grappa.compute_s == pytest.approx(0.02)  # dilation and all-reduce taken out
    assert cal.grappa.wire_overhead == pytest.approx(1.05) and cal.grappa.corr_bytes == 0
    d, part = cal.distdgl, cal.partitions["metis"]
    assert d.compute_s == pytest.approx(0.05) and d.row_cost_s == 0  # one remote-row count: not separable
    assert d.round_trips == LAYERS + 2 and d.wire_overhead == pytest.approx(1.08)
    assert part.input_rows == pytest.approx(20_000) and part.remote_fraction0 == pytest.approx(0.3)
    assert part.q0 == pytest.approx(0.3 / random_remote_fraction(2, 20_000, 1000))
    assert part.rpc_share == pytest.approx(0.1) and part.growth == 0
    assert any("not separable" in n for n in cal.notes)
    # what the calibration writes to projection.json: the same fields, as JSON
    saved = json.loads(json.dumps(cal.to_dict()))
    assert list(saved) == [f.name for f in dataclasses.fields(pj.Calibration)]
    assert saved["distdgl"]["round_trips"] == LAYERS + 2 and saved["partitions"]["metis"]["parts0"] == 2
    assert [r["system"] for r in saved["runs"]] == ["grappa", "distdgl"]
    # at the calibration point the projection is the measurement (undilated)
    r = pj.project(cal, 2, 1, 100)
    assert r["grappa_epoch_s"] == pytest.approx(runs[0]["epoch_time_s"] / 2)
    assert r["distdgl_epoch_s"] == pytest.approx(runs[1]["epoch_time_s"] / 2)


def test_calibration_separates_distdgl_row_cost_with_a_one_part_run():
    runs = (
        _grappa(1, rate=None, lat_ms=0),
        _grappa(4),
        _distdgl(1, rate=None, lat_ms=0, row_cost=5e-6),
        _distdgl(4, remote=0.5, row_cost=5e-6),
    )
    cal = pj.calibrate_from(_facts(*runs))
    assert cal.distdgl.compute_s == pytest.approx(0.05)
    assert cal.distdgl.row_cost_s == pytest.approx(5e-6)
    assert cal.grappa.compute_s == pytest.approx(0.02)
    assert list(cal.partitions) == ["metis"] and cal.partitions["metis"].parts0 == 4
    # a given row cost wins over the fit
    assert pj.calibrate_from(_facts(*runs), row_cost_s=1e-6).distdgl.row_cost_s == 1e-6


def test_calibration_fits_a_structure_aware_partitions_growth_from_two_part_counts():
    q2 = 0.2 / random_remote_fraction(2, 20_000, 1000)
    rho4 = 2 * q2 * random_remote_fraction(4, 20_000, 1000)  # q doubled from 2 to 4 parts: a = 1
    runs = (_grappa(2), _grappa(4), _distdgl(2, remote=0.2), _distdgl(4, remote=rho4))
    cal = pj.calibrate_from(_facts(*runs))
    assert cal.partitions["metis"].growth == pytest.approx(1.0)
    assert pj.remote_fraction(cal, 4) == pytest.approx(rho4)
    assert pj.calibrate_from(_facts(*runs), remote_growth=0.25).partitions["metis"].growth == 0.25
    # random partitions follow the formula: no growth beyond (P-1)/P
    rnd = pj.calibrate_from(_facts(_grappa(2, "random"), _distdgl(2, "random", remote=0.45)))
    assert rnd.partitions["random"].growth == 0


def test_calibration_rejects_one_system_and_mixed_workloads():
    with pytest.raises(pj.ProjectError, match="DistDGL summaries but no Grappa one"):
        pj.calibrate_from(_facts(_distdgl(2)))
    with pytest.raises(pj.ProjectError, match="Grappa summaries but no DistDGL one"):
        pj.calibrate_from(_facts(_grappa(2)))
    other = _grappa(2)
    other["model_grad_bytes"] = 2 * M
    with pytest.raises(pj.ProjectError, match="2 different workloads"):
        pj.calibrate_from(_facts(other, _distdgl(2)))
    with pytest.raises(pj.ProjectError, match="every DistDGL run has 1 part"):
        pj.calibrate_from(_facts(_grappa(1), _distdgl(1)))


def test_check_projects_each_run_at_its_own_link_and_divides_by_its_dilation():
    cal = pj.calibrate_from(_facts(_grappa(2, rate=None, lat_ms=0), _distdgl(2, rate=None, lat_ms=0)))
    # "emulated" runs of the same workload: the model's own numbers at 4 parts, 1 Gbit, dilated x2
    rho4 = pj.remote_fraction(cal, 4)
    emu = [_grappa(4, dilation=2.0, overhead=1.05), _distdgl(4, remote=rho4, dilation=2.0, overhead=1.08)]
    cal.grappa.wire_overhead, cal.distdgl.wire_overhead = 1.05, 1.08
    rows = pj.check_rows(cal, _facts(*emu))
    assert [r["system"] for r in rows] == ["grappa", "distdgl"]
    for r, s in zip(rows, emu):
        assert r["measured_epoch_s"] == pytest.approx(s["epoch_time_s"] / 2)
        assert r["error"] == pytest.approx(0.0, abs=1e-9)
        assert r["wire_error"] == pytest.approx(0.0, abs=1e-9)
    text = pj.format_check(rows)
    assert "2 of 2 epochs within 15%" in text
    # a run of another workload is not checked against this calibration
    other = _distdgl(4, remote=rho4)
    other["config"]["data"] = {"name": "synthetic", "synthetic": {"num_nodes": 5}}
    with pytest.raises(pj.ProjectError, match="trains another workload"):
        pj.check_rows(cal, _facts(other))


def test_check_reports_a_run_whose_hosts_computed_slower_than_the_calibration():
    cal = pj.calibrate_from(_facts(_grappa(2, rate=None, lat_ms=0, compute=0.02), _distdgl(2, rate=None, lat_ms=0)))
    # the same step at 4 parts, but its hosts spent 1.3x the CPU seconds on it (time-sliced cores)
    slow = _grappa(4, dilation=2.0, compute=0.026)
    slow["cpu_time_s_rank0"] = 0.026 * slow["steps_per_epoch"]
    cal.grappa.wire_overhead = 1.05
    (r,) = pj.check_rows(cal, _facts(slow))
    assert r["cpu_ratio"] == pytest.approx(1.3)
    assert r["error"] < -0.15  # the projection, at the calibration's compute, is short of it
    assert r["error_at_run_cpu"] == pytest.approx(0.0, abs=1e-9)  # and exact at the run's own
    text = pj.format_check([r])
    assert "1.30x" in text and "spent 1.30x the calibration's compute" in text
    # a run that did not record CPU seconds has no such figure
    (plain,) = pj.check_rows(cal, _facts(_grappa(4, dilation=2.0)))
    assert plain["cpu_ratio"] is None and plain["error_at_run_cpu"] is None


def test_grappa_is_calibrated_on_one_correction():
    batch = _grappa(2, compute=0.5)
    batch["correction"] = "batch"
    none = _grappa(2)
    none["correction"] = "none"
    cal = pj.calibrate_from(_facts(batch, none, _distdgl(2)))
    assert cal.correction == "none" and cal.grappa.compute_s == pytest.approx(0.02)
    assert any("correction=none" in n for n in cal.notes)
    # the check leaves the other variant out
    rows = pj.check_rows(cal, _facts(batch, none))
    assert len(rows) == 1


# ---------------------------------------------------------------------------------------
# Files and the command line
# ---------------------------------------------------------------------------------------


def _write(folder: Path, **summaries) -> Path:
    for name, s in summaries.items():
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "summary.json").write_text(json.dumps(s))
    return folder


def test_find_summaries_reads_a_compare_folder_and_skips_segments(tmp_path):
    run = _write(tmp_path / "cmp", distdgl=_distdgl(2), **{"grappa-none": _grappa(2)})
    _write(run / "distdgl" / "segments", **{"0": _distdgl(2)})  # a restart segment of the DistDGL run
    found = pj.find_summaries([run])
    assert sorted(p.name for p, _, _ in found) == ["distdgl", "grappa-none"]
    assert len(pj.find_summaries([run / "distdgl" / "summary.json"])) == 1


def test_cli_prints_the_table_and_writes_json(tmp_path, capsys):
    run = _write(tmp_path / "cmp", distdgl=_distdgl(2), **{"grappa-none": _grappa(2)})
    assert cli.main(["project", "--runs", str(run), "--parts", "4,8", "--gbit", "1,10", "--latency-us", "50"]) == 0
    out = capsys.readouterr().out
    assert "metis partitions" in out and "speedup" in out
    data = json.loads((run / "projection.json").read_text())
    assert [(r["parts"], r["gbit"]) for r in data["projection"]] == [(4, 1), (4, 10), (8, 1), (8, 10)]
    assert all(r["speedup"] > 1 for r in data["projection"])
    # check mode: the calibration's own runs come back exactly
    assert cli.main(["project", "--runs", str(run), "--check", str(run), "--out", str(tmp_path / "c.json")]) == 0
    rows = json.loads((tmp_path / "c.json").read_text())["check"]
    assert len(rows) == 2 and all(abs(r["error"]) < 1e-9 for r in rows)


def _error(capsys, argv) -> str:
    assert cli.main(argv) == 2
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dgl_grappa: error: ")
    return lines[0].removeprefix("dgl_grappa: error: ")


def test_cli_errors_are_one_line_with_the_fix(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    msg = _error(capsys, ["project", "--runs", str(empty)])
    assert msg.startswith(f"project: no summary.json under '{empty}'") and "compare" in msg
    only = _write(tmp_path / "only", distdgl=_distdgl(2))
    msg = _error(capsys, ["project", "--runs", str(only)])
    assert "has DistDGL summaries but no Grappa one" in msg and "compare run" in msg
    assert "does not exist" in _error(capsys, ["project", "--runs", str(tmp_path / "nope")])
    both = _write(tmp_path / "both", distdgl=_distdgl(2), grappa=_grappa(2))
    assert "--parts='4,x' is not a comma-separated list" in _error(
        capsys, ["project", "--runs", str(both), "--parts", "4,x"]
    )
    assert "--gbit='0' must be > 0" in _error(capsys, ["project", "--runs", str(both), "--gbit", "0"])
    assert "no 'random' partitioning" in _error(capsys, ["project", "--runs", str(both), "--partition", "random"])
    assert "config file 'x.yaml' does not exist" in _error(
        capsys, ["project", "--config", "x.yaml", "--runs", str(both)]
    )
    assert "no calibration runs; pass compare run folders with --runs" in _error(capsys, ["project"])
    assert "unknown option '--bogus'" in _error(capsys, ["project", "--runs", str(both), "--bogus", "1"])
    assert "unknown option '--project.nope'" in _error(capsys, ["project", "--runs", str(both), "--project.nope=1"])
    assert "project.target='x' is not a number" in _error(capsys, ["project", "--runs", str(both), "--target", "x"])
    assert "--resume applies to train" in _error(capsys, ["project", "--resume", "--runs", str(both)])
    train = tmp_path / "train.yaml"
    train.write_text("train:\n  epochs: 3\nproject:\n  runs: [x]\n")
    assert "must hold a project: section of options and nothing else (it has train)" in _error(
        capsys, ["project", "--config", str(train)]
    )
    train.write_text("project:\n  runs: [x]\n  nope: 1\n")
    assert "unknown key project.nope" in _error(capsys, ["project", "--config", str(train)])
    bad = tmp_path / "bad" / "summary.json"
    bad.parent.mkdir()
    bad.write_text("{not json")
    assert "is not a run's summary.json" in _error(capsys, ["project", "--runs", str(bad.parent)])
    assert not (both / "projection.json").exists()  # nothing written on an error


def test_the_options_are_one_setting_however_spelled(tmp_path, capsys):
    """A short flag, its --project.<key>=<value> override and the --config file's project: section
    are the same setting (last wins), and the same options give the same projection, byte for byte."""
    run = _write(tmp_path / "cmp", distdgl=_distdgl(2), **{"grappa-none": _grappa(2)})
    assert (
        cli.main(
            [
                "project",
                "--runs",
                str(run),
                "--parts",
                "4,8",
                "--gbit",
                "10",
                "--latency-us",
                "5,50",
                "--remote-growth",
                "0.3",
                "--out",
                str(tmp_path / "flags.json"),
            ]
        )
        == 0
    )
    flags = capsys.readouterr().out.replace("flags.json", "X")
    assert (
        cli.main(
            [
                "project",
                f"--project.runs=[{run}]",
                "--project.parts=[4,8]",
                "--project.gbit=10",
                "--project.latency_us",
                "5,50",
                "--project.remote_growth=0.3",
                f"--project.out={tmp_path / 'overrides.json'}",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.replace("overrides.json", "X") == flags
    cfg = tmp_path / "project.yaml"
    cfg.write_text(
        f"project:\n  runs: [{run}]\n  parts: [4, 8]\n  gbit: [1]\n  latency_us: [5, 50]\n"
        f"  remote_growth: 0.3\n  out: {tmp_path / 'file.json'}\n"
    )
    assert cli.main(["project", "--config", str(cfg), "--gbit", "10"]) == 0  # the command line wins
    assert capsys.readouterr().out.replace("file.json", "X") == flags
    texts = {n: (tmp_path / f"{n}.json").read_text() for n in ("flags", "overrides", "file")}
    assert texts["flags"] == texts["overrides"] == texts["file"]
    # repeated --runs add up; a none-like value clears an optional number
    opts = pj.load_options(None, ["--runs", "a", "--runs", "b", "c", "--project.remote_growth=none"])
    assert opts.runs == ["a", "b", "c"] and opts.remote_growth is None and opts.parts == [4, 8, 16, 32, 64]
