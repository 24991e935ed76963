"""A/B timing of Grappa's hot path inside one run: variants alternate epoch by epoch.

One training job (the config's graph, partitions, model; spawned gloo workers as in
``python -m dgl_grappa train``) whose epochs rotate through variants of the hot path:

* ``before``   - the code before the optimisation: features gathered with ``table[ids]``
  after a per-step residency check, batches sampled in line;
* ``gather``   - ``index_select`` gather (what ``LocalFeatures.gather`` does now);
* ``prefetch`` - that, plus ``train.prefetch``: the next batch is sampled and gathered while
  the step's backward and all-reduce run.

None of them changes the arithmetic (the same batches, the same model: a test checks it),
so switching between epochs leaves training untouched, and epochs of different variants
sit seconds apart: on a shared, loaded machine this is the fairest comparison there is.
Epoch 0 (warm-up) is dropped; round r = the next len(variants) epochs, in an order that
rotates with r; per round every variant's epoch time is divided by ``before``'s (paired
ratios), and the table shows their medians and each variant's median phase breakdown.

    python experiments/runtime/bench_hotpath.py --config configs/compare.yaml --rounds 6 -- --partition.num_parts=4

Writes ``<out>/bench_hotpath.json`` (and the job's metrics.jsonl).
"""

from __future__ import annotations

import argparse
import json
import statistics
import types
from pathlib import Path

import torch

VARIANTS = ("before", "gather", "prefetch")


def old_gather(self, ids):
    """LocalFeatures.gather as it was: residency check, then advanced indexing."""
    if ids.numel() and int(ids.max()) >= self.table.shape[0]:
        raise RuntimeError("a step asked for a node outside this worker's local graph")
    if not hasattr(self, "_old_resident"):
        self._old_resident = torch.ones(self.table.shape[0], dtype=torch.bool)
    here = self._old_resident[ids]
    n_remote = int((~here).sum())
    assert n_remote == 0
    self.local_bytes += ids.numel() * self.row_bytes
    return self.table[ids]


def schedule(rounds: int) -> list[str]:
    """Variant of every epoch: a warm-up epoch, then rounds with a rotating order."""
    out = ["gather"]
    for r in range(rounds):
        k = r % len(VARIANTS)
        out += list(VARIANTS[k:] + VARIANTS[:k])
    return out


class Switch:
    """Trainer hooks: before each epoch, put the runtime into that epoch's variant."""

    def __init__(self, plan: list[str]):
        self.plan = plan

    def epoch_start(self, epoch, ddp, opt, rt) -> None:
        v = self.plan[epoch]
        rt.prefetch = v == "prefetch"
        if v == "before":
            rt.features.gather = types.MethodType(old_gather, rt.features)
        elif "gather" in vars(rt.features):
            del rt.features.gather

    def epoch_end(self, epoch, ddp, opt, rt) -> None:
        pass


def bench_worker(rank, cfg, part_config, n_classes, port, out_dir, plan):
    from dgl_grappa.cluster.launch import (
        init_distributed,
        set_threads,
        setup_logging,
        shutdown_distributed,
        threads_per_worker,
    )
    from dgl_grappa.native.trainer import run_worker

    setup_logging(rank)
    set_threads(threads_per_worker(cfg.partition.num_parts, cfg.run.num_threads))
    ident = init_distributed(rank, cfg.partition.num_parts, port, cfg.run.collective_timeout_s)
    clean = False
    try:
        run_worker(ident, cfg, part_config, n_classes, out_dir, hooks=Switch(plan))
        clean = True
    finally:
        shutdown_distributed(clean)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out", default="runs/bench_hotpath")
    ap.add_argument("overrides", nargs="*", help="--section.key=value overrides (after --)")
    args = ap.parse_args()

    from dgl_grappa.cluster.launch import free_port, setup_logging, spawn_workers
    from dgl_grappa.config import load_config
    from dgl_grappa.data import load_dataset, num_classes
    from dgl_grappa.partition.store import ensure_partitions
    from dgl_grappa.runtime.metrics import read_jsonl

    setup_logging(None)
    plan = schedule(args.rounds)
    out = Path(args.out).resolve()
    cfg = load_config(
        args.config,
        [
            *args.overrides,
            f"--run.output_dir={out}",
            f"--train.epochs={len(plan)}",
            "--train.eval_every=0",
            "--run.progress=false",
        ],
    )
    g = load_dataset(cfg.data)
    n_classes = num_classes(g)
    stats, g = ensure_partitions(cfg, g)
    del g
    spawn_workers(
        bench_worker,
        cfg.partition.num_parts,
        (cfg, stats["part_config"], n_classes, free_port(), str(out), plan),
        timeout_s=cfg.run.timeout_s,
    )
    recs = read_jsonl(out / "metrics.jsonl")
    by = {v: [] for v in VARIANTS}
    for r, v in zip(recs, plan):
        r["variant"] = v
    for r in recs[1:]:
        by[r["variant"]].append(r)
    rounds = [recs[1 + i * len(VARIANTS) : 1 + (i + 1) * len(VARIANTS)] for i in range(args.rounds)]
    table = {}
    for v in VARIANTS:
        ratios = []
        for rd in rounds:
            t = {x["variant"]: x["epoch_time_s"] for x in rd}
            ratios.append(t[v] / t["before"])
        phases = {k: statistics.median(x[k] for x in by[v]) for k in by[v][0] if k.endswith("_s")}
        table[v] = {
            "ratio_to_before": statistics.median(ratios),
            "ratios": ratios,
            "epoch_time_s": statistics.median(x["epoch_time_s"] for x in by[v]),
            "phases": phases,
        }
    s = json.loads((out / "summary.json").read_text())
    result = {
        "config": args.config,
        "overrides": args.overrides,
        "rounds": args.rounds,
        "plan": plan,
        "num_parts": cfg.partition.num_parts,
        "steps_per_epoch": s["steps_per_epoch"],
        "table": table,
        "final_val_acc": s["val_acc"],
    }
    (out / "bench_hotpath.json").write_text(json.dumps(result, indent=1))
    keys = [
        "sample_s",
        "gather_s",
        "forward_s",
        "backward_s",
        "allreduce_s",
        "optimizer_s",
        "other_s",
        "wait_s",
        "overlap_s",
    ]
    print(
        f"\n{cfg.partition.num_parts} parts, {s['steps_per_epoch']} steps/epoch, {args.rounds} rounds; "
        "epoch time as a ratio to 'before' (median of paired rounds), then median seconds per phase:"
    )
    print(f"{'variant':>9} {'ratio':>6} {'epoch':>6} " + " ".join(f"{k[:-2]:>8}" for k in keys))
    for v, t in table.items():
        print(
            f"{v:>9} {t['ratio_to_before']:6.3f} {t['epoch_time_s']:6.2f} "
            + " ".join(f"{t['phases'].get(k, 0.0):8.3f}" for k in keys)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
