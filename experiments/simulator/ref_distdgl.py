"""A one-process reference of the DistDGL baseline's training, built from the package's own parts.

Why: the simulator (sim.py) re-implements the models and the sampler; the runtime bench runs
real DistDGL servers and trainers. When the two disagree on DistDGL's accuracy (Cora LDG-8
GCN-3: 79.45 % in the simulator, 80.26 % in the runtime, at the same hyper-parameters), this
script is the third opinion: ``dgl_grappa.method.models.build_model`` and DGL's own
``NeighborSampler`` on the whole graph, W workers whose per-worker mean losses are averaged
(what DDP's gradient averaging does), Adam, and the test accuracy read as the runtime reads
it (every ``--eval_every`` epochs, averaged over the evaluations in the last 20 % of epochs).

Which worker holds which train node does not matter here: with full-graph sampling a node's
computation tree is the same on any worker, and the workers' losses are averaged. The train
nodes are dealt out evenly in a random order (``node_split(force_even=True)``'s balance).

    DGLBACKEND=pytorch python experiments/simulator/ref_distdgl.py \
        --dataset cora --model gcn --layers 3 --parts 8 --seeds 0,1,2,3,4,5,6,7,8,9
"""

from __future__ import annotations

import argparse
import json
import statistics

import dgl
import numpy as np
import torch
import torch.nn.functional as F

from dgl_grappa.config import DataConfig, ModelConfig
from dgl_grappa.data import load_dataset, num_classes
from dgl_grappa.method.models import build_model

FANOUTS = {2: [25, 10], 3: [15, 10, 5], 4: [20, 15, 10, 5]}  # input layer first, as the bench's


def run(
    g,
    model: str,
    layers: int,
    parts: int,
    seed: int,
    epochs: int,
    batch: int,
    eval_every: int,
    hidden: int = 64,
    dropout: float = 0.5,
    lr: float = 0.01,
    weight_decay: float = 5e-4,
) -> dict:
    """Train once; returns the last-20 % test accuracy (percent) and the test curve at the evaluations."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    dgl.seed(seed)
    net = build_model(
        ModelConfig(name=model, num_layers=layers, hidden=hidden, dropout=dropout),
        g.ndata["feat"].shape[1],
        num_classes(g),
    )
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    train = g.ndata["train_mask"].nonzero().squeeze(1)
    perm = train[torch.randperm(train.numel())]
    workers = [perm[w::parts] for w in range(parts)]
    steps = max(-(-w.numel() // batch) for w in workers)  # every worker takes the same number of steps
    sampler = dgl.dataloading.NeighborSampler(FANOUTS[layers])
    curve = {}
    for ep in range(epochs):
        net.train()
        order = [w[torch.randperm(w.numel())] for w in workers]
        for s in range(steps):
            opt.zero_grad()
            loss = 0.0
            for w in order:
                seeds = w[s * batch : (s + 1) * batch]
                if seeds.numel() == 0:
                    continue
                inp, out, blocks = sampler.sample_blocks(g, seeds)
                loss = loss + F.cross_entropy(net(blocks, g.ndata["feat"][inp]), g.ndata["label"][out]) / parts
            loss.backward()
            opt.step()
        if (ep + 1) % eval_every == 0 or ep == epochs - 1:
            net.eval()
            with torch.no_grad():
                pred = net(g, g.ndata["feat"]).argmax(-1)
            curve[ep] = 100 * float((pred == g.ndata["label"])[g.ndata["test_mask"]].float().mean())
    tail = [a for e, a in curve.items() if e >= int(0.8 * epochs)]
    return {"seed": seed, "final_test": sum(tail) / len(tail), "curve": curve}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="cora", choices=["cora", "citeseer"])
    ap.add_argument("--root", default="", help="folder of the Planetoid files (default: the package's data.root)")
    ap.add_argument("--model", default="gcn", choices=["gcn", "sage"])
    ap.add_argument("--layers", type=int, default=3, choices=sorted(FANOUTS))
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--eval_every", type=int, default=5)
    ap.add_argument("--out", default="", help="write the per-seed results here as JSON")
    a = ap.parse_args()
    torch.set_num_threads(1)
    g = load_dataset(DataConfig(name=a.dataset, **({"root": a.root} if a.root else {})))
    res = []
    for seed in (int(s) for s in a.seeds.split(",")):
        r = run(g, a.model, a.layers, a.parts, seed, a.epochs, a.batch, a.eval_every)
        res.append(r)
        print(f"seed {seed}: test {r['final_test']:.2f} %", flush=True)
    acc = [r["final_test"] for r in res]
    sd = statistics.stdev(acc) if len(acc) > 1 else float("nan")
    print(f"{a.dataset} {a.model}-{a.layers} W={a.parts}: mean {statistics.mean(acc):.2f} % sd {sd:.2f} (n={len(acc)})")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"args": vars(a), "runs": res}, f, indent=1)


if __name__ == "__main__":
    main()
