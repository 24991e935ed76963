#!/usr/bin/env python
"""DistDGL vs Grappa across namespace test hosts: one NIC per machine vs one shared link.

For every number of parts and every link setting it runs ``python -m dgl_grappa compare``
with ``launch.remote=netns`` (one test host per part): both systems in the same run, on
the same partitions, so each row's ratios come from one measurement on the (shared, noisy)
machine. Link settings: ``per_host`` (each host its own link of the given rate, both
directions), ``shared`` (all hosts behind one link of that rate), and ``unshaped``.
Prints a table and writes ``<out>/compare_hosts.json`` and ``<out>/compare_hosts.md``.
Needs root (test hosts). Example (the README's tables)::

    DGLBACKEND=pytorch python experiments/runtime/compare_hosts.py --config configs/compare.yaml --parts 2 4 \\
        --links per_host shared unshaped --bandwidth 1gbit --out runs/compare-hosts
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from dgl_grappa.runtime.metrics import format_bytes

ROOT = Path(__file__).resolve().parents[2]


def run_one(
    config: str, parts: int, link: str, bandwidth: str, out: Path, variants: str, extra: list[str], timeout_s: float
) -> dict:
    """One ``compare`` run; its compare.json plus the per-host bytes of each system."""
    shaped = link != "unshaped"
    args = [
        sys.executable,
        "-m",
        "dgl_grappa",
        "compare",
        "--config",
        config,
        f"--partition.num_parts={parts}",
        f"--partition.out_dir={out / f'parts-{parts}'}",
        "--launch.remote=netns",
        f"--network.link={link if shaped else 'per_host'}",
        f"--network.bandwidth={bandwidth if shaped else ''}",
        f"--compare.variants={variants}",
        "--compare.dropin=false",
        f"--run.output_dir={out / f'p{parts}-{link}'}",
        *extra,
    ]
    t0 = time.perf_counter()
    p = subprocess.run(
        args, cwd=ROOT, env=dict(os.environ, DGLBACKEND="pytorch"), capture_output=True, text=True, timeout=timeout_s
    )
    if p.returncode != 0:
        raise SystemExit(f"compare failed (parts={parts}, link={link}):\n{p.stderr[-3000:]}")
    res = json.loads((out / f"p{parts}-{link}" / "compare.json").read_text())
    res["wall_s"] = time.perf_counter() - t0
    return res


def row(parts: int, link: str, bandwidth: str, res: dict) -> dict:
    rows = {r["system"]: r for r in res["rows"]}
    base = rows["distdgl"]
    g = next(r for name, r in rows.items() if name.startswith("grappa-"))
    max_tx = lambda r: max((h["tx_bytes_per_epoch"] for h in r.get("wire_hosts") or []), default=None)  # noqa: E731
    return {
        "parts": parts,
        "link": link,
        "bandwidth": bandwidth if link != "unshaped" else None,
        "grappa": g["system"],
        "distdgl_epoch_s": base["epoch_time_s"],
        "distdgl_wire_per_epoch": base["wire_bytes_per_epoch"],
        "distdgl_max_host_tx_per_epoch": max_tx(base),
        "grappa_epoch_s": g["epoch_time_s"],
        "grappa_wire_per_epoch": g["wire_bytes_per_epoch"],
        "epoch_time_ratio": g["epoch_time_s_ratio"],
        "wire_ratio": g["wire_bytes_per_epoch_ratio"],
        "val_acc_distdgl": base["val_acc"],
        "val_acc_grappa": g["val_acc"],
        "time_to_target_ratio": g["time_to_target_ratio"],
        "wall_s": res["wall_s"],
    }


def table(rows: list[dict]) -> str:
    head = [
        "parts",
        "link",
        "DistDGL epoch",
        "DistDGL wire/epoch (max per host)",
        "Grappa epoch",
        "epoch time ratio",
        "wire ratio",
        "val acc (DistDGL, Grappa)",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        link = "unshaped" if r["link"] == "unshaped" else f"{r['bandwidth']} {r['link'].replace('_', '-')}"
        lines.append(
            "| "
            + " | ".join(
                [
                    str(r["parts"]),
                    link,
                    f"{r['distdgl_epoch_s']:.2f} s",
                    f"{format_bytes(r['distdgl_wire_per_epoch'])} ({format_bytes(r['distdgl_max_host_tx_per_epoch'])})",
                    f"{r['grappa_epoch_s']:.2f} s",
                    f"{r['epoch_time_ratio']:.2f}x",
                    f"{r['wire_ratio']:.3f}x",
                    f"{r['val_acc_distdgl']:.3f}, {r['val_acc_grappa']:.3f}",
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/compare.yaml")
    ap.add_argument("--parts", type=int, nargs="+", default=[2, 4])
    ap.add_argument(
        "--links", nargs="+", default=["per_host", "shared", "unshaped"], choices=["per_host", "shared", "unshaped"]
    )
    ap.add_argument("--bandwidth", default="1gbit")
    ap.add_argument("--variants", default="[batch]", help="compare.variants (Grappa's corrections)")
    ap.add_argument("--out", default="runs/compare-hosts")
    ap.add_argument("--timeout", type=float, default=1800.0, help="bound on each compare run, seconds")
    args, extra = ap.parse_known_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for parts in args.parts:
        for link in args.links:
            print(f"parts={parts} link={link} ...", flush=True)
            res = run_one(args.config, parts, link, args.bandwidth, out, args.variants, extra, args.timeout)
            rows.append(row(parts, link, args.bandwidth, res))
            print(
                f"  DistDGL {rows[-1]['distdgl_epoch_s']:.2f} s/epoch, Grappa {rows[-1]['epoch_time_ratio']:.2f}x "
                f"epoch time, {rows[-1]['wire_ratio']:.3f}x wire ({rows[-1]['wall_s']:.0f} s)",
                flush=True,
            )
            (out / "compare_hosts.json").write_text(json.dumps(rows, indent=1))
    md = table(rows)
    (out / "compare_hosts.md").write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
