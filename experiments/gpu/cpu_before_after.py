"""Paired CPU runs of one config: a tree before a change against the tree after it, each setting in turn.

    python experiments/gpu/cpu_before_after.py --before /tmp/base --after /tmp/after --rounds 5 \
        --out runs/before_after "after:" "after-torch:--train.sampler=torch"

Each round runs every variant once (``before`` is the ``--before`` tree with no override; every other is this
tree with its overrides), rotating which goes first, and reads the run's summary.json: its epoch time (median
over epochs of the slowest worker), rank 0's CPU seconds per epoch, and the test accuracy. The table has the
medians over rounds and each variant's median per-round ratio to ``before``; the JSON has every run.
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", type=Path, required=True, help="the tree before the change (its own checkout)")
    ap.add_argument("--after", type=Path, default=ROOT, help="the tree after it (default: this one)")
    ap.add_argument("--config", default="configs/default.yaml")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("runs/before_after"))
    ap.add_argument("variants", nargs="*", default=["after:"], help="name:override,override ... (this tree)")
    args = ap.parse_args()
    out = args.out.resolve()
    variants = [("before", args.before.resolve(), [])]
    for v in args.variants:
        name, _, over = v.partition(":")
        variants.append((name, args.after.resolve(), [o for o in over.split(",") if o]))
    runs = []
    for r in range(args.rounds):
        order = variants[r % len(variants) :] + variants[: r % len(variants)]
        for name, tree, over in order:
            d = out / f"{name}-{r}"
            parts = out / f"partition-{tree.name}"  # data.root differs per tree
            cmd = [
                sys.executable,
                "-m",
                "dgl_grappa",
                "train",
                "--config",
                str(tree / args.config),
                f"--run.output_dir={d}",
                f"--partition.out_dir={parts}",
                "--run.progress=false",
                *over,
            ]
            env = dict(os.environ, DGLBACKEND="pytorch", PYTHONPATH=str(tree))
            p = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=1800)
            if p.returncode != 0:
                sys.exit(f"{name} failed:\n{p.stderr[-2000:]}")
            s = json.loads((d / "summary.json").read_text())
            runs.append(
                {
                    "variant": name,
                    "round": r,
                    "epoch_time_s": s["epoch_time_s"],
                    "test_acc": s["test_acc"],
                    "cpu_time_s": s["cpu_time_s_rank0"],
                    "job_wall_s": s.get("job_wall_s"),
                    "phases": s.get("phases"),
                }
            )
            print(
                f"round {r} {name:12s} epoch {s['epoch_time_s']:.3f} s  cpu {s['cpu_time_s_rank0']:.3f} s  "
                f"test acc {s['test_acc']:.4f}",
                flush=True,
            )
    # rank 0's CPU seconds per epoch are what a loaded machine disturbs least (the wall time waits for the others)
    print(
        "\n| variant | epoch s (median) | ratio to before | rank 0 CPU s/epoch (median) | ratio to before | "
        "test acc (mean) |\n|---|---|---|---|---|---|"
    )
    for name, _, _ in variants:
        mine = [x for x in runs if x["variant"] == name]
        figs = []
        for key in ("epoch_time_s", "cpu_time_s"):
            base = {x["round"]: x[key] for x in runs if x["variant"] == "before"}
            figs += [
                statistics.median(x[key] for x in mine),
                statistics.median(x[key] / base[x["round"]] for x in mine),
            ]
        print(
            f"| {name} | {figs[0]:.3f} | {figs[1]:.2f} | {figs[2]:.3f} | {figs[3]:.2f} | "
            f"{statistics.mean(x['test_acc'] for x in mine):.4f} |"
        )
    (out / "before_after.json").write_text(json.dumps({"config": args.config, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
