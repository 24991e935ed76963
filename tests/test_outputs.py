"""What a user reads: the libraries' chatter kept in the run's log, one line per partitioning, the
compare table within 100 columns, the target's rule said where the number appears, and the plots."""

from __future__ import annotations

import logging
import os
import sys

import dgl
import pytest
import torch

from dgl_grappa.bench.compare import TERMINAL_WIDTH, compare_summary, compare_table, report_markdown
from dgl_grappa.bench.compare_plots import PLOTS, plot
from dgl_grappa.bench.labels import system_label
from dgl_grappa.cluster.output import library_output_to
from dgl_grappa.config import load_config
from dgl_grappa.partition import store
from dgl_grappa.partition.store import ensure_partitions, partition_log_path

pytestmark = pytest.mark.unit


@pytest.fixture
def dgl_logger():
    """The package's logger, restored afterwards (a test gives it a handler on the terminal it captures)."""
    lg = logging.getLogger("dgl_grappa")
    old = lg.handlers[:], lg.level, lg.propagate
    lg.setLevel(logging.INFO)
    yield lg
    lg.handlers[:], lg.level, lg.propagate = old


def test_library_output_goes_to_the_log_and_our_lines_to_the_terminal(tmp_path, capfd, dgl_logger):
    dgl_logger.handlers[:] = [logging.StreamHandler(sys.stderr)]  # as the command line sets it up
    g = dgl.rand_graph(200, 1500)
    g.ndata["feat"] = torch.randn(200, 4)
    log = tmp_path / "lib.log"
    with library_output_to(log):
        os.write(1, b"from C, fd 1\n")
        dgl.distributed.partition_graph(g, "g", 2, str(tmp_path / "p"), part_method="metis")  # prints, METIS too
        dgl_logger.info("the package's own line")
    out, err = capfd.readouterr()
    text = log.read_text()
    assert "from C, fd 1" in text and "edge cuts" in text and "peak mem" in text
    assert "Partition a graph with 200 nodes" in text  # METIS's C-level LOG(INFO), fd 2
    assert out == "" and err.strip() == "the package's own line"
    # restored: after the block everything reaches the terminal again
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n" and "after" not in log.read_text()


def test_library_output_is_restored_when_the_call_raises(tmp_path, capfd):
    with pytest.raises(ValueError), library_output_to(tmp_path / "x.log"):
        os.write(2, b"inside\n")
        raise ValueError("boom")
    os.write(2, b"outside\n")
    assert capfd.readouterr().err == "outside\n"
    assert (tmp_path / "x.log").read_text() == "inside\n"


def _small_cfg(tmp_path, *extra):
    return load_config(
        None,
        [
            "--data.name=synthetic",
            "--data.synthetic.num_nodes=600",
            "--partition.num_parts=2",
            f"--run.output_dir={tmp_path / 'run'}",
            *extra,
        ],
    )


def test_partitioning_says_one_cut_count_and_announces_a_reused_folder_once(tmp_path, caplog, capfd, monkeypatch):
    monkeypatch.setattr(store, "_SAID_REUSED", set())  # as a fresh process
    cfg = _small_cfg(tmp_path)
    with caplog.at_level(logging.INFO, logger="dgl_grappa"):
        stats, _ = ensure_partitions(cfg)
    lines = caplog.messages
    cut = round(stats["edge_cut"] * stats["num_edges"])
    assert any(f"cut {cut} of {stats['num_edges']} edges" in m for m in lines), lines
    assert not any("reusing" in m for m in lines)
    out, err = capfd.readouterr()
    assert "edge cuts" not in out + err and "peak mem" not in out + err  # DGL's and METIS's, in the log
    assert "edge cuts" in partition_log_path(cfg).read_text()
    # the same folder again, by its relative and its absolute path (as compare, then its runs, ask): not announced
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="dgl_grappa"):
        ensure_partitions(cfg)
        ensure_partitions(_small_cfg(tmp_path, f"--partition.out_dir={tmp_path / 'run' / 'partitions' / '0'}"))
    assert not [m for m in caplog.messages if "partition" in m], caplog.messages
    # a later process (a rerun) says it once, whichever path names the folder
    monkeypatch.setattr(store, "_SAID_REUSED", set())
    with caplog.at_level(logging.INFO, logger="dgl_grappa"):
        ensure_partitions(cfg)
        ensure_partitions(_small_cfg(tmp_path, f"--partition.out_dir={tmp_path / 'run' / 'partitions' / '0'}"))
    reused = [m for m in caplog.messages if "reusing" in m]
    assert len(reused) == 1 and str((tmp_path / "run" / "partitions" / "0").resolve()) in reused[0]


def _summary(epoch, wire, acc, best, one_time=None, rss=1.23e9):
    return {
        "epoch_time_s": epoch,
        "wire_bytes_per_epoch": wire,
        "app_bytes_per_epoch": wire * 0.99,
        "one_time_bytes_per_epoch": one_time,
        "val_acc": acc,
        "test_acc": acc - 0.003,
        "best_val_acc": best,
        "resident_bytes_max": 2.56e6,
        "resident_ratio_max": 1.24,
        "peak_rss_bytes_max": rss,
    }


def _records(epoch, accs):
    return [{"epoch_time_s": epoch, "val_acc": a} for a in accs]


def _result(variants, dropin=False):
    """compare_summary of the default config's comparison, with wide figures in every column."""
    cfg = load_config(
        "configs/default.yaml",
        [f"--compare.variants=[{','.join(variants)}]", f"--compare.dropin={str(dropin).lower()}"],
    )
    # the widest each cell prints: 5 digits of bytes or seconds, ratios below 0.01
    runs = {
        "distdgl": {
            "summary": _summary(9.999, 999.99e6, 0.9860, 0.9871, rss=999.99e6),
            "records": _records(99.99, [0.5, 0.9, 0.97, 0.9871] * 3),
        }
    }
    for v in variants:
        runs[f"grappa-{v}"] = {
            "summary": _summary(0.0456, 999.99e3, 0.9862, 0.9866, one_time=999.99e3, rss=632.58e6),
            "records": _records(3.456, [0.6, 0.95, 0.98]),
        }
    if dropin:
        runs["distdgl-grappa"] = {"summary": _summary(0.2, 1.5e6, 0.95, 0.96), "records": _records(0.2, [0.9, 0.95])}
    for r in runs.values():
        r["curve"] = [(i * r["summary"]["epoch_time_s"], x["val_acc"]) for i, x in enumerate(r["records"], 1)]
    return compare_summary(cfg, runs, {"edge_cut": 0.0523, "num_nodes": 20000}, isolated=True)


@pytest.mark.parametrize("variants,dropin", [(["none"], False), (["none", "batch", "node", "shrinkage"], True)])
def test_the_terminal_table_fits_100_columns(variants, dropin):
    res = _result(variants, dropin)
    table = compare_table(res)
    widths = [len(line) for line in table.splitlines()]
    assert max(widths) <= TERMINAL_WIDTH, table
    for r in res["rows"]:
        assert system_label(r["system"], short=True) in table  # every system, in words
    assert "DistDGL" in table and "grappa-" not in table


def test_the_target_is_said_where_it_appears(tmp_path):
    res = _result(["none"])
    best = res["runs"]["distdgl"]["summary"]["best_val_acc"]
    assert res["target_acc"] == round(0.98 * best, 4)
    rule = f"98 % of DistDGL's best validation accuracy, {best:.4f}"
    assert res["target_rule"] == rule
    assert rule in compare_table(res)  # the terminal's footnote
    report = report_markdown(res)
    assert report.count(rule) >= 2  # under the table and in the column's note
    assert "`grappa-none`: Grappa (plain gradient averaging, the default)" in report
    # a target the user set says so
    cfg = load_config("configs/default.yaml", ["--compare.target_acc=0.9"])
    fixed = compare_summary(cfg, res["runs"], {"edge_cut": 0.05, "num_nodes": 20000}, isolated=True)
    assert fixed["target_acc"] == 0.9 and "set by compare.target_acc" in compare_table(fixed)
    assert [p.name for p in plot(res, tmp_path)] == list(PLOTS)
    assert all((tmp_path / p).stat().st_size > 10_000 for p in PLOTS)
