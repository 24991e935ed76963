"""The speed and accuracy reports against DistDGL on one partitioner (``bench.baseline_partition``).

Hand-made cells (``unit``): DistDGL runs only in the METIS cells; the LDG and random cells of
Grappa borrow them, and what ran stays what the coverage counts.
"""

from __future__ import annotations

import pytest
from test_bench import _cell

from dgl_grappa.bench import report as br

pytestmark = pytest.mark.unit


def _matrix():
    cells = []
    for seed in (0, 1):
        cells.append(
            _cell(
                seed,
                2,
                {"distdgl": 0.80, "grappa": 0.81},
                partition="metis",
                epoch={"distdgl": 4.0, "grappa": 1.0},
                bytes_={"distdgl": 1e6, "grappa": 1e4},
            )
        )
        cells.append(
            _cell(
                seed,
                2,
                {"grappa": 0.79 + seed / 100},
                partition="random",
                epoch={"grappa": 2.0},
                bytes_={"grappa": 2e4},
            )
        )
    for c in cells:
        for s in c["systems"].values():
            s["metrics"]["network_dilation"] = 2.0
    return cells


def test_cells_of_other_partitioners_borrow_the_metis_distdgl_run_seed_by_seed():
    cells = _matrix()
    out = br.borrow_baseline(cells, "metis")
    random = [c for c in out if c["axes"]["partition"] == "random"]
    assert [c["systems"]["distdgl"]["borrowed_from"] for c in random] == [
        "syn-metis-p4-sage-l2-unshaped-s0",
        "syn-metis-p4-sage-l2-unshaped-s1",
    ]
    assert all("distdgl" not in c["systems"] for c in cells if c["axes"]["partition"] == "random")  # input kept
    # a cell with its own DistDGL run keeps it; an unknown partitioner borrows nothing
    assert "borrowed_from" not in out[0]["systems"]["distdgl"]
    assert br.borrow_baseline(cells, "ldg") == cells


def test_rows_compare_with_the_borrowed_run_and_list_it_once():
    cells = br.borrow_baseline(_matrix(), "metis")
    rows = br.speed_rows(cells)
    assert [(r["partition"], r["system"]) for r in rows] == [
        ("metis", "distdgl"),
        ("metis", "grappa"),
        ("random", "grappa"),
    ]
    assert rows[1]["speedup"] == pytest.approx(4.0) and rows[2]["speedup"] == pytest.approx(2.0)
    assert rows[2]["bytes_ratio"] == pytest.approx(0.02)
    acc = {(r["partition"], r["system"]): r for r in br.accuracy_rows(cells)}
    assert ("random", "distdgl") not in acc
    assert acc[("random", "grappa")]["diff_mean"] == pytest.approx(-0.5)  # (-1 + 0) / 2 points


def test_the_report_says_whose_runs_are_the_reference_and_counts_only_what_ran():
    md = br.render("speed", _matrix(), None, command="bench", regenerate="bench", baseline_partition="metis")
    assert "ran on metis partitions (`bench.baseline_partition`)" in md and "rows of random partitions" in md
    assert "time dilation (D = 2 at 4 parts)" in md
    assert "runs ok 6 of 6" in md  # 2 DistDGL + 4 Grappa runs: the borrowed ones are not counted
    plain = br.render("speed", _matrix(), None, command="bench", regenerate="bench")
    assert "(`bench.baseline_partition`)" not in plain  # without it, a cell without DistDGL has no ratio
    assert "| syn | random | 4 | sage | 2 | unshaped | grappa | 2 | 2.000 s | - |" in plain
