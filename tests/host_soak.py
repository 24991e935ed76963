#!/usr/bin/env python
"""Host soak: training runs on 4 namespace test hosts, each with a fault a cluster sends, drawn at random.

Every run is ``python -m dgl_grappa train --launch.remote=netns`` on a small graph (4 parts, 6 epochs,
a checkpoint after each) with one fault:

* ``kill``: a worker is SIGKILLed before a random step (``launch.on_failure: continue``): the run must
  complete without a restart, with the change in ``membership``, every epoch recorded;
* ``kill2``: two workers on two hosts are SIGKILLed at the same step (milliseconds apart): one change
  of membership with both, never two;
* ``host2``: two workers per host (and a spare host): both workers of one host are SIGKILLed at the
  same step, as when the host dies: one change, both parts to the spare;
* ``stop``: a worker is SIGSTOPped (continue, ``run.peer_timeout_s=10``): named in one line, taken over;
* ``blip``: a worker's host takes its link down at a step and this script brings it back 4 s later
  (less than every timeout): the run completes without any change, the stall in that epoch's ``wall_s``;
* ``netdown``: a host's link goes down for good: named unreachable (not a healthy peer) within
  ``run.peer_timeout_s``, taken over;
* ``return``: a host's link goes down and comes back once its part was taken over: taken over, and
  its stale worker stops without writing;
* ``sigterm``: the top level gets SIGTERM after the first checkpoint (started as ``cmd &`` from a script
  would be: its own session, no terminal): exit 143, no process of the job left 30 s later, then
  ``--resume`` completes the run;
* ``second-job``: a second job on the same folder while the first trains: refused in one line (exit 2),
  the first completes with every epoch recorded;
* ``truncate``: a part's ``node_feat.dgl`` cut short: ``prepare`` on that partition folder refuses in one
  line naming the file (exit 2); ``train``, which reuses the folder it made, finds the file's size and hash
  unlike what it wrote, says so, partitions again and completes (never reading zeros).

For each run: the outcome, whether it hung (killed here past its bound), the job's processes left,
results lost (epochs missing from metrics.jsonl of a run that should have them) and, for the elastic
runs, the test accuracy against the failure-free run of the same seed. Prints a table, writes JSON.

    python tests/host_soak.py --n 10 --json runs/host_soak.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KINDS = ("kill", "kill2", "host2", "stop", "blip", "netdown", "return", "sigterm", "second-job", "truncate")
BLIP_S = 4.0
"""How long a ``blip`` keeps a link down (below run.peer_timeout_s and run.collective_timeout_s)."""
EPOCHS, STEPS = 6, 3
JOB = """
name: host-soak
data: {{name: synthetic, synthetic: {{preset: easy, num_nodes: 3000, avg_degree: 10}}}}
partition: {{num_parts: 4, method: metis, out_dir: {parts}}}
model: {{name: sage, num_layers: 2, hidden: 16}}
train: {{epochs: {epochs}, batch_size: 128, fanouts: [5, 10], eval_every: 1, lr: 0.03, seed: {seed}}}
run: {{timeout_s: 240, collective_timeout_s: 60, peer_timeout_s: 10, progress: false}}
launch: {{remote: netns, on_failure: continue}}
checkpoint: {{every: 1}}
"""
BOUND_S = 240 + 120  # run.timeout_s plus start-up and teardown


def _start(cfg: Path, out: Path, job: str, faults: list[dict], *extra: str) -> subprocess.Popen:
    from dgl_grappa.cluster.procs import ENV_JOB

    env = dict(os.environ, DGLBACKEND="pytorch", PYTHONPATH=str(ROOT), **{ENV_JOB: job})
    env.pop("DGL_GRAPPA_FAULT", None)
    if faults:
        env["DGL_GRAPPA_FAULT"] = json.dumps(faults)
    log = open(out.parent / f"{out.name}.log", "a")
    return subprocess.Popen(
        [sys.executable, "-m", "dgl_grappa", "train", "--config", str(cfg), f"--run.output_dir={out}", *extra],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def _wait(p: subprocess.Popen, bound: float) -> bool:
    """Wait for ``p`` at most ``bound`` seconds; True when it had to be killed (a hang)."""
    try:
        p.wait(timeout=bound)
        return False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return True


def _wait_for(path_glob, root: Path, bound: float) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < bound:
        if list(root.glob(path_glob)):
            return True
        time.sleep(0.2)
    return False


def _link_fault(run: Path, out: Path, p: subprocess.Popen, rank: int, up_when) -> str | None:
    """Wait for worker ``rank``'s "link down" fault, then bring its host's link back once ``up_when()`` is true
    (None: never); the host's namespace, or None when the fault did not fire before the job ended."""
    log = out / "logs" / f"worker{rank}.log"
    pat = re.compile(r"fault injection: link down at .* \(pid (\d+)\)")
    deadline = time.monotonic() + BOUND_S
    ns = None
    while time.monotonic() < deadline and p.poll() is None:
        m = pat.search(log.read_text(errors="replace")) if log.exists() else None
        if m:
            ns = subprocess.run(
                ["ip", "netns", "identify", m.group(1)], capture_output=True, text=True, timeout=10
            ).stdout.strip()
            break
        time.sleep(0.2)
    if not ns or up_when is None:
        return ns
    while time.monotonic() < deadline and p.poll() is None and not up_when():
        time.sleep(0.2)
    subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "up"], capture_output=True, timeout=10)
    return ns


def _left(job: str) -> int:
    from dgl_grappa.cluster.procs import processes_of_job

    return len(processes_of_job(job))


def _result(out: Path) -> tuple[dict | None, list[int]]:
    s = json.loads((out / "summary.json").read_text()) if (out / "summary.json").is_file() else None
    m = out / "metrics.jsonl"
    epochs = [json.loads(line)["epoch"] for line in m.read_text().splitlines()] if m.is_file() else []
    return s, epochs


def run_one(i: int, kind: str, rng: random.Random, work: Path, seed: int, reference: float | None) -> dict:
    run = work / f"run{i:02d}"
    run.mkdir(parents=True)
    cfg = run / "job.yaml"
    cfg.write_text(JOB.format(parts=work / "parts", epochs=EPOCHS, seed=seed))
    out, job = run / "out", uuid.uuid4().hex
    rank, epoch, step = rng.randrange(4), rng.randrange(1, EPOCHS - 1), rng.randrange(STEPS)
    fault = {"point": "step", "rank": rank, "epoch": epoch, "step": step, "once": str(run / "fired")}
    row = {"run": i, "kind": kind, "fault": "-", "hang": False, "left": 0, "lost": 0, "acc_diff": None}
    t0 = time.monotonic()
    if kind in ("kill2", "host2"):
        if kind == "kill2":
            ranks = sorted(rng.sample(range(4), 2))
            extra = []
        else:  # two workers per host on two hosts, and a spare: host h holds ranks 2h and 2h+1
            h = rng.randrange(2)
            ranks, extra = [2 * h, 2 * h + 1], ["--launch.workers_per_host=2", "--launch.spare_hosts=1"]
        faults = [dict(fault, rank=r, once=str(run / f"fired{r}")) for r in ranks]
        row["fault"] = f"SIGKILL ranks {ranks[0]},{ranks[1]} e{epoch} s{step}"
        p = _start(cfg, out, job, faults, *extra)
        row["hang"] = _wait(p, BOUND_S)
        s, epochs = _result(out)
        row["lost"] = EPOCHS - len(set(epochs))
        ok = (
            p.returncode == 0
            and s is not None
            and not s["restarts"]
            and len(s["membership"]) == 1
            and s["membership"][0]["lost"] == ranks
        )
        if kind == "host2" and ok:
            ok = all(j["host"] == 2 for j in s["membership"][0]["joined"])  # the spare took both
        if ok and reference is not None:
            row["acc_diff"] = round(100 * (s["test_acc"] - reference), 2)
        row["outcome"] = "completed, one change of both" if ok else f"FAILED (rc {p.returncode})"
    elif kind in ("blip", "netdown", "return"):
        fault["link"] = "down"
        row["fault"] = f"link down host of rank {rank} e{epoch} s{step}" + (
            f" {BLIP_S:.0f} s" if kind == "blip" else " for good" if kind == "netdown" else " until taken over"
        )
        p = _start(cfg, out, job, [fault])
        t_down = []

        def up_when():
            if kind == "blip":
                t_down.append(time.monotonic()) if not t_down else None
                return time.monotonic() - t_down[0] >= BLIP_S
            return (out / "membership" / "gen-1.json").exists()

        ns = _link_fault(run, out, p, rank, None if kind == "netdown" else up_when)
        row["hang"] = _wait(p, BOUND_S)
        s, epochs = _result(out)
        row["lost"] = EPOCHS - len(set(epochs))
        said = (run / "out.log").read_text(errors="replace")
        ok = ns is not None and p.returncode == 0 and s is not None and not s["restarts"]
        if kind == "blip":
            rec = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()][epoch] if ok else {}
            ok = ok and not s["membership"] and "is unreachable" not in said
            row["outcome"] = (
                f"completed, no change; epoch {epoch} wall {rec.get('wall_s', 0):.1f} s vs "
                f"{rec.get('epoch_time_s', 0):.1f} s of steps"
                if ok
                else f"FAILED (rc {p.returncode})"
            )
        else:
            host = rank  # one worker per host
            ok = (
                ok
                and len(s["membership"]) == 1
                and s["membership"][0]["lost"] == [rank]
                and f"host {host} (10.77.0.{host + 1}) is unreachable" in said
                and "stopped answering" not in said
            )
            if kind == "return":
                stale = (out / "logs" / f"worker{rank}.log").read_text(errors="replace")
                ok = ok and "this stale worker stops and writes nothing" in stale
            row["outcome"] = (
                ("named unreachable, taken over" + (", stale worker fenced" if kind == "return" else ""))
                if ok
                else f"FAILED (rc {p.returncode})"
            )
        if ok and reference is not None:
            row["acc_diff"] = round(100 * (s["test_acc"] - reference), 2)
    elif kind in ("kill", "stop"):
        if kind == "stop":
            fault["signal"] = "SIGSTOP"
        row["fault"] = f"{fault.get('signal', 'SIGKILL')} rank {rank} e{epoch} s{step}"
        p = _start(cfg, out, job, [fault])
        row["hang"] = _wait(p, BOUND_S)
        s, epochs = _result(out)
        row["lost"] = EPOCHS - len(set(epochs))
        ok = p.returncode == 0 and s is not None and len(s["membership"]) == 1 and not s["restarts"]
        if kind == "stop":
            log = (run / "out.log").read_text(errors="replace")
            ok = ok and f"worker {rank} (rank {rank} on host" in log and "stopped answering" in log
        if ok and reference is not None:
            row["acc_diff"] = round(100 * (s["test_acc"] - reference), 2)
        row["outcome"] = "completed, taken over" if ok else f"FAILED (rc {p.returncode})"
    elif kind == "sigterm":
        row["fault"] = "SIGTERM to the top level"
        p = _start(cfg, out, job, [])
        _wait_for("checkpoints/ckpt-e*.json", out, BOUND_S)
        time.sleep(rng.uniform(0, 2))
        p.send_signal(signal.SIGTERM)
        row["hang"] = _wait(p, 60)
        time.sleep(30)  # the bound: nothing of the job 30 s later
        row["left"] = _left(job)
        q = _start(cfg, out, job, [], "--resume")
        row["hang"] |= _wait(q, BOUND_S)
        s, epochs = _result(out)
        row["lost"] = EPOCHS - len(set(epochs))
        ok = p.returncode == 143 and q.returncode == 0 and row["left"] == 0
        row["outcome"] = "stopped (143), resumed, completed" if ok else f"FAILED (rc {p.returncode}, {q.returncode})"
    elif kind == "second-job":
        row["fault"] = "a second job on the folder"
        # the first job long enough to be still training when the second has started up and asks for the lock
        long = 5 * EPOCHS
        cfg.write_text(JOB.format(parts=work / "parts", epochs=long, seed=seed))
        p = _start(cfg, out, job, [])
        _wait_for("metrics.jsonl", out, BOUND_S)
        q = _start(cfg, out, uuid.uuid4().hex, [])
        row["hang"] = _wait(q, 120)
        overlapped = p.poll() is None  # else the case tested nothing: the first had ended
        row["hang"] |= _wait(p, BOUND_S)
        s, epochs = _result(out)
        row["lost"] = long - len(set(epochs))
        said = (run / "out.log").read_text(errors="replace")
        ok = overlapped and q.returncode == 2 and "is in use by another job" in said and p.returncode == 0
        row["outcome"] = (
            "second refused, first completed"
            if ok
            else f"FAILED (rc {q.returncode}, {p.returncode}{'' if overlapped else ', first had ended'})"
        )
    else:
        row["fault"] = f"node_feat.dgl of part {rank} cut short"
        feats = work / "parts" / f"part{rank}" / "node_feat.dgl"
        saved = feats.read_bytes()
        try:
            with open(feats, "r+b") as f:
                f.truncate(len(saved) // 2)
            copy = run / "parts"
            shutil.copytree(work / "parts", copy)
            pre = subprocess.run(
                [sys.executable, "-m", "dgl_grappa", "prepare", "--part-config", str(copy), "--force"],
                cwd=ROOT,
                env=dict(os.environ, DGLBACKEND="pytorch", PYTHONPATH=str(ROOT)),
                capture_output=True,
                text=True,
                timeout=120,
            )
            refused = (
                pre.returncode == 2
                and pre.stderr.count("\n") == 1
                and "node_feat.dgl" in pre.stderr
                and "truncated" in pre.stderr
            )
            p = _start(cfg, out, job, [])
            row["hang"] = _wait(p, BOUND_S)
            said = (run / "out.log").read_text(errors="replace")
            rebuilt = p.returncode == 0 and "is broken" in said and "partitioning again" in said
            s, epochs = _result(out)
            row["lost"] = EPOCHS - len(set(epochs))
            ok = refused and rebuilt and "Traceback" not in said
        finally:
            if feats.stat().st_size != len(saved):  # the run's own rebuild may have replaced it already
                feats.write_bytes(saved)
        row["outcome"] = (
            "prepare refused in one line, train rebuilt"
            if ok
            else f"FAILED (prepare rc {pre.returncode}, train rc {p.returncode})"
        )
    time.sleep(1.0)
    row["left"] = max(row["left"], _left(job))
    row["wall_s"] = round(time.monotonic() - t0, 1)
    row["ok"] = row["outcome"][:6] != "FAILED" and not row["hang"] and row["left"] == 0 and row["lost"] == 0
    return row


def reference(work: Path, seed: int) -> float:
    """The failure-free run's test accuracy (it also makes the partitions every run reuses)."""
    run = work / "reference"
    run.mkdir(parents=True)
    cfg = run / "job.yaml"
    cfg.write_text(JOB.format(parts=work / "parts", epochs=EPOCHS, seed=seed))
    p = _start(cfg, run / "out", uuid.uuid4().hex, [])
    if _wait(p, BOUND_S) or p.returncode != 0:
        raise SystemExit(f"the failure-free run failed: see {run / 'out.log'}")
    return json.loads((run / "out" / "summary.json").read_text())["test_acc"]


def table(rows: list[dict]) -> str:
    head = (
        f"{'run':>3}  {'kind':10} {'fault':30} {'wall s':>6}  {'hang':4} {'left':>4} {'lost':>4} "
        f"{'acc diff':>8}  outcome"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        acc = "-" if r["acc_diff"] is None else f"{r['acc_diff']:+.2f}"
        lines.append(
            f"{r['run']:>3}  {r['kind']:10} {r['fault']:30} {r['wall_s']:>6.1f}  "
            f"{'YES' if r['hang'] else 'no':4} {r['left']:>4} {r['lost']:>4} {acc:>8}  {r['outcome']}"
        )
    return "\n".join(lines)


def soak(n: int, seed: int, work: Path) -> dict:
    rng = random.Random(seed)
    ref = reference(work, seed)
    kinds = [KINDS[i % len(KINDS)] for i in range(n)]  # every kind, in a random order
    rng.shuffle(kinds)
    rows = []
    for i, kind in enumerate(kinds):
        rows.append(run_one(i, kind, rng, work, seed, ref))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    elastic = [r["acc_diff"] for r in rows if r["acc_diff"] is not None]
    totals = {
        "runs": len(rows),
        "ok": sum(r["ok"] for r in rows),
        "hangs": sum(r["hang"] for r in rows),
        "left_processes": sum(r["left"] for r in rows),
        "results_lost": sum(r["lost"] for r in rows),
        "reference_test_acc": ref,
        "elastic_acc_diff_points": elastic,
        "seed": seed,
        "work": str(work),
    }
    return {"runs": rows, "totals": totals}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10, help="number of runs (the kinds in turn, shuffled)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    work = Path(a.work or tempfile.mkdtemp(prefix="host-soak-"))
    res = soak(a.n, a.seed, work)
    print()
    print(table(res["runs"]))
    t = res["totals"]
    print(
        f"\n{t['runs']} runs: {t['ok']} as they should, {t['hangs']} hangs, {t['left_processes']} processes left, "
        f"{t['results_lost']} epochs lost; elastic runs' test accuracy against the failure-free run "
        f"({t['reference_test_acc']:.4f}): {t['elastic_acc_diff_points']} points"
    )
    path = Path(a.json) if a.json else work / "host_soak.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res, indent=1))
    print(f"wrote {path}")
    return 0 if t["ok"] == t["runs"] else 1


if __name__ == "__main__":
    sys.exit(main())
