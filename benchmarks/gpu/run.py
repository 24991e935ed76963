"""DistDGL at its best against Grappa with GPU trainers: both systems' phases beside the floor, and the JSON.

The paper's setting: the model trained on the GPU (``run.device: cuda``), each machine on its own 1 Gbit
link. Three steps on one METIS partitioning of the 100k synthetic graph:

1. **DistDGL's sampler processes** (``distdgl.num_samplers``, default 0, 1 and 2): a short DistDGL run of
   the deepest model with each; the fastest median epoch is the baseline of step 2 (the table says which).
2. **The comparison** (``python -m dgl_grappa compare``) per depth: DistDGL with that setting; Grappa with
   its local pipeline on the GPU (``train.sampler: auto`` = the torch sampler there, ``train.resident:
   auto`` = its tables on the device, ``train.prefetch``: the next batch drawn during the backward pass)
   and ``run.floor`` (the all-reduce alone on the same links, every epoch). Then **the floor**: the
   forward and backward of one batch of part 0 on the device (synchronised, median of repeats) times the
   steps of an epoch, plus the all-reduce alone of Grappa's run: what an epoch cannot beat; the depth's
   phase table (each system's seconds per epoch beside the floor) is printed at once.
3. At the deepest model a Grappa run with 16-bit gradients (``--grad-dtype``).

Every part is an emulated host of its own (``launch.remote: netns``, 1 Gbit per host) where root, ip and
tc allow; else the workers share the loopback, shaped to 1 Gbit where tc can, and the table says which.
All workers share the machine's GPU(s) (LOCAL_RANK modulo the GPU count).

    python benchmarks/gpu/run.py --out runs/gpu -- --model.hidden=128 --data.synthetic.feat_dim=128
    python benchmarks/gpu/run.py --layers 2 --epochs 2 --samplers 0 --device cpu   # the pipeline without a GPU
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FANOUTS = {1: "[10]", 2: "[10,25]", 3: "[10,15,25]", 4: "[10,10,15,25]"}
GOALS = {2: 10.0, 3: 25.0}  # DistDGL's epoch / Grappa's, at the paper's widths
FLOOR_GOAL = 1.5  # Grappa's epoch / its floor
PHASES = ("sample", "gather", "forward", "backward", "allreduce", "optimizer")


def links(mode: str) -> tuple[str, list[str]]:
    """The network setting (in words) and its overrides: per-host links, or the shared loopback."""
    root = os.geteuid() == 0
    tools = all(shutil.which(t) for t in ("ip", "tc", "nsenter", "unshare"))
    if mode == "netns" or (mode == "auto" and root and tools):
        return (
            "one emulated host per part, 1 Gbit each (launch.remote: netns)",
            [
                "--launch.remote=netns",
                "--network.link=per_host",
                "--network.dilation=auto",
                "--network.bandwidth=1gbit",
            ],
        )
    if root and shutil.which("tc"):
        return "shared loopback shaped to 1 Gbit (no per-host links here)", ["--network.bandwidth=1gbit"]
    return "shared loopback, unshaped (not root, or no tc)", []


def compare(args, name: str, layers: int, extra: list[str], epochs: int, timeout: int) -> tuple[dict | None, float]:
    """One ``compare`` run in ``args.out / name``: its compare.json (None if it failed) and wall seconds."""
    out = args.out / name
    cmd = [
        sys.executable,
        "-m",
        "dgl_grappa",
        "compare",
        "--config",
        args.config,
        f"--partition.num_parts={args.parts}",
        "--partition.method=metis",
        f"--partition.out_dir={args.out / 'partitions'}",
        "--model.name=sage",
        f"--model.num_layers={layers}",
        f"--train.fanouts={FANOUTS[layers]}",
        f"--train.epochs={epochs}",
        "--train.eval_every=1",
        f"--run.device={args.device}",
        f"--run.timeout_s={timeout}",
        "--run.progress=false",
        "--compare.variants=[none]",
        "--compare.dropin=false",
        f"--run.output_dir={out}",
        *extra,
    ]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, DGLBACKEND="pytorch"), timeout=timeout + 120)
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - t0
    if p.returncode != 0:
        return None, time.monotonic() - t0
    return json.loads((out / "compare.json").read_text()), time.monotonic() - t0


def summary(args, name: str, system: str) -> dict:
    path = args.out / name / system / "summary.json"
    return json.loads(path.read_text()) if path.exists() else {}


def probe_samplers(args, net: list[str]) -> tuple[int, dict]:
    """DistDGL's epoch with each ``distdgl.num_samplers`` (the deepest model, ``--probe-epochs``): the fastest."""
    layers = max(args.layers)
    epochs = {}
    for s in args.samplers:
        res, wall = compare(
            args,
            f"probe-samplers{s}",
            layers,
            net + args.extra + ["--compare.variants=[]", f"--distdgl.num_samplers={s}", "--train.eval_every=0"],
            args.probe_epochs,
            args.timeout,
        )
        if res is None:
            print(
                f"benchmarks/gpu: DistDGL with distdgl.num_samplers={s} failed (logs: "
                f"{args.out / f'probe-samplers{s}'}); left out",
                flush=True,
            )
            continue
        row = next(r for r in res["rows"] if r["system"] == "distdgl")
        epochs[s] = row["epoch_time_s"] / (res.get("network_dilation") or 1)
        print(f"  DistDGL, GraphSAGE-{layers}, num_samplers={s}: epoch {epochs[s]:.3f} s ({wall:.0f} s)", flush=True)
    if not epochs:
        sys.exit("benchmarks/gpu: DistDGL failed with every num_samplers tried")
    return min(epochs, key=epochs.get), epochs


def device_floor(args, layers: int, steps: int, reps: int = 20) -> float | None:
    """Seconds of the forward and backward of one batch of part 0 on the device, synchronised (median of
    ``reps`` after warm-up): the model and batch of the run, each worker's compute alone."""
    import torch

    from dgl_grappa.cluster.launch import Identity, set_threads, threads_per_worker
    from dgl_grappa.config import load_config
    from dgl_grappa.data import load_dataset
    from dgl_grappa.data.common import num_classes
    from dgl_grappa.kinds import resolve
    from dgl_grappa.method.kernels import place_blocks, resolve_kernels
    from dgl_grappa.partition.store import ensure_partitions

    cfg = load_config(
        args.config,
        [
            f"--partition.num_parts={args.parts}",
            "--partition.method=metis",
            f"--partition.out_dir={args.out / 'partitions'}",
            "--model.name=sage",
            f"--model.num_layers={layers}",
            f"--train.fanouts={FANOUTS[layers]}",
            f"--run.device={args.device}",
            f"--run.output_dir={args.out / 'floor'}",
            *[e for e in args.extra if e.startswith(("--model.", "--data.", "--train."))],
        ],
    )
    set_threads(threads_per_worker(args.parts))  # a worker's share of the cores, as in the runs
    dev = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    kind = resolve(cfg)
    stats, _ = ensure_partitions(cfg)
    lp = kind.load_part(cfg, stats["part_config"], 0)
    rt = kind.make_runtime(cfg, Identity(0, 1, 0), lp)
    model = kind.build_model(cfg, lp, num_classes(load_dataset(cfg.data))).to(dev)
    kernels = resolve_kernels(cfg.train.kernels, cfg.run.device)
    batch = next(rt.epoch_inputs(0))
    graph = place_blocks(batch.graph, dev, kernels)
    x = batch.inputs.to(dev)
    extra = {k: v.to(dev) for k, v in batch.extra.items()}
    times = []
    for i in range(reps + 3):
        sync()
        t0 = time.perf_counter()
        out = model(graph, x, **extra)
        per_item, _ = rt.losses(out, batch, dev)
        per_item.mean().backward()
        sync()
        if i >= 3:
            times.append(time.perf_counter() - t0)
        model.zero_grad(set_to_none=True)
    return statistics.median(times)


def phase_rows(args, name: str, res: dict, floor_s: float | None) -> list[dict]:
    """One row per system of a comparison: its epoch and median phases (seconds per epoch, the emulated
    cluster's), and its epoch over the floor."""
    dil = res.get("network_dilation") or 1
    rows = []
    for r in res["rows"]:
        ph = r.get("phases") or {}
        epoch = r["epoch_time_s"] / dil
        rows.append(
            {
                "system": r["system"],
                "epoch_s": epoch,
                **{p: (ph[f"{p}_s"] / dil if f"{p}_s" in ph else None) for p in PHASES + ("overlap",)},
                "over_floor": epoch / floor_s if floor_s else None,
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/bench/synth100k.yaml", help="the base config (default: %(default)s)")
    ap.add_argument("--parts", type=int, default=4, help="partition.num_parts: hosts and workers (default: 4)")
    ap.add_argument("--layers", type=int, nargs="+", default=[2, 3], help="GraphSAGE depths (default: 2 3)")
    ap.add_argument("--epochs", type=int, default=8, help="epochs of each comparison, each evaluated (default: 8)")
    ap.add_argument(
        "--samplers",
        type=int,
        nargs="+",
        default=[0, 1, 2],
        help="distdgl.num_samplers tried (default: 0 1 2); one value: no probe",
    )
    ap.add_argument("--probe-epochs", type=int, default=3, help="epochs of each probe run (default: 3)")
    ap.add_argument(
        "--grad-dtype",
        default="bfloat16",
        help="grappa.grad_dtype of an extra Grappa run at the deepest model ('' = none)",
    )
    ap.add_argument("--device", default="cuda", help="run.device (default: cuda)")
    ap.add_argument(
        "--hosts",
        choices=("auto", "netns", "loopback"),
        default="auto",
        help="per-host links (netns) or the shared loopback; auto: netns where possible",
    )
    ap.add_argument("--out", type=Path, default=Path("runs/gpu"), help="output folder (default: %(default)s)")
    ap.add_argument("--timeout", type=int, default=600, help="run.timeout_s of each run (default: %(default)s)")
    ap.add_argument("extra", nargs="*", help="further --a.b=v overrides for every run (after --)")
    args = ap.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch  # after argparse: --help needs no torch

    network, net = links(args.hosts)
    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" and torch.cuda.is_available() else None
    grappa = ["--train.prefetch=true", "--run.floor=true"]  # the GPU step's pipeline and its all-reduce alone
    result = {
        "config": args.config,
        "parts": args.parts,
        "device": args.device,
        "gpu": gpu,
        "torch": torch.__version__,
        "network": network,
        "epochs": args.epochs,
        "overrides": args.extra,
        "rows": [],
        "phases": {},
        "runs": {},
    }

    def save() -> None:  # after every step: a later one may not finish
        (args.out / "gpu.json").write_text(json.dumps(result, indent=1))

    if len(args.samplers) > 1:
        print(f"[1/3] DistDGL's sampler processes: num_samplers {args.samplers}", flush=True)
        best, probe = probe_samplers(args, net)
    else:
        best, probe = args.samplers[0], {}
    result["distdgl_num_samplers"] = {"best": best, "epoch_s": probe}
    save()
    print(f"[2/3] the comparisons, DistDGL with num_samplers={best}, each with its floor", flush=True)
    for layers in args.layers:
        name = f"sage{layers}"
        res, wall = compare(
            args,
            name,
            layers,
            net + args.extra + grappa + [f"--distdgl.num_samplers={best}"],
            args.epochs,
            args.timeout,
        )
        if res is None and args.hosts == "auto" and "--launch.remote=netns" in net and not result["rows"]:
            print(
                "benchmarks/gpu: the per-host links could not be used here; on the shared loopback instead", flush=True
            )
            network, net = links("loopback")
            result["network"] = network
            res, wall = compare(
                args,
                name,
                layers,
                net + args.extra + grappa + [f"--distdgl.num_samplers={best}"],
                args.epochs,
                args.timeout,
            )
        if res is None:
            sys.exit(f"benchmarks/gpu: the comparison of GraphSAGE-{layers} failed; its logs: {args.out / name}")
        dil = res.get("network_dilation") or 1
        g = summary(args, name, "grappa-none")
        result["runs"][name] = {
            "compare_wall_s": wall,
            "target_acc": res["target_acc"],
            "target_rule": res["target_rule"],
            "rows": res["rows"],
            "grappa_floor": {
                k: g.get(k)
                for k in ("floor_epoch_s", "allreduce_only_s", "floor_s", "epoch_over_floor", "floor_phases")
            },
            "grappa_workers": [
                {k: w.get(k) for k in ("sampler", "resident", "resident_device_bytes")} for w in g.get("workers") or []
            ],
            **{k: res.get(k) for k in ("network_dilation", "host_cpu_share", "edge_cut", "network_link", "num_hosts")},
        }
        for r in res["rows"]:
            tta = r["time_to_target_s"]
            result["rows"].append(
                {
                    "model": f"GraphSAGE-{layers}",
                    "layers": layers,
                    "system": r["system"],
                    "epoch_time_s": r["epoch_time_s"] / dil,
                    "epoch_time_ratio": r.get("epoch_time_s_ratio"),
                    "target_acc": res["target_acc"],
                    "time_to_target_s": None if tta is None else tta / dil,
                    "time_to_target_ratio": r.get("time_to_target_ratio"),
                    "wire_bytes_per_epoch": r.get("wire_bytes_per_epoch"),
                    "app_bytes_per_epoch": r.get("app_bytes_per_epoch"),
                    "bytes_ratio": r.get("wire_bytes_per_epoch_ratio") or r.get("app_bytes_per_epoch_ratio"),
                    "test_acc": r["test_acc"],
                    "val_acc": r["val_acc"],
                    "gpu_peak_bytes": [
                        w.get("gpu_peak_bytes") for w in summary(args, name, r["system"]).get("workers") or []
                    ],
                    "peak_rss_bytes_max": r.get("peak_rss_bytes_max"),
                }
            )
        save()
        # the floor at once, and this depth's phases: a check cut short still shows them
        steps = g.get("steps_per_epoch") or 0
        fb = device_floor(args, layers, steps)
        allreduce = result["runs"][name]["grappa_floor"].get("allreduce_only_s")
        floor = steps * fb + (allreduce or 0.0) if fb is not None else None
        result["runs"][name]["floor"] = {
            "forward_backward_s_per_step": fb,
            "steps": steps,
            "allreduce_only_s": allreduce,
            "floor_s": floor,
        }
        result["phases"][name] = phase_rows(args, name, res, floor)
        save()
        print_phases(result, name)
    deepest = max(args.layers)
    if args.grad_dtype:
        print(f"[3/3] Grappa with {args.grad_dtype} gradients, GraphSAGE-{deepest}", flush=True)
        name = f"sage{deepest}-{args.grad_dtype}"
        res, _ = compare(
            args,
            name,
            deepest,
            net + args.extra + grappa + ["--compare.distdgl=false", f"--grappa.grad_dtype={args.grad_dtype}"],
            max(2, args.probe_epochs),
            args.timeout,
        )
        if res is not None:
            r = res["rows"][0]
            dil = res.get("network_dilation") or 1
            result["grad16"] = {
                "grad_dtype": args.grad_dtype,
                "layers": deepest,
                "epoch_time_s": r["epoch_time_s"] / dil,
                "allreduce_s": ((r.get("phases") or {}).get("allreduce_s") or 0) / dil,
                "grad_bytes_per_epoch": r.get("grad_bytes_per_epoch"),
                "test_acc": r["test_acc"],
            }
        save()
    report(args, result)
    save()
    print(f"wrote {args.out / 'gpu.json'}")


def print_phases(result: dict, name: str) -> None:
    """One depth's phase table: each system's seconds per epoch by phase, its epoch and the epoch over the floor."""
    fl = result["runs"][name]["floor"]
    fb = fl["forward_backward_s_per_step"]
    print(
        f"\n{name}: seconds per epoch; floor = {fl['steps']} steps x {fb * 1e3:.2f} ms (one batch's forward and "
        f"backward on the device) + {fl['allreduce_only_s'] or 0:.3f} s (the all-reduce alone on the links) = "
        f"{fl['floor_s']:.3f} s\n"
        if fb is not None
        else f"\n{name}: no floor measured\n"
    )
    print("| system | " + " | ".join(PHASES) + " | overlap | epoch | epoch / floor |")
    print("|---|" + "---|" * (len(PHASES) + 3))
    for r in result["phases"][name]:
        figs = ["-" if r[p] is None else f"{r[p]:.3f}" for p in PHASES + ("overlap",)]
        over = "-" if r["over_floor"] is None else f"{r['over_floor']:.2f}"
        print(f"| {r['system']} | " + " | ".join(figs) + f" | {r['epoch_s']:.3f} | {over} |", flush=True)


def report(args, result: dict) -> None:
    """The tables: systems per depth, the phases beside the floor, DistDGL's sampler setting, the goals."""

    def gib(b) -> str:
        return "-" if b is None else f"{b / 2**30:.2f} GiB"

    def cell(text: str, r: dict, key: str) -> str:  # a figure, and DistDGL's to Grappa's as "Nx shorter"
        return text if r["system"] == "distdgl" or r.get(key) in (None, 0) else f"{text} ({1 / r[key]:.1f}x)"

    gpu = result["gpu"]
    print(
        f"\n{args.config}, METIS-{args.parts}, run.device={args.device}{f' ({gpu})' if gpu else ''}, "
        f"{args.epochs} epochs each evaluated; {result['network']}; overrides {' '.join(args.extra) or 'none'}\n"
    )
    print("| model | system | epoch | time to target | bytes/epoch | test acc | GPU peak per worker | peak RSS |")
    print("|---|---|---|---|---|---|---|---|")
    for r in result["rows"]:
        b = r["wire_bytes_per_epoch"] if r["wire_bytes_per_epoch"] is not None else r["app_bytes_per_epoch"]
        tta = "not reached" if r["time_to_target_s"] is None else f"{r['time_to_target_s']:.2f} s"
        gpus = [g for g in r["gpu_peak_bytes"] if g is not None]
        print(
            " | ".join(
                [
                    "",
                    r["model"],
                    r["system"],
                    cell(f"{r['epoch_time_s']:.3f} s", r, "epoch_time_ratio"),
                    cell(f"{tta} (val {r['target_acc']:.3f})", r, "time_to_target_ratio"),
                    "-" if b is None else f"{b / 1e6:.2f} MB",
                    f"{r['test_acc']:.4f}",
                    gib(max(gpus)) if gpus else "-",
                    gib(r["peak_rss_bytes_max"]),
                    "",
                ]
            ).strip()
        )
    print(
        "\n(Nx): how many times shorter Grappa's figure is than DistDGL's; the target: 98 % of DistDGL's best "
        "validation accuracy"
    )
    ns = result["distdgl_num_samplers"]
    if ns["epoch_s"]:
        tried = ", ".join(f"{k}: {v:.3f} s" for k, v in ns["epoch_s"].items())
        print(
            f"\nDistDGL's sampler processes (distdgl.num_samplers, epoch of GraphSAGE-{max(args.layers)}): {tried}; "
            f"the fastest, {ns['best']}, is the baseline above"
        )
    for name in result["phases"]:
        print_phases(result, name)
    print(
        "\ngoals (the paper's widths): Grappa's epoch <= 1.5x its floor; DistDGL's epoch / Grappa's >= 10 at 2 "
        "layers, >= 25 at 3"
    )
    for name, rows in result["phases"].items():
        d = next((r for r in rows if r["system"] == "distdgl"), None)
        g = next((r for r in rows if r["system"] != "distdgl"), None)
        layers = int(name[4:])
        if d and g:
            x = d["epoch_s"] / g["epoch_s"]
            goal = GOALS.get(layers)
            met = "" if goal is None else (" (met)" if x >= goal else f" (goal {goal:g}x: not met)")
            fl = (
                "-"
                if g["over_floor"] is None
                else f"{g['over_floor']:.2f}x its floor" + (" (met)" if g["over_floor"] <= FLOOR_GOAL else " (not met)")
            )
            print(f"- {name}: DistDGL / Grappa epoch {x:.1f}x{met}; Grappa {fl}")
    if result.get("grad16"):
        g16 = result["grad16"]
        print(
            f"- 16-bit gradients ({g16['grad_dtype']}, GraphSAGE-{g16['layers']}): epoch "
            f"{g16['epoch_time_s']:.3f} s, all-reduce {g16['allreduce_s']:.3f} s/epoch, "
            f"{g16['grad_bytes_per_epoch'] or 0:.0f} gradient bytes/epoch"
        )


if __name__ == "__main__":
    main()
