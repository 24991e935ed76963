"""The capacity model of docs/scaling.md: checks against measured runs, then predictions.

Measured inputs come from the README's compare tables and notes/distdgl-recipe.md (100k
graph; constants below, with their source) and from runs/scale/*.json (the 100M-edge
build and probes: experiments/scale/scale_build.py, scale_train_probe.py, scale_remote_probe.py)
when present. Prints tables and writes runs/scale/capacity.json.

    python experiments/scale/capacity_model.py

Check 6 compares the model of the node tables a worker holds (features, first-hop aggregates,
kept halo: ``capacity.resident_bytes`` with ``reach_fractions``) with measured resident bytes:

* ``--memory-runs DIR...``: run folders (or their summary.json files) whose partition folder
  still exists (its grappa_partition.json gives the halo shares, cut and train nodes);
* ``--memory-cells PATH...``: archived bench cells, ``benchmarks/<name>/cells`` folders or
  single ``*.json.gz`` cells (the cell carries the partition statistics, each worker its
  training seeds), every ``grappa*`` system with per-worker ``resident_bytes``; prints every
  worker and a summary per dataset x partitioner x parts and overall;
* ``--memory-only``: check 6 alone (no other checks or predictions); writes
  runs/scale/capacity_memory.json instead of capacity.json.

    python experiments/scale/capacity_model.py --memory-only \\
        --memory-cells benchmarks/memory/cells benchmarks/dropin/cells benchmarks/sparse_labels/cells
"""

from __future__ import annotations

import json
from pathlib import Path

from dgl_grappa.bench.capacity import (
    GB,
    Workload,
    distdgl_feature_step_bytes,
    epoch_bytes,
    epoch_seconds,
    grappa_step_bytes,
    part_bytes,
    part_cut,
    random_halo_share,
    random_remote_fraction,
    reach_fractions,
    resident_bytes,
    scale_step_time,
)

ROOT = Path(__file__).resolve().parents[2]

RUNS = ROOT / "runs" / "scale"
MB = 1e6

# 100k-node hard graph, GraphSAGE 2 x 64, fan-outs [10, 25], batch 1000, 60k train nodes.
# notes/distdgl-recipe.md section 3 (per trainer per epoch) and README "Measured".
M100K = 41_280  # 10,320 parameters
MEASURED_100K = {
    # name: (parts, input rows per epoch, rho, measured remote feature MB per trainer)
    "metis 2": (2, 1.28e6, 0.155, (50, 52)),
    "metis 4": (4, 0.48e6, 0.30, (37, 37)),
    "random 2": (2, 1.59e6, 0.495, (201, 201)),
}
# README compare table: DistDGL epoch s and wire MB (all workers) per epoch; Grappa as ratios.
COMPARE = {  # (parts, network): (distdgl_epoch_s, distdgl_wire_MB, grappa_time_ratio, grappa_wire_ratio)
    (2, "loopback"): (1.95, 104.7, 1.04, 0.025),
    (4, "loopback"): (2.24, 162.3, 0.79, 0.026),
    (2, "1gbit"): (2.22, 104.8, 0.44, 0.025),
    (4, "1gbit"): (2.48, 162.5, 0.76, 0.026),
    (2, "200mbit"): (4.99, 104.8, 0.22, 0.025),
    (4, "200mbit"): (7.31, 162.7, 0.24, 0.026),
}
BW = {"1gbit": 1e9 / 8, "200mbit": 200e6 / 8, "10gbit": 10e9 / 8, "25gbit": 25e9 / 8}


def _load(name: str) -> dict | None:
    f = RUNS / name
    return json.loads(f.read_text()) if f.is_file() else None


def sage_bytes(f: int, hidden: int, classes: int) -> int:
    """Gradient bytes of dgl_grappa's 2-layer GraphSAGE (SAGEConv mean: fc_self + fc_neigh + bias)."""
    return 4 * ((2 * f * hidden + hidden) + (2 * hidden * classes + classes))


def _dur(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--memory-runs",
        nargs="*",
        default=[],
        help="run folders (or summary.json files) whose workers' resident bytes check the memory model",
    )
    ap.add_argument(
        "--memory-cells",
        nargs="*",
        default=[],
        help="archived bench cells (benchmarks/<name>/cells folders or *.json.gz files) whose Grappa "
        "workers' resident bytes check the memory model",
    )
    ap.add_argument(
        "--memory-only", action="store_true", help="only the memory checks; writes runs/scale/capacity_memory.json"
    )
    args = ap.parse_args(argv)
    out: dict = {"checks": {}, "predictions": {}}
    if args.memory_only:
        memory_checks(out, args.memory_runs)
        memory_cell_checks(out, args.memory_cells)
        RUNS.mkdir(parents=True, exist_ok=True)
        (RUNS / "capacity_memory.json").write_text(json.dumps(out["checks"], indent=1, default=float))
        print(f"\nwrote {RUNS / 'capacity_memory.json'}")
        return
    print("== check 1: DistDGL remote feature bytes per trainer per epoch, 100k graph ==")
    print(f"{'partition':<10} {'steps':>5} {'I/step':>7} {'rho':>5} {'model MB':>9} {'measured MB':>12}")
    for name, (p, rows, rho, meas) in MEASURED_100K.items():
        w = Workload(name, 1e5, 1e6, 64, 6e4, p, M100K, rows / (30 if p == 2 else 15), rho)
        mb = epoch_bytes(w)["distdgl_features"] / MB
        print(f"{name:<10} {w.steps:>5} {w.input_rows:>7.0f} {rho:>5.3f} {mb:>9.1f} {meas[0]:>6}-{meas[1]:<5}")
        out["checks"][f"features {name}"] = {"model_MB": mb, "measured_MB": meas}

    print("\n== check 2: wire bytes per epoch, all workers (README compare, METIS) ==")
    print(f"{'parts':>5} {'DistDGL model':>14} {'measured':>9} {'Grappa model':>13} {'measured':>9}")
    for p, rho, rows in ((2, 0.155, 1.28e6 / 30), (4, 0.30, 0.48e6 / 15)):
        w = Workload(f"metis{p}", 1e5, 1e6, 64, 6e4, p, M100K, rows, rho)
        eb = epoch_bytes(w)
        d_wire, g_ratio = COMPARE[(p, "loopback")][1], COMPARE[(p, "loopback")][3]
        print(
            f"{p:>5} {p * eb['distdgl'] / MB:>11.1f} MB {d_wire:>6.1f} MB {p * eb['grappa'] / MB:>10.2f} MB "
            f"{d_wire * g_ratio:>6.2f} MB"
        )
        out["checks"][f"wire metis{p}"] = {
            "distdgl_model_MB": p * eb["distdgl"] / MB,
            "distdgl_MB": d_wire,
            "grappa_model_MB": p * eb["grappa"] / MB,
            "grappa_MB": d_wire * g_ratio,
        }

    print(
        "\n== check 3: epoch time on a shaped shared link (all workers share it): "
        "DistDGL in [max(T0, W/BW), T0 + W/BW] =="
    )
    print(f"{'parts':>5} {'link':>8} {'low':>6} {'high':>6} {'measured':>9}   Grappa model / measured")
    for (p, net), (t_d, wire, g_t, g_w) in COMPARE.items():
        if net == "loopback":
            continue
        t0 = COMPARE[(p, "loopback")][0]
        xfer = wire * MB / BW[net]
        # Grappa's unshaped epoch from the same table; its link time is < 0.05 s, so the
        # model says "no trend with bandwidth" (the machine's load moves it more than that).
        g0 = t0 * COMPARE[(p, "loopback")][2]
        g_model = g0 + wire * g_w * MB / BW[net]
        lo, hi = max(t0, xfer), t0 + xfer
        print(
            f"{p:>5} {net:>8} {lo:>6.2f} {hi:>6.2f} {t_d:>9.2f} {'ok' if lo <= t_d <= hi else 'OUT':>3}   "
            f"{g_model:.2f} / {t_d * g_t:.2f}"
        )
        out["checks"][f"time {p} {net}"] = {
            "low": lo,
            "high": hi,
            "measured": t_d,
            "grappa_model": g_model,
            "grappa_measured": t_d * g_t,
        }
    # CPU cost per remote row at zero network cost: loopback DistDGL minus Grappa's epoch.
    rpc_row = [
        (COMPARE[(p, "loopback")][0] - 1.10) / (s * rho * rows)
        for p, s, rho, rows in ((2, 30, 0.155, 1.28e6 / 30), (4, 15, 0.30, 0.48e6 / 15))
    ]
    print(f"DistDGL CPU per remote row on loopback (2 cores): {', '.join(f'{r * 1e6:.1f} us' for r in rpc_row)}")
    out["checks"]["remote_row_s_2cores"] = rpc_row

    build, remote = _load("build.json"), _load("remote_probe.json")
    probe = _load("train_probe_ldg_p4_drop.json")
    step_s, step_rows, m_big = 1.316, 121_236.0, 148_032
    if probe:
        step_s, step_rows, m_big = probe["step_s"], probe["input_rows_per_step"], probe["gradient_bytes"]
    if remote:
        print("\n== check 4: 100M-edge graph (6M nodes, 128-dim): bytes per worker per step ==")
        print(
            f"{'partition':<16} {'I/step':>7} {'rho':>6} {'rho random formula':>19} {'DistDGL MB':>11} "
            f"{'Grappa KB':>10} {'ratio':>6}"
        )
        for name, c in remote["cases"].items():
            p = c["num_parts"]
            w = Workload(name, 6e6, 1.08e8, 128, 3.6e6, p, m_big, c["input_rows_per_step"], c["remote_fraction"])
            f_rand = random_remote_fraction(p, c["input_rows_per_step"], 1000) if "random" in name else float("nan")
            d, g = distdgl_feature_step_bytes(w), grappa_step_bytes(w)
            print(
                f"{name:<16} {c['input_rows_per_step']:>7.0f} {c['remote_fraction']:>6.3f} {f_rand:>19.3f} "
                f"{d / MB:>11.1f} {g / 1e3:>10.1f} {d / g:>6.0f}"
            )
            out["checks"][f"100M {name}"] = {"distdgl_step_MB": d / MB, "grappa_step_KB": g / 1e3, "ratio": d / g}
    if build:
        print("\n== check 5: memory of one loaded part (load_local), 100M-edge graph ==")
        for key, run in build.get("runs", {}).items():
            for mode in ("drop", "keep"):
                st = run["stages"].get(f"load-{mode}")
                if not st:
                    continue
                per_edge = (st["peak_rss_gb"] * 2**30 - 0.45e9 - st["feat_bytes"]) / st["local_edges"]
                print(
                    f"{key:<10} {mode:<5} {st['local_nodes']:>10,} nodes {st['local_edges']:>11,} edges "
                    f"peak {st['peak_rss_gb']:.2f} GB = 0.45 GB runtime + {st['feat_bytes'] / GB:.2f} GB features "
                    f"+ {per_edge:.0f} B per local edge"
                )
                out["checks"][f"memory {key} {mode}"] = {"bytes_per_edge": per_edge, **st}

    # ---------------------------------------------------------------- predictions
    ldg8 = remote["cases"].get("assign_ldg_p8", {}).get("remote_fraction", 0.27) if remote else 0.27
    rpc_big = sum(rpc_row) / len(rpc_row)
    # bytes per local edge at load time, measured above (defaults: the ldg-p4 figures)
    per_edge_today = {"drop": 62.0, "keep": 83.0}
    for mode in per_edge_today:
        if f"memory ldg-p4 {mode}" in out["checks"]:
            per_edge_today[mode] = out["checks"][f"memory ldg-p4 {mode}"]["bytes_per_edge"]

    def predict(label: str, w: Workload, cores: int, width: int, nets: list[str], cut: float) -> None:
        t_step = scale_step_time(step_s, step_rows, 128 + 128, 2, w.input_rows, width, cores)
        row_s = rpc_big * 2 / (cores * 0.5)
        eb = epoch_bytes(w)
        mem = {
            f"{h}, {eb_:.0f} B/edge": part_bytes(w, edge_bytes=eb_, halo=h, cut=cut)["total"] / GB
            for h in ("drop", "keep")
            for eb_ in (4, per_edge_today[h])
        }
        print(
            f"\n{label}: P={w.num_parts}, S={eb['steps']} steps/epoch, rho={w.remote_fraction:.2f}, "
            f"I={w.input_rows:,.0f}, M={w.model_bytes / 1e3:.0f} KB, step {t_step:.3f} s on {cores} cores"
        )
        print(
            f"  bytes per worker per epoch: Grappa {eb['grappa'] / GB:.2f} GB, DistDGL {eb['distdgl'] / GB:.1f} GB "
            f"({eb['ratio']:.0f}x); all workers: {w.num_parts * eb['grappa'] / GB:.1f} vs "
            f"{w.num_parts * eb['distdgl'] / GB:.0f} GB"
        )
        print("  memory per worker (GB, halo, bytes/edge): " + ", ".join(f"{k}: {v:.0f}" for k, v in mem.items()))
        times = {}
        for net in nets:
            t = epoch_seconds(w, t_step, BW[net], latency_s=20e-6, remote_row_s=row_s)
            times[net] = t
            print(
                f"  {net:>7}: epoch Grappa {_dur(t['grappa'])}, DistDGL {_dur(t['distdgl_low'])}-"
                f"{_dur(t['distdgl_high'])} (x{t['distdgl_low'] / t['grappa']:.1f}-"
                f"{t['distdgl_high'] / t['grappa']:.1f})"
            )
        out["predictions"][label] = {
            "workload": w.__dict__,
            "steps": eb["steps"],
            "step_s": t_step,
            "bytes": eb,
            "memory_gb": mem,
            "epoch_s": times,
        }

    m_pap = sage_bytes(128, 256, 172)
    pap = Workload("papers100M", 111e6, 1.6e9, 128, 1.2e6, 8, m_pap, 140e3, ldg8, halo_share=1.0)
    print("\n== predictions (2-layer GraphSAGE, hidden 256, fan-outs [10, 25], batch 1000 per worker) ==")
    predict("papers100M, 8 x 32-core, good partition", pap, 32, 128 + 256, ["1gbit", "10gbit"], cut=0.17)
    predict(
        "papers100M, 8 x 32-core, random",
        pap.with_(remote_fraction=random_remote_fraction(8, 140e3, 1000), rpc_share=0.14),
        32,
        128 + 256,
        ["1gbit", "10gbit"],
        cut=0.87,
    )
    tera = Workload("1T edges", 62.5e9, 1e12, 128, 625e6, 128, m_pap, 200e3, 0.5)
    predict("1T edges, 128 x (64 cores, 512 GB), rho 0.5", tera, 64, 128 + 256, ["10gbit", "25gbit"], cut=0.4)
    predict(
        "1T edges, 128 x (64 cores, 512 GB), random",
        tera.with_(remote_fraction=random_remote_fraction(128, 200e3, 1000), rpc_share=0.14),
        64,
        128 + 256,
        ["10gbit", "25gbit"],
        cut=0.99,
    )
    memory_checks(out, args.memory_runs)
    memory_cell_checks(out, args.memory_cells)
    memory_projections(out)
    RUNS.mkdir(parents=True, exist_ok=True)
    (RUNS / "capacity.json").write_text(json.dumps(out, indent=1, default=float))
    print(f"\nwrote {RUNS / 'capacity.json'}")


# ---------------------------------------------------------------- memory per worker

PRECISION_LADDER = ("fp32", "fp16", "int8", "int4")


def budgeted(w: Workload, inner_frac: float, halo_frac: float, budget: float = 1.5, exact: bool = True) -> dict:
    """What the loader keeps under ``budget``: the most exact precision that holds every reached
    node, else int4 with the halo sampled to fit (as ``method.local_part`` chooses)."""
    for precision in PRECISION_LADDER:
        r = resident_bytes(w, precision=precision, inner_frac=inner_frac, halo_frac=halo_frac, exact=exact)
        if r["ratio"] <= budget:
            return {**r, "precision": precision}
    r = resident_bytes(w, precision="int4", inner_frac=inner_frac, halo_frac=halo_frac, exact=exact, budget=budget)
    return {**r, "precision": "int4"}


def worker_hops(wk: dict, summary: dict) -> int | None:
    """Sampled hops whose nodes the worker kept: its ``keep.reach`` (None: every node kept), else
    the model's layers, less one with the exact first hop (records from before ``keep``)."""
    keep = wk.get("keep") or {}
    if "reach" in keep:
        return keep["reach"]
    return summary["num_layers"] - (1 if summary.get("first_hop") == "exact" else 0)


def compare_worker(
    wk: dict, stats: dict, num_parts: int, hops: int | None, exact: bool, train_frac: float
) -> dict | None:
    """One worker's measured node tables against the model, as multiples of its own fp32 rows.

    ``wk``: a summary.json ``workers`` entry (``resident_bytes``, ``own_fp32_bytes``, ``keep``);
    ``stats``: the partition's statistics (``halo_share``, ``inner_nodes``, ``edge_cut``,
    ``num_nodes``, ``num_edges``); ``train_frac``: the label share fed to :func:`reach_fractions`;
    ``hops``: see :func:`worker_hops` (None: every node held, no estimate); the part's own cut
    comes from the partitioning's cut and halo shares (:func:`capacity.part_cut`).
    The precision and the budget are the run's. Besides the model's ratio (reach estimated) it
    gives the ratio from the reach the loader measured (``keep``: inner nodes and halo nodes the
    seeds' trees reach), which isolates the reach estimate from the byte accounting, and the
    precision the model's own ladder would pick. None for a worker without the memory figures.
    """
    if wk.get("resident_bytes") is None or not wk.get("own_fp32_bytes"):
        return None
    p, keep = wk["part"], wk.get("keep") or {}
    h, inner = stats["halo_share"][p], stats["inner_nodes"][p]
    n, e = stats["num_nodes"], stats["num_edges"]
    own = wk["own_fp32_bytes"]
    width = own // (4 * inner)
    precision = keep.get("precision") or (wk.get("memory") or {}).get("precision", "fp32")
    budget = keep["budget_bytes"] / own if keep.get("budget_bytes") else None
    w = Workload("worker", inner * num_parts, e, width, train_frac * n, num_parts, 0, 0, 0, halo_share=h)
    cut = part_cut(stats["edge_cut"], stats["halo_share"], stats["inner_nodes"], p)
    fi, fh = (1.0, 1.0) if hops is None else reach_fractions(train_frac, e / n, cut, h, hops)
    model = resident_bytes(w, precision=precision, inner_frac=fi, halo_frac=fh, exact=exact, budget=budget)
    meas = wk["resident_bytes"] / own
    row = {
        "part": p,
        "hops": hops,
        "precision": precision,
        "train_frac": train_frac,
        "cut": cut,
        "measured": meas,
        "model": model["ratio"],
        "error": model["ratio"] / meas - 1,
        "inner_reach_model": fi,
        "halo_reach_model": fh,
        "halo_kept_model": model["halo_kept_frac"],
    }
    if "inner_kept" in keep and "halo_reach" in keep:
        ri, rh = keep["inner_kept"] / inner, keep["halo_reach"] / keep["halo"] if keep.get("halo") else 0.0
        acct = resident_bytes(w, precision=precision, inner_frac=ri, halo_frac=rh, exact=exact, budget=budget)["ratio"]
        row.update(
            inner_reach=ri,
            halo_reach=rh,
            halo_kept=keep.get("halo_kept", 0) / max(keep["halo_reach"], 1),
            accounting_error=acct / meas - 1,
        )
    if budget is not None:
        pred = budgeted(w, fi, fh, budget, exact)
        row.update(model_precision=pred["precision"], predicted=pred["ratio"], predicted_error=pred["ratio"] / meas - 1)
    return row


def memory_checks(out: dict, runs: list[str]) -> None:
    """The model of what a worker holds against runs' measured resident bytes (their summary.json workers).

    Each run's partition statistics (halo shares, cut, train nodes) feed :func:`reach_fractions`;
    the precision is the one the run chose. ``runs``: run folders or summary.json files.
    """
    if not runs:
        return
    print("\n== check 6: node tables a worker holds (features, aggregates, halo), model vs measured ==")
    print(f"{'run':<58} {'part':>4} {'precision':>9} {'measured x own':>15} {'model':>7} {'error':>7}")
    errs = []
    for r in runs:
        f = Path(r) / "summary.json" if Path(r).is_dir() else Path(r)
        s = json.loads(f.read_text())
        pc = s["config"]["partition"]
        pdir = Path(pc["prebuilt"] or pc["out_dir"] or f.parent / "partitions" / "0")
        stats = json.loads((pdir / "grappa_partition.json").read_text())
        n = stats["num_nodes"]
        train = sum(stats.get("train_nodes") or []) or 0.6 * n  # bigpart's stats have no train counts: 60 %
        exact = s.get("first_hop") == "exact"
        for wk in s["workers"]:
            row = compare_worker(wk, stats, s["num_parts"], worker_hops(wk, s), exact, train / n)
            if row is None:
                continue  # a run from before the memory figures
            errs.append(row["error"])
            print(
                f"{str(f.parent)[-58:]:<58} {row['part']:>4} {row['precision']:>9} {row['measured']:>15.3f} "
                f"{row['model']:>7.3f} {row['error']:>+7.1%}"
            )
            out["checks"].setdefault("memory", []).append({"run": str(f.parent), **row})
    if errs:
        print(
            f"model / measured - 1: mean {sum(errs) / len(errs):+.1%}, largest |error| {max(map(abs, errs)):.1%} "
            f"over {len(errs)} workers"
        )


# Training nodes when a worker record lacks its part's seed count (``train_seeds``): the
# Planetoid splits DGL ships (Cora 140 of 2,708 nodes, CiteSeer 120 of 3,327); a generated
# graph's share is its config's data.synthetic.train_frac (configs/bench/*.yaml). The part's
# share is then assumed to be the graph's.
TRAIN_SHARE = {"cora": 140 / 2708, "citeseer": 120 / 3327}
WITHIN = 0.15  # the goal: the model within 15 % of the measured resident bytes


def _cell_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        files += sorted(p.glob("*.json.gz")) + sorted(p.glob("*.json")) if p.is_dir() else [p]
    return files


def _read_cell(f: Path) -> dict:
    import gzip

    return json.loads(gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_text())


def _train_share(cell: dict, system: dict) -> float:
    data = (system.get("config") or cell.get("config") or {}).get("data", {})
    name = data.get("name", cell["axes"].get("data_name", ""))
    if name in TRAIN_SHARE:
        return TRAIN_SHARE[name]
    if name == "synthetic":
        return float(data["synthetic"]["train_frac"])
    raise ValueError(f"no train-node share known for dataset {name!r}: add it to TRAIN_SHARE")


def _summary(label: str, rows: list[dict]) -> dict:
    errs = [r["error"] for r in rows]
    within = sum(abs(x) <= WITHIN for x in errs)
    reach = {
        k: sum(r[k] for r in rows) / len(rows)
        for k in ("inner_reach_model", "inner_reach", "halo_reach_model", "halo_reach")
        if all(k in r for r in rows)
    }
    acct = [abs(r["accounting_error"]) for r in rows if "accounting_error" in r]
    prec = sum(r.get("model_precision", r["precision"]) != r["precision"] for r in rows)
    pred = [r["predicted_error"] for r in rows if "predicted_error" in r]
    return {
        "group": label,
        "workers": len(rows),
        "mean_error": sum(errs) / len(errs),
        "largest_abs_error": max(map(abs, errs)),
        "within": within,
        "reach": reach,
        "accounting_abs_error_max": max(acct) if acct else None,
        "precision_differs": prec,
        "predicted": {
            "workers": len(pred),
            "mean_error": sum(pred) / len(pred),
            "largest_abs_error": max(map(abs, pred)),
            "within": sum(abs(x) <= WITHIN for x in pred),
        }
        if pred
        else None,
    }


def _print_summary(s: dict) -> None:
    r = s["reach"]
    reach = (
        f"{r['inner_reach_model']:>5.2f} {r['inner_reach']:>5.2f} {r['halo_reach_model']:>5.2f} {r['halo_reach']:>5.2f}"
        if len(r) == 4
        else f"{'':>23}"
    )
    acct = f"{s['accounting_abs_error_max']:>6.2%}" if s["accounting_abs_error_max"] is not None else f"{'':>6}"
    print(
        f"{s['group']:<30} {s['workers']:>4} {s['mean_error']:>+7.1%} {s['largest_abs_error']:>7.1%} "
        f"{s['within']:>4}/{s['workers']:<4} {reach}  {acct} {s['precision_differs']:>5}"
    )


def memory_cell_checks(out: dict, paths: list[str]) -> None:
    """Check 6 on archived bench cells (``benchmarks/*/cells/*.json.gz``, see benchmarks/README.md).

    For every cell and every Grappa system in it (``grappa*``, not ``distdgl*``) whose summary
    has per-worker ``resident_bytes``: the model against each worker's measured node tables,
    from the cell's partition statistics and the part's training seeds (the worker's
    ``train_seeds`` over its inner nodes; else :data:`TRAIN_SHARE`). Prints every worker, then
    per dataset x partitioner x parts (and per reach hops within it) and overall: mean error,
    largest |error|, workers within 15 %, the reach the model estimates against what the loader
    measured, the byte accounting's error given the measured reach, and how often the model's
    own precision ladder would pick another precision than the run did.
    """
    if not paths:
        return
    rows = []
    print("\n== check 6 on archived bench cells: node tables per worker, model vs measured (x own fp32 rows) ==")
    print("reach: share of the part's inner nodes / of its halo that the seeds' trees reach, model vs measured")
    print("precision: the run's / the one the model's ladder picks; measured, model: resident bytes / own fp32 rows")
    print(
        f"{'cell':<44} {'system':<16} {'part':>4} {'hops':>4} {'precision':>11} {'inner m/meas':>12} "
        f"{'halo m/meas':>11} {'measured':>8} {'model':>6} {'error':>7}"
    )
    for f in _cell_files(paths):
        cell = _read_cell(f)
        stats, axes = cell.get("partition") or {}, cell.get("axes") or {}
        if not stats.get("halo_share"):
            continue
        for name, system in sorted((cell.get("systems") or {}).items()):
            if not name.startswith("grappa") or name.startswith("distdgl"):
                continue
            s = system.get("summary") or {}
            workers = s.get("workers") or []
            if not any(wk.get("resident_bytes") is not None for wk in workers):
                continue  # no memory figures (e.g. grappa-replicate, copied from before the budget)
            exact = s.get("first_hop") == "exact"
            share = None
            for wk in workers:
                hops = worker_hops(wk, s)
                inner = stats["inner_nodes"][wk["part"]]
                if wk.get("train_seeds") is not None and inner:
                    tf = wk["train_seeds"] / inner
                else:
                    share = _train_share(cell, system) if share is None else share
                    tf = share
                row = compare_worker(wk, stats, s["num_parts"], hops, exact, tf)
                if row is None:
                    continue
                row.update(
                    cell=cell.get("cell_id", f.name),
                    file=str(f),
                    system=name,
                    dataset=axes.get("dataset", s.get("dataset")),
                    partitioner=axes.get("partition", s.get("partition_method")),
                    parts=s["num_parts"],
                    layers=s["num_layers"],
                )
                rows.append(row)
                reach = (
                    (
                        f"{row['inner_reach_model']:.2f}/{row['inner_reach']:.2f}",
                        f"{row['halo_reach_model']:.2f}/{row['halo_reach']:.2f}",
                    )
                    if "inner_reach" in row
                    else ("", "")
                )
                prec = row["precision"] + "/" + row.get("model_precision", "-")
                print(
                    f"{row['cell'][-44:]:<44} {name[:16]:<16} {row['part']:>4} {str(hops):>4} {prec:>11} "
                    f"{reach[0]:>12} {reach[1]:>11} {row['measured']:>8.3f} {row['model']:>6.3f} "
                    f"{row['error']:>+7.1%}"
                )
    if not rows:
        print("no worker with resident_bytes in the cells given")
        return
    print(
        f"\nper group: model / measured - 1; within: |error| <= {WITHIN:.0%}; reach: mean shares, inner model, "
        f"measured, halo model, measured;\naccounting: largest |error| of the bytes given the measured reach; "
        f"prec: workers whose model precision differs from the run's"
    )
    print(
        f"{'group':<30} {'n':>4} {'mean':>7} {'worst':>7} {'within':>9} {'inner m  meas  halo m  meas':>23}  "
        f"{'acct':>6} {'prec':>5}"
    )
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["partitioner"], r["parts"]), {}).setdefault(r["hops"], []).append(r)
    summaries = []
    for (ds, part, p), by_hops in sorted(groups.items()):
        everyone = [r for rs in by_hops.values() for r in rs]
        summaries.append(_summary(f"{ds} {part} {p}", everyone))
        _print_summary(summaries[-1])
        if len(by_hops) > 1:
            for hops, rs in sorted(by_hops.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
                label = "every node kept" if hops is None else f"{hops} hop{'s' if hops != 1 else ''}"
                summaries.append(_summary(f"  {label}", rs))
                _print_summary(summaries[-1])
    by_folder: dict = {}
    for r in rows:
        by_folder.setdefault(str(Path(r["file"]).parent), []).append(r)
    if len(by_folder) > 1:
        for folder, rs in sorted(by_folder.items()):
            summaries.append(_summary(Path(folder).parent.name + " cells", rs))
            _print_summary(summaries[-1])
    summaries.append(_summary("all", rows))
    _print_summary(summaries[-1])
    pred = summaries[-1]["predicted"]
    if pred:
        print(
            f"with the precision the model's own ladder picks (a prediction from the partition statistics alone): "
            f"mean {pred['mean_error']:+.1%}, largest |error| {pred['largest_abs_error']:.1%}, "
            f"{pred['within']}/{pred['workers']} within {WITHIN:.0%}"
        )
    out["checks"]["memory_cells"] = {"workers": rows, "summaries": summaries}


def memory_projections(out: dict) -> None:
    """Bytes of node tables per worker at scale: replicated (every node, halo, fp32) vs the budget's defaults."""
    print("\n== memory per worker: node tables (features, first-hop aggregates, kept halo), GB ==")
    print("replicate: every node of the part and its whole halo, in fp32 (the earlier defaults); budget: the")
    print("defaults at train.memory_budget 1.5 (what the seeds reach, the most exact precision that fits, int4 and a")
    print("sampled halo beyond); DistDGL: a machine's own feature rows in fp32. Halo / inner of a random partition")
    print("from the mean degree (formula); LDG assumed 0.35 x that (measured at 4 and 8 parts on the 100M-edge")
    print("graph: 1.07 and ~2.2 against 2.9 and 5.8). 2 layers, exact first hop (one sampled hop reached).")
    graphs = [
        ("papers100M-sized: 111M nodes, 1.6B edges, F=128", 111e6, 1.6e9, 128),
        ("1T edges: 62.5G nodes, F=128", 62.5e9, 1e12, 128),
    ]
    out["predictions"]["memory"] = []

    def per_worker(n, e, f, p, labels, part):
        d = e / n
        h = random_halo_share(p, [d]) * (1.0 if part == "random" else 0.35)
        cut = (1 - 1 / p) * (1.0 if part == "random" else 0.35)
        w = Workload("x", n, e, f, labels * n, p, 0, 0, 0, halo_share=h)
        rep = resident_bytes(w)
        bud = budgeted(w, *reach_fractions(labels, d, cut, h, 1))
        struct = e / p * 8 * (1 + cut)  # int32 CSC + edge ids, in-edges and the halo's out-edges
        return h, rep, bud, rep["own_fp32"], struct

    for label, n, e, f in graphs:
        for labels in (0.01, 0.10):
            print(f"\n{label}, {labels:.0%} labelled")
            print(
                f"{'P':>5} {'partition':>9} {'halo/inner':>10} {'replicate':>16} {'budget':>28} {'DistDGL':>8} "
                f"{'structure':>9}"
            )
            for p in (16, 32, 64, 128, 256):
                for part in ("random", "ldg"):
                    h, rep, bud, own, struct = per_worker(n, e, f, p, labels, part)
                    print(
                        f"{p:>5} {part:>9} {h:>10.2f} {rep['resident'] / GB:>8.1f} ({rep['ratio']:>4.1f}x) "
                        f"{bud['resident'] / GB:>8.1f} ({bud['ratio']:.2f}x {bud['precision']}, halo "
                        f"{bud['halo_kept_frac']:>4.0%}) {own / GB:>8.1f} {struct / GB:>9.1f}"
                    )
                    out["predictions"]["memory"].append(
                        {
                            "graph": label,
                            "labels": labels,
                            "parts": p,
                            "partitioner": part,
                            "halo_share": h,
                            "replicate": rep,
                            "budget": bud,
                            "distdgl_bytes": own,
                            "structure": struct,
                        }
                    )
            for part in ("random", "ldg"):
                need = {}
                for key in ("replicate", "budget", "distdgl"):
                    for p in (2**k for k in range(1, 16)):
                        _, rep, bud, own, struct = per_worker(n, e, f, p, labels, part)
                        tables = {"replicate": rep["resident"], "budget": bud["resident"], "distdgl": own}[key]
                        if tables + struct <= 512e9 * 0.9:  # 10 % for the runtime, batches, the model
                            need[key] = p
                            break
                print(
                    f"  machines of 512 GB (smallest power of 2, {part}): replicate {need.get('replicate')}, "
                    f"budget {need.get('budget')}, DistDGL {need.get('distdgl')}"
                )
                out["predictions"]["memory"].append(
                    {"graph": label, "labels": labels, "partitioner": part, "machines_512GB": need}
                )


if __name__ == "__main__":
    main()
