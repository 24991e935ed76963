"""A few runs of tests/fault_soak.py (the script itself runs 20): no hang, every run within its bound,
completed, nothing left behind."""

import fault_soak


def test_fault_soak_runs_end_within_their_bounds(tmp_path):
    res = fault_soak.soak(n=2, seed=None, work=tmp_path, compare=False)
    print(fault_soak.table(res["runs"]))
    t = res["totals"]
    assert t["hangs"] == 0 and t["over_bound"] == 0 and t["left_processes"] == 0, fault_soak.table(res["runs"])
    assert t["completed"] == t["runs"] == 2, fault_soak.table(res["runs"])
