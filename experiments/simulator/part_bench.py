"""Partitioner table: edge cut, node balance, train balance, halo/inner and time per method."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sim  # noqa: E402
from partitioners import make_partition, partition_stats  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default="cora,citeseer,syn20k,syn100k")
    ap.add_argument("--parts", default="4,8")
    ap.add_argument("--methods", default="random,ldg1,ldg,fennel,metis")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "partitioners.json"))
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = json.loads(Path(a.out).read_text()) if Path(a.out).exists() else []
    done = {(r["dataset"], r["parts"], r["method"], r["seed"]) for r in rows}
    for ds in a.datasets.split(","):
        G = sim.load_graph(ds)
        ptr, ind, tm = G.indptr.numpy(), G.indices.numpy(), G.train.numpy()
        for W in map(int, a.parts.split(",")):
            for m in a.methods.split(","):
                for seed in map(int, a.seeds.split(",")):
                    if (ds, W, m, seed) in done:
                        continue
                    part, secs = make_partition(
                        m, ptr, ind, W, sim.partition_seed(ds, seed), train_mask=tm, dgl_graph=G.dgl_graph
                    )
                    st = partition_stats(ptr, ind, part, W, tm)
                    # how different is a re-run with another seed (perturbation for repartitioning)?
                    r = {"dataset": ds, "parts": W, "method": m, "seed": seed, "seconds": secs, **st}
                    rows.append(r)
                    print(json.dumps(r), flush=True)
                    Path(a.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
