"""DGL's link script at convergence in one process: DistDGL's batches against the drop-in's, without servers.

Four trainers of synchronous data-parallel training are one process here (the mean of their four losses is what
DDP's averaged gradients step on), so a variant of the edge loader is a flag, not a branch, and a run costs one
core. The model, loss and linear probe are ``examples/dgl_style/train_dist_unsupervised.py``'s (DistSAGE:
SAGEConv-mean 512 -> 16 -> 16, dropout 0.5, Adam 0.003, fan-outs 10,25, one uniform negative per edge,
the probe on full-neighbourhood embeddings).

Variants:
  dgl     DGL's ``DataLoader`` with ``as_edge_prediction_sampler`` on the whole graph, batches of 4000 edges
          (four trainers' batches of 1000): what DistDGL's trainers compute, less the servers
          (``--first-hop block``: its first layer replaced by the exact first-hop aggregates, as the drop-in's).
  whole   the drop-in's batch code (``LocalEdgeBatches``) on the whole graph, with the block first hop (exact
          first-hop aggregates) or ``--first-hop sampled`` (DGL's sampled first layer).
  parts   the drop-in's core (``PartitionEdgeLoader``) on each part of a real DGL partitioning: own rows fp32,
          every other row and every first-hop aggregate through ``--precision``, the negative pool every
          other machine's node, ``--pool-fanout`` in-edges per pool node outside the halo and
          ``--halo-fanout`` per halo node (from other machines' nodes: the part holds those from its own); the block
          first hop, or ``--first-hop sampled`` (DGL's sampled first layer over the held rows, no aggregates).

    python experiments/link/one_process.py --variant parts --seed 0 --halo-fanout 10 \\
        --part-config runs/dropin-exp/parts/syn20000d10f512-random4/g.json >> runs/one_process.jsonl

The graph of ``--variant dgl|whole`` is generated as ``benchmarks/dgl_scripts/run.py`` generates it (20k nodes,
degree 10, 512-wide); ``parts`` (and ``dgl|whole --reshuffled``) reads it back from the partition folder that
script made, in its node ids. One JSON line out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import dgl
import dgl.function as fn
import dgl.nn as dglnn
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "dgl_style"))
from train_dist_unsupervised import CrossEntropyLoss, compute_acc  # noqa: E402

from dgl_grappa.config import DataConfig, SyntheticConfig  # noqa: E402
from dgl_grappa.data import load_dataset  # noqa: E402
from dgl_grappa.method.dropin.core import PartitionEdgeLoader  # noqa: E402
from dgl_grappa.method.dropin.options import LoaderOptions  # noqa: E402
from dgl_grappa.method.link import LocalEdgeBatches, LocalNegativeSampler, positive_edges  # noqa: E402
from dgl_grappa.method.local_part import draw_per_centre  # noqa: E402
from dgl_grappa.method.sampler import skip_first_layer  # noqa: E402
from dgl_grappa.method.storage import NodeTable  # noqa: E402

TRAINERS, BATCH, FANOUTS = 4, 1000, [10, 25]


class SAGE(nn.Module):
    """The script's DistSAGE: training on blocks, and its full-neighbourhood inference on one graph."""

    def __init__(self, width: int):
        super().__init__()
        self.layers = nn.ModuleList([dglnn.SAGEConv(width, 16, "mean"), dglnn.SAGEConv(16, 16, "mean")])
        self.dropout = nn.Dropout(0.5)

    def forward(self, blocks, h):
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i == 0:
                h = self.dropout(F.relu(h))
        return h

    def full(self, g, h):
        for i, layer in enumerate(self.layers):
            h = layer(g, h)
            if i == 0:
                h = F.relu(h)
        return h


def mean_of_in_neighbours(g: dgl.DGLGraph, x: torch.Tensor) -> torch.Tensor:
    with g.local_scope():
        g.ndata["x"] = x
        g.update_all(fn.copy_u("x", "m"), fn.mean("m", "a"))
        return g.ndata["a"]


def generated():
    """(graph, features, labels, masks) as benchmarks/dgl_scripts/run.py generates them (before partitioning)."""
    g = load_dataset(
        DataConfig(name="synthetic", synthetic=SyntheticConfig(num_nodes=20000, avg_degree=10, feat_dim=512, seed=2))
    )
    masks = {k: g.ndata[k].bool() for k in ("train_mask", "val_mask", "test_mask")}
    return dgl.graph(g.edges(), num_nodes=g.num_nodes()), g.ndata["feat"], g.ndata["label"], masks


def from_parts(part_config: str):
    """The whole graph back from a DGL partitioning (reshuffled ids), and each part as load_partition gives it."""
    parts = [dgl.distributed.load_partition(part_config, p) for p in range(TRAINERS)]
    n = sum(int(p[0].ndata["inner_node"].sum()) for p in parts)
    x, labels = torch.empty((n, 512)), torch.empty(n, dtype=torch.int64)
    masks = {k: torch.zeros(n, dtype=torch.bool) for k in ("train_mask", "val_mask", "test_mask")}
    edges = []
    for pg, nf, *_ in parts:
        inner = pg.ndata["inner_node"].bool()
        ids = pg.ndata[dgl.NID][inner].long()
        x[ids], labels[ids] = nf["_N/features"], nf["_N/labels"].long()
        for k in masks:
            masks[k][ids] = nf[f"_N/{k}"].bool()
        s, d = pg.edges()
        m = inner[d]  # every edge once: with its destination's part
        edges.append(torch.stack([pg.ndata[dgl.NID][s[m]], pg.ndata[dgl.NID][d[m]], pg.edata[dgl.EID][m]]).long())
    s, d, e = torch.cat(edges, 1)[:, torch.argsort(torch.cat(edges, 1)[2])]
    return dgl.graph((s, d), num_nodes=n), x, labels, masks, parts, e


def part_loaders(a, g, x, agg, parts, eids):
    """One drop-in core per part, and the rows each machine holds (own fp32, the rest in a.precision)."""
    src, dst = g.edges()
    n, deg = g.num_nodes(), g.in_degrees()
    stored = NodeTable.store(x, a.precision).gather(torch.arange(n))
    stored_agg = NodeTable.store(agg, a.precision).gather(torch.arange(n))
    loaders, tables = [], []
    for p, (pg, *_rest) in enumerate(parts):
        inner = pg.ndata["inner_node"].bool()
        n_own = int(inner.sum())
        gids = pg.ndata[dgl.NID].long()
        own, held = torch.zeros(n, dtype=torch.bool), torch.zeros(n, dtype=torch.bool)
        own[gids[:n_own]], held[gids] = True, True
        outside = (~held).nonzero().squeeze(1)  # the pool's nodes outside the halo (the pool: every remote node)
        gen = torch.Generator().manual_seed(a.seed * 31 + p)
        extra = []
        for centres, k in ((outside, a.pool_fanout), (gids[n_own:], a.halo_fanout)):
            if k > 0:
                is_centre = torch.zeros(n, dtype=torch.bool)
                is_centre[centres] = True
                m = is_centre[dst] & ~own[src]  # in-edges from other machines' nodes (the part holds the rest)
                take = torch.sort(draw_per_centre(dst[m], k, gen)).values
                extra.append(torch.stack([src[m][take], dst[m][take], eids[m][take]]))
        extra_edges = tuple(torch.cat(extra, 1)) if extra else None
        pool = torch.cat([gids[n_own:], outside]).sort().values
        loaders.append(
            PartitionEdgeLoader(
                pg,
                inner,
                gids,
                torch.ones(n_own, dtype=torch.bool),
                deg[gids],
                dgl.dataloading.NeighborSampler(FANOUTS),
                BATCH,
                options=LoaderOptions(halo="keep", first_hop=a.first_hop, seed=a.seed * 10 + p),
                num_nodes=n,
                extra=(outside, deg[outside]),
                extra_edges=extra_edges,
                negative_sampler=dgl.dataloading.negative_sampler.Uniform(1),
                pool=pool,
                remote=n - n_own,
            )
        )
        rows = stored.clone()
        rows[gids[:n_own]] = x[gids[:n_own]]
        tables.append(torch.cat([rows, stored_agg]))
    steps = max(ld.steps for ld in loaders)  # every trainer takes the same number (equal_steps' all-reduce)
    for ld in loaders:
        ld.steps = ld.batches.steps = ld.batches.limit = steps
    return loaders, tables


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", choices=["dgl", "whole", "parts"], required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--part-config", default=str(ROOT / "runs/dropin-exp/parts/syn20000d10f512-random4/g.json"))
    ap.add_argument("--precision", default="int4", help="parts: the other machines' rows and the aggregates")
    ap.add_argument("--pool-fanout", type=int, default=10)
    ap.add_argument("--halo-fanout", type=int, default=10, help="parts: the edge loader's default")
    ap.add_argument(
        "--first-hop", choices=["block", "sampled"], help="the first hop (defaults: dgl sampled, whole and parts block)"
    )
    ap.add_argument(
        "--reshuffled",
        action="store_true",
        help="dgl, whole: the graph read back from --part-config (the partitioning's node ids, so the same draws "
        "meet the same nodes as in parts) rather than generated",
    )
    ap.add_argument("--probe-every", type=int, default=0, help="also the probe's test accuracy every N epochs")
    ap.add_argument(
        "--save-embeddings", help="also write the embeddings, labels and masks the probe reads here (torch.save)"
    )
    a = ap.parse_args()
    a.first_hop = a.first_hop or ("sampled" if a.variant == "dgl" else "block")
    torch.set_num_threads(1)
    if a.variant == "parts" or a.reshuffled:
        g, x, labels, masks, parts, eids = from_parts(a.part_config)
    else:
        g, x, labels, masks = generated()
    agg = mean_of_in_neighbours(g, x)
    n = g.num_nodes()
    torch.manual_seed(a.seed)  # the model first, as the script builds it before it iterates its loader
    dgl.seed(a.seed)
    model = SAGE(x.shape[1])
    sampler = dgl.dataloading.NeighborSampler(FANOUTS)
    if a.variant == "dgl":
        edge_sampler = dgl.dataloading.as_edge_prediction_sampler(
            skip_first_layer(sampler) if a.first_hop == "block" else sampler,
            negative_sampler=dgl.dataloading.negative_sampler.Uniform(1),
        )
        loader = dgl.dataloading.DataLoader(
            g, torch.arange(g.num_edges()), edge_sampler, batch_size=4 * BATCH, shuffle=True
        )

        def steps_of(e):  # one trainer's batch of 4000 a step
            return [(batch,) for batch in loader]  # drawn before the steps, as the runs in README drew them

        tables = [torch.cat([x, agg])]
    elif a.variant == "whole":
        g = g.formats(["coo", "csc"])
        batches = LocalEdgeBatches(
            g,
            positive_edges(*g.edges(), n),
            skip_first_layer(sampler) if a.first_hop == "block" else sampler,
            LocalNegativeSampler(1),
            -(-g.num_edges() // (4 * BATCH)),
            seed=a.seed,
        )

        def steps_of(e):
            return [(batch,) for batch in batches.epoch(e)]

        tables = [torch.cat([x, agg])]
    else:
        loaders, tables = part_loaders(a, g, x, agg, parts, eids)

        def steps_of(e):  # the four trainers' batches of a step
            return zip(*[iter(ld) for ld in loaders])

    opt = torch.optim.Adam(model.parameters(), lr=0.003)
    loss_fcn = CrossEntropyLoss()
    t0, losses, curve = time.time(), [], []
    for e in range(a.epochs):
        model.train()
        total, steps = 0.0, 0
        for step in steps_of(e):
            loss = 0.0
            for p, (input_nodes, pos, neg, blocks) in enumerate(step):
                ids = input_nodes.long()
                # the block first hop: virtual ids n + v are v's aggregates (parts: the core adds them)
                if a.variant != "parts" and a.first_hop == "block":
                    blocks = [first_block(ids.numel())] + blocks
                    ids = torch.cat([ids, ids + n])
                loss = loss + loss_fcn(model(blocks, tables[p][ids]), pos, neg) / len(step)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, steps = total + float(loss), steps + 1
        losses.append(round(total / steps, 4))
        if a.probe_every and (e + 1) % a.probe_every == 0:
            curve.append((e + 1, round(probe(model, g, x, labels, masks)[1][1], 4)))
            model.train()
    emb, (val, test) = probe(model, g, x, labels, masks)
    if a.save_embeddings:
        torch.save({"emb": emb, "labels": labels, "masks": masks}, a.save_embeddings)
    print(
        json.dumps(
            {
                **vars(a),
                "val": round(val, 4),
                "test": round(test, 4),
                "losses": losses,
                **({"probe_curve": curve} if a.probe_every else {}),
                "secs": round(time.time() - t0, 1),
                "steps": steps,
            }
        )
    )


def probe(model: SAGE, g, x, labels, masks) -> tuple[torch.Tensor, list[float]]:
    """The model's full-neighbourhood embeddings and the script's linear probe on them (validation and test
    accuracy); the random state is left as it was, so probing along the way does not change the run."""
    state = torch.get_rng_state()
    model.eval()
    with torch.no_grad():
        emb = model.full(g, x)
    acc = compute_acc(emb, labels, *(masks[k].nonzero().squeeze(1) for k in ("train_mask", "val_mask", "test_mask")))
    torch.set_rng_state(state)
    return emb, acc


def first_block(m: int) -> dgl.DGLGraph:
    """Block 0 of the block first hop: each of m destinations has one in-neighbour, its virtual aggregate row."""
    return dgl.create_block((torch.arange(m, 2 * m), torch.arange(m)), num_src_nodes=2 * m, num_dst_nodes=m)


if __name__ == "__main__":
    main()
