"""The benchmark harness: statistics and reports on hand-made cells, the matrix expansion,
partition.seed, and one tiny real sweep (DistDGL + Grappa + a failing system) that resumes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from clitools import run_cli

from dgl_grappa.bench import plan as planning
from dgl_grappa.bench import report as br
from dgl_grappa.bench import staleness, storage
from dgl_grappa.bench.execute import derive_metrics
from dgl_grappa.bench.matrix import load_bench
from dgl_grappa.bench.plan import expand, parse_system
from dgl_grappa.config import ConfigError, PartitionConfig, config_changes, load_config, parse_pairs

# ---------------------------------------------------------------------------------------
# Hand-made cells
# ---------------------------------------------------------------------------------------


def _cell(
    seed,
    layers,
    accs,
    *,
    dataset="syn",
    partition="random",
    parts=4,
    model="sage",
    bw="",
    bytes_=None,
    epoch=None,
    floor=None,
    status=None,
):
    """A cell JSON as the bench writes it, with only what the reports read."""
    axes = {
        "dataset": dataset,
        "dataset_config": f"configs/bench/{dataset}.yaml",
        "data_name": "synthetic",
        "partition": partition,
        "parts": parts,
        "model": model,
        "layers": layers,
        "fanouts": [10] * layers,
        "bandwidth": bw,
        "seed": seed,
    }
    systems = {}
    for name, acc in accs.items():
        m = {
            "test_acc": acc,
            "bytes_per_epoch_amortised": (bytes_ or {}).get(name, 1000.0),
            "epoch_time_s": (epoch or {}).get(name, 1.0),
            "train_time_s": 10 * (epoch or {}).get(name, 1.0),
            "edge_cut": 0.75,
        }
        if floor and name in floor:
            m["floor_s"] = floor[name]
        systems[name] = {"status": (status or {}).get(name, "ok"), "metrics": m, "reason": "boom"}
    cid = f"{dataset}-{partition}-p{parts}-{model}-l{layers}-{bw or 'unshaped'}-s{seed}"
    return {
        "cell_id": cid,
        "axes": axes,
        "systems": systems,
        "config": {"train": {"epochs": 3}},
        "partition": {"num_nodes": 100},
    }


@pytest.mark.unit
def test_t_interval_matches_scipy():
    from scipy import stats

    xs = [0.5, -1.2, 2.0, 0.1]
    m, lo, hi = br.t_interval(xs)
    ref = stats.t.interval(0.95, len(xs) - 1, loc=np.mean(xs), scale=stats.sem(xs))
    assert m == pytest.approx(np.mean(xs))
    assert (lo, hi) == pytest.approx(ref)
    assert br.t_interval([1.5]) == (1.5, None, None)
    assert br.t_interval([]) == (None, None, None)


@pytest.mark.unit
def test_a_cell_is_read_once_into_a_typed_result_that_the_rows_take_as_the_json():
    cells = [_cell(s, 2, {"distdgl": 0.80, "grappa": 0.79 + s / 100}) for s in range(3)]
    results = [br.read_result(c) for c in cells]
    r = results[0]
    assert isinstance(r, br.CellResult) and r.task is br.TASKS["node"] and r.cell_id == cells[0]["cell_id"]
    assert r.finished["grappa"][br.ACC_KEY] == pytest.approx(0.79) and r.finished["grappa"]["time_to_target_s"] is None
    assert br.ok_systems(cells[0]) == r.finished
    assert br.accuracy_rows(results) == br.accuracy_rows(cells) and br.speed_rows(results) == br.speed_rows(cells)
    # a failed run is a stored entry, not a finished one
    failed = br.read_result(_cell(0, 2, {"distdgl": 0.8, "grappa": 0.8}, status={"grappa": "failed"}))
    assert list(failed.finished) == ["distdgl"] and failed.systems["grappa"]["status"] == "failed"


@pytest.mark.unit
def test_the_task_table_holds_what_differs_between_node_and_link_rows():
    node, link = br.TASKS["node"], br.TASKS["link"]
    assert (node.val_key, node.test_key, link.val_key, link.test_key) == ("val_acc", "test_acc", "val_mrr", "test_mrr")
    assert node.met(-1.0, 2) and not node.met(-0.01, 3) and node.met(None, 2) is None  # the accuracy goal
    assert link.met(-2.0, 3) and not link.met(-2.01, 2)  # the link goal, any depth
    assert (node.pair_points, link.pair_points) == (br.PAIR_POINTS, br.LINK_POINTS)
    assert (node.loss_points, link.loss_points) == (br.LOSS_POINTS, br.LINK_POINTS)
    assert (node.show(0.81234), link.show(0.81234), node.show(None)) == ("81.23", "0.8123", "-")
    assert br.QUALITY_KEYS == {"node": ("val_acc", "test_acc"), "link": ("val_mrr", "test_mrr")}


@pytest.mark.unit
def test_accuracy_rows_paired_differences_and_goal_marks():
    cells = []
    for s, (b, g2, g3) in enumerate([(0.80, 0.795, 0.795), (0.82, 0.81, 0.815), (0.81, 0.80, 0.80)]):
        cells.append(_cell(s, 2, {"distdgl": b, "grappa": g2}, bytes_={"distdgl": 1e6, "grappa": 1e4}))
        cells.append(_cell(s, 3, {"distdgl": b, "grappa": g3}, bytes_={"distdgl": 1e6, "grappa": 2e5}))
    rows = br.accuracy_rows(cells)
    assert [(r["layers"], r["system"]) for r in rows] == [(2, "distdgl"), (2, "grappa"), (3, "distdgl"), (3, "grappa")]
    g2, g3 = rows[1], rows[3]
    d2 = [(0.795 - 0.80) * 100, (0.81 - 0.82) * 100, (0.80 - 0.81) * 100]
    assert (g2["diff_mean"], g2["diff_lo"], g2["diff_hi"]) == pytest.approx(br.t_interval(d2))
    assert g2["seeds"] == g2["paired"] == 3 and g2["acc_std"] == pytest.approx(np.std([0.795, 0.81, 0.80], ddof=1))
    assert g2["met"] is True  # -0.83 points >= -1 at 2 layers
    assert g3["met"] is False  # -0.67 points < 0 at 3 layers
    assert g2["bytes_ratio"] == pytest.approx(0.01) and rows[0]["met"] is None
    md = br.accuracy_table(rows)
    assert "| syn | random | 4 | sage | 2 | grappa | 3 |" in md and "**not met**" in md and "(reference)" in md
    goals = br.accuracy_goals(rows)
    assert goals[0]["met"] is False and "1 of 2 rows met" in goals[0]["figure"]
    # the stricter goal: within 0.5 points in every row, not below DistDGL pooled at 3-4 layers
    assert goals[1]["met"] is False and "0 of 2 rows within 0.5" in goals[1]["figure"]
    assert "3-4 layers pooled -0.67" in goals[1]["figure"]
    assert goals[2]["met"] is None and goals[2]["figure"] == "not measured"  # no memory figures in these cells
    assert goals[3]["met"] is False and "0.2000" in goals[3]["figure"]  # 2e5 / 1e6 on the synthetic graph
    assert goals[4]["met"] is True and "no run repartitioned" in goals[4]["figure"]  # schedule.k = 0: no stall


@pytest.mark.unit
def test_memory_columns_and_goal_read_new_and_old_runs():
    """New runs report resident_ratio_max; runs from before the budget held fp32 rows: rows_per_inner_max."""
    cells = [_cell(s, 2, {"distdgl": 0.80, "grappa": 0.80}) for s in range(2)]
    for c, (held, old) in zip(cells, ((1.4, None), (None, 1.6))):
        m = c["systems"]["grappa"]["metrics"]
        m.update({"resident_ratio_max": held, "rows_per_inner_max": old, "peak_rss_bytes_max": 2e9})
        c["systems"]["distdgl"]["metrics"].update({"resident_ratio_max": 1.0, "machine_peak_rss_bytes_max": 3e9})
    rows = br.accuracy_rows(cells)
    g = next(r for r in rows if r["system"] == "grappa")
    assert g["held_ratio"] == pytest.approx(1.5) and g["held_ratio_max"] == pytest.approx(1.6)
    assert g["peak_rss"] == 2e9 and rows[0]["peak_rss"] == 3e9
    memory = br.accuracy_goals(rows)[2]
    assert memory["met"] is False and memory["figure"].startswith("largest 1.600")
    cells[1]["systems"]["grappa"]["metrics"]["resident_ratio_max"] = 1.2  # a new run's figure wins over the rows
    assert br.accuracy_goals(br.accuracy_rows(cells))[2]["met"] is True
    assert "| 1.30 |" in br.accuracy_table(br.accuracy_rows(cells))


@pytest.mark.unit
def test_one_time_bytes_are_graded_in_distdgl_epochs_on_sparse_label_graphs():
    """One-time bytes over DistDGL's bytes per epoch, per seed; graded only where <= 1 % of the nodes are labelled."""

    def cells(frac, once):
        out = [_cell(s, 2, {"distdgl": 0.8, "grappa": 0.8}) for s in range(2)]
        for c, o in zip(out, once):
            c["config"]["data"] = {"name": "synthetic", "synthetic": {"train_frac": frac}}
            c["systems"]["distdgl"]["metrics"]["bytes_per_epoch"] = 1000.0
            c["systems"]["grappa"]["metrics"]["one_time_bytes"] = o
        return out

    def goal(cs):
        return next(g for g in br.accuracy_goals(br.accuracy_rows(cs)) if g["goal"].startswith("one-time bytes"))

    g = next(r for r in br.accuracy_rows(cells(0.01, [400.0, 800.0])) if r["system"] == "grappa")
    assert g["one_time_epochs"] == pytest.approx(0.6) and g["label_frac"] == 0.01
    assert goal(cells(0.01, [400.0, 800.0]))["met"] is True
    assert goal(cells(0.01, [1400.0, 1000.0]))["met"] is False  # 1.2 DistDGL epochs
    dense = goal(cells(0.6, [5000.0, 5000.0]))  # shown, not graded
    assert dense["met"] is None and "every row: median 5.00" in dense["figure"]


@pytest.mark.unit
def test_convergence_compares_the_last_fifth_of_the_epochs_with_the_fifth_before():
    def recs(vals):  # evaluated every 2nd epoch of 20
        return [{"epoch": e, **({"val_acc": vals[e // 2]} if e % 2 else {})} for e in range(20)]

    flat = br.convergence(recs([0.1, 0.5, 0.7, 0.8, 0.80, 0.81, 0.80, 0.805, 0.81, 0.80]))
    assert flat["converged"] and abs(flat["rise_points"]) < 1
    rising = br.convergence(recs([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.65, 0.70, 0.75, 0.80]))
    assert not rising["converged"] and rising["rise_points"] == pytest.approx(10.0)
    assert br.convergence(recs([0.5, 0.6, 0.7, 0.8, 0.9, 0.9, 0.9, 0.9, 0.7, 0.7]))["converged"]  # past its peak
    assert br.convergence([{"epoch": 0}, {"epoch": 1, "val_acc": 0.5}]) is None  # one window only
    cells = [_cell(0, 2, {"distdgl": 0.8, "grappa": 0.8})]
    cells[0]["systems"]["grappa"]["records"] = recs([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.65, 0.70, 0.75, 0.80])
    rows = br.accuracy_rows(cells)
    assert rows[1]["converged"] == (0, 1) and rows[0]["converged"] == (0, 0)
    assert br.accuracy_table(rows).splitlines()[-1].endswith("| 0/1 |")


@pytest.mark.unit
def test_a_seed_without_its_distdgl_run_is_not_paired():
    cells = [
        _cell(0, 2, {"distdgl": 0.8, "grappa": 0.7}),
        _cell(1, 2, {"distdgl": 0.8, "grappa": 0.9}, status={"distdgl": "failed"}),
    ]
    (base, g) = br.accuracy_rows(cells)
    assert base["seeds"] == 1 and g["seeds"] == 2 and g["paired"] == 1
    assert g["diff_mean"] == pytest.approx(-10.0) and g["diff_lo"] is None


@pytest.mark.unit
def test_coverage_counts_done_partial_failed_stale_and_outside():
    plan_cells = {}
    for s in range(4):
        c = _cell(s, 2, {})
        plan_cells[c["cell_id"]] = {"axes": c["axes"], "systems": ["distdgl", "grappa"]}
    plan = {
        "cells": plan_cells,
        "axes": {
            "dataset": ["syn"],
            "partition": ["random"],
            "parts": [4],
            "model": ["sage"],
            "layers": [2],
            "bandwidth": [""],
            "seed": [0, 1, 2, 3],
        },
    }
    cells = [
        _cell(0, 2, {"distdgl": 0.8, "grappa": 0.8}),  # done
        _cell(1, 2, {"distdgl": 0.8, "grappa": 0.8}, status={"grappa": "failed"}),  # partial, 1 failed
        _cell(2, 2, {"distdgl": 0.8, "grappa": 0.8}, status={"distdgl": "stale"}),  # partial, 1 stale
        _cell(0, 2, {"distdgl": 0.8}, model="gcn"),
    ]  # outside the matrix
    cov = br.coverage(cells, plan)
    assert (cov["cells_total"], cov["cells_done"], cov["cells_partial"]) == (4, 1, 2)
    assert (cov["runs_total"], cov["runs_ok"], cov["runs_failed"], cov["runs_stale"]) == (8, 4, 1, 1)
    assert cov["outside"] == ["syn-random-p4-gcn-l2-unshaped-s0"]
    assert cov["axes"]["seed"] == {"configured": [0, 1, 2, 3], "done": [0]}
    assert cov["failed"] == [("syn-random-p4-sage-l2-unshaped-s1", "grappa", "boom")]
    assert cov["systems"] == {"distdgl": [2, 4], "grappa": [2, 4]}
    text = br.coverage_text(cov)
    assert "**1 of 4**" in text and "failed 1" in text and "outside this matrix" in text
    assert "ran in: distdgl 2 of 4, grappa 2 of 4" in text
    # a partial system (run on a subset on purpose) does not keep a cell from being done
    for p in plan_cells.values():
        p["systems"] = ["distdgl", "grappa", "old"]
    cells[0]["systems"]["old"] = {"status": "ok"}
    cov = br.coverage(cells, dict(plan, partial=["old"]))
    assert (cov["cells_done"], cov["runs_total"], cov["runs_ok"], cov["systems"]["old"]) == (1, 8, 4, [1, 4])
    assert "old 1 of 4 (partial: run on a subset)" in br.coverage_text(cov)
    cov = br.coverage(cells, plan)  # without the mark its missing runs count
    assert (cov["cells_done"], cov["runs_total"], cov["runs_ok"]) == (1, 12, 5)
    # the tables show only cells of the matrix, and only finished runs
    rows = br.accuracy_rows(cells, plan)
    assert {r["model"] for r in rows} == {"sage"}
    assert next(r for r in rows if r["system"] == "distdgl")["seeds"] == 2


@pytest.mark.unit
def test_speed_rows_mark_a_speedup_that_loses_accuracy_and_show_floors_only_when_measured():
    cells = [
        _cell(
            0,
            2,
            {"distdgl": 0.80, "grappa": 0.77},
            bw="1gbit",
            epoch={"distdgl": 2.0, "grappa": 0.4},
            bytes_={"distdgl": 4e6, "grappa": 5e4},
        ),
        _cell(0, 3, {"distdgl": 0.80, "grappa": 0.80}, bw="1gbit", epoch={"distdgl": 3.0, "grappa": 0.5}),
    ]
    rows = br.speed_rows(cells)
    g2, g3 = rows[1], rows[3]
    assert g2["speedup"] == pytest.approx(5.0) and g2["bytes_ratio"] == pytest.approx(5e4 / 4e6)
    assert g2["loses_accuracy"] is True and g3["loses_accuracy"] is False
    md = br.speed_table(rows)
    assert "**loses accuracy** (-3.00 points)" in md and "epoch / floor" not in md
    goals = br.speed_goals(rows)
    assert goals[0]["met"] is True and "mean 6.00x" in goals[0]["figure"] and "1 rows that lose" in goals[0]["figure"]
    assert goals[1]["met"] is False and goals[3]["met"] is None
    # without the one-time bytes: the wire bytes per epoch alone
    cells[0]["systems"]["distdgl"]["metrics"]["bytes_per_epoch"] = 4e6
    cells[0]["systems"]["grappa"]["metrics"]["bytes_per_epoch"] = 2e4
    row = br.speed_rows(cells)[1]
    assert row["steady_bytes_ratio"] == pytest.approx(2e4 / 4e6)
    bytes_goal = [g for g in br.speed_goals([row]) if "1/40" in g["goal"]][0]
    assert "without them (every later epoch) worst 0.0050 (1/200), 1 of 1 rows <= 1/40" in bytes_goal["figure"]
    cells[1]["systems"]["grappa"]["metrics"]["floor_s"] = 0.4
    rows = br.speed_rows(cells)
    assert rows[3]["floor_ratio"] == pytest.approx(1.25) and rows[1]["floor_ratio"] is None
    assert "epoch / floor" in br.speed_table(rows)
    assert br.speed_goals(rows)[3]["met"] is False


@pytest.mark.unit
def test_phase_table_gives_each_phase_its_share_of_the_epoch_and_skips_runs_without_phases():
    cells = [_cell(0, 2, {"distdgl": 0.8, "grappa": 0.8}), _cell(1, 2, {"distdgl": 0.8, "grappa": 0.8})]
    for c, gather in zip(cells, (0.2, 0.4)):  # DistDGL's gather differs by seed: the row averages it
        c["systems"]["distdgl"]["summary"] = {
            "phases": {
                "sample_s": 0.3,
                "gather_s": gather,
                "forward_s": 0.2,
                "backward_s": 0.2,
                "allreduce_s": 0.0,
                "optimizer_s": 0.0,
                "other_s": 0.0,
                "wait_s": 0.1,
                "overlap_s": 0.0,
            }
        }
    cells[0]["systems"]["grappa"]["summary"] = {"phases": {"forward_s": 0.5, "allreduce_s": 0.5}}
    rows = br.speed_rows(cells)
    assert rows[0]["phases"]["gather_s"] == pytest.approx(0.3)
    assert rows[1]["phases"] == {}  # only one of the two grappa runs has phases: none shown
    md = br.phase_table(rows)
    line = [ln for ln in md.splitlines() if "| distdgl |" in ln][0]
    # 0.3 + 0.3 + 0.2 + 0.2 + 0.1 = 1.1 s: sample 27 %, gather 27 %, forward 18 %, backward 18 %, wait 9 %
    assert "| 1.100 s | 27 | 27 | 18 | 18 | 0 | 0 | 0 | 9 |" in line
    assert "| grappa |" not in md


@pytest.mark.unit
@pytest.mark.parametrize("kind", ["accuracy", "speed"])
def test_write_report_regenerates_markdown_and_plots(tmp_path, kind):
    cells = [_cell(s, layers, {"distdgl": 0.8, "grappa": 0.79 + s / 100}) for s in range(2) for layers in (2, 3)]
    path = tmp_path / "docs" / "acc.md"
    (tmp_path / "docs" / "acc").mkdir(parents=True)
    (tmp_path / "docs" / "acc" / "speedup.png").write_text("stale")  # an old plot of ours goes
    (tmp_path / "docs" / "acc" / "mine.txt").write_text("kept")  # other files stay
    br.write_report(
        kind,
        cells,
        None,
        path,
        command="python -m dgl_grappa bench --config X",
        regenerate="python -m dgl_grappa bench --config X --bench.report_only=true",
        preamble="Hand text.",
    )
    text = path.read_text()
    assert text.startswith("<!-- Generated by `python -m dgl_grappa bench --config X --bench.report_only=true`")
    assert "Hand text." in text and "Matrix: `python -m dgl_grappa bench --config X`" in text
    assert "**4 of 4**" in text
    assert f"## {kind.capitalize()} goals" in text and "issue" not in text.lower()
    pngs = sorted(p.name for p in (tmp_path / "docs" / "acc").glob("*.png"))
    assert pngs and all(f"(acc/{p})" in text for p in pngs)
    assert (tmp_path / "docs" / "acc" / "mine.txt").exists()
    if kind == "accuracy":
        assert pngs == ["acc_vs_bytes_syn.png", "acc_vs_layers_syn_p4.png"]
    else:
        assert pngs == ["acc_vs_time.png", "bytes_per_epoch.png", "speedup.png"]


@pytest.mark.unit
def test_derive_metrics_amortises_one_time_bytes():
    s = {
        "epochs": 4,
        "wire_bytes_per_epoch": 1000.0,
        "app_bytes_per_epoch": 900.0,
        "test_acc": 0.5,
        "workers": [{"halo_bytes_loaded": 200}, {"halo_bytes_loaded": 200}],
        "config": {"x": 1},
        "schedule": {"stall_fraction": 0.01},
        "floor_epoch_s": 0.3,
    }
    m = derive_metrics(s)
    assert m["one_time_bytes"] == 400 and m["bytes_per_epoch_amortised"] == 1100.0
    assert m["app_bytes_per_epoch_amortised"] == 1000.0 and m["bytes_source"] == "wire"
    assert m["stall_fraction"] == 0.01 and m["floor_epoch_s"] == 0.3 and "config" not in m and "workers" not in m
    m = derive_metrics(dict(s, one_time_bytes_total=4000, wire_bytes_per_epoch=None))
    assert m["one_time_bytes"] == 4000 and m["bytes_per_epoch_amortised"] == 1900.0 and m["bytes_source"] == "app"


@pytest.mark.unit
def test_config_changes_ignore_new_keys_at_their_default():
    default = {"train": {"epochs": 10, "new_knob": False}, "grappa": {"correction": "batch"}}
    old = {"train": {"epochs": 10, "gone": 1}, "grappa": {"correction": "batch"}}
    assert (
        config_changes(old, {"train": {"epochs": 10, "new_knob": False}, "grappa": {"correction": "batch"}}, default)
        == []
    )
    assert config_changes(
        old, {"train": {"epochs": 20, "new_knob": True}, "grappa": {"correction": "none"}}, default
    ) == ["train.epochs: 10 -> 20", "train.new_knob: (absent) -> True", "grappa.correction: 'batch' -> 'none'"]


@pytest.mark.unit
def test_a_cell_stays_done_when_only_the_data_location_differs():
    # A cell archived on one machine (data.root next to that checkout) and planned in a clone
    # elsewhere: the same graph read from another folder is the same run.
    here = load_config(None, ["--data.name=cora", "--data.root=/machine/a/planetoid"])
    there = load_config(None, ["--data.name=cora", "--data.root=/elsewhere/planetoid"])
    stored = planning.normalised(here)
    assert "root" not in stored["data"]
    assert config_changes(stored, planning.normalised(there), planning.normalised(load_config(None, []))) == []
    # an older cell that still holds data.root in its config is not stale for it either
    old = dict(stored, data=dict(stored["data"], root="/machine/a/planetoid"))
    assert config_changes(old, planning.normalised(there), planning.normalised(load_config(None, []))) == []
    other = load_config(None, ["--data.name=citeseer", "--data.root=/elsewhere/planetoid"])
    assert config_changes(stored, planning.normalised(other), {}) == ["data.name: 'cora' -> 'citeseer'"]


@pytest.mark.unit
def test_a_cell_stays_done_when_only_compare_settings_differ():
    # compare.variants' default moved from [batch] to [none]; no bench run reads it, so cells
    # stored before stay done. compare.script (the DistDGL trainer) does reach a run.
    now = planning.normalised(load_config(None, []))
    assert now["compare"] == {"script": ""}
    old = dict(now, compare={"variants": ["batch"], "distdgl": True, "dropin": False, "target_acc": 0.0, "script": ""})
    assert config_changes(old, now, now) == []
    mine = planning.normalised(load_config(None, ["--compare.script=/opt/train_dist.py"]))
    assert config_changes(old, mine, now) == ["compare.script: '' -> '/opt/train_dist.py'"]


# ---------------------------------------------------------------------------------------
# The matrix
# ---------------------------------------------------------------------------------------

BASE = """
name: tiny
data:
  name: synthetic
  synthetic: {preset: hard, num_nodes: 2000, avg_degree: 8}
partition: {num_parts: 2, method: random}
model: {name: sage, num_layers: 2, hidden: 16}
train: {epochs: 2, batch_size: 400, fanouts: [5, 10], eval_every: 1}
run: {timeout_s: 240, collective_timeout_s: 60}
"""


def _write_bench(tmp_path: Path, bench: str, extra: str = "") -> Path:
    (tmp_path / "base.yaml").write_text(BASE)
    (tmp_path / "bench.yaml").write_text(
        f"name: tinybench\n{extra}bench:\n"
        + "".join(f"  {line}\n" for line in bench.strip().splitlines())
        + f"  out_dir: {tmp_path / 'out'}\n"
        f"  report: {tmp_path / 'report.md'}\n"
    )
    return tmp_path / "bench.yaml"


@pytest.mark.unit
def test_expand_axes_fanouts_systems_and_shared_partitions(tmp_path):
    path = _write_bench(
        tmp_path,
        f"""
datasets: [{tmp_path / "base.yaml"}]
partitions: [random, metis]
models: [sage, gcn]
layers: [2, 3]
fanouts: ["4", "4,6", "4,6,8"]
seeds: [0, 1]
bandwidths: ["", 1gbit]
systems: [distdgl, "g-none: --grappa.correction=none --train.lr=0.01"]
""",
        extra="train: {epochs: 3}\n",
    )
    run_cfg, plan_cfg, file_ov = load_bench(str(path), ["--bench.seeds=[1]", "--model.hidden=8"])
    assert file_ov == ["--train.epochs=3"] and run_cfg.bench.overrides == ["--model.hidden=8"]
    matrix, selected = expand(plan_cfg, tmp_path / "out", file_ov), expand(run_cfg, tmp_path / "out", file_ov)
    assert len(matrix) == 2 * 2 * 2 * 2 * 2 and len(selected) == 16
    assert {c.axes["seed"] for c in selected} == {1}
    c = next(c for c in matrix if c.cell_id == "base-random-p2-gcn-l3-1gbit-s0")
    d, g = c.systems["distdgl"].cfg, c.systems["g-none"].cfg
    assert d.train.fanouts == g.train.fanouts == [4, 6, 8] and d.network.bandwidth == "1gbit"
    assert (d.train.seed, d.partition.seed, d.model.name, d.train.epochs, d.model.hidden) == (0, 0, "gcn", 3, 8)
    assert (d.grappa.correction, d.train.lr, g.grappa.correction, g.train.lr) == ("none", 0.003, "none", 0.01)
    assert d.partition.out_dir == g.partition.out_dir == str(c.partition_dir.resolve())
    assert d.run.output_dir != g.run.output_dir

    def pdir(**axes):
        return {c.partition_dir for c in matrix if all(c.axes[k] == v for k, v in axes.items())}

    # one partitioning per (partitioner, seed) for random, one for METIS whatever the seed
    assert len(pdir(partition="random")) == 2 and len(pdir(partition="metis")) == 1
    assert pdir(partition="random", seed=0, model="sage") == pdir(partition="random", seed=0, model="gcn")


@pytest.mark.unit
def test_extra_sub_matrices_join_the_matrix_and_follow_the_selection(tmp_path):
    path = _write_bench(
        tmp_path,
        f"""
datasets: [{tmp_path / "base.yaml"}]
partitions: [random, metis]
parts: [2]
layers: [2]
fanouts: ["4", "4,6", "4,6,8"]
extra: ["parts=[4] layers=[2,3] partitions=[random]", "parts=[2]"]
""",
    )
    _, plan_cfg, fo = load_bench(str(path), [])
    ids = [c.cell_id for c in expand(plan_cfg, tmp_path / "out", fo)]
    # 2 base cells, 2 from the first entry, the second entry repeats the base: no cell twice
    assert ids == [
        "base-random-p2-sage-l2-unshaped-s0",
        "base-metis-p2-sage-l2-unshaped-s0",
        "base-random-p4-sage-l2-unshaped-s0",
        "base-random-p4-sage-l3-unshaped-s0",
    ]
    c4 = expand(plan_cfg, tmp_path / "out", fo)[3]
    assert (c4.cfg.partition.num_parts, c4.cfg.model.num_layers, c4.cfg.train.fanouts) == (4, 3, [4, 6, 8])

    def selected(*args):
        r, _, fo = load_bench(str(path), list(args))
        return [c.cell_id for c in expand(r, tmp_path / "out", fo)]

    # a selection narrows the extra entries too: layers=[3] leaves only the first entry's depth-3 cell
    assert selected("--bench.layers=[3]") == [
        "base-random-p2-sage-l3-unshaped-s0",
        "base-metis-p2-sage-l3-unshaped-s0",
        "base-random-p4-sage-l3-unshaped-s0",
    ]
    # an axis the entry fixes and the selection excludes drops the entry
    assert selected("--bench.parts=[2]", "--bench.partitions=[metis]") == ["base-metis-p2-sage-l2-unshaped-s0"]
    # a partial system runs only when selected by name
    p = _write_bench(
        tmp_path, f"datasets: [{tmp_path / 'base.yaml'}]\nsystems: [distdgl, grappa, old]\npartial: [old]\n"
    )
    r, plan, _ = load_bench(str(p), [])
    assert (r.bench.systems, plan.bench.systems) == (["distdgl", "grappa"], ["distdgl", "grappa", "old"])
    assert load_bench(str(p), ["--bench.systems=[old]"])[0].bench.systems == ["old"]
    p = _write_bench(tmp_path, f"datasets: [{tmp_path / 'base.yaml'}]\npartial: [nope]\n")
    with pytest.raises(ConfigError, match="bench.partial names 'nope'"):
        load_bench(str(p), [])
    for bad, msg in [
        ("nodes=[3]", "is not an axis setting"),
        ("parts=[8] parts=[4]", "set twice"),
        ("parts=[x]", "not an integer"),
    ]:
        p = _write_bench(tmp_path, f'datasets: [{tmp_path / "base.yaml"}]\nextra: ["{bad}"]\n')
        with pytest.raises(ConfigError, match=msg):
            r, _, fo = load_bench(str(p), [])
            expand(r, tmp_path / "out", fo)


def test_bad_bench_settings_fail_before_anything_runs(tmp_path):
    def err(bench: str, args=()):
        path = _write_bench(tmp_path, f"datasets: [{tmp_path / 'base.yaml'}]\n" + bench)
        with pytest.raises(ConfigError) as e:
            r, _, fo = load_bench(str(path), list(args))
            expand(r, tmp_path / "out", fo)
        return str(e.value)

    assert "partition, network" in err('systems: ["g: --partition.method=metis"]')
    assert "unknown config key 'grappa.nope'" in err('systems: ["g: --grappa.nope=1"]')
    assert "quote it" in err("systems: [distdgl, g: --grappa.lam=0.1]")
    assert "has a name twice" in err("systems: [grappa, grappa]")
    assert "no fan-outs for 3 layers" in err("layers: [3]")
    assert "needs 2" in err('fanouts: ["5", "5"]')
    assert "partition.method='kway'" in err("partitions: [kway]")
    assert "unknown config key 'bench.nope'" in err("", ["--bench.nope=1"])
    assert parse_system("distdgl").kind == "distdgl" and parse_system("distdgl-grappa").kind == "distdgl-grappa"
    assert parse_system("x: --train.halo=keep").overrides == ["--train.halo=keep"]
    p = run_cli("bench", "--config", str(_write_bench(tmp_path, f"datasets: [{tmp_path / 'nope.yaml'}]")))
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "nope.yaml does not exist" in p.stderr
    # a missing preamble is found before the first run (it used to stop the report after the last)
    p = run_cli(
        "bench",
        "--config",
        str(_write_bench(tmp_path, f"datasets: [{tmp_path / 'base.yaml'}]\npreamble: {tmp_path / 'gone.md'}")),
    )
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "gone.md does not exist" in p.stderr
    assert "running" not in p.stdout and not (tmp_path / "out" / "cells").exists()


# ---------------------------------------------------------------------------------------
# partition.seed
# ---------------------------------------------------------------------------------------


@pytest.mark.unit
def test_partition_seed_changes_a_random_partitioning_and_not_metis(tmp_path):
    from dgl_grappa.config import DataConfig, SyntheticConfig
    from dgl_grappa.data import load_dataset
    from dgl_grappa.partition.store import partition, partition_fingerprint

    # generator seed 0 and partition seed 0: DGL's RNG is not the generator's, so the parts are
    # not the planted blocks (their cut would be ~0.1, a random 4-way cut is ~0.75)
    g = load_dataset(DataConfig(name="synthetic", synthetic=SyntheticConfig(num_nodes=3000, seed=0)))
    got = {}
    for i, (method, seed) in enumerate([("random", 0), ("random", 0), ("random", 1), ("metis", 0), ("metis", 1)]):
        stats = partition(g, PartitionConfig(num_parts=4, method=method, seed=seed), tmp_path / str(i))
        got.setdefault((method, seed), []).append((np.load(tmp_path / str(i) / "assignment.npy"), stats["edge_cut"]))
    (a, cut), (b, _) = got[("random", 0)]
    assert np.array_equal(a, b) and cut > 0.6
    assert (got[("random", 1)][0][0] != a).mean() > 0.5
    assert np.array_equal(got[("metis", 0)][0][0], got[("metis", 1)][0][0])

    def fp(method, seed):
        return partition_fingerprint(load_config(None, [f"--partition.method={method}", f"--partition.seed={seed}"]))

    assert fp("random", 0) != fp("random", 1) and fp("metis", 0) == fp("metis", 1)


# ---------------------------------------------------------------------------------------
# A tiny real sweep
# ---------------------------------------------------------------------------------------


def _needs_ns():
    from dgl_grappa.cluster.netns import check_isolation

    why = check_isolation(net=True, shm="64m")
    if why is not None:
        pytest.skip(f"private namespaces unavailable (DistDGL runs need them): {why}")


def test_tiny_sweep_writes_cells_skips_done_ones_and_records_a_failure(tmp_path):
    """Matrix: 2 cells (sage, gcn) on one random partitioning x {distdgl, grappa, broken}.

    1. the sage cell: DistDGL and Grappa succeed, "broken" (a 1 s job limit) fails, the sweep goes on;
    2. the sage cell again: only broken runs again (and fails), the others are not touched;
    3. Grappa on the gcn cell: it reuses the partitioning;
    4. Grappa on both cells: both are done, skipped, nothing rewritten;
    5. the report alone.
    """
    _needs_ns()
    path = _write_bench(
        tmp_path,
        f"""
datasets: [{tmp_path / "base.yaml"}]
models: [sage, gcn]
systems: [distdgl, grappa, "broken: --run.timeout_s=1"]
archive: {tmp_path / "archive"}
""",
    )
    out = tmp_path / "out"
    sage = out / "cells" / "base-random-p2-sage-l2-unshaped-s0.json"
    gcn = out / "cells" / "base-random-p2-gcn-l2-unshaped-s0.json"
    p = run_cli("bench", "--config", str(path), "--bench.models=[sage]", timeout=600)
    assert p.returncode == 1, p.stdout + p.stderr  # a run failed: status 1, after the others ran
    doc = json.loads(sage.read_text())
    s = doc["systems"]
    assert (s["distdgl"]["status"], s["grappa"]["status"], s["broken"]["status"]) == ("ok", "ok", "failed")
    assert "run.timeout_s=1" in s["broken"]["reason"] and Path(s["broken"]["log"]).is_file()
    for name in ("distdgl", "grappa"):
        m = s[name]["metrics"]
        assert 0 <= m["test_acc"] <= 1 and m["epochs"] == 2 and len(s[name]["records"]) == 2
        assert m["bytes_per_epoch_amortised"] > 0 and m["edge_cut"] == pytest.approx(doc["partition"]["edge_cut"])
        assert s[name]["config"]["partition"]["seed"] == 0 and s[name]["fingerprint"]
    assert s["grappa"]["metrics"]["wire_bytes_per_epoch"] < s["distdgl"]["metrics"]["wire_bytes_per_epoch"]
    assert doc["axes"]["model"] == "sage" and not gcn.exists()
    assert "ETA" in p.stdout and "FAILED" in p.stdout
    report = (tmp_path / "report.md").read_text()
    assert "**0 of 2**" in report and "| base | random | 2 | sage | 2 | grappa | 1 |" in report

    logs = {n: Path(s[n]["log"]) for n in s}
    mtimes = {n: logs[n].stat().st_mtime_ns for n in logs}
    p = run_cli("bench", "--config", str(path), "--bench.models=[sage]", timeout=600)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "(1 runs)" in p.stdout and "broken: runs again (failed before)" in p.stdout
    s2 = json.loads(sage.read_text())["systems"]
    assert s2["distdgl"] == s["distdgl"] and s2["grappa"] == s["grappa"] and s2["broken"]["status"] == "failed"
    assert {n: logs[n].stat().st_mtime_ns != mtimes[n] for n in logs} == {
        "distdgl": False,
        "grappa": False,
        "broken": True,
    }

    p = run_cli("bench", "--config", str(path), "--bench.models=[gcn]", "--bench.systems=[grappa]", timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "partitioning" not in p.stdout  # one partitioning for both cells
    g = json.loads(gcn.read_text())
    assert list(g["systems"]) == ["grappa"] and g["systems"]["grappa"]["status"] == "ok"
    assert g["partition"]["dir"] == doc["partition"]["dir"] and g["partition"]["reused"] is True

    before = {f: f.read_bytes() for f in (sage, gcn)}
    mtimes = {n: logs[n].stat().st_mtime_ns for n in logs}
    p = run_cli("bench", "--config", str(path), "--bench.systems=[grappa]")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "skip base-random-p2-sage-l2-unshaped-s0" in p.stdout
    assert "skip base-random-p2-gcn-l2-unshaped-s0" in p.stdout
    assert "bench: 0 runs" in p.stdout
    assert {f: f.read_bytes() for f in before} == before and {n: logs[n].stat().st_mtime_ns for n in logs} == mtimes

    (tmp_path / "report.md").unlink()
    p = run_cli("bench", "--config", str(path), "--bench.report_only=true", "--bench.report_kind=speed")
    assert p.returncode == 0, p.stdout + p.stderr
    report = (tmp_path / "report.md").read_text()
    assert "# Speed" in report and "runs ok 3 of 6" in report and "(report/speedup.png)" in report

    # 6. a fresh machine (new out_dir, only the archive kept in the repository): nothing runs again,
    #    and the report is the same as from out_dir
    archived = sorted(x.name for x in (tmp_path / "archive").iterdir())
    assert archived == [gcn.name + ".gz", sage.name + ".gz"]
    archived_sage = gzip.decompress((tmp_path / "archive" / archived[1]).read_bytes())
    assert json.loads(archived_sage) == json.loads(sage.read_text())
    p = run_cli("bench", "--config", str(path), "--bench.systems=[grappa]", f"--bench.out_dir={tmp_path / 'fresh'}")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "skip base-random-p2-sage-l2-unshaped-s0" in p.stdout and "bench: 0 runs" in p.stdout
    assert not (tmp_path / "fresh" / "cells").exists()
    p = run_cli(
        "bench",
        "--config",
        str(path),
        "--bench.report_only=true",
        "--bench.report_kind=speed",
        f"--bench.out_dir={tmp_path / 'fresh'}",
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "runs ok 3 of 6" in (tmp_path / "report.md").read_text()


@pytest.mark.unit
def test_archive_keeps_gzipped_cells_and_out_dir_wins(tmp_path):
    out, arch = tmp_path / "out", tmp_path / "archive"
    a = {"cell_id": "a", "axes": {"seed": 0}, "systems": {"grappa": {"status": "ok"}}}
    b = {"cell_id": "b", "axes": {"seed": 1}, "systems": {}}
    for doc in (a, b):
        storage.write_archived(storage.archive_path(arch, doc["cell_id"]), doc)
    first = storage.archive_path(arch, "a").read_bytes()
    storage.write_archived(storage.archive_path(arch, "a"), a)
    assert storage.archive_path(arch, "a").read_bytes() == first  # same cell, same bytes: no diff to commit
    newer = dict(a, systems={"grappa": {"status": "failed"}})
    storage.write_cell(storage.cell_path(out, "a"), newer)
    assert storage.stored_cell(out, arch, "a") == newer and storage.stored_cell(out, arch, "b") == b
    assert storage.stored_cell(out, None, "b") is None
    assert sorted(storage.read_cells(out, arch), key=lambda c: c["cell_id"]) == [newer, b]
    assert storage.read_cells(out) == [newer]
    # a cell of out_dir written before the archive was set is copied in; archived ones are left alone
    storage.write_cell(storage.cell_path(out, "c"), dict(b, cell_id="c"))
    assert storage.archive_missing(out, arch) == 1 and storage.archive_missing(out, arch) == 0
    assert storage.read_archived(storage.archive_path(arch, "c"))["cell_id"] == "c"
    assert storage.read_archived(storage.archive_path(arch, "a")) == a
    storage.archive_path(arch, "b").write_bytes(b"not gzip")  # unreadable: ignored, never fatal
    assert storage.read_cells(out, arch) == [newer, dict(b, cell_id="c")]
    assert storage.read_archived(storage.archive_path(arch, "b")) is None


@pytest.mark.unit
def test_reports_compare_the_mean_test_accuracy_of_the_last_fifth_of_the_epochs():
    """One noisy final evaluation is not the statistic: the window's mean is, for every system alike."""
    recs = [
        {"epoch": e, **({"test_acc": a, "val_acc": a} if a is not None else {})}
        for e, a in enumerate([None, 0.5, None, 0.6, None, 0.6, None, 0.8, 0.7, 0.9])
    ]
    assert br.window_test_acc(recs) == pytest.approx(0.8)  # epochs 8 and 9 of 10
    assert br.window_test_acc(recs, window=0.5) == pytest.approx((0.6 + 0.8 + 0.7 + 0.9) / 4)
    assert br.window_test_acc([{"epoch": 3}]) is None and br.window_test_acc(None) is None
    cells = [_cell(0, 2, {"distdgl": 0.80, "grappa": 0.70})]
    cells[0]["systems"]["grappa"]["records"] = recs  # final 0.90, window 0.80
    (base, g) = br.accuracy_rows(cells)
    assert base["acc_mean"] == pytest.approx(0.80)  # no records: the final evaluation
    assert g["acc_mean"] == pytest.approx(0.80) and g["diff_mean"] == pytest.approx(0.0)


@pytest.mark.unit
def test_accuracy_goal_grades_the_defaults_only_when_they_are_in_the_matrix():
    cells = [_cell(s, 2, {"distdgl": 0.80, "grappa": 0.80, "grappa-old": 0.70}) for s in range(2)]
    goal = br.accuracy_goals(br.accuracy_rows(cells))[0]
    assert goal["met"] is True and "1 of 1 rows met" in goal["figure"] and "defaults" in goal["goal"]
    cells = [_cell(s, 3, {"distdgl": 0.80, "variant": 0.79}) for s in range(2)]  # no "grappa": every variant
    goal = br.accuracy_goals(br.accuracy_rows(cells))[0]
    assert goal["met"] is False and "syn random-4 sage-3 -1.00 (n=2)" in goal["figure"]


@pytest.mark.unit
def test_pooled_by_depth_separates_scatter_from_a_systematic_loss():
    rows = [{"layers": 3, "diff_mean": d} for d in (-0.1, +0.5, +0.2, -0.05)] + [{"layers": 2, "diff_mean": -0.3}]
    text = br.pooled_by_depth(rows)
    assert "2 layers -0.30 (1 rows, 1 below 0)" in text  # one row: no interval
    m, lo, hi = br.t_interval([-0.1, 0.5, 0.2, -0.05])
    assert f"3-4 layers {m:+.2f} [{lo:+.2f}, {hi:+.2f}] (4 rows, 2 below 0)" in text
    assert lo < 0 < hi  # these misses are scatter
    assert br.pooled_by_depth([]) == ""


@pytest.mark.unit
def test_time_to_target_counts_setup_and_epochs_up_to_the_first_hit():
    recs = [
        {"epoch": e, "epoch_time_s": 1.0, **({"val_acc": v} if v is not None else {})}
        for e, v in enumerate([0.2, None, 0.7, 0.6, 0.9])
    ]
    assert br.time_to_target(recs, 0.7) == pytest.approx(3.0)  # epochs 0-2
    assert br.time_to_target(recs, 0.7, setup_s=0.5) == pytest.approx(3.5)
    assert br.time_to_target(recs, 0.95) is None  # never reached
    assert br.time_to_target(None, 0.1) is None


@pytest.mark.unit
def test_accuracy_rows_race_every_system_to_98_percent_of_distdgl_plateau():
    def run(vals, dt, load_s=None):
        recs = [{"epoch": e, "epoch_time_s": dt, "val_acc": v, "test_acc": v} for e, v in enumerate(vals)]
        summary = {"workers": [{"load_s": load_s}, {"load_s": 0.1}]} if load_s is not None else {}
        return {"status": "ok", "records": recs, "summary": summary, "metrics": {"test_acc": vals[-1]}}

    vals = [0.1, 0.5, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8]  # plateau 0.8: target 0.784
    cell = {
        "cell_id": "c",
        "axes": {
            "dataset": "syn",
            "partition": "random",
            "parts": 4,
            "model": "sage",
            "layers": 2,
            "bandwidth": "",
            "seed": 0,
        },
        "systems": {
            "distdgl": run(vals, 2.0),
            "grappa": run(vals, 0.5, load_s=1.0),
            "slow": run([0.1] * 9 + [0.7], 0.5),
        },
    }
    base, g, slow = br.accuracy_rows([cell])
    assert base["tta_s"] == pytest.approx(6.0) and base["tta_reached"] == 1  # 3 epochs x 2 s
    assert g["tta_s"] == pytest.approx(1.0 + 1.5) and g["tta_speedup"] == pytest.approx(6.0 / 2.5)
    assert slow["tta_s"] is None and slow["tta_reached"] == 0 and slow["tta_speedup"] is None
    assert "2.5 (1/1)" in br.accuracy_table([base, g, slow]) and "- (0/1)" in br.accuracy_table([base, g, slow])


@pytest.mark.unit
def test_tta_summary_counts_faster_rows_and_names_the_misses():
    rows = [
        {"system": "distdgl", "seeds": 3, "tta_speedup": None, "tta_reached": 3},
        {
            "system": "grappa",
            "seeds": 3,
            "tta_speedup": 2.0,
            "tta_reached": 3,
            "dataset": "cora",
            "partition": "random",
            "parts": 4,
            "model": "sage",
            "layers": 3,
        },
        {
            "system": "grappa",
            "seeds": 3,
            "tta_speedup": 0.5,
            "tta_reached": 2,
            "dataset": "cora",
            "partition": "ldg",
            "parts": 4,
            "model": "gcn",
            "layers": 2,
        },
        {"system": "grappa-old", "seeds": 3, "tta_speedup": 9.0, "tta_reached": 3},
    ]  # not graded
    text = br.tta_summary(rows)
    assert "faster than DistDGL in 1 of 2 rows" in text and "median 1.25x (range 0.50x-2.00x)" in text
    assert "cora ldg-4 gcn-2 1 of 3" in text
    assert br.tta_summary(rows[:1]) == ""


def test_an_entry_from_before_a_behaviour_key_is_stale_for_grappa_only():
    """A Grappa entry stored before train.memory_budget existed ran the replicating defaults:
    it must run again, although the planned value is the key's default; DistDGL's stays."""
    cfg = load_config(None, [])
    now = planning.normalised(cfg)
    old = json.loads(json.dumps(now))
    del old["train"]["memory_budget"], old["train"]["storage"]
    for kind, stale in (("grappa", True), ("distdgl", False), ("distdgl-grappa", False)):
        system = planning.System(name=kind, kind=kind, overrides=[], entry=kind)
        planned = planning.PlannedSystem(system=system, cfg=cfg, config=now, fingerprint="x")
        why = staleness.stale_reason({"status": "ok", "kind": kind, "config": old}, planned)
        assert (why is not None) == stale, (kind, why)
        assert staleness.stale_reason({"status": "ok", "kind": kind, "config": now}, planned) is None
    assert "train.memory_budget" in staleness.stale_reason(
        {"status": "ok", "kind": "grappa", "config": old},
        planned=(
            planning.PlannedSystem(
                system=planning.System(name="g", kind="grappa", overrides=[], entry="g"),
                cfg=cfg,
                config=now,
                fingerprint="x",
            )
        ),
    )


@pytest.mark.unit
def test_an_entry_from_before_the_halo_sync_is_stale_on_the_heterogeneous_graph_only():
    """model.embed_halo_sync and train.halo_in_edges changed what Grappa does on a heterogeneous graph: a hetsynth
    entry stored before them must run again; a homogeneous one (where they do nothing) and DistDGL's stay."""
    for data, stale in (([], False), (["--data.name=hetsynth", "--model.name=rgcn", "--model.embed=true"], True)):
        cfg = load_config(None, data)
        now = planning.normalised(cfg)
        old = json.loads(json.dumps(now))
        del old["model"]["embed_halo_sync"], old["train"]["halo_in_edges"]
        for kind in ("grappa", "distdgl"):
            planned = planning.PlannedSystem(
                system=planning.System(name=kind, kind=kind, overrides=[], entry=kind),
                cfg=cfg,
                config=now,
                fingerprint="x",
            )
            why = staleness.stale_reason({"status": "ok", "kind": kind, "config": old}, planned)
            assert (why is not None) == (stale and kind == "grappa"), (data, kind, why)
            if why is not None:
                assert "model.embed_halo_sync" in why


# ---------------------------------------------------------------------------------------
# bench.pairs: one system against another
# ---------------------------------------------------------------------------------------


def _pair_cells():
    """Three seeds of two rows and a row without the native runtime; a fourth seed where it failed."""
    cells = []
    for s, d in enumerate((0.2, 0.4, 0.6)):  # drop-in - native, points: 0.2, 0.4, 0.6 at 2 layers
        cells.append(_cell(s, 2, {"distdgl": 0.80, "distdgl-grappa": 0.80 + d / 100, "grappa": 0.80}))
        cells.append(_cell(s, 3, {"distdgl": 0.80, "distdgl-grappa": 0.79, "grappa": 0.80}))  # 1 point below
        cells.append(_cell(s, 2, {"distdgl": 0.80, "distdgl-grappa": 0.80}, model="gcn"))  # no native run
    cells.append(
        _cell(3, 2, {"distdgl": 0.80, "distdgl-grappa": 0.50, "grappa": 0.80}, status={"grappa": "failed"})
    )  # not paired
    return cells


@pytest.mark.unit
def test_pair_rows_grade_one_system_against_another_by_seed():
    from scipy import stats

    pair = br.pair_rows(_pair_cells(), "distdgl-grappa", "grappa")
    assert (pair["a"], pair["b"]) == ("distdgl-grappa", "grappa")
    assert [(r["model"], r["layers"]) for r in pair["rows"]] == [("sage", 2), ("sage", 3)]
    two, three = pair["rows"]
    # the seed whose native run failed is left out of the difference: 0.2, 0.4, 0.6 -> mean 0.4
    half = stats.t.ppf(0.975, 2) * 0.2 / np.sqrt(3)  # sample std of 0.2, 0.4, 0.6 is 0.2
    assert two["paired"] == 3 and two["diff_mean"] == pytest.approx(0.4)
    assert (two["diff_lo"], two["diff_hi"]) == pytest.approx((0.4 - half, 0.4 + half))
    assert two["met"] is True and (two["a_acc"], two["b_acc"]) == pytest.approx((0.804, 0.80))  # paired seeds
    assert three["diff_mean"] == pytest.approx(-1.0) and three["met"] is False  # 1 point below: not within 0.5
    assert pair["skipped"] == ["syn random-4 gcn-2"]
    text = br.pair_summary(pair)
    m, lo, hi = br.t_interval([two["diff_mean"], three["diff_mean"]])
    assert f"1 of 2 rows within 0.5 points; pooled mean diff over rows {m:+.2f} [{lo:+.2f}, {hi:+.2f}]" in text
    assert "below: syn random-4 sage-3 -1.00" in text
    md = br.pair_table(pair)
    ci = f"[{0.4 - half:+.2f}, {0.4 + half:+.2f}]"
    assert f"| syn | random | 4 | sage | 2 | 3 | 80.40 | 80.00 | +0.40 {ci} | met |" in md
    assert "| syn | random | 4 | sage | 3 | 3 | 79.00 | 80.00 | -1.00 [" in md and "| **not met** |" in md
    assert "distdgl-grappa − grappa, points (95 % CI)" in md


@pytest.mark.unit
def test_the_pairs_section_sits_between_the_goals_and_the_matrix():
    cells = _pair_cells()
    text = br.render("accuracy", cells, None, command="c", regenerate="r", pairs=[("distdgl-grappa", "grappa")])
    goals, pairs, matrix = (text.index(h) for h in ("## Accuracy goals", "## System against system", "## Matrix"))
    assert goals < pairs < matrix
    section = text[pairs:matrix]
    assert "### distdgl-grappa vs grappa" in section and "1 of 2 rows within 0.5 points" in section
    assert "1 row(s) skipped, without a seed where both ran ok: syn random-4 gcn-2." in section
    assert "## System against system" not in br.render("accuracy", cells, None, command="c", regenerate="r")
    empty = br.render("accuracy", cells, None, command="c", regenerate="r", pairs=[("grappa", "nothing")])
    assert "**grappa vs nothing**: no row where both ran ok yet." in empty


@pytest.mark.unit
def test_bad_bench_pairs_are_one_line_errors_before_anything_runs(tmp_path):
    head = f'datasets: [{tmp_path / "base.yaml"}]\nsystems: [distdgl, distdgl-grappa, "grappa: --model.hidden=8"]\n'

    def err(pairs: str, extra: str = ""):
        with pytest.raises(ConfigError) as e:
            load_bench(str(_write_bench(tmp_path, head + f"pairs: {pairs}\n" + extra)), [])
        msg = str(e.value)
        assert msg.startswith("bench.pairs") and "\n" not in msg
        return msg

    assert 'is not "A vs B"' in err('["distdgl-grappa against grappa"]')
    assert 'is not "A vs B"' in err('["distdgl-grappa vs"]')
    assert "names 'nope', which is not in bench.systems (distdgl, distdgl-grappa, grappa)" in err('["nope vs grappa"]')
    assert "with itself" in err('["grappa vs grappa"]')
    assert "set --bench.report_kind=accuracy" in err('["distdgl-grappa vs grappa"]', "report_kind: speed\n")
    # a good pair (names before the ':'), also when the command line runs one of its systems alone
    path = _write_bench(tmp_path, head + 'pairs: ["distdgl-grappa vs grappa"]\n')
    run_cfg, plan_cfg, _ = load_bench(str(path), ["--bench.systems=[grappa]"])
    assert plan_cfg.bench.pairs == ["distdgl-grappa vs grappa"]
    assert parse_pairs(plan_cfg.bench.pairs, ["distdgl-grappa", "grappa"]) == [("distdgl-grappa", "grappa")]


def test_sigterm_to_a_running_sweep_kills_its_job(tmp_path):
    """A bench stopped by SIGTERM (a scheduler's cancel, a terminal's hangup) while a cell trains
    leaves none of that cell's processes behind: the cleanup of its wait runs, as after Ctrl+C."""
    import os
    import signal
    import subprocess
    import sys
    import time
    import uuid

    from clitools import ROOT

    from dgl_grappa.cluster.procs import processes_of_job
    from dgl_grappa.env import ENV_JOB

    path = _write_bench(tmp_path, f"datasets: [{tmp_path / 'base.yaml'}]\nsystems: [grappa]\n")
    job = uuid.uuid4().hex  # every process the bench starts inherits this tag
    env = dict(os.environ, DGLBACKEND="pytorch", **{ENV_JOB: job})
    p = subprocess.Popen(
        [sys.executable, "-m", "dgl_grappa", "bench", "--config", str(path), "--train.epochs=500"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        workers: list[int] = []
        while time.monotonic() < deadline and p.poll() is None:
            workers = [pid for pid in processes_of_job(job) if pid != p.pid]
            if (tmp_path / "out" / "runs").is_dir() and len(workers) >= 3:  # the cell's launcher and its 2 workers
                break
            time.sleep(0.5)
        assert p.poll() is None and len(workers) >= 3, f"the cell never started: {p.poll()} {workers}"
        time.sleep(2)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=60) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 30
        while processes_of_job(job) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert processes_of_job(job) == []
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
        for pid in processes_of_job(job):
            os.kill(pid, signal.SIGKILL)
