"""Which correction wins? Train the same job once per variant; print a table, write JSON.

Usage:
    python scripts/bench_corrections.py --config configs/default.yaml --out runs/bench_corrections \
        [--variants none,batch,node,shrinkage:0.5] [--seeds 0,1] [--section.key=value ...]

Each variant is ``name`` or ``shrinkage:<lam>``. All runs share one partitioning (the
first run makes it, the others reuse it). Accuracy differences under about one point are
noise on small graphs: use several seeds before choosing a default.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/default.yaml")
    ap.add_argument("--out", default="runs/bench_corrections")
    ap.add_argument("--variants", default="none,batch,node,shrinkage:0.5")
    ap.add_argument("--seeds", default="0")
    args, overrides = ap.parse_known_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = out / "partitions"
    rows = []
    for variant in args.variants.split(","):
        name, _, lam = variant.partition(":")
        for seed in (int(s) for s in args.seeds.split(",")):
            run_dir = out / f"{variant.replace(':', '_')}_s{seed}"
            cmd = [sys.executable, "-m", "dgl_grappa", "train", "--config", args.config,
                   f"--run.output_dir={run_dir}", f"--partition.out_dir={parts}", "--run.progress=false",
                   f"--grappa.correction={name}", f"--train.seed={seed}", *overrides]
            if lam:
                cmd.append(f"--grappa.lam={lam}")
            print("$", " ".join(cmd[1:]), flush=True)
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                print(p.stderr[-3000:], file=sys.stderr)
                return p.returncode
            s = json.loads((run_dir / "summary.json").read_text())
            rows.append({"variant": variant, "seed": seed, "val_acc": s["val_acc"], "test_acc": s["test_acc"],
                         "best_val_acc": s["best_val_acc"], "epoch_time_s": s["epoch_time_s"],
                         "grad_bytes_per_epoch": s["grad_bytes_per_epoch"]})
    table = []
    for variant in dict.fromkeys(r["variant"] for r in rows):
        rs = [r for r in rows if r["variant"] == variant]
        t = [r["test_acc"] for r in rs]
        table.append({"variant": variant, "runs": len(rs), "test_acc_mean": statistics.mean(t),
                      "test_acc_std": statistics.pstdev(t), "val_acc_mean": statistics.mean(r["val_acc"] for r in rs),
                      "epoch_time_s": statistics.median(r["epoch_time_s"] for r in rs),
                      "grad_bytes_per_epoch": rs[0]["grad_bytes_per_epoch"]})
    print(f"\n{'variant':<16}{'runs':>5}{'test acc':>16}{'val acc':>10}{'epoch s':>10}{'grad B/epoch':>14}")
    for r in table:
        print(f"{r['variant']:<16}{r['runs']:>5}{r['test_acc_mean']:>10.4f} ±{r['test_acc_std']:.3f}"
              f"{r['val_acc_mean']:>10.4f}{r['epoch_time_s']:>10.3f}{r['grad_bytes_per_epoch']:>14.0f}")
    (out / "bench_corrections.json").write_text(json.dumps({"runs": rows, "table": table,
                                                            "config": args.config, "overrides": overrides}, indent=1))
    print(f"wrote {out / 'bench_corrections.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
