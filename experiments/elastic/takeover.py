"""What a lost machine costs: take-over (launch.on_failure=continue) against the whole-group restart.

Three runs of the same job on 4 namespace test hosts (the 100k-node synthetic graph of configs/compare.yaml,
4 METIS parts, GraphSAGE-2, 10 epochs, one seed): without a fault; with rank 2 SIGKILLed mid-epoch and its
part taken over (continue); the same fault with the whole group restarted from the newest checkpoint
(restart, a checkpoint after every epoch). Prints a markdown table and writes takeover.json.

    sudo .venv/bin/python experiments/elastic/takeover.py --out /tmp/takeover [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMON = [
    "--partition.num_parts=4",
    "--launch.remote=netns",
    "--train.epochs=10",
    "--train.eval_every=1",
    "--run.progress=false",
    "--run.timeout_s=1500",
    "--checkpoint.every=1",
]


def run(out: Path, name: str, seed: int, fault: dict | None, extra: list[str]) -> dict:
    env = dict(os.environ, DGLBACKEND="pytorch")
    env.pop("DGL_GRAPPA_FAULT", None)
    if fault is not None:
        env["DGL_GRAPPA_FAULT"] = json.dumps(dict(fault, once=str(out / f"{name}.fired")))
    t0 = time.perf_counter()
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "dgl_grappa",
            "train",
            "--config",
            "configs/compare.yaml",
            f"--run.output_dir={out / name}",
            f"--train.seed={seed}",
            *COMMON,
            *extra,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{name} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    s = json.loads((out / name / "summary.json").read_text())
    recs = [json.loads(line) for line in (out / name / "metrics.jsonl").read_text().splitlines()]
    return {
        "name": name,
        "command_wall_s": round(wall, 1),
        "job_wall_s": round(s["job_wall_s"], 1),
        "epoch_time_s": [round(r["epoch_time_s"], 3) for r in recs],
        "test_acc": s["test_acc"],
        "val_acc": s["val_acc"],
        "best_val_acc": s.get("best_val_acc"),
        "epochs_recorded": [r["epoch"] for r in recs],
        "membership": s.get("membership"),
        "restarts": s.get("restarts"),
        "fault_fired": fault is None or (out / f"{name}.fired").exists(),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epoch", type=int, default=4, help="the epoch in which rank 2 is killed")
    ap.add_argument("--step", type=int, default=3, help="the step of that epoch")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    fault = {"point": "step", "rank": 2, "epoch": args.epoch, "step": args.step}
    rows = [
        run(args.out, "no-fault", args.seed, None, ["--launch.on_failure=continue"]),
        run(args.out, "continue", args.seed, fault, ["--launch.on_failure=continue"]),
        run(args.out, "restart", args.seed, fault, ["--launch.on_failure=restart", "--launch.max_restarts=1"]),
    ]
    base = rows[0]
    print("| run | job wall s | cost of the loss s | test acc | diff (points) | epochs recorded | what happened |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        what = (
            "-"
            if r["name"] == "no-fault"
            else "; ".join(f"gen {m['gen']}: {m['lost_part']} ({m['seconds']:.1f} s)" for m in r["membership"] or [])
            or "; ".join(x["reason"] for x in r["restarts"] or [])
        )
        print(
            f"| {r['name']} | {r['job_wall_s']:.1f} | {r['job_wall_s'] - base['job_wall_s']:+.1f} | "
            f"{r['test_acc']:.4f} | {100 * (r['test_acc'] - base['test_acc']):+.2f} | "
            f"{len(r['epochs_recorded'])} | {what} |"
        )
    after = slice(args.epoch + 1, None)
    print(
        "\nmedian epoch after the loss (s): "
        + ", ".join(
            f"{r['name']} {sorted(r['epoch_time_s'][after])[len(r['epoch_time_s'][after]) // 2]:.2f}" for r in rows
        )
    )
    (args.out / "takeover.json").write_text(json.dumps({"seed": args.seed, "fault": fault, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
