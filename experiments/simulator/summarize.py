"""Tables from experiments/simulator/results/*.json: accuracy mean±std, paired difference to DistDGL with a
95 % t-interval, bytes/epoch ratio to DistDGL, cache memory. Prints markdown."""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571}


def load(results: Path) -> list[dict]:
    rows = []
    for p in sorted(results.glob("*.json")):
        if p.name == "partitioners.json":
            continue
        r = json.loads(p.read_text())
        if isinstance(r, dict) and "final_test" in r:
            r.pop("curve", None)
            fix_v1(r)
            rows.append(r)
    return rows


def fix_v1(r: dict) -> None:
    """Files written before the byte/cache accounting fix (bytes_v2): halo+fhc counted the halo x
    rows twice (3H instead of 2H rows), and the fhc cache counted halo rows instead of inner rows."""
    if r.get("bytes_v2"):
        return
    v = r["variant"]
    keep, fhc = v["halo"] == "keep", v["fhc"]
    if keep and fhc and not v["repart"]:
        ep = r["hparams"]["epochs"]
        ot = r["bytes"]["one_time"]
        r["bytes_per_epoch"] -= ot / 3 / ep
    h = r["halo_over_inner_max"]
    hist = r["cache_rows_over_inner_max"] - h * ((1 if keep else 0) + (1 if fhc else 0) + (1 if keep and fhc else 0))
    r["cache_rows_over_inner_max"] = (
        h * ((1 if keep else 0) + (1 if keep and fhc else 0)) + (1 if fhc else 0) + max(hist, 0.0)
    )


def cells(rows: list[dict]):
    by = defaultdict(dict)
    for r in rows:
        key = (r["dataset"], r["partition"], r["parts"], r["model"], r["layers"])
        by[key].setdefault(r["tag"], {})[r["seed"]] = r
    return by


def fmt_pm(xs) -> str:
    xs = np.asarray(xs) * 100
    return f"{xs.mean():.1f}±{xs.std(ddof=1) if len(xs) > 1 else 0:.1f}"


def diff(a: dict, b: dict) -> tuple[float, float, int]:
    """Paired (by seed) mean difference a - b in points and the 95 % half-width."""
    seeds = sorted(set(a) & set(b))
    d = np.array([a[s]["final_test"] - b[s]["final_test"] for s in seeds]) * 100
    if len(d) == 0:
        return float("nan"), float("nan"), 0
    hw = T95.get(len(d) - 1, 2.0) * d.std(ddof=1) / math.sqrt(len(d)) if len(d) > 1 else float("nan")
    return float(d.mean()), hw, len(d)


def table(rows: list[dict], datasets=None, tags=None, min_seeds=1) -> str:
    out = []
    by = cells(rows)
    for key in sorted(by):
        ds = key[0]
        if datasets and ds not in datasets:
            continue
        variants = by[key]
        if "distdgl" not in variants:
            continue
        base = variants["distdgl"]
        for tag in sorted(variants, key=lambda t: (t != "distdgl", t)):
            if tags and tag not in tags and tag != "distdgl":
                continue
            v = variants[tag]
            if len(v) < min_seeds:
                continue
            acc = [x["final_test"] for x in v.values()]
            bpe = np.mean([x["bytes_per_epoch"] for x in v.values()])
            bref = np.mean([x["bytes_per_epoch"] for x in base.values()])
            conv = sum(x["converged"] for x in v.values())
            if tag == "distdgl":
                dtxt, ratio = "-", "1"
            else:
                m, hw, n = diff(v, base)
                dtxt = f"{m:+.1f} [{m - hw:+.1f}, {m + hw:+.1f}]" if n > 1 else f"{m:+.1f}"
                ratio = f"{bpe / bref:.3f}"
            cache = np.mean([x["cache_rows_over_inner_max"] for x in v.values()])
            out.append(
                f"| {ds} | {key[1]}-{key[2]} | {key[3]}-{key[4]} | {tag} | {len(v)} | {fmt_pm(acc)} | {dtxt} "
                f"| {bpe:.3g} | {ratio} | {cache:.2f} | {conv}/{len(v)} |"
            )
    head = (
        "| graph | partition | model | variant | seeds | test acc % | Δ vs DistDGL (pt) [95% CI] | bytes/epoch "
        "| ratio to DistDGL | cache rows / inner (max worker) | converged |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|"
    )
    return head + "\n" + "\n".join(out)


def pivot(rows: list[dict], tags: list[str], min_seeds=2) -> str:
    """One row per cell, one column per variant: Δ vs DistDGL (mean, paired)."""
    by = cells(rows)
    lines = [
        "| graph | partition | model | DistDGL acc % | " + " | ".join(tags) + " |",
        "|---|---|---|---|" + "---|" * len(tags),
    ]
    for key in sorted(by):
        variants = by[key]
        if "distdgl" not in variants or len(variants["distdgl"]) < min_seeds:
            continue
        base = variants["distdgl"]
        cols = []
        for t in tags:
            if t in variants:
                m, hw, n = diff(variants[t], base)
                cols.append(f"{m:+.1f}" + (f" ±{hw:.1f}" if n > 1 else "") + ("" if n >= 3 else f" (n={n})"))
            else:
                cols.append("")
        lines.append(
            f"| {key[0]} | {key[1]}-{key[2]} | {key[3]}-{key[4]} | "
            f"{fmt_pm([x['final_test'] for x in base.values()])} | " + " | ".join(cols) + " |"
        )
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", default=str(Path(__file__).resolve().parent / "results"))
    ap.add_argument("--datasets", default="")
    ap.add_argument("--pivot", default="")
    ap.add_argument("--min-seeds", type=int, default=1)
    a = ap.parse_args(argv)
    rows = load(Path(a.results))
    ds = set(a.datasets.split(",")) if a.datasets else None
    if a.pivot:
        print(pivot([r for r in rows if not ds or r["dataset"] in ds], a.pivot.split(";"), a.min_seeds))
    else:
        print(table(rows, ds, min_seeds=a.min_seeds))


if __name__ == "__main__":
    main()
