#!/usr/bin/env python
"""What time-slicing a core costs one worker: a 1-part Grappa job alone on a core, then two at once on it.

Each job is ``python -m dgl_grappa compare`` of one part on one test host pinned to the same
core (``network.host_cpus=A``): no network, no collective with anyone, so whatever the second
job changes is the core's sharing alone. The script prints each job's epoch time and its
rank 0's CPU seconds an epoch (``cpu_time_s_rank0``). If sharing were free, two jobs would
each take 2x the lone job's epoch with the same CPU seconds; a job that needs more CPU
seconds for the same epoch when it shares the core (its caches and TLB refilled after the
other job ran) shows the cost that no time dilation of the links undoes. Writes
``<out>/timeslice_cost.json``. Needs root and a quiet machine. Example::

    DGLBACKEND=pytorch python experiments/runtime/timeslice_cost.py --config configs/dilation_check.yaml \\
        --core 0 --repeats 2 --out runs/timeslice-cost
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def start(args, run_dir: Path, parts: Path) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "dgl_grappa",
        "compare",
        "--config",
        args.config,
        "--launch.remote=netns",
        "--partition.num_parts=1",
        f"--partition.out_dir={parts}",
        "--compare.variants=[none]",
        "--compare.dropin=false",
        "--compare.distdgl=false",
        f"--network.host_cpus={args.core}",
        "--network.dilation=auto",
        f"--run.output_dir={run_dir}",
        *args.overrides,
    ]
    run_dir.mkdir(parents=True, exist_ok=True)
    log = open(run_dir.parent / f"{run_dir.name}.log", "w")
    return subprocess.Popen(
        cmd, cwd=ROOT, env=dict(os.environ, DGLBACKEND="pytorch"), stdout=log, stderr=subprocess.STDOUT
    )


def finish(procs: list[tuple[subprocess.Popen, Path]], timeout_s: float) -> list[dict]:
    out = []
    for p, run_dir in procs:
        try:
            rc = p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            raise SystemExit(f"timeslice_cost: a job ran past --timeout-s={timeout_s:.0f}; log {run_dir}.log") from None
        if rc != 0:
            raise SystemExit(f"timeslice_cost: a job failed (status {rc}); log {run_dir}.log")
        s = json.loads((run_dir / "grappa-none" / "summary.json").read_text())
        if not s.get("cpu_time_s_rank0"):
            raise SystemExit(f"timeslice_cost: {run_dir} recorded no CPU seconds (cpu_time_s_rank0)")
        out.append({"epoch_time_s": s["epoch_time_s"], "cpu_time_s": s["cpu_time_s_rank0"]})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/dilation_check.yaml")
    ap.add_argument("--core", type=int, default=0, help="the core every job is pinned to")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--timeout-s", type=float, default=1800.0, help="bound on one job")
    ap.add_argument("--out", default="runs/timeslice-cost")
    ap.add_argument("overrides", nargs="*", help="further --a.b=v overrides for every job (after --)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("timeslice_cost: needs root (test hosts and their CPU shares)")
    out = (ROOT / args.out).resolve()
    parts = out / "parts"
    alone, shared = [], []
    for rep in range(args.repeats):
        alone += finish([(start(args, d, parts), d) for d in [out / f"r{rep}-alone"]], args.timeout_s)
        pair = [out / f"r{rep}-shared-a", out / f"r{rep}-shared-b"]
        shared += finish([(start(args, d, parts), d) for d in pair], args.timeout_s)
    med = {
        name: {k: statistics.median(r[k] for r in rs) for k in ("epoch_time_s", "cpu_time_s")}
        for name, rs in (("alone", alone), ("two on one core", shared))
    }
    a, s = med["alone"], med["two on one core"]
    result = {
        "config": args.config,
        "core": args.core,
        "repeats": args.repeats,
        "alone": alone,
        "shared": shared,
        "medians": med,
        "epoch_ratio": s["epoch_time_s"] / a["epoch_time_s"],
        "cpu_ratio": s["cpu_time_s"] / a["cpu_time_s"],
    }
    (out / "timeslice_cost.json").write_text(json.dumps(result, indent=2))
    print(f"{'':<16} {'epoch':>9} {'CPU s an epoch':>15}")
    for name, m in med.items():
        print(f"{name:<16} {m['epoch_time_s']:>7.3f} s {m['cpu_time_s']:>13.3f} s")
    print(
        f"sharing the core: epoch x{result['epoch_ratio']:.2f} (free sharing: x2.00), CPU seconds an epoch "
        f"x{result['cpu_ratio']:.2f} (free sharing: x1.00); wrote {out / 'timeslice_cost.json'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
