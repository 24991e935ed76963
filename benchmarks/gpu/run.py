"""DistDGL against Grappa with GPU trainers: one table of both systems at 2 and 3 layers, and its JSON.

The paper's setting: neighbours sampled on the CPU, the model trained on the GPU (``run.device: cuda``),
each machine on its own 1 Gbit link. Runs ``python -m dgl_grappa compare`` (DistDGL on its own servers
and KVStore, its blocks moved to the trainer's GPU; Grappa without a correction) once per depth on one
METIS partitioning of the 100k synthetic graph, then prints epoch time, time to the target accuracy,
bytes per epoch, test accuracy and each worker's GPU and host memory, with Grappa's ratios to DistDGL.

Every part is an emulated host of its own (``launch.remote: netns``, 1 Gbit per host) where root, ip and
tc allow; else the workers share the loopback, shaped to 1 Gbit where tc can, and the table says which.
All workers share the machine's GPU(s) (LOCAL_RANK modulo the GPU count).

    python benchmarks/gpu/run.py --out runs/gpu                # GraphSAGE-2 and -3, 8 epochs
    python benchmarks/gpu/run.py --layers 2 --epochs 3 --device cpu   # the same pipeline without a GPU
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FANOUTS = {1: "[10]", 2: "[10,25]", 3: "[10,15,25]", 4: "[10,10,15,25]"}


def links(mode: str) -> tuple[str, list[str]]:
    """The network setting (in words) and its overrides: per-host links, or the shared loopback."""
    root = os.geteuid() == 0
    tools = all(shutil.which(t) for t in ("ip", "tc", "nsenter", "unshare"))
    if mode == "netns" or (mode == "auto" and root and tools):
        return ("one emulated host per part, 1 Gbit each (launch.remote: netns)",
                ["--launch.remote=netns", "--network.link=per_host", "--network.dilation=auto",
                 "--network.bandwidth=1gbit"])
    if root and shutil.which("tc"):
        return "shared loopback shaped to 1 Gbit (no per-host links here)", ["--network.bandwidth=1gbit"]
    return "shared loopback, unshaped (not root, or no tc)", []


def compare(args, layers: int, extra: list[str]) -> tuple[dict, float]:
    out = args.out / f"sage{layers}"
    cmd = [sys.executable, "-m", "dgl_grappa", "compare", "--config", args.config,
           f"--partition.num_parts={args.parts}", "--partition.method=metis",
           f"--partition.out_dir={args.out / 'partitions'}", "--model.name=sage", f"--model.num_layers={layers}",
           f"--train.fanouts={FANOUTS[layers]}", f"--train.epochs={args.epochs}", "--train.eval_every=1",
           f"--run.device={args.device}", f"--run.timeout_s={args.timeout}", "--run.progress=false",
           "--compare.variants=[none]", "--compare.dropin=false", f"--run.output_dir={out}", *extra]
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, DGLBACKEND="pytorch"), timeout=args.timeout + 300)
    if p.returncode != 0:
        return None, time.monotonic() - t0
    return json.loads((out / "compare.json").read_text()), time.monotonic() - t0


def per_worker(out: Path, key: str) -> list:
    """Each worker's ``key`` from a run's summary.json (rank order)."""
    return [w.get(key) for w in json.loads((out / "summary.json").read_text()).get("workers") or []]


def gib(b) -> str:
    return "-" if b is None else f"{b / 2**30:.2f} GiB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/bench/synth100k.yaml", help="the base config (default: %(default)s)")
    ap.add_argument("--parts", type=int, default=4, help="partition.num_parts: hosts and workers (default: 4)")
    ap.add_argument("--layers", type=int, nargs="+", default=[2, 3], help="GraphSAGE depths (default: 2 3)")
    ap.add_argument("--epochs", type=int, default=8, help="epochs, each evaluated (default: %(default)s)")
    ap.add_argument("--device", default="cuda", help="run.device (default: cuda)")
    ap.add_argument("--hosts", choices=("auto", "netns", "loopback"), default="auto",
                    help="per-host links (netns) or the shared loopback; auto: netns where possible")
    ap.add_argument("--out", type=Path, default=Path("runs/gpu"), help="output folder (default: %(default)s)")
    ap.add_argument("--timeout", type=int, default=600, help="run.timeout_s of each run (default: %(default)s)")
    ap.add_argument("extra", nargs="*", help="further --a.b=v overrides for every run (after --)")
    args = ap.parse_args()
    args.out = args.out.resolve()
    import torch  # after argparse: --help needs no torch

    network, net_args = links(args.hosts)
    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" and torch.cuda.is_available() else None
    rows, runs = [], {}
    for layers in args.layers:
        res, wall = compare(args, layers, net_args + args.extra)
        if res is None and args.hosts == "auto" and "--launch.remote=netns" in net_args and not rows:
            print("benchmarks/gpu: the per-host links could not be used here; on the shared loopback instead",
                  flush=True)
            network, net_args = links("loopback")
            res, wall = compare(args, layers, net_args + args.extra)
        if res is None:
            sys.exit(f"benchmarks/gpu: the comparison of GraphSAGE-{layers} failed; its logs: "
                     f"{args.out / f'sage{layers}'}")
        runs[f"sage{layers}"] = {"compare_wall_s": wall, "target_acc": res["target_acc"],
                                 "target_rule": res["target_rule"], "rows": res["rows"],
                                 **{k: res.get(k) for k in ("network_dilation", "host_cpu_share", "edge_cut",
                                                            "network_link", "num_hosts")}}
        dilation = res.get("network_dilation") or 1
        partial = {"network": network, "runs": runs}  # kept after each depth: a later one may not finish
        (args.out / "gpu.json").write_text(json.dumps(partial, indent=1))
        for r in res["rows"]:
            out = args.out / f"sage{layers}" / r["system"]
            tta = r["time_to_target_s"]
            rows.append({"model": f"GraphSAGE-{layers}", "system": r["system"],
                         "epoch_time_s": r["epoch_time_s"] / dilation,  # the emulated cluster's seconds
                         "epoch_time_ratio": r.get("epoch_time_s_ratio"), "target_acc": res["target_acc"],
                         "time_to_target_s": None if tta is None else tta / dilation,
                         "time_to_target_ratio": r.get("time_to_target_ratio"),
                         "wire_bytes_per_epoch": r.get("wire_bytes_per_epoch"),
                         "app_bytes_per_epoch": r.get("app_bytes_per_epoch"),
                         "bytes_ratio": r.get("wire_bytes_per_epoch_ratio") or r.get("app_bytes_per_epoch_ratio"),
                         "test_acc": r["test_acc"], "val_acc": r["val_acc"],
                         "gpu_peak_bytes": per_worker(out, "gpu_peak_bytes"),
                         "peak_rss_bytes_max": r.get("peak_rss_bytes_max")})
    def cell(text: str, r: dict, key: str) -> str:  # a figure, and Grappa's ratio to DistDGL's
        return text if r["system"] == "distdgl" or r.get(key) is None else f"{text} ({r[key]:.3f}x)"

    print(f"\n{args.config}, METIS-{args.parts}, run.device={args.device}"
          f"{f' ({gpu})' if gpu else ''}, {args.epochs} epochs each evaluated; {network}"
          + (f"; time dilation {dilation:g}: times are divided by it" if dilation != 1 else "") + "\n")
    print("| model | system | epoch | time to target | bytes/epoch | test acc | GPU peak per worker | peak RSS |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        b = r["wire_bytes_per_epoch"] if r["wire_bytes_per_epoch"] is not None else r["app_bytes_per_epoch"]
        tta = "not reached" if r["time_to_target_s"] is None else f"{r['time_to_target_s']:.2f} s"
        gpus = [g for g in r["gpu_peak_bytes"] if g is not None]
        print(" | ".join(["", r["model"], r["system"], cell(f"{r['epoch_time_s']:.3f} s", r, "epoch_time_ratio"),
                          cell(f"{tta} (val {r['target_acc']:.3f})", r, "time_to_target_ratio"),
                          cell("-" if b is None else f"{b / 1e6:.2f} MB", r, "bytes_ratio"),
                          f"{r['test_acc']:.4f}", gib(max(gpus)) if gpus else "-", gib(r["peak_rss_bytes_max"]), ""]
                         ).strip())
    print("\nratios (x) are Grappa's to DistDGL's; bytes: on the wire where measured, else what the application "
          "sent; the target: compare's rule (98 % of DistDGL's best validation accuracy)")
    result = {"config": args.config, "parts": args.parts, "device": args.device, "gpu": gpu,
              "torch": torch.__version__, "network": network, "epochs": args.epochs, "overrides": args.extra,
              "rows": rows, "runs": runs}
    (args.out / "gpu.json").write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out / 'gpu.json'}")


if __name__ == "__main__":
    main()
