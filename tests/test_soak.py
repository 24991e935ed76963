"""A few runs of scripts/fault_soak.py (the script itself runs 20): no hang, every run within its bound,
completed, nothing left behind."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_fault_soak_runs_end_within_their_bounds(tmp_path):
    spec = importlib.util.spec_from_file_location("fault_soak", ROOT / "scripts" / "fault_soak.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.soak(n=2, seed=None, work=tmp_path, compare=False)
    print(mod.table(res["runs"]))
    t = res["totals"]
    assert t["hangs"] == 0 and t["over_bound"] == 0 and t["left_processes"] == 0, mod.table(res["runs"])
    assert t["completed"] == t["runs"] == 2, mod.table(res["runs"])
