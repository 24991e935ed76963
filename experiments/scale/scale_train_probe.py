"""One worker's training throughput on one loaded part, in one process (no network).

Loads part ``--part`` with ``dgl_grappa.method.local_part.load_local``, samples inside it with DGL's
``NeighborSampler`` (what a Grappa worker does), and times ``--steps`` steps of a GNN
(``dgl_grappa.method.models.build_model``, GraphSAGE by default) with Adam: sampling, feature
gather, forward + backward + step. A real Grappa step adds one gradient all-reduce, whose
payload is printed (``gradient_bytes``). Also counts the sampled input rows per step and
how many of them are halo nodes (rows that DistDGL would pull from another machine at the
first hop; with ``--halo keep``). Prints a table and writes JSON.

    nice -n 10 python experiments/scale/scale_train_probe.py --part-config runs/scale/parts_ldg_p4/grappa.json \
        --halo keep --steps 40 --out runs/scale/train_probe.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

os.environ.setdefault("DGLBACKEND", "pytorch")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part-config", required=True)
    ap.add_argument("--part", type=int, default=0)
    ap.add_argument("--halo", default="drop", choices=["drop", "keep"])
    ap.add_argument("--model", default="sage")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--fanouts", default="10,25", help="per layer, input layer first (DGL's order)")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="")
    ns = ap.parse_args()

    import dgl
    import torch

    from dgl_grappa.config import ModelConfig
    from dgl_grappa.method.local_part import load_local
    from dgl_grappa.method.models import build_model, gradient_bytes

    torch.set_num_threads(ns.threads)
    torch.manual_seed(ns.seed)
    t0 = time.perf_counter()
    lp = load_local(ns.part_config, ns.part, ns.halo)
    load_s = time.perf_counter() - t0
    fanouts = [int(f) for f in ns.fanouts.split(",")]
    num_classes = int(lp.label.max()) + 1
    model = build_model(
        ModelConfig(name=ns.model, num_layers=len(fanouts), hidden=ns.hidden), lp.feat.shape[1], num_classes
    )
    opt = torch.optim.Adam(model.parameters(), lr=0.003)
    sampler = dgl.dataloading.NeighborSampler(fanouts)
    loader = dgl.dataloading.DataLoader(
        lp.graph, lp.train_ids, sampler, batch_size=ns.batch, shuffle=True, drop_last=False
    )
    steps_per_epoch = len(loader)
    times = {"sample": 0.0, "gather": 0.0, "compute": 0.0}
    inputs = halo_inputs = 0
    it = iter(loader)
    done = 0
    for step in range(ns.warmup + ns.steps):
        ts = time.perf_counter()
        try:
            input_nodes, seeds, blocks = next(it)
        except StopIteration:
            it = iter(loader)
            input_nodes, seeds, blocks = next(it)
        tg = time.perf_counter()
        x = lp.feat[input_nodes]
        y = lp.label[seeds]
        tc = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(blocks, x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        te = time.perf_counter()
        if step >= ns.warmup:
            times["sample"] += tg - ts
            times["gather"] += tc - tg
            times["compute"] += te - tc
            inputs += input_nodes.numel()
            halo_inputs += int((input_nodes >= lp.num_inner).sum())
            done += 1
    per_step = {k: v / done for k, v in times.items()}
    step_s = sum(per_step.values())
    res = {
        "part_config": ns.part_config,
        "part": ns.part,
        "halo": ns.halo,
        "model": ns.model,
        "hidden": ns.hidden,
        "fanouts": fanouts,
        "batch": ns.batch,
        "threads": ns.threads,
        "steps_timed": done,
        "local_nodes": lp.graph.num_nodes(),
        "local_edges": lp.graph.num_edges(),
        "num_inner": lp.num_inner,
        "train_nodes": int(lp.train_ids.numel()),
        "steps_per_epoch": steps_per_epoch,
        "load_s": load_s,
        "per_step_s": per_step,
        "step_s": step_s,
        "epoch_s_estimate": step_s * steps_per_epoch,
        "input_rows_per_step": inputs / done,
        "halo_input_fraction": halo_inputs / max(inputs, 1),
        "gradient_bytes": gradient_bytes(model),
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }
    print(
        f"part {ns.part} ({ns.halo}): {res['local_nodes']:,} nodes, {res['local_edges']:,} edges, "
        f"{res['train_nodes']:,} train nodes, {steps_per_epoch} steps/epoch (batch {ns.batch})"
    )
    print(
        f"per step: sample {per_step['sample']:.3f} s, gather {per_step['gather']:.3f} s, "
        f"fwd/bwd/step {per_step['compute']:.3f} s = {step_s:.3f} s; epoch ~ {res['epoch_s_estimate']:.0f} s "
        f"on {ns.threads} threads"
    )
    print(
        f"input rows per step {res['input_rows_per_step']:.0f} ({res['halo_input_fraction']:.1%} halo), "
        f"gradient payload {res['gradient_bytes']:,} B, peak RSS {res['peak_rss_gb']:.2f} GB"
    )
    if ns.out:
        Path(ns.out).parent.mkdir(parents=True, exist_ok=True)
        Path(ns.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
