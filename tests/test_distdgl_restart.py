"""DistDGL with repartitioning: a restart per partitioning, resumed from a checkpoint.

A tiny real job (3k nodes, 2 parts, 3 epochs, k=2 -> 2 segments of 2 and 1 epochs, 1
switch), baseline DistDGL trainer. Needs root (private /dev/shm per machine); skips where
the machine cannot.
"""

from __future__ import annotations

import json
import os
import statistics
import uuid

import psutil
import pytest
import torch

from dgl_grappa.cluster.netns import check_isolation
from dgl_grappa.cluster.procs import ENV_JOB, processes_of_job
from dgl_grappa.config import load_config
from dgl_grappa.distdgl import run_distdgl

WHY_NOT = check_isolation(net=False, shm="64m")

TINY = """
name: restart
data:
  name: synthetic
  synthetic: {{preset: hard, num_nodes: 3000, avg_degree: 10}}
partition: {{num_parts: 2, method: metis}}
model: {{name: sage, num_layers: 2, hidden: 16}}
train: {{epochs: 3, batch_size: 500, fanouts: [5, 10], eval_every: 0}}
schedule: {{k: 2, method: random, keep_last: 1}}
run: {{output_dir: {out}, timeout_s: 120, progress: false}}
"""


@pytest.mark.skipif(WHY_NOT is not None, reason=f"private namespaces unavailable: {WHY_NOT}")
def test_restart_per_partitioning_resumes_the_checkpointed_model(tmp_path):
    cfg_path = tmp_path / "tiny.yaml"
    cfg_path.write_text(TINY.format(out=tmp_path / "run"))
    cfg = load_config(cfg_path)
    job = uuid.uuid4().hex
    os.environ[ENV_JOB] = job
    try:
        s = run_distdgl(cfg, quiet=True)
    finally:
        del os.environ[ENV_JOB]
    out = tmp_path / "run"
    # Nothing of the job is left (the background builder included). Python's multiprocessing
    # resource tracker, started for this test process by the builder's spawn, stays with it.
    left = [
        p
        for p in processes_of_job(job)
        if "multiprocessing.resource_tracker" not in " ".join(psutil.Process(p).cmdline())
    ]
    assert left == []

    # One run: both segments merged, every epoch trained once, on partitionings 0, 0 and 1.
    assert s["segments"] == 2 and s["epochs"] == 3
    recs = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(r["epoch"], r["partitioning"]) for r in recs] == [(0, 0), (1, 0), (2, 1)]
    assert json.loads((out / "summary.json").read_text())["switches"] == s["switches"]
    assert s["val_acc"] is not None and s["wire_bytes_per_epoch"] is not None

    # The segments merge by the rule of a single run: the median of the per-epoch times
    # (each the slowest worker's) and their sum, not a median of the segments' medians.
    times = [r["epoch_time_s"] for r in recs]
    assert s["epoch_time_s"] == statistics.median(times) and s["train_time_s"] == pytest.approx(sum(times))
    assert all(r["epoch_time_s"] >= r["worker_epoch_time_s"] > 0 for r in recs)

    (sw,) = s["switches"]
    assert sw["epoch"] == 2 and sw["partitioning"] == 1
    assert 0 < sw["restart_s"] and s["restart_fraction_of_train"] == pytest.approx(sw["restart_s"] / s["train_time_s"])
    assert sw["checkpoint_save_s"] > 0 and sw["checkpoint_load_s"] > 0 and sw["build_s"] > 0
    assert 0 < sw["overlap_prev"] <= 1 and 0 < sw["edge_cut"] < 1
    # The wall-clock marks come from four processes (segment runner, two trainers, their
    # launcher); they must follow each other in the order the restart happens, so no phase
    # is negative, and the trainer's own start-up phases lie inside its launch-to-first-epoch.
    for phase in (
        "teardown_s",
        "between_jobs_s",
        "launch_s",
        "trainer_init_s",
        "imports_s",
        "connect_s",
        "distgraph_s",
        "setup_s",
        "first_barrier_s",
    ):
        assert sw[phase] >= 0, (phase, sw)
    assert sw["imports_s"] > 0 and sw["launch_s"] > 0  # process start is taken from the kernel, not the script
    assert sw["imports_s"] + sw["connect_s"] + sw["distgraph_s"] + sw["setup_s"] <= sw["restart_s"]

    # The resumed model is the checkpointed one: checked against the file itself, not
    # only against what the trainer says it saved.
    # The boundary checkpoint (segment 0's last) is in the run's checkpoint folder, and loads
    # with weights_only=True: it holds tensors and plain containers only.
    ck = torch.load(out / "checkpoints" / "ckpt-e000002.pt", weights_only=True)
    in_file = float(sum(t.double().sum() for t in ck["model"].values() if t.is_floating_point()))
    assert ck["epoch"] == 2 and len(ck["ranks"]) == 2 and [r["epoch"] for r in ck["records"]] == [0, 1]
    assert s["restarts"] == []
    assert sw["checksum_saved"] == pytest.approx(in_file, rel=0, abs=1e-9)
    assert sw["checksum_loaded"] == pytest.approx(in_file, rel=0, abs=1e-9)
    assert ck["optimizer"]["state"], "the optimizer state (Adam moments) was saved"
