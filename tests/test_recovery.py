"""Recovery from dead workers, through the real command line (spawned gloo workers, real DistDGL jobs).

Where a worker dies is fixed where it matters (the native mid-epoch kill is in the first epoch of the
second partitioning, so its restart always crosses the switch) and otherwise drawn from a fixed seed
(``RECOVERY_SEED`` draws others; printed, so a failure can be rerun), and injected with
``DGL_GRAPPA_FAULT`` (:mod:`dgl_grappa.cluster.faults`): the worker SIGKILLs itself at that point, once.

* Native runtime: a worker killed mid-epoch -> the launcher restarts the group from the
  newest checkpoint -> the run completes with **bitwise** the final parameters of an
  unfaulted run with the same seed (the RNG streams are restored per rank, and DGL's
  sampling is reseeded per epoch from (seed, epoch)). A worker killed while rank 0 writes a
  checkpoint leaves the previous one intact; ``--resume`` continues from it, again bitwise.
* DistDGL (repartitioning, one job per partitioning): a trainer killed mid-epoch and one
  killed in the middle of a repartition switch: the job restarts at the checkpointed epoch
  with the checkpoint's parameter checksum, and ends with a test accuracy no lower than
  3 unfaulted seeds' lowest less their spread.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dgl_grappa.cluster.netns import check_isolation
from dgl_grappa.runtime.checkpoint import CheckpointStore

ROOT = Path(__file__).resolve().parent.parent
SEED = int(os.environ.get("RECOVERY_SEED", 0))  # fixed: every run tests the same points
RNG = random.Random(SEED)

# 4 epochs, a new (random, exactly reproducible) partitioning every 2: restarts cross a switch.
NATIVE = [
    "--data.synthetic.num_nodes=2000",
    "--data.synthetic.preset=custom",
    "--data.synthetic.noise=1.0",
    "--partition.num_parts=4",
    "--train.epochs=4",
    "--train.batch_size=150",
    "--model.hidden=64",
    "--train.fanouts=[5,5]",
    "--train.lr=0.03",
    "--train.eval_every=2",
    "--schedule.k=2",
    "--schedule.method=random",
    "--checkpoint.keep_last=10",
    "--run.progress=false",
    "--run.timeout_s=240",
]


def cli(*args: str, fault=None, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, DGLBACKEND="pytorch", PYTHONPATH=str(ROOT))
    env.pop("DGL_GRAPPA_FAULT", None)
    if fault is not None:
        env["DGL_GRAPPA_FAULT"] = json.dumps(fault)
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def final_state(out: Path) -> dict:
    point = CheckpointStore(out / "checkpoints").newest_valid()
    return torch.load(point.path, weights_only=True)


def assert_same_params(a: dict, b: dict) -> None:
    assert a["model"].keys() == b["model"].keys()
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), f"parameter {k} differs"
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    for i in sa:
        for key in sa[i]:
            assert torch.equal(sa[i][key], sb[i][key]), f"optimizer state {i}/{key} differs"


@pytest.fixture(scope="module")
def unfaulted(tmp_path_factory):
    out = tmp_path_factory.mktemp("unfaulted")
    p = cli("dgl_grappa", "train", *NATIVE, f"--run.output_dir={out}")
    assert p.returncode == 0, p.stderr[-3000:]
    return out, final_state(out), json.loads((out / "summary.json").read_text())


def test_native_worker_killed_mid_epoch_restarts_from_the_checkpoint_bitwise(unfaulted, tmp_path):
    ref_out, ref, ref_summary = unfaulted
    # epoch 2 is partitioning 1's first (schedule.k=2): the restart resumes from the checkpoint written at the
    # switch and loads the new partitioning, the case a restart most easily gets wrong
    rank, epoch, step = RNG.randrange(2), 2, 1
    print(f"RECOVERY_SEED={SEED}: SIGKILL of worker {rank} before step {step} of epoch {epoch}")
    fault = {"point": "step", "rank": rank, "epoch": epoch, "step": step, "once": str(tmp_path / "fired")}
    out = tmp_path / "run"
    p = cli("dgl_grappa", "train", *NATIVE, f"--run.output_dir={out}", "--launch.max_restarts=1", fault=fault)
    assert p.returncode == 0, p.stderr[-3000:]
    assert (tmp_path / "fired").exists()
    ck = out / "checkpoints" / f"ckpt-e{epoch:06d}.pt"  # written after epoch - 1, the newest before the kill
    assert (
        f"restart 1/1 of the Grappa job: worker {rank} was killed by SIGKILL; resuming from checkpoint "
        f"{ck} (epoch {epoch})"
    ) in p.stderr
    s = json.loads((out / "summary.json").read_text())
    assert [(r["restart"], r["epoch"], r["resumed_from"]) for r in s["restarts"]] == [(1, epoch, str(ck))]
    # Every epoch once in the run's records; the same final parameters (and optimizer state)
    # as the unfaulted run, bit for bit, hence the same accuracy.
    assert [json.loads(ln)["epoch"] for ln in (out / "metrics.jsonl").read_text().splitlines()] == [0, 1, 2, 3]
    assert_same_params(final_state(out), ref)
    assert (s["val_acc"], s["test_acc"]) == (ref_summary["val_acc"], ref_summary["test_acc"])
    assert [sw["index"] for sw in s["switches"]] == [1]


def test_native_kill_while_a_checkpoint_is_written_keeps_the_previous_one(unfaulted, tmp_path):
    _, ref, _ = unfaulted
    epoch = RNG.randrange(2, 5)  # the checkpoint after epoch-1 is being written; the previous is epoch-1's
    print(f"RECOVERY_SEED={SEED}: rank 0 killed half-way through writing checkpoint ckpt-e{epoch:06d}")
    out = tmp_path / "run"
    p = cli(
        "dgl_grappa",
        "train",
        *NATIVE,
        f"--run.output_dir={out}",
        fault={"point": "checkpoint", "epoch": epoch, "once": str(tmp_path / "fired")},
    )
    assert p.returncode == 1 and "worker 0 was killed by SIGKILL" in p.stderr, p.stderr[-3000:]
    store = CheckpointStore(out / "checkpoints")
    assert list((out / "checkpoints").glob(f".ckpt-e{epoch:06d}.pt.tmp-*")), "the killed write left its temporary file"
    assert not (out / "checkpoints" / f"ckpt-e{epoch:06d}.json").exists()
    point = store.newest_valid()
    assert point.epoch == epoch - 1, "the previous checkpoint is the newest intact one"
    prev = torch.load(point.path, weights_only=True)
    assert prev["epoch"] == epoch - 1 and prev["model"]
    # ... and a resume from it ends where the unfaulted run ended.
    p = cli("dgl_grappa", "train", *NATIVE, f"--run.output_dir={out}", "--resume")
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"resumed from {point.path}: epoch {epoch - 1}" in p.stderr
    assert_same_params(final_state(out), ref)
    assert not list((out / "checkpoints").glob(".ckpt-*")), "the next checkpoint cleared the stale temporary file"


# ---------------------------------------------------------------------------------------
# DistDGL
# ---------------------------------------------------------------------------------------

WHY_NOT = check_isolation(net=False, shm="64m")
needs_ns = pytest.mark.skipif(WHY_NOT is not None, reason=f"private namespaces unavailable: {WHY_NOT}")

DISTDGL = """
name: recovery
data:
  name: synthetic
  synthetic: {{preset: custom, noise: 1.0, num_nodes: 2000, avg_degree: 10}}
partition: {{num_parts: 2, method: metis}}
model: {{name: sage, num_layers: 2, hidden: 16}}
train: {{epochs: 4, batch_size: 300, fanouts: [5, 5], lr: 0.03, eval_every: 0, seed: {seed}}}
schedule: {{k: {k}, method: random}}
checkpoint: {{keep_last: 10}}
launch: {{max_restarts: {restarts}}}
run: {{output_dir: {out}, timeout_s: 240, progress: false}}
"""


def _distdgl(tmp: Path, name: str, seed: int = 0, k: int = 2, restarts: int = 0, fault=None):
    cfg = tmp / f"{name}.yaml"
    cfg.write_text(DISTDGL.format(seed=seed, k=k, restarts=restarts, out=tmp / name))
    p = cli("dgl_grappa.distdgl", "--config", str(cfg), fault=fault, timeout=900)
    assert p.returncode == 0, p.stderr[-4000:]
    return tmp / name, json.loads((tmp / name / "summary.json").read_text()), p.stderr


def _assert_no_worse_than_unfaulted(acc: float, unfaulted: list[float]) -> None:
    """A resumed DistDGL job is not bitwise the unfaulted one (DistDGL's sampling is not
    reseeded per epoch), so its accuracy is another draw from the seeds' distribution: a
    recovery that lost the trained parameters would fall well below the seeds' range, one
    that worked lands within it or above. Lower bound: the lowest seed less the seeds'
    spread (at least 2 points); no upper bound (being better than the seeds is no fault)."""
    spread = max(unfaulted) - min(unfaulted)
    assert acc >= min(unfaulted) - max(spread, 0.02), (acc, unfaulted)


@pytest.fixture(scope="module")
def distdgl_unfaulted(tmp_path_factory):
    """Test accuracy of 2 unfaulted seeds. k=0 (one job each): DistDGL samples every neighbour
    wherever it lives, so its training does not depend on the partitioning, only the seeds'
    split over the trainers does; the same run with k=2 is the same training in one more job.
    (Two seeds: the bound below is at least 2 points under the lower one, wider than a third
    seed would move it.)"""
    tmp = tmp_path_factory.mktemp("distdgl-seeds")
    return [_distdgl(tmp, f"seed{s}", seed=s, k=0)[1]["test_acc"] for s in range(2)]


@pytest.fixture(scope="module")
def distdgl_faulted(tmp_path_factory):
    """One run (k=2: segments [0,2) and [2,4)) with two faults: a trainer killed mid-epoch in
    segment 0, and a trainer killed in the middle of the switch to partitioning 1 (the
    restarted segment's start, after its checkpoint was loaded)."""
    tmp = tmp_path_factory.mktemp("distdgl-faulted")
    mid = {
        "point": "step",
        "rank": RNG.randrange(2),
        "epoch": 1,
        "step": RNG.randrange(2),
        "once": str(tmp / "fired-step"),
    }
    switch = {"point": "switch", "rank": RNG.randrange(2), "epoch": 2, "once": str(tmp / "fired-switch")}
    print(f"RECOVERY_SEED={SEED}: DistDGL faults {mid} and {switch}")
    out, s, err = _distdgl(tmp, "faulted", restarts=2, fault=[mid, switch])
    assert (tmp / "fired-step").exists() and (tmp / "fired-switch").exists()
    return out, s, err, mid, switch


def _file_checksum(path: Path) -> float:
    ck = torch.load(path, weights_only=True)
    return float(sum(t.double().sum() for t in ck["model"].values() if t.is_floating_point()))


@needs_ns
def test_distdgl_trainer_killed_mid_epoch_resumes_at_the_checkpoint(distdgl_faulted, distdgl_unfaulted):
    out, s, err, mid, _ = distdgl_faulted
    r = s["restarts"][0]
    ck = out / "checkpoints" / "ckpt-e000001.pt"
    assert (r["segment"], r["epoch"], r["resumed_from"]) == (0, 1, str(ck))
    assert f"DistDGL trainer {mid['rank']} was killed by SIGKILL" in r["reason"]
    assert f"restart 1/2 of the DistDGL job: {r['reason']}; resuming from checkpoint {ck} (epoch 1)" in err
    restart = json.loads((out / "segments" / "0" / "summary.json").read_text())["restart"]
    assert restart["resumed_epoch"] == 1
    assert restart["checksum_loaded"] == restart["checksum_checkpoint"] == pytest.approx(_file_checksum(ck), abs=1e-9)
    assert [json.loads(ln)["epoch"] for ln in (out / "metrics.jsonl").read_text().splitlines()] == [0, 1, 2, 3]
    _assert_no_worse_than_unfaulted(s["test_acc"], distdgl_unfaulted)


@needs_ns
def test_distdgl_trainer_killed_during_a_repartition_switch_resumes_at_the_boundary(distdgl_faulted, distdgl_unfaulted):
    out, s, err, _, switch = distdgl_faulted
    r = s["restarts"][1]
    ck = out / "checkpoints" / "ckpt-e000002.pt"  # segment 0's last: the boundary
    assert (r["segment"], r["epoch"], r["resumed_from"]) == (1, 2, str(ck))
    assert f"DistDGL trainer {switch['rank']} was killed by SIGKILL" in r["reason"]
    restart = json.loads((out / "segments" / "1" / "summary.json").read_text())["restart"]
    assert restart["resumed_epoch"] == 2
    assert restart["checksum_loaded"] == restart["checksum_checkpoint"] == pytest.approx(_file_checksum(ck), abs=1e-9)
    (sw,) = s["switches"]
    assert sw["checksum_saved"] == pytest.approx(sw["checksum_loaded"], abs=1e-9)
    assert s["epochs"] == 4 and [len(s["restarts"]), s["segments"]] == [2, 2]
    _assert_no_worse_than_unfaulted(s["test_acc"], distdgl_unfaulted)


# ---------------------------------------------------------------------------------------
# Workers started by an external starter (torchrun, Slurm): run_worker(..., resume="auto")
# ---------------------------------------------------------------------------------------


def _external_worker(rank, world_size, cfg, part_config, n_classes, out_dir):
    from dgl_grappa.cluster.launch import Identity
    from dgl_grappa.native.trainer import run_worker

    run_worker(Identity(rank, world_size, rank), cfg, part_config, n_classes, out_dir, resume="auto")


def test_externally_started_workers_continue_from_the_newest_checkpoint(tmp_path):
    """What ``python -m dgl_grappa worker`` does under torchrun: every start resumes with "auto"."""
    import shutil

    from dgl_grappa.cluster.testing import run_distributed
    from dgl_grappa.config import load_config
    from dgl_grappa.data import load_dataset, num_classes
    from dgl_grappa.partition.schedule import prepare_schedule

    def cfg_for(epochs):
        return load_config(
            None,
            [a for a in NATIVE if not a.startswith(("--train.epochs", "--run.timeout"))]
            + [f"--train.epochs={epochs}", f"--run.output_dir={tmp_path}"],
        )

    g = load_dataset(cfg_for(3).data)
    stats = prepare_schedule(cfg_for(3), g)
    # First start: no checkpoint yet, so epoch 0; three epochs, checkpoints after each.
    run_distributed(_external_worker, 2, cfg_for(3), stats["part_config"], num_classes(g), str(tmp_path), timeout_s=300)
    assert CheckpointStore(tmp_path / "checkpoints").newest_valid().epoch == 3
    # The next start (the starter's restart, here with more epochs) continues at epoch 3, on
    # partitioning 1, which rank 0 builds again because it is gone from disk.
    shutil.rmtree(tmp_path / "partitions" / "1")
    run_distributed(_external_worker, 2, cfg_for(4), stats["part_config"], num_classes(g), str(tmp_path), timeout_s=300)
    records = [json.loads(ln) for ln in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [0, 1, 2, 3] and [r["partitioning"] for r in records] == [0, 0, 1, 1]
    assert CheckpointStore(tmp_path / "checkpoints").newest_valid().epoch == 4
    assert (tmp_path / "partitions" / "1" / "grappa.json").is_file()
