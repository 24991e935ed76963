"""DistDGL with repartitioning: a restart per partitioning, resumed from a checkpoint.

A tiny real job (3k nodes, 2 parts, 2 epochs, k=1 -> 2 segments, 1 switch), baseline
DistDGL script. Needs root (private /dev/shm per machine); skips where the machine cannot.
"""
from __future__ import annotations

import json
import os
import uuid

import psutil
import pytest
import torch

from dgl_grappa.config import load_config
from dgl_grappa.distdgl import run_distdgl
from dgl_grappa.procs import ENV_JOB, processes_of_job
from dgl_grappa.netns import check_isolation

WHY_NOT = check_isolation(net=False, shm="64m")

TINY = """
name: restart
data:
  name: synthetic
  synthetic: {{preset: hard, num_nodes: 3000, avg_degree: 10}}
partition: {{num_parts: 2, method: metis}}
model: {{name: sage, num_layers: 2, hidden: 16}}
train: {{epochs: 2, batch_size: 500, fanouts: [5, 10], eval_every: 0}}
schedule: {{k: 1, method: random, keep_last: 1}}
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
    left = [p for p in processes_of_job(job)
            if "multiprocessing.resource_tracker" not in " ".join(psutil.Process(p).cmdline())]
    assert left == []

    # One run: both segments merged, epochs 0 and 1 each trained once, on partitionings 0 and 1.
    assert s["segments"] == 2 and s["epochs"] == 2
    recs = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(r["epoch"], r["partitioning"]) for r in recs] == [(0, 0), (1, 1)]
    assert json.loads((out / "summary.json").read_text())["switches"] == s["switches"]
    assert s["val_acc"] is not None and s["wire_bytes_per_epoch"] is not None

    (sw,) = s["switches"]
    assert sw["epoch"] == 1 and sw["partitioning"] == 1
    assert 0 < sw["restart_s"] and s["restart_s_total"] == pytest.approx(sw["restart_s"])
    assert s["restart_fraction_of_train"] == pytest.approx(sw["restart_s"] / s["train_time_s"])
    assert sw["checkpoint_save_s"] > 0 and sw["checkpoint_load_s"] > 0 and sw["build_s"] > 0
    assert 0 < sw["overlap_prev"] <= 1 and 0 < sw["edge_cut"] < 1
    # The parts of the restart cost fit inside it (they are consecutive, measured apart).
    parts = sw["teardown_s"] + sw["between_jobs_s"] + sw["launch_s"] + sw["trainer_init_s"] + sw["first_barrier_s"]
    assert parts == pytest.approx(sw["restart_s"], abs=0.05)
    init = sw["imports_s"] + sw["connect_s"] + sw["distgraph_s"] + sw["setup_s"]
    assert init == pytest.approx(sw["trainer_init_s"], abs=0.05)

    # The resumed model is the checkpointed one: checked against the file itself, not
    # only against what the trainer says it saved.
    ck = torch.load(out / "segments" / "0" / "checkpoint.pt", weights_only=False)
    in_file = float(sum(t.double().sum() for t in ck["model"].values() if t.is_floating_point()))
    assert ck["epoch"] == 1 and len(ck["rng"]) == 2 and [r["epoch"] for r in ck["records"]] == [0]
    assert sw["checksum_saved"] == pytest.approx(in_file, rel=0, abs=1e-9)
    assert sw["checksum_loaded"] == pytest.approx(in_file, rel=0, abs=1e-9)
    assert ck["optimizer"]["state"], "the optimizer state (Adam moments) was saved"
