"""The table of benchmarks/dgl_scripts' runs: per setting, DistDGL (the unconverted script) against the drop-in.

    python benchmarks/dgl_scripts/report.py [results.jsonl] [--json out.json]

A setting is (kind, graph and partitioning, the script's arguments); its rows are the unconverted script
(``base``) and each drop-in variant (the loader's keywords; none = the defaults), with the mean test accuracy the
script printed over the runs, each run's value, and the drop-in's difference from DistDGL's mean in points.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import defaultdict
from pathlib import Path
from statistics import mean

ROOT = Path(__file__).resolve().parents[2]


def rows(results: Path) -> list[dict]:
    out = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    return [r for r in out if r.get("acc") is not None]


def table(runs: list[dict]) -> tuple[str, list[dict]]:
    groups: dict = defaultdict(lambda: defaultdict(list))
    for r in runs:
        setting = (r["kind"], r["parts"], r["args"])
        variant = (
            "DistDGL (unconverted)"
            if r["system"] == "base"
            else r.get("label") or f"drop-in {r['loader_kwargs'] or '(defaults)'}"
        )
        groups[setting][variant].append((r["acc"], r.get("seed")))
    names = {args: f"A{i + 1}" for i, args in enumerate(sorted({k[2] for k in groups}))}
    lines = [
        "| kind | graph, partitions | arguments | system | runs | test acc (mean) | each run (seed) | vs DistDGL "
        "| paired by seed (pairs) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    data = []
    for (kind, parts, args), variants in sorted(groups.items()):
        base = variants.get("DistDGL (unconverted)")
        ref = mean(a for a, _ in base) if base else None
        by_seed = defaultdict(list)  # DistDGL's seeded runs, for the pairs
        for a, seed in base or []:
            if seed is not None:
                by_seed[seed].append(a)
        for name in sorted(variants, key=lambda v: (not v.startswith("DistDGL"), v)):
            runs = variants[name]
            accs = [a for a, _ in runs]
            own = name.startswith("DistDGL")
            diff = "" if ref is None or own else f"{100 * (mean(accs) - ref):+.2f}"
            pairs = [a - mean(by_seed[seed]) for a, seed in runs if seed in by_seed] if not own else []
            paired = f"{100 * mean(pairs):+.2f} ({len(pairs)})" if pairs else ""
            each = ", ".join(f"{a:.4f}" + (f" ({seed})" if seed is not None else "") for a, seed in runs)
            lines.append(
                f"| {kind} | {parts} | {names[args]} | {name} | {len(accs)} | {mean(accs):.4f} | {each} | {diff} "
                f"| {paired} |"
            )
            data.append(
                {
                    "kind": kind,
                    "parts": parts,
                    "args": args,
                    "system": name,
                    "accs": accs,
                    "mean": mean(accs),
                    "diff_points": None if not diff else float(diff),
                }
            )
    lines += ["", "Arguments (the script's own, besides the launcher's):", ""]
    lines += [f"- {name}: `{args}`" for args, name in names.items()]
    return "\n".join(lines), data


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "results",
        nargs="?",
        default=str(Path(os.environ.get("DROPIN_OUT", ROOT / "runs" / "dropin-exp")) / "results.jsonl"),
    )
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    text, data = table(rows(Path(a.results)))
    print(text)
    if a.json:
        Path(a.json).write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
