"""Gradient study: does each estimator estimate the full-graph gradient?

At fixed parameters theta (at init, and after some training), with dropout off:
  g*  = gradient of the mean cross-entropy over ALL train nodes, full graph, full neighbourhoods;
  g_r = one system/estimator's all-reduced gradient for draw r (a new random partitioning and
        new neighbour samples; every worker uses all its train seeds as one batch, so
        mini-batch noise is excluded and what remains is partition + sampling).
Over R draws: relative bias ||E g - g*|| / ||g*||, relative variance E||g - E g||^2 / ||g*||^2,
mean cosine(g_r, g*), and the relative error of the mean logits ("forward bias"):
||E z - z*|| / ||z*|| over the train nodes' logits.

``cv`` is the proposed control-variate (bias-corrected) reducer: at a refresh (theta~), the
workers compute once the exact full-graph gradient g*(theta~) (a distributed layer-wise
forward/backward: halo rows x hidden per layer each way) and the mean local gradient
gbar_loc(theta~); every step then applies g_loc(theta) + (g*(theta~) - gbar_loc(theta~)).
Here it is measured with theta~ = theta (fresh) and theta~ = theta minus some steps (stale).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sim  # noqa: E402


def flat_grad(net) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in net.parameters()])


def full_grad(s: sim.Sim) -> tuple[torch.Tensor, torch.Tensor]:
    """g* and the train logits with full neighbourhoods, dropout off."""
    G = s.G
    s.net.eval()
    s.net.zero_grad()
    out = s.net([s.full] * s.L, s.input_rows(torch.arange(G.n)))
    F.cross_entropy(out[G.train], G.y[G.train]).backward()
    return flat_grad(s.net).clone(), out[G.train].detach()


def system_grad(s: sim.Sim, with_hist: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """One all-reduced gradient of system/estimator ``s.var`` on its current partitioning."""
    G, N = s.G, s.G.n
    if with_hist:
        ev = s.evaluate()
        s.hist = {i + 1: h for i, h in enumerate(ev["hidden"])}
    s.net.eval()
    s.net.zero_grad()
    seeds = s.view.seeds
    seed_keys = torch.cat([w * N + x for w, x in enumerate(seeds)])
    blocks, in_keys = s.build(seed_keys)
    in_v = in_keys % N
    out = s.forward_blocks(blocks, in_v)
    per = F.cross_entropy(out, G.y[seed_keys % N], reduction="none")
    s.combine(per, seeds, seed_keys).backward()
    # logits in the order of the train nodes
    z = torch.zeros(N, out.shape[1])
    z[seed_keys % N] = out.detach()
    return flat_grad(s.net).clone(), z[G.train]


def study(
    G: sim.Graph,
    dataset: str,
    model: str,
    layers: int,
    W: int,
    method: str,
    specs: list[str],
    R: int,
    theta: dict,
    theta_stale: dict | None,
) -> list[dict]:
    hp = dict(sim.HPARAMS[dataset])
    rows = []
    for spec in specs:
        cv = spec.endswith("+cv") or spec.endswith("+cvstale")
        stale = spec.endswith("+cvstale")
        base = spec.split("+")[0]
        var = sim.parse_variant(base)

        def pf(sw):
            return sim.make_partition(
                method,
                G.indptr.numpy(),
                G.indices.numpy(),
                W,
                10_000 + sw,
                train_mask=G.train.numpy(),
                dgl_graph=G.dgl_graph,
            )

        s = sim.Sim(G, model, layers, W, var, hp, 0, pf)
        s.net.load_state_dict(theta)
        g_star, z_star = full_grad(s)
        gs, zs = [], []
        t0 = time.perf_counter()
        for r in range(R):
            s.set_partition(r)
            s.gen.manual_seed(r * 31 + 7)
            g, z = system_grad(s, with_hist=bool(var.hist))
            if cv:
                # correction g*(theta~) - gbar_loc(theta~) on the same partitioning, other samples
                if stale:
                    s.net.load_state_dict(theta_stale)
                g_t, _ = full_grad(s)
                gl = torch.stack([system_grad(s, with_hist=bool(var.hist))[0] for _ in range(2)]).mean(0)
                if stale:
                    s.net.load_state_dict(theta)
                g = g + (g_t - gl)
            gs.append(g)
            zs.append(z)
        gs, zs = torch.stack(gs), torch.stack(zs)
        mean = gs.mean(0)
        nrm = float(g_star.norm())
        rows.append(
            {
                "spec": spec,
                "dataset": dataset,
                "model": model,
                "layers": layers,
                "parts": W,
                "partition": method,
                "R": R,
                "rel_bias": float((mean - g_star).norm()) / nrm,
                "rel_var": float(((gs - mean) ** 2).sum(1).mean()) / nrm**2,
                "rel_mse": float(((gs - g_star) ** 2).sum(1).mean()) / nrm**2,
                "cos_mean": float(F.cosine_similarity(gs, g_star.unsqueeze(0)).mean()),
                "cos_of_mean": float(F.cosine_similarity(mean, g_star, dim=0)),
                "logit_rel_bias": float((zs.mean(0) - z_star).norm() / z_star.norm()),
                "seconds": time.perf_counter() - t0,
            }
        )
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in rows[-1].items()}), flush=True)
    return rows


def trained_theta(G, dataset, model, layers, W, epochs) -> tuple[dict, dict]:
    """Parameters after ``epochs`` of DistDGL-style training, and 1 epoch earlier (stale)."""
    hp = dict(sim.HPARAMS[dataset])
    s = sim.Sim(G, model, layers, W, sim.Variant(system="distdgl"), hp, 123, sim.part_fn_for(G, "random", W, 123))
    s.run(epochs - 1, hp["batch"])
    stale = {k: v.clone() for k, v in s.net.state_dict().items()}
    s.run(1, hp["batch"])
    return {k: v.clone() for k, v in s.net.state_dict().items()}, stale


SPECS = [
    "distdgl",
    "grappa",
    "grappa:est=batch",
    "grappa:est=node",
    "grappa:est=shrinkage",
    "grappa:sampler=foldback",
    "grappa:empty=self",
    "grappa:norm=ht",
    "grappa:fhc=1",
    "grappa:halo=keep",
    "grappa:halo=keep,fhc=1",
    "grappa:halo=keep,hist=1",
    "grappa:halo=keep,fhc=1,hist=1",
    "grappa+cv",
    "grappa+cvstale",
    "grappa:halo=keep,fhc=1+cv",
]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="cora")
    ap.add_argument("--models", default="sage,gcn")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--partition", default="random")
    ap.add_argument("--R", type=int, default=30)
    ap.add_argument("--train-epochs", type=int, default=10)
    ap.add_argument("--specs", default=";".join(SPECS))
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "grad"))
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    G = sim.load_graph(a.dataset)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    for model in a.models.split(","):
        specs = [s for s in a.specs.split(";") if s and not ("norm=" in s and model == "sage")]
        for when in ("init", "trained"):
            torch.manual_seed(0)
            if when == "init":
                net = sim.Net(
                    model,
                    G.x.shape[1],
                    sim.HPARAMS[a.dataset]["hidden"],
                    G.num_classes,
                    a.layers,
                    sim.HPARAMS[a.dataset]["dropout"],
                )
                theta = {k: v.clone() for k, v in net.state_dict().items()}
                theta_stale = {
                    k: v + 0.01 * torch.randn_like(v) * v.std() if v.numel() > 1 else v for k, v in theta.items()
                }
            else:
                theta, theta_stale = trained_theta(G, a.dataset, model, a.layers, a.parts, a.train_epochs)
            rows = study(G, a.dataset, model, a.layers, a.parts, a.partition, specs, a.R, theta, theta_stale)
            p = Path(a.out) / f"{a.dataset}_{a.partition}{a.parts}_{model}{a.layers}_{when}.json"
            p.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
