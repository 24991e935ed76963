"""DGL's sampler against the torch sampler on the CPU: the draws of one epoch, and whole training runs.

1. **Draws** (always): one worker's part of a METIS partitioning (made once in ``--out``), and for each
   case (fan-outs, first hop) and block layout an epoch of :class:`~dgl_grappa.method.sampler.LocalBatches`
   (batches of the config's size over the part's training seeds) timed with each sampler: ``dgl`` layout =
   DGL blocks (what DGL's layers read), ``plain`` = index tensors (what the torch kernels read: DGL's
   blocks go through ``to_plain``, the torch sampler builds them directly). The samplers alternate which
   goes first from round to round, so the machine's load falls on both alike; the table has the medians
   over rounds and the ratio torch / dgl.
2. **Training** (``--train-seeds``): ``python -m dgl_grappa train`` of the config with each sampler for each
   seed (alternating which goes first), its test accuracy and median epoch time.

    python benchmarks/samplers/run.py --out runs/samplers                               # the draws
    python benchmarks/samplers/run.py --out runs/samplers --train-seeds 0 1 2            # and training parity

``--out``/samplers.json holds every round and the medians.
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
CASES = [  # (name, fanouts, first_hop)
    ("2 layers, exact first hop", [10, 25], "exact"),
    ("2 layers, sampled", [10, 25], "sampled"),
    ("3 layers, sampled", [10, 15, 25], "sampled"),
]


def draws(args) -> list[dict]:
    import torch

    from dgl_grappa.config import load_config
    from dgl_grappa.data import load_dataset
    from dgl_grappa.method.kernels import to_plain
    from dgl_grappa.method.local_part import load_local
    from dgl_grappa.method.sampler import LocalBatches, equal_steps, layer_sampler
    from dgl_grappa.partition.store import partition

    torch.set_num_threads(args.threads)
    cfg = load_config(args.config, args.extra)
    parts = args.out / "partition"
    part_config = next(iter(sorted(parts.glob("*.json"))), None) if parts.exists() else None
    if part_config is None:
        stats = partition(load_dataset(cfg.data), cfg.partition, parts)
        part_config = stats["part_config"]
    lp = load_local(str(part_config), 0, cfg.train.halo, "exact")
    steps = equal_steps(lp.train_ids.numel(), cfg.train.batch_size)
    rows = []
    for name, fanouts, first_hop in CASES:
        for layout in ("dgl", "plain"):
            samplers = {kind: layer_sampler(fanouts, first_hop, kind, "cpu", layout) for kind in ("dgl", "torch")}
            # CPU seconds of this process (one thread): what other jobs on a shared machine disturb least
            times: dict[str, list[float]] = {"dgl": [], "torch": []}
            walls: dict[str, list[float]] = {"dgl": [], "torch": []}
            edges = {}
            for r in range(args.rounds):
                order = ("dgl", "torch") if r % 2 == 0 else ("torch", "dgl")
                for kind in order:
                    batches = LocalBatches(lp.graph, lp.train_ids, samplers[kind], steps, seed=r)
                    t0, w0 = time.process_time(), time.perf_counter()
                    n = 0
                    for _, _, blocks in batches.epoch(r):
                        if layout == "plain":
                            blocks = to_plain(blocks)  # the plain ones as they are; DGL's converted
                        n += sum(b.num_edges() for b in blocks)
                    times[kind].append(time.process_time() - t0)
                    walls[kind].append(time.perf_counter() - w0)
                    edges[kind] = n
            med = {k: statistics.median(v) for k, v in times.items()}
            ratio = statistics.median(t / d for t, d in zip(times["torch"], times["dgl"]))  # paired by round
            rows.append(
                {
                    "case": name,
                    "fanouts": fanouts,
                    "first_hop": first_hop,
                    "layout": layout,
                    "steps": steps,
                    "dgl_s": med["dgl"],
                    "torch_s": med["torch"],
                    "ratio": ratio,
                    "edges_per_epoch": edges,
                    "rounds_cpu_s": times,
                    "rounds_wall_s": walls,
                }
            )
            print(
                f"  {name:28s} {layout:5s}  dgl {med['dgl']:.4f} s  torch {med['torch']:.4f} s  torch/dgl {ratio:.2f}",
                flush=True,
            )
    return rows


def train(args) -> list[dict]:
    runs = []
    for i, seed in enumerate(args.train_seeds):
        order = ("dgl", "torch") if i % 2 == 0 else ("torch", "dgl")
        for kind in order:
            out = args.out / f"train-{kind}-{seed}"
            cmd = [
                sys.executable,
                "-m",
                "dgl_grappa",
                "train",
                "--config",
                args.train_config,
                f"--train.sampler={kind}",
                f"--train.seed={seed}",
                f"--run.output_dir={out}",
                f"--partition.out_dir={args.out / 'train-partition'}",
                "--run.progress=false",
                *args.extra,
            ]
            p = subprocess.run(
                cmd,
                cwd=ROOT,
                env=dict(os.environ, DGLBACKEND="pytorch"),
                capture_output=True,
                text=True,
                timeout=args.timeout,
            )
            if p.returncode != 0:
                sys.exit(f"benchmarks/samplers: {' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
            s = json.loads((out / "summary.json").read_text())
            recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
            runs.append(
                {
                    "sampler": kind,
                    "seed": seed,
                    "test_acc": s["test_acc"],
                    "val_acc": s["val_acc"],
                    "epoch_time_s": s["epoch_time_s"],
                    "cpu_time_s": s["cpu_time_s_rank0"],
                    "sample_s": statistics.median(r["sample_s"] for r in recs),
                }
            )
            print(
                f"  seed {seed} {kind:5s}: test acc {s['test_acc']:.4f}, epoch {s['epoch_time_s']:.3f} s, "
                f"sample {runs[-1]['sample_s']:.4f} s",
                flush=True,
            )
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--config",
        default="configs/bench/synth100k.yaml",
        help="the draws' graph, partitioning, batch size and halo (default: %(default)s)",
    )
    ap.add_argument("--rounds", type=int, default=5, help="timed epochs per sampler and case (default: 5)")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch/DGL threads (default 1: a worker's share when the workers fill the cores)",
    )
    ap.add_argument("--train-seeds", type=int, nargs="*", default=[], help="training runs' seeds (none: skip)")
    ap.add_argument("--train-config", default="configs/default.yaml", help="the training runs' config")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per training run (default: 900)")
    ap.add_argument("--out", type=Path, default=Path("runs/samplers"), help="output folder (default: %(default)s)")
    ap.add_argument("extra", nargs="*", help="further --a.b=v overrides of every config (after --)")
    args = ap.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    print(
        f"draws of one epoch on part 0 of {args.config}, {args.threads} thread(s), median of {args.rounds} rounds",
        flush=True,
    )
    rows = draws(args)
    runs = train(args) if args.train_seeds else []
    print(
        "\nCPU seconds of one epoch's draws (median over rounds); torch / dgl: the median of the rounds' ratios\n"
        "\n| case | blocks | dgl s/epoch | torch s/epoch | torch / dgl |\n|---|---|---|---|---|"
    )
    for r in rows:
        print(f"| {r['case']} | {r['layout']} | {r['dgl_s']:.4f} | {r['torch_s']:.4f} | {r['ratio']:.2f} |")
    if runs:
        print(
            f"\n{args.train_config}: seeds {args.train_seeds}\n\n| sampler | test acc (mean) | per seed | "
            "epoch s (median) | rank 0 CPU s/epoch (median) | sample s/epoch (median) |\n|---|---|---|---|---|---|"
        )
        for kind in ("dgl", "torch"):
            mine = [r for r in runs if r["sampler"] == kind]
            accs = [r["test_acc"] for r in mine]
            print(
                f"| {kind} | {statistics.mean(accs):.4f} | {', '.join(f'{a:.4f}' for a in accs)} | "
                f"{statistics.median(r['epoch_time_s'] for r in mine):.3f} | "
                f"{statistics.median(r['cpu_time_s'] for r in mine):.3f} | "
                f"{statistics.median(r['sample_s'] for r in mine):.4f} |"
            )
    (args.out / "samplers.json").write_text(
        json.dumps(
            {
                "config": args.config,
                "threads": args.threads,
                "rounds": args.rounds,
                "draws": rows,
                "train_config": args.train_config,
                "train": runs,
            },
            indent=1,
        )
    )
    print(f"wrote {args.out / 'samplers.json'}")


if __name__ == "__main__":
    main()
