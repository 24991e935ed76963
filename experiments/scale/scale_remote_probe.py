"""What DistDGL would pull over the network on the 100M-edge graph, per trainer step.

DistDGL samples on the *whole* graph and fetches the features of every sampled input node
that another machine owns. The whole graph's structure (not its features) fits in one
process here as a CSC built from the edge chunks, so this script samples real mini-batches
(DGL's ``NeighborSampler``, seeds = the train nodes of one part) and counts, per step:
unique input rows ``I_s`` and the fraction ``rho`` owned by other parts, for each
assignment given (e.g. the LDG assignment of a build, and random ones). Those two numbers
are the inputs of the DistDGL side of the capacity model in docs/scaling.md.

    nice -n 10 python experiments/scale/scale_remote_probe.py --graph runs/scale/graph \
        --assign runs/scale/assign_ldg_p4.npy runs/scale/assign_ldg_p8.npy --random 4 8 \
        --out runs/scale/remote_probe.json
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
    ap.add_argument("--graph", default="runs/scale/graph")
    ap.add_argument("--assign", nargs="*", default=[], help="assignment .npy files (original id -> part)")
    ap.add_argument("--random", nargs="*", type=int, default=[], help="also random assignments into these part counts")
    ap.add_argument("--fanouts", default="10,25")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--part", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="")
    ns = ap.parse_args()

    import dgl
    import numpy as np
    import torch

    from dgl_grappa.data.bigsynth import BigGraph
    from dgl_grappa.partition.bigpart import assign_random, build_csr

    t0 = time.perf_counter()
    g = BigGraph(ns.graph)
    indptr, indices = build_csr(g)
    # The graph is symmetric, so out-neighbour CSR = in-neighbour CSC.
    full = dgl.graph(
        (
            "csc",
            (torch.from_numpy(indptr), torch.from_numpy(indices.astype(np.int64)), torch.empty(0, dtype=torch.int64)),
        ),
        num_nodes=g.num_nodes,
    )
    del indptr, indices
    build_s = time.perf_counter() - t0
    fanouts = [int(f) for f in ns.fanouts.split(",")]
    sampler = dgl.dataloading.NeighborSampler(fanouts)
    train = np.flatnonzero(g.mask("train_mask"))
    cases = [(Path(f).stem, np.load(f)) for f in ns.assign]
    cases += [(f"random_p{p}", assign_random(g.num_nodes, p, seed=ns.seed)) for p in ns.random]
    rng = np.random.default_rng(ns.seed)
    res = {
        "graph": ns.graph,
        "fanouts": fanouts,
        "batch": ns.batch,
        "steps": ns.steps,
        "build_s": build_s,
        "feat_dim": g.feat_dim,
        "cases": {},
    }
    for name, a in cases:
        num_parts = int(a.max()) + 1
        seeds_all = train[a[train] == ns.part]
        rows = remote = 0
        ts = time.perf_counter()
        for _ in range(ns.steps):
            seeds = torch.from_numpy(rng.choice(seeds_all, size=min(ns.batch, seeds_all.size), replace=False))
            input_nodes, _, _ = sampler.sample(full, seeds)
            owner = a[input_nodes.numpy()]
            rows += input_nodes.numel()
            remote += int((owner != ns.part).sum())
        rho = remote / rows
        row_bytes = 4 * g.feat_dim + 8  # feature row + its id in the request
        res["cases"][name] = {
            "num_parts": num_parts,
            "input_rows_per_step": rows / ns.steps,
            "remote_fraction": rho,
            "remote_bytes_per_step": remote / ns.steps * row_bytes,
            "sample_s_per_step": (time.perf_counter() - ts) / ns.steps,
            "train_nodes_in_part": int(seeds_all.size),
        }
        c = res["cases"][name]
        print(
            f"{name:>16}: P={num_parts} input rows/step {c['input_rows_per_step']:.0f}, remote {rho:.1%}, "
            f"{c['remote_bytes_per_step'] / 2**20:.1f} MiB remote feature bytes per step"
        )
    res["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"peak RSS {res['peak_rss_gb']:.2f} GB (whole-graph CSC built in {build_s:.0f} s)")
    if ns.out:
        Path(ns.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
