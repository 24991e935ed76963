"""Build a 100M-edge synthetic graph and its DGL partitions on one machine, stage by stage.

Every stage runs in its own child process, so its peak resident memory is measured exactly
(``os.wait4`` rusage of that child) and a stage that outgrows ``--max-rss-gb`` is killed
instead of pushing a shared machine into swap/OOM. Stages:

    generate            dgl_grappa.data.bigsynth.generate_big  -> <out>/graph
    assign-<method>     random / contiguous / ldg part per node -> <out>/assign_<method>_p<P>.npy
    bucket              reshuffle + edges bucketed by part      -> <out>/parts_<method>_p<P>/_work
    write-<p>           part p in DGL's layout                  -> <out>/parts_<method>_p<P>/part<p>
    finish              grappa.json, grappa_partition.json
    load-drop/keep      dgl_grappa.method.local_part.load_local of part 0

Prints a table and merges the figures into ``<out>/build.json`` (one entry per method and
part count; the generated graph is shared and reused when its config is unchanged).

    nice -n 10 python experiments/scale/scale_build.py --out runs/scale --parts 4 --method ldg
    python experiments/scale/scale_build.py --out runs/scale --nodes 20000 --avg-degree 10 --feat-dim 16   # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# ----------------------------------------------------------------------------- child side


def _graph_cfg(args: dict):
    from dgl_grappa.config import SyntheticConfig

    return SyntheticConfig(
        num_nodes=args["nodes"],
        avg_degree=args["avg_degree"],
        feat_dim=args["feat_dim"],
        num_communities=args["communities"],
        num_classes=args["classes"],
        preset=args["preset"],
        seed=args["seed"],
    )


def _edge_cut(graph, a) -> float:
    cut = 0
    for _, src, dst in graph.edge_chunks():
        cut += int((a[src] != a[dst]).sum())
    return cut / max(graph.num_edges, 1)


def run_stage(stage: str, args: dict) -> dict:
    """Run one stage in this process; returns its figures (JSON-able)."""
    import numpy as np

    from dgl_grappa.data.bigsynth import BigGraph, generate_big
    from dgl_grappa.partition import bigpart

    out = Path(args["out"])
    gdir = out / "graph"
    tag = f"{args['method']}_p{args['parts']}"
    adir = out / f"assign_{tag}.npy"
    pdir = out / f"parts_{tag}"
    work = pdir / "_work"
    t0 = time.perf_counter()
    if stage == "generate":
        g = generate_big(_graph_cfg(args), gdir, chunk_edges=args["chunk_edges"], overwrite=True)
        return {
            "num_nodes": g.num_nodes,
            "num_edges": g.num_edges,
            "feat_dim": g.feat_dim,
            "max_degree": g.meta["max_degree"],
            "chunks": len(g.meta["chunks"]),
            "gen_seconds": g.meta["seconds"],
            "disk_bytes": bigpart.folder_bytes(gdir),
            "config": g.meta["config"],
            "seconds": time.perf_counter() - t0,
        }
    g = BigGraph(gdir)
    if stage.startswith("assign"):
        extra = {}
        if args["method"] == "ldg":
            tc = time.perf_counter()
            csr = bigpart.build_csr(g)
            extra["csr_seconds"] = time.perf_counter() - tc
            a = bigpart.assign_ldg(g, args["parts"], passes=args["ldg_passes"], seed=args["seed"], csr=csr)
            del csr
        else:
            a = bigpart.assign(g, args["method"], args["parts"], seed=args["seed"])
        seconds = time.perf_counter() - t0
        np.save(adir, a)
        return {
            "seconds": seconds,
            "edge_cut": _edge_cut(g, a),
            "part_sizes": np.bincount(a, minlength=args["parts"]).tolist(),
            **extra,
        }
    if stage == "bucket":
        a = np.load(adir)
        st = bigpart.bucket_edges(g, a, args["parts"], work, method=args["method"])
        return {
            "seconds": time.perf_counter() - t0,
            "cut_edges": st.cut_edges,
            "inner_edges": st.inner_edges,
            "outer_edges": st.outer_edges,
            "work_bytes": bigpart.folder_bytes(work),
        }
    if stage.startswith("write-"):
        res = bigpart.write_part(g, work, int(stage.split("-")[1]), pdir)
        (work / f"written{res['part']}.json").write_text(json.dumps(res))
        return res
    if stage == "finish":
        parts = [json.loads((work / f"written{q}.json").read_text()) for q in range(args["parts"])]
        stats = bigpart.finish(work, pdir, parts, fingerprint={"graph": str(gdir), "seed": args["seed"]})
        return {
            "seconds": time.perf_counter() - t0,
            "edge_cut": stats["edge_cut"],
            "inner_nodes": stats["inner_nodes"],
            "halo_nodes": stats["halo_nodes"],
            "halo_share": stats["halo_share"],
            "disk_bytes": bigpart.folder_bytes(pdir),
            "part_bytes": [bigpart.folder_bytes(pdir / f"part{q}") for q in range(args["parts"])],
        }
    if stage.startswith("load-"):
        from dgl_grappa.method.local_part import load_local
        from dgl_grappa.partition.layout import part_config_path

        lp = load_local(part_config_path(pdir), 0, stage.split("-")[1])
        return {
            "seconds": time.perf_counter() - t0,
            "num_inner": lp.num_inner,
            "local_nodes": lp.graph.num_nodes(),
            "local_edges": lp.graph.num_edges(),
            "train_nodes": int(lp.train_ids.numel()),
            "feat_bytes": lp.feat.numel() * 4,
            "halo_bytes_loaded": lp.halo_bytes_loaded,
        }
    raise SystemExit(f"unknown stage {stage!r}")


# ----------------------------------------------------------------------------- parent side


def _rss_of_tree(pid: int) -> int:
    import psutil

    try:
        p = psutil.Process(pid)
        return p.memory_info().rss + sum(c.memory_info().rss for c in p.children(recursive=True))
    except psutil.Error:
        return 0


def spawn_stage(stage: str, args: dict, result_file: Path) -> dict:
    """Run ``stage`` in a child; kill it past the memory or time limit. Returns its figures
    plus ``wall_s`` and ``peak_rss_gb`` (the child's ru_maxrss)."""
    env = dict(os.environ, DGLBACKEND="pytorch", OMP_NUM_THREADS=str(args["threads"]))
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        stage,
        "--child-args",
        json.dumps(args),
        "--child-result",
        str(result_file),
    ]
    result_file.unlink(missing_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    limit = args["max_rss_gb"] * 2**30
    why = None
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if why is None and _rss_of_tree(proc.pid) > limit:
            why = f"over --max-rss-gb {args['max_rss_gb']}"
        elif why is None and time.perf_counter() - t0 > args["stage_timeout"]:
            why = f"over --stage-timeout {args['stage_timeout']} s"
        if why is not None:
            os.killpg(proc.pid, signal.SIGKILL)  # the child's own session: only what we started
        time.sleep(0.2)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if why or code != 0 or not result_file.is_file():
        raise SystemExit(f"stage {stage} failed ({why or f'exit {code}'}) after {wall:.0f} s")
    res = json.loads(result_file.read_text())
    res.update({"wall_s": wall, "peak_rss_gb": ru.ru_maxrss / 2**20})
    return res


def _fmt_gb(b: float | None) -> str:
    return "" if b is None else f"{b / 2**30:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="runs/scale")
    ap.add_argument("--nodes", type=int, default=6_000_000)
    ap.add_argument("--avg-degree", type=float, default=18.0)
    ap.add_argument("--feat-dim", type=int, default=128)
    ap.add_argument("--communities", type=int, default=64)
    ap.add_argument("--classes", type=int, default=16)
    ap.add_argument("--preset", default="hard")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunk-edges", type=int, default=8_000_000)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--method", default="ldg", choices=["random", "contiguous", "ldg"])
    ap.add_argument("--ldg-passes", type=int, default=3)
    ap.add_argument(
        "--stages",
        default="generate,assign,bucket,write,finish,load",
        help="comma list out of generate, assign, bucket, write, finish, load",
    )
    ap.add_argument("--regenerate", action="store_true", help="generate even if the graph exists with this config")
    ap.add_argument("--drop-parts", action="store_true", help="delete the partition folder at the end")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-rss-gb", type=float, default=11.0)
    ap.add_argument("--stage-timeout", type=float, default=3600.0)
    ap.add_argument("--child")
    ap.add_argument("--child-args")
    ap.add_argument("--child-result")
    ns = ap.parse_args()

    if ns.child:  # we are a stage
        res = run_stage(ns.child, json.loads(ns.child_args))
        Path(ns.child_result).write_text(json.dumps(res))
        return

    args = {k: v for k, v in vars(ns).items() if not k.startswith("child")}
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    args["out"] = str(out.resolve())
    build_file = out / "build.json"
    build = json.loads(build_file.read_text()) if build_file.is_file() else {}
    stages = ns.stages.split(",")
    rows = []
    res_dir = out / "stage_results"
    res_dir.mkdir(exist_ok=True)

    def run(stage: str) -> dict:
        print(f"[scale_build] {stage} ...", flush=True)
        r = spawn_stage(stage, args, res_dir / f"{stage}.json")
        print(
            f"[scale_build] {stage}: {r.get('seconds', r['wall_s']):.1f} s, peak RSS {r['peak_rss_gb']:.2f} GB",
            flush=True,
        )
        return r

    gen_keys = ("nodes", "avg_degree", "feat_dim", "communities", "classes", "preset", "seed", "chunk_edges")
    want = {k: args[k] for k in gen_keys}
    meta = out / "graph" / "meta.json"
    if "generate" in stages:
        if ns.regenerate or not meta.is_file() or build.get("graph", {}).get("args") != want:
            build["graph"] = {"args": want, **run("generate")}
        else:
            print("[scale_build] generate: graph exists with this config, reused", flush=True)
    g = build.get("graph")
    if g:
        rows.append(
            (
                "generate",
                g.get("seconds"),
                g["peak_rss_gb"],
                g.get("disk_bytes"),
                f"N={g['num_nodes']:,} E={g['num_edges']:,} F={g['feat_dim']}",
            )
        )
    key = f"{ns.method}-p{ns.parts}"
    entry = build.setdefault("runs", {}).setdefault(key, {})
    entry["args"] = {"method": ns.method, "parts": ns.parts, "ldg_passes": ns.ldg_passes}
    st = entry.setdefault("stages", {})
    if "assign" in stages:
        st["assign"] = run(f"assign-{ns.method}")
    if "bucket" in stages:
        st["bucket"] = run("bucket")
    if "write" in stages:
        for q in range(ns.parts):
            st[f"write-{q}"] = run(f"write-{q}")
    if "finish" in stages:
        st["finish"] = run("finish")
    if "load" in stages:
        for mode in ("drop", "keep"):
            st[f"load-{mode}"] = run(f"load-{mode}")
    build_file.write_text(json.dumps(build, indent=1))

    for name, r in st.items():
        extra = ""
        if name == "assign":
            extra = f"cut {r['edge_cut']:.3f}" + (f", csr {r['csr_seconds']:.0f} s" if "csr_seconds" in r else "")
        elif name == "bucket":
            extra = f"{r['cut_edges']:,} cut edges, tmp {_fmt_gb(r['work_bytes'])} GB"
        elif name.startswith("write"):
            extra = f"{r['local_nodes']:,} nodes ({r['halo_nodes']:,} halo), {r['local_edges']:,} edges"
        elif name == "finish":
            extra = f"halo/inner {', '.join(f'{h:.2f}' for h in r['halo_share'])}"
        elif name.startswith("load"):
            extra = (
                f"{r['local_nodes']:,} nodes, {r['local_edges']:,} edges, "
                f"halo feats {_fmt_gb(r['halo_bytes_loaded'])} GB"
            )
        rows.append((name, r.get("seconds"), r["peak_rss_gb"], r.get("disk_bytes", r.get("work_bytes")), extra))
    print(f"\n{key}: stage, seconds, peak RSS (GB), disk (GB), notes")
    print(f"{'stage':<12} {'seconds':>8} {'RSS GB':>7} {'disk GB':>8}  notes")
    for name, sec, rss, disk, extra in rows:
        print(f"{name:<12} {sec if sec is None else f'{sec:8.1f}':>8} {rss:7.2f} {_fmt_gb(disk):>8}  {extra}")
    print(f"wrote {build_file}")
    if ns.drop_parts:
        import shutil

        shutil.rmtree(out / f"parts_{ns.method}_p{ns.parts}", ignore_errors=True)


if __name__ == "__main__":
    main()
