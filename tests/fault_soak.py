#!/usr/bin/env python
"""Fault soak: N training runs, each with a worker killed somewhere; no run may hang or outlive its bound.

Every run is ``python -m dgl_grappa train`` (or, with ``--distdgl-every M``, every M-th run
the DistDGL job) on a small graph with repartitioning (4 epochs, a new partitioning every
2), ``launch.max_restarts`` restarts allowed, and one or two faults drawn at random:

* ``step-sigkill`` / ``step-sigterm`` / ``step-exit``: a worker dies before a training
  step (SIGKILL, SIGTERM, or exit status 7), injected with ``DGL_GRAPPA_FAULT``;
* ``switch-sigkill``: a worker dies in the middle of the repartition switch at epoch 2;
* ``checkpoint-sigkill``: rank 0 dies half-way through writing a checkpoint;
* ``external-sigkill``: this script SIGKILLs a random process of the job (a worker or the
  partition builder) from outside, at a random moment after the first checkpoint;
* ``double``: a mid-epoch kill and a switch kill in the same run (two restarts).

For each run: outcome (completed / failed), restarts, wall time against the run's bound
((max_restarts + 1) x run.timeout_s plus start-up), hang (this script had to kill it past
the bound + 60 s), processes of the job left afterwards, and (native) whether the final
parameters equal those of an unfaulted run with the same seed, bit for bit. Prints a table
and writes JSON.

    python tests/fault_soak.py                   # 20 native runs
    python tests/fault_soak.py --n 6 --distdgl-every 3 --json runs/soak.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KINDS = (
    "step-sigkill",
    "step-sigterm",
    "step-exit",
    "switch-sigkill",
    "checkpoint-sigkill",
    "external-sigkill",
    "double",
)
EPOCHS, K, STEPS = 4, 2, 2
NATIVE = [
    "--data.synthetic.num_nodes=2000",
    "--data.synthetic.preset=custom",
    "--data.synthetic.noise=1.0",
    "--partition.num_parts=2",
    f"--train.epochs={EPOCHS}",
    "--train.batch_size=300",
    "--model.hidden=16",
    "--train.fanouts=[5,5]",
    "--train.lr=0.03",
    "--train.eval_every=2",
    f"--schedule.k={K}",
    "--schedule.method=random",
    "--run.progress=false",
]


def faults_for(kind: str, rng: random.Random, marker_dir: Path) -> list[dict]:
    """The DGL_GRAPPA_FAULT entries of a run (empty for an external kill)."""

    def once(name):
        return str(marker_dir / f"fired-{name}")

    step = {
        "point": "step",
        "rank": rng.randrange(2),
        "epoch": rng.randrange(EPOCHS),
        "step": rng.randrange(STEPS),
        "once": once("step"),
    }
    if kind == "step-sigterm":
        step["signal"] = "SIGTERM"
    if kind == "step-exit":
        step["exit"] = 7
    if kind in ("step-sigkill", "step-sigterm", "step-exit"):
        return [step]
    switch = {"point": "switch", "rank": rng.randrange(2), "epoch": K, "once": once("switch")}
    if kind == "switch-sigkill":
        return [switch]
    if kind == "checkpoint-sigkill":
        return [{"point": "checkpoint", "epoch": rng.randrange(1, EPOCHS + 1), "once": once("checkpoint")}]
    if kind == "double":
        step["epoch"] = rng.randrange(K)  # in the first partitioning, then the switch
        return [step, switch]
    return []


def _job_children(pid: int) -> list:
    """The processes of a job that may be killed: spawned workers, the builder, DistDGL trainers and servers."""
    import psutil

    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for p in kids:
        try:
            cmd = " ".join(p.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if "resource_tracker" in cmd:
            continue
        if "spawn_main" in cmd or "dgl_grappa.distdgl.train" in cmd or "_server" in cmd or "_launch" in cmd:
            out.append(p)
    return out


def run_one(i: int, kind: str, system: str, rng: random.Random, work: Path, args, reference: dict | None) -> dict:
    from dgl_grappa.cluster.procs import ENV_JOB, processes_of_job
    from dgl_grappa.runtime.checkpoint import CheckpointStore

    out = work / f"run{i:02d}"
    out.mkdir(parents=True)
    faults = faults_for(kind, rng, out)
    job = uuid.uuid4().hex
    env = dict(os.environ, DGLBACKEND="pytorch", PYTHONPATH=str(ROOT), **{ENV_JOB: job})
    env.pop("DGL_GRAPPA_FAULT", None)
    if faults:
        env["DGL_GRAPPA_FAULT"] = json.dumps(faults)
    common = [
        f"--launch.max_restarts={args.max_restarts}",
        f"--run.timeout_s={args.timeout_s}",
        f"--run.output_dir={out / 'out'}",
        "--checkpoint.keep_last=10",
    ]
    if system == "native":
        cmd = [sys.executable, "-m", "dgl_grappa", "train", *NATIVE, *common]
        bound = (args.max_restarts + 1) * (args.timeout_s + 60) + 60
    else:
        cmd = [sys.executable, "-m", "dgl_grappa.distdgl", *NATIVE, *common]
        bound = (args.max_restarts + 1) * (args.timeout_s + 180 + 60 + 60) + 60 * 2
    t0 = time.monotonic()
    log = open(out / "log.txt", "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    external = None
    hang = False
    try:
        if kind == "external-sigkill":
            ckdir = out / "out" / "checkpoints"
            want = rng.randrange(1, EPOCHS)  # after this many checkpoints, plus a random delay
            while proc.poll() is None and len(list(ckdir.glob("ckpt-e*.json"))) < want:
                if time.monotonic() - t0 > bound:
                    break
                time.sleep(0.1)
            time.sleep(rng.uniform(0.0, 1.5))
            victims = _job_children(proc.pid)
            if proc.poll() is None and victims:
                v = rng.choice(victims)
                external = " ".join(v.cmdline()[-3:])[:60]
                os.kill(v.pid, signal.SIGKILL)
        try:
            proc.wait(timeout=max(1.0, bound + 60 - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            hang = True
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    wall = time.monotonic() - t0
    time.sleep(0.5)
    import psutil

    left = [p for p in processes_of_job(job) if "resource_tracker" not in " ".join(psutil.Process(p).cmdline())]
    text = (out / "log.txt").read_text(errors="replace")
    summary_path = out / "out" / "summary.json"
    restarts, bitwise = None, None
    if proc.returncode == 0 and summary_path.is_file():
        s = json.loads(summary_path.read_text())
        restarts = len(s.get("restarts", []))
        outcome = "completed" if s.get("epochs") == EPOCHS else f"completed with {s.get('epochs')} epochs"
        if reference is not None and system == "native":
            import torch

            point = CheckpointStore(out / "out" / "checkpoints").newest_valid()
            mine = torch.load(point.path, weights_only=True)["model"]
            bitwise = all(torch.equal(mine[k], reference[k]) for k in reference)
    else:
        errs = [ln for ln in text.splitlines() if "error:" in ln]
        outcome = f"failed (rc {proc.returncode}): {errs[-1].strip()[:90] if errs else '?'}"
    fired = sorted(p.name[len("fired-") :] for p in out.glob("fired-*"))
    return {
        "run": i,
        "system": system,
        "kind": kind,
        "faults": faults,
        "external": external,
        "fired": fired,
        "outcome": outcome,
        "rc": proc.returncode,
        "restarts": restarts,
        "wall_s": round(wall, 1),
        "bound_s": bound,
        "within_bound": wall <= bound,
        "hang": hang,
        "left_processes": len(left),
        "bitwise_equal": bitwise,
    }


def reference_params(work: Path, args):
    import torch

    from dgl_grappa.runtime.checkpoint import CheckpointStore

    out = work / "reference"
    env = dict(os.environ, DGLBACKEND="pytorch", PYTHONPATH=str(ROOT))
    env.pop("DGL_GRAPPA_FAULT", None)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "dgl_grappa",
            "train",
            *NATIVE,
            f"--run.output_dir={out}",
            f"--run.timeout_s={args.timeout_s}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=args.timeout_s + 120,
    )
    if p.returncode != 0:
        raise SystemExit(f"the unfaulted reference run failed:\n{p.stderr[-2000:]}")
    return torch.load(CheckpointStore(out / "checkpoints").newest_valid().path, weights_only=True)["model"]


def table(rows: list[dict]) -> str:
    head = (
        f"{'run':>3}  {'system':7} {'fault':19} {'fired':17} {'restarts':>8}  {'wall s':>7} {'bound s':>7}  "
        f"{'hang':4} {'left':>4}  {'bitwise':7}  outcome"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        fired = ",".join(r["fired"]) or ("external" if r["external"] else "-")
        bw = "-" if r["bitwise_equal"] is None else ("yes" if r["bitwise_equal"] else "NO")
        lines.append(
            f"{r['run']:>3}  {r['system']:7} {r['kind']:19} {fired:17} "
            f"{'-' if r['restarts'] is None else r['restarts']:>8}  {r['wall_s']:>7.1f} {r['bound_s']:>7.0f}  "
            f"{'YES' if r['hang'] else 'no':4} {r['left_processes']:>4}  {bw:7}  {r['outcome']}"
        )
    return "\n".join(lines)


def soak(
    n: int = 20,
    seed: int | None = None,
    work: Path | None = None,
    distdgl_every: int = 0,
    max_restarts: int = 2,
    timeout_s: float = 240,
    compare: bool = True,
) -> dict:
    """Run the soak; returns {"runs": [...], "totals": {...}} (see the module docstring)."""
    args = argparse.Namespace(max_restarts=max_restarts, timeout_s=timeout_s)
    seed = int(time.time()) if seed is None else seed
    rng = random.Random(seed)
    work = Path(work or tempfile.mkdtemp(prefix="fault-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    reference = reference_params(work, args) if compare else None
    rows = []
    for i in range(n):
        system = "distdgl" if distdgl_every and (i + 1) % distdgl_every == 0 else "native"
        kind = rng.choice(KINDS if system == "native" else ("step-sigkill", "switch-sigkill", "external-sigkill"))
        rows.append(run_one(i, kind, system, rng, work, args, reference))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    totals = {
        "runs": len(rows),
        "completed": sum(r["outcome"] == "completed" for r in rows),
        "hangs": sum(r["hang"] for r in rows),
        "over_bound": sum(not r["within_bound"] for r in rows),
        "left_processes": sum(r["left_processes"] for r in rows),
        "bitwise_equal": sum(bool(r["bitwise_equal"]) for r in rows),
        "restarts": sum(r["restarts"] or 0 for r in rows),
        "seed": seed,
        "work": str(work),
    }
    return {"runs": rows, "totals": totals}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20, help="number of faulted runs")
    ap.add_argument("--seed", type=int, default=None, help="seed of the fault draws (default: the clock)")
    ap.add_argument("--work", default=None, help="folder for the runs (default: a temporary one)")
    ap.add_argument("--json", default=None, help="write the results here (default: <work>/soak.json)")
    ap.add_argument("--distdgl-every", type=int, default=0, help="every M-th run is a DistDGL run (0: none)")
    ap.add_argument("--max-restarts", type=int, default=2)
    ap.add_argument("--timeout-s", type=float, default=240, help="run.timeout_s of each attempt")
    ap.add_argument("--no-compare", action="store_true", help="skip the unfaulted reference run (bitwise check)")
    a = ap.parse_args()
    res = soak(
        a.n, a.seed, Path(a.work) if a.work else None, a.distdgl_every, a.max_restarts, a.timeout_s, not a.no_compare
    )
    print()
    print(table(res["runs"]))
    t = res["totals"]
    print(
        f"\n{t['runs']} runs: {t['completed']} completed, {t['hangs']} hangs, {t['over_bound']} over their bound, "
        f"{t['left_processes']} processes left behind, {t['restarts']} restarts, "
        f"{t['bitwise_equal']} bitwise equal to the unfaulted run (seed {t['seed']})"
    )
    path = Path(a.json) if a.json else Path(t["work"]) / "soak.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res, indent=1))
    print(f"wrote {path}")
    ok = t["hangs"] == 0 and t["over_bound"] == 0 and t["left_processes"] == 0 and t["completed"] == t["runs"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
