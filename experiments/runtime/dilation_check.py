#!/usr/bin/env python
"""Does time dilation keep the emulated cluster's ratio? DistDGL vs Grappa, pinned vs one shared core.

Two settings of the same ``python -m dgl_grappa compare`` run (2 test hosts, each its own
link of the config's bandwidth, DistDGL and Grappa on the same partitions, made once):

* ``pinned``: one whole core per host (``network.host_cpus=A,B``): D = 1;
* ``shared-core``: both hosts on ONE core, half a core each (``network.host_cpus=A``), the
  links dilated to bandwidth / 2 (``network.dilation=auto`` gives D = 2).

If the emulation is right, each host computes half as fast in the second setting and its
network is half as fast too, so every epoch takes about twice as long and the DistDGL /
Grappa epoch-time ratio stays where it was. The script prints each system's epoch time
(measured, i.e. dilated, and divided by D), the ratio in both settings and their relative
difference (target: within 10 %), and writes ``<out>/dilation_check.json``. With
``--repeats`` the settings alternate and the medians are compared. Needs root (test hosts,
cgroups) and a quiet machine: other load on the chosen cores distorts both settings
differently. Example::

    DGLBACKEND=pytorch python experiments/runtime/dilation_check.py --config configs/dilation_check.yaml \\
        --cores 0,1 --repeats 3 --out runs/dilation-check
    # smoke run (minutes): --nodes 2000 --epochs 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SYSTEMS = ("distdgl", "grappa-none")


def settings(cores: list[int]) -> dict[str, dict]:
    """The two settings: their network overrides and the D and CPU share they must come out with."""
    a, b = cores
    return {
        "pinned": {"args": [f"--network.host_cpus={a},{b}", "--network.dilation=auto"], "D": 1.0, "share": 1.0},
        "shared-core": {"args": [f"--network.host_cpus={a}", "--network.dilation=auto"], "D": 2.0, "share": 0.5},
    }


def run_one(args, name: str, extra: list[str], run_dir: Path, parts: Path) -> dict:
    """One ``compare`` run of a setting (output in ``run_dir``, the partitions shared in ``parts``);
    its epoch times, D and CPU share from compare.json."""
    cmd = [
        sys.executable,
        "-m",
        "dgl_grappa",
        "compare",
        "--config",
        args.config,
        "--launch.remote=netns",
        "--network.link=per_host",
        f"--network.bandwidth={args.bandwidth}",
        "--partition.num_parts=2",
        f"--partition.out_dir={parts}",
        "--compare.variants=[none]",
        "--compare.dropin=false",
        "--compare.distdgl=true",
        f"--run.output_dir={run_dir}",
        *extra,
        *args.overrides,
    ]
    if args.epochs:
        cmd.append(f"--train.epochs={args.epochs}")
    if args.nodes:
        cmd.append(f"--data.synthetic.num_nodes={args.nodes}")
    print(f"  {name}: {' '.join(cmd[3:])}", flush=True)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(
            cmd,
            cwd=ROOT,
            env=dict(os.environ, DGLBACKEND="pytorch"),
            capture_output=True,
            text=True,
            timeout=args.timeout_s,
        )
    except subprocess.TimeoutExpired:
        raise SystemExit(
            f"compare ran past --timeout-s={args.timeout_s:.0f} ({name}); its logs are in {run_dir}"
        ) from None
    wall = time.perf_counter() - t0
    (run_dir / "compare.log").parent.mkdir(parents=True, exist_ok=True)
    (run_dir / "compare.log").write_text(p.stdout + p.stderr)
    if p.returncode != 0:
        raise SystemExit(
            f"compare failed ({name}, status {p.returncode}); log in {run_dir / 'compare.log'}:\n{p.stderr[-3000:]}"
        )
    res = json.loads((run_dir / "compare.json").read_text())
    rows = {r["system"]: r for r in res["rows"]}
    cpu = {s: json.loads((run_dir / s / "summary.json").read_text()).get("cpu_time_s_rank0") for s in SYSTEMS}
    return {
        "setting": name,
        "network_dilation": res.get("network_dilation"),
        "cpu_time_s_rank0": cpu,
        "host_cpu_share": res.get("host_cpu_share"),
        "epoch_time_s": {s: rows[s]["epoch_time_s"] for s in SYSTEMS},
        "ratio": rows["distdgl"]["epoch_time_s"] / rows["grappa-none"]["epoch_time_s"],
        "wire_bytes_per_epoch": {s: rows[s]["wire_bytes_per_epoch"] for s in SYSTEMS},
        "wall_s": wall,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/dilation_check.yaml")
    ap.add_argument("--cores", default="", help="two cores A,B (default: the first two this process may use)")
    ap.add_argument("--bandwidth", default="1gbit", help="each host's link (default 1gbit)")
    ap.add_argument("--epochs", type=int, default=0, help="train.epochs (default: the config's)")
    ap.add_argument("--nodes", type=int, default=0, help="data.synthetic.num_nodes (default: the config's)")
    ap.add_argument("--repeats", type=int, default=1, help="alternate the settings this many times (medians)")
    ap.add_argument("--tolerance", type=float, default=0.10, help="target for the ratios' relative difference")
    ap.add_argument("--timeout-s", type=float, default=7200.0, help="bound on one compare run")
    ap.add_argument("--out", default="runs/dilation-check")
    ap.add_argument("overrides", nargs="*", help="further --a.b=v overrides for every run (after --)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("dilation_check: needs root (test hosts and their CPU shares)")
    cores = [int(c) for c in args.cores.split(",")] if args.cores else sorted(os.sched_getaffinity(0))[:2]
    if len(cores) != 2 or cores[0] == cores[1]:
        raise SystemExit(f"dilation_check: needs two different cores, got {cores}; pass --cores A,B")
    out = (ROOT / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    plan = settings(cores)
    runs: list[dict] = []
    t0 = time.perf_counter()
    for rep in range(args.repeats):
        # Alternate the order, so that a drift of the machine does not favour one setting.
        order = list(plan) if rep % 2 == 0 else list(reversed(plan))
        print(f"repeat {rep + 1}/{args.repeats}", flush=True)
        for name in order:
            r = run_one(args, name, plan[name]["args"], out / f"r{rep}" / name, out / "parts")
            if (r["network_dilation"], r["host_cpu_share"]) != (plan[name]["D"], plan[name]["share"]):
                raise SystemExit(
                    f"dilation_check: {name} ran with D={r['network_dilation']} and "
                    f"{r['host_cpu_share']} cores per host, not D={plan[name]['D']} and "
                    f"{plan[name]['share']}: the emulation is not what this check assumes"
                )
            r["repeat"] = rep
            runs.append(r)

    med = {}
    for name, s in plan.items():
        mine = [r for r in runs if r["setting"] == name]
        med[name] = {
            "network_dilation": s["D"],
            "host_cpu_share": s["share"],
            "epoch_time_s": {k: statistics.median(r["epoch_time_s"][k] for r in mine) for k in SYSTEMS},
            "ratio": statistics.median(r["ratio"] for r in mine),
            "cpu_time_s_rank0": {k: statistics.median(r["cpu_time_s_rank0"][k] for r in mine) for k in SYSTEMS},
        }
        med[name]["emulated_epoch_time_s"] = {k: v / s["D"] for k, v in med[name]["epoch_time_s"].items()}
    r_pin, r_shared = med["pinned"]["ratio"], med["shared-core"]["ratio"]
    rel = (r_shared - r_pin) / r_pin
    result = {
        "config": args.config,
        "cores": cores,
        "bandwidth": args.bandwidth,
        "epochs": args.epochs or None,
        "nodes": args.nodes or None,
        "repeats": args.repeats,
        "settings": med,
        "runs": runs,
        "ratio_pinned": r_pin,
        "ratio_shared_core": r_shared,
        "relative_difference": rel,
        "tolerance": args.tolerance,
        "within_tolerance": abs(rel) <= args.tolerance,
        "wall_s": time.perf_counter() - t0,
    }
    (out / "dilation_check.json").write_text(json.dumps(result, indent=2))

    print(
        f"\n{'setting':<12} {'D':>3} {'cores/host':>10} {'DistDGL epoch':>22} {'Grappa epoch':>22} "
        f"{'DistDGL/Grappa':>15}"
    )
    for name, m in med.items():
        e, em = m["epoch_time_s"], m["emulated_epoch_time_s"]
        print(
            f"{name:<12} {m['network_dilation']:>3.0f} {m['host_cpu_share']:>10.2g} "
            f"{e['distdgl']:>8.3f} s ({em['distdgl']:.3f} s/D) {e['grappa-none']:>8.3f} s ({em['grappa-none']:.3f} "
            f"s/D) {m['ratio']:>14.3f}x"
        )
    # Rank 0's CPU seconds an epoch: the same work, so a time-sliced host that needs more of
    # them computes slower than 1/D of a core (caches, TLB), which no link dilation undoes.
    cpu_up = {k: med["shared-core"]["cpu_time_s_rank0"][k] / med["pinned"]["cpu_time_s_rank0"][k] - 1 for k in SYSTEMS}
    result["cpu_inflation_shared_core"] = cpu_up
    (out / "dilation_check.json").write_text(json.dumps(result, indent=2))
    print(
        "rank 0's CPU seconds an epoch, pinned -> shared-core: "
        + ", ".join(
            f"{k} {med['pinned']['cpu_time_s_rank0'][k]:.3f} -> {med['shared-core']['cpu_time_s_rank0'][k]:.3f} s "
            f"({cpu_up[k]:+.1%})"
            for k in SYSTEMS
        )
    )
    print(
        f"relative difference of the ratios (shared-core vs pinned): {rel:+.1%} "
        f"(target within {args.tolerance:.0%}: {'yes' if abs(rel) <= args.tolerance else 'NO'})"
    )
    print(f"wrote {out / 'dilation_check.json'} ({result['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
