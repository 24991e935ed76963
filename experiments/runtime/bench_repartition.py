#!/usr/bin/env python
"""Benchmark of the repartition methods: cut, overlap, build time, edges ever local.

For every ``schedule.method`` it builds ``--count`` successive partitionings of one graph
exactly as the background builder does (assignment + DGL's on-disk layout, via
``scheduler.build_partitioning``), one at a time in this process, and reports per method:

* edge-cut fraction of each partitioning;
* overlap with the previous one (share of nodes that keep their part after the best
  matching of part labels);
* build time (assignment, layout write, total);
* fraction of edges local in at least one of the partitionings so far.

Prints a table and writes JSON. Example (the issue's setting)::

    DGLBACKEND=pytorch python experiments/runtime/bench_repartition.py --num-nodes 100000 --parts 4 --count 10
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from dgl_grappa.config import SyntheticConfig
from dgl_grappa.data import synthetic_graph
from dgl_grappa.partition import schedule as S


def bench_method(g, method: str, parts: int, count: int, seed: int, workdir: Path) -> dict:
    """Build ``count`` partitionings with one method; per-partitioning records and a summary."""
    spec = S.AssignmentSpec(num_parts=parts, method=method, seed=seed)
    src, dst = (t.numpy() for t in g.edges())
    tracker = S.LocalityTracker(src, dst)
    root = workdir / method
    prev, rows = None, []
    for j in range(count):
        stats, assignment = S.build_partitioning(g, spec, j, root, prev=prev)
        rows.append(
            {
                "index": j,
                "edge_cut": stats["edge_cut"],
                "overlap_prev": stats.get("overlap_prev"),
                "assign_s": stats["assign_s"],
                "write_s": stats["write_s"],
                "build_s": stats["build_s"],
                "ever_local_edges": tracker.add(assignment),
            }
        )
        S.remove_old(root, j, keep_last=1)  # keep the disk footprint at one partitioning
        prev = assignment
    shutil.rmtree(root, ignore_errors=True)
    ov = [r["overlap_prev"] for r in rows[1:]]
    return {
        "method": method,
        "partitionings": rows,
        "edge_cut_mean": statistics.mean(r["edge_cut"] for r in rows),
        "edge_cut_min": min(r["edge_cut"] for r in rows),
        "edge_cut_max": max(r["edge_cut"] for r in rows),
        "overlap_mean": statistics.mean(ov) if ov else None,
        "assign_s_mean": statistics.mean(r["assign_s"] for r in rows),
        "build_s_mean": statistics.mean(r["build_s"] for r in rows),
        "build_s_max": max(r["build_s"] for r in rows),
        "ever_local_edges": rows[-1]["ever_local_edges"],
        "ever_local_curve": [r["ever_local_edges"] for r in rows],
    }


def format_table(results: list[dict], count: int) -> str:
    head = (
        f"{'method':<16} {'edge cut (mean, min-max)':>26} {'overlap':>8} {'assign s':>9} {'build s':>8} "
        f"{'max s':>6} {'ever local':>10}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        cut = f"{r['edge_cut_mean']:.4f} ({r['edge_cut_min']:.4f}-{r['edge_cut_max']:.4f})"
        ov = f"{r['overlap_mean']:.3f}" if r["overlap_mean"] is not None else "-"
        lines.append(
            f"{r['method']:<16} {cut:>26} {ov:>8} {r['assign_s_mean']:>9.2f} {r['build_s_mean']:>8.2f} "
            f"{r['build_s_max']:>6.2f} {r['ever_local_edges']:>10.4f}"
        )
    lines.append(
        f"(over {count} successive partitionings; overlap = nodes keeping their part vs the previous "
        "one after the best label matching; ever local = edges local in at least one)"
    )
    lines.append("edges ever local after j+1 partitionings:")
    for r in results:
        lines.append(f"  {r['method']:<16} " + " ".join(f"{x:.3f}" for x in r["ever_local_curve"]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-nodes", type=int, default=100_000)
    ap.add_argument("--avg-degree", type=float, default=10.0)
    ap.add_argument("--preset", default="hard", choices=["easy", "hard"])
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--count", type=int, default=10, help="successive partitionings per method")
    ap.add_argument("--methods", default=",".join(S.METHODS), help="comma-separated subset of " + ",".join(S.METHODS))
    ap.add_argument("--seed", type=int, default=0, help="schedule seed")
    ap.add_argument("--out", default="runs/bench_repartition.json", help="JSON output")
    ap.add_argument("--workdir", default="", help="where layouts are written (default: a temp folder)")
    args = ap.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    unknown = [m for m in methods if m not in S.METHODS]
    if unknown:
        ap.error(f"unknown methods {unknown}; choose from {', '.join(S.METHODS)}")

    t0 = time.perf_counter()
    g = synthetic_graph(SyntheticConfig(num_nodes=args.num_nodes, avg_degree=args.avg_degree, preset=args.preset))
    print(
        f"graph: {g.num_nodes()} nodes, {g.num_edges()} edges ({time.perf_counter() - t0:.2f} s); "
        f"{args.parts} parts, {args.count} partitionings per method",
        flush=True,
    )
    with tempfile.TemporaryDirectory(dir=args.workdir or None) as tmp:
        results = []
        for m in methods:
            results.append(bench_method(g, m, args.parts, args.count, args.seed, Path(tmp)))
            print(f"  {m}: done ({sum(r['build_s'] for r in results[-1]['partitionings']):.1f} s)", flush=True)
    print(format_table(results, args.count))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "graph": {
                    "num_nodes": g.num_nodes(),
                    "num_edges": g.num_edges(),
                    "preset": args.preset,
                    "avg_degree": args.avg_degree,
                },
                "parts": args.parts,
                "count": args.count,
                "seed": args.seed,
                "subsample_keep": S.SUBSAMPLE_KEEP,
                "weight_max": S.WEIGHT_MAX,
                "results": results,
            },
            indent=1,
        )
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
