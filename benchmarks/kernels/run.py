"""Epoch times of the two kernels (``train.kernels: dgl`` and ``torch``) on the CPU, from one run of this script.

Trains the same config with each kernel on the same partitioning (made once), in alternating order over
``--rounds`` rounds, so the machine's load falls on both alike; prints a table (median epoch time,
forward and backward seconds per epoch, test accuracy, and torch's time as a ratio of DGL's) and writes
it as JSON. ``README.md`` next to this file holds the figures that set ``train.kernels: auto``'s CPU
choice (``dgl_grappa.method.kernels.AUTO_CPU``).

    python benchmarks/kernels/run.py                      # the 100k synthetic graph, 2 parts, 3 epochs
    python benchmarks/kernels/run.py --epochs 5 --rounds 3 -- --model.name=gcn
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ("dgl", "torch")


def _train(args, kernel: str, out: Path, extra: list[str]) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "dgl_grappa",
        "train",
        "--config",
        args.config,
        f"--partition.num_parts={args.parts}",
        f"--partition.out_dir={args.out / 'partitions'}",
        f"--train.epochs={args.epochs}",
        "--train.eval_every=0",
        f"--train.kernels={kernel}",
        f"--run.device={args.device}",
        f"--run.output_dir={out}",
        "--run.progress=false",
        *extra,
    ]
    t0 = time.monotonic()
    p = subprocess.run(
        cmd, cwd=ROOT, env=dict(os.environ, DGLBACKEND="pytorch"), capture_output=True, text=True, timeout=args.timeout
    )
    if p.returncode != 0:
        sys.exit(f"benchmarks/kernels: the {kernel} run failed (rc {p.returncode}): {p.stderr.strip()[-2000:]}")
    s = json.loads((out / "summary.json").read_text())
    if s.get("kernels") != kernel:
        sys.exit(f"benchmarks/kernels: the {kernel} run trained with {s.get('kernels')!r} kernels")
    ph = s["phases"]  # rank 0's seconds per epoch by phase (medians over epochs)
    return {
        "epoch_time_s": s["epoch_time_s"],
        "forward_s": ph["forward_s"],
        "backward_s": ph["backward_s"],
        "compute_s": ph["forward_s"] + ph["backward_s"],
        "test_acc": s["test_acc"],
        "wall_s": time.monotonic() - t0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/bench/synth100k.yaml", help="the base config (default: %(default)s)")
    ap.add_argument("--parts", type=int, default=2, help="partition.num_parts (default: %(default)s)")
    ap.add_argument("--epochs", type=int, default=3, help="epochs per run; the median is reported (default: 3)")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each kernel, alternating (default: 2)")
    ap.add_argument("--device", default="cpu", help="run.device (default: cpu)")
    ap.add_argument("--out", type=Path, default=Path("runs/kernels"), help="output folder (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds one run may take (default: %(default)s)")
    ap.add_argument("extra", nargs="*", help="further --a.b=v overrides for every run (after --)")
    args = ap.parse_args()
    args.out = args.out.resolve()
    runs = {k: [] for k in KERNELS}
    for r in range(args.rounds):
        for k in KERNELS if r % 2 == 0 else KERNELS[::-1]:
            runs[k].append(_train(args, k, args.out / f"{k}-{r}", args.extra))
            print(f"round {r + 1}/{args.rounds}: {k:5s} epoch {runs[k][-1]['epoch_time_s']:.3f} s", flush=True)
    rows = {k: {f: statistics.median(x[f] for x in v) for f in v[0]} for k, v in runs.items()}
    ratio = rows["torch"]["epoch_time_s"] / rows["dgl"]["epoch_time_s"]
    compute = rows["torch"]["compute_s"] / rows["dgl"]["compute_s"]
    print(
        f"\n{args.config}, {args.parts} parts, {args.device}, {args.epochs} epochs x {args.rounds} rounds (medians)\n"
    )
    print("| kernels | epoch s | forward s | backward s | forward + backward s | test acc |")
    print("|---|---|---|---|---|---|")
    for k, row in rows.items():
        print(
            f"| {k} | {row['epoch_time_s']:.3f} | {row['forward_s']:.3f} | {row['backward_s']:.3f} | "
            f"{row['compute_s']:.3f} | {row['test_acc']:.4f} |"
        )
    print(
        f"\ntorch / dgl: epoch time {ratio:.3f}, forward + backward {compute:.3f} "
        f"(faster epochs on this CPU: {'torch' if ratio < 1 else 'dgl'})"
    )
    result = {
        "config": args.config,
        "parts": args.parts,
        "device": args.device,
        "epochs": args.epochs,
        "rounds": args.rounds,
        "overrides": args.extra,
        "runs": runs,
        "median": rows,
        "torch_over_dgl_epoch_time": ratio,
        "torch_over_dgl_compute": compute,
        "faster": "torch" if ratio < 1 else "dgl",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kernels.json").write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out / 'kernels.json'}")


if __name__ == "__main__":
    main()
