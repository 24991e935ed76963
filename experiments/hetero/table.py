"""The ablation table of experiments/hetero/README.md from bench cell files.

Per row (partitioner, parts, layers) and system: seeds, mean test accuracy (the bench's window mean),
the paired difference to DistDGL and to a base system (``--base``, default grappa; per seed, mean and
95 % t-interval, points), and the wire bytes per epoch (amortised, median over epochs, all workers).

    python experiments/hetero/table.py runs/hetero-ablate [more bench out_dirs ...] [--systems a,b,...] [--base NAME]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from dgl_grappa.bench.report import ok_systems, t_interval


def load(dirs: list[str]) -> list[dict]:
    """Every cell of the folders; a cell in several folders gets the systems of all of them (later ones win)."""
    cells: dict[str, dict] = {}
    for d in dirs:
        for f in sorted(Path(d, "cells").glob("*.json")):
            doc = json.loads(f.read_text())
            if f.stem in cells:
                cells[f.stem]["systems"].update(doc["systems"])
            else:
                cells[f.stem] = doc
    return list(cells.values())


def fmt(m, lo, hi) -> str:
    if m is None:
        return "-"
    return f"{100 * m:+.2f}" + (f" [{100 * lo:+.2f}, {100 * hi:+.2f}]" if lo is not None else "")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--systems", default="", help="comma-separated systems, in this order (default: all, sorted)")
    ap.add_argument("--base", default="grappa", help="the system of the second difference column")
    args = ap.parse_args()
    rows = defaultdict(list)
    for c in load(args.dirs):
        a = c["axes"]
        rows[(a["partition"], int(a["parts"]), int(a["layers"]))].append(c)
    order = [s for s in args.systems.split(",") if s]
    print(
        "| partition | parts | layers | system | seeds | test acc % | vs DistDGL, points (95 % CI) | "
        f"vs {args.base}, points (95 % CI) | bytes/epoch |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for key in sorted(rows):
        per = [(c["axes"]["seed"], ok_systems(c)) for c in rows[key]]
        names = order or sorted({n for _, s in per for n in s})
        for n in names:
            acc = [s[n]["test_acc_window"] for _, s in per if n in s and s[n].get("test_acc_window") is not None]
            if not acc:
                continue
            d_dist = [
                s[n]["test_acc_window"] - s["distdgl"]["test_acc_window"] for _, s in per if n in s and "distdgl" in s
            ]
            d_base = [
                s[n]["test_acc_window"] - s[args.base]["test_acc_window"]
                for _, s in per
                if n in s and args.base in s and n != args.base
            ]
            b = [s[n].get("bytes_per_epoch_amortised") for _, s in per if n in s]
            b = [x for x in b if x is not None]
            nbytes = f"{sum(b) / len(b) / 1e3:.0f} KB" if b else "-"
            print(
                f"| {key[0]} | {key[1]} | {key[2]} | {n} | {len(acc)} | {100 * sum(acc) / len(acc):.2f} | "
                f"{fmt(*t_interval(d_dist)) if n != 'distdgl' else '(reference)'} | "
                f"{fmt(*t_interval(d_base)) if d_base else '-'} | {nbytes} |"
            )


if __name__ == "__main__":
    main()
