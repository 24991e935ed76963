"""The checkpoint store on its own: commit protocol, fallbacks, pruning, RNG states, refusals (no processes)."""

import errno
import json
import logging
import os
import random

import numpy as np
import pytest
import torch

from dgl_grappa.config import load_config
from dgl_grappa.runtime import checkpoint as C

pytestmark = pytest.mark.unit

FP = {"model.hidden": 8}


def _state(v: float = 0.0) -> dict:
    return {"model": {"w": torch.full((3,), v)}, "optimizer": {"state": {}, "param_groups": []}}


def test_save_commits_pt_then_json_and_loads_with_weights_only(tmp_path):
    store = C.CheckpointStore(tmp_path, keep_last=2)
    path = store.save(_state(1.0), epoch=3, fp=FP, step=12)
    assert path.name == "ckpt-e000003.pt" and path.with_suffix(".json").is_file()
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["bytes"] == path.stat().st_size and meta["epoch"] == 3 and meta["fingerprint"] == FP
    ck = torch.load(path, weights_only=True)
    assert ck["epoch"] == 3 and ck["step"] == 12 and torch.equal(ck["model"]["w"], torch.ones(3))
    assert store.newest_valid(FP) == C.ResumePoint(str(path), 3, 12)
    assert not list(tmp_path.glob(".*")), "no temporary file is left"


def test_keep_last_and_an_abandoned_future_are_pruned(tmp_path):
    store = C.CheckpointStore(tmp_path, keep_last=2)
    for e in range(1, 5):
        store.save(_state(e), e, FP)
    assert [e for e, _ in store.entries()] == [4, 3]
    # Resuming from 3 and saving 4 again replaces the old 4; a save at 2 drops 3 and 4 (their trajectory was abandoned).
    store.save(_state(2), 2, FP)
    assert [e for e, _ in store.entries()] == [2]


def test_a_corrupt_or_unfinished_newest_falls_back_with_a_log_line(tmp_path, caplog):
    store = C.CheckpointStore(tmp_path, keep_last=3)
    for e in (1, 2, 3):
        store.save(_state(e), e, FP)
    p3 = C.CheckpointStore.pt_path(tmp_path, 3)
    p3.write_bytes(p3.read_bytes()[:-10])  # truncated
    p2 = C.CheckpointStore.pt_path(tmp_path, 2)
    p2.with_suffix(".json").unlink()  # its write did not finish
    with caplog.at_level(logging.WARNING, logger="dgl_grappa"):
        point = store.newest_valid(FP)
    assert point.epoch == 1
    text = caplog.text
    assert "ckpt-e000003.pt is not usable: it is" in text and "truncated" in text
    assert "ckpt-e000002.pt is not usable: it has no metadata file" in text


def test_a_checkpoint_of_another_model_is_refused_in_one_line(tmp_path):
    store = C.CheckpointStore(tmp_path)
    path = store.save(_state(), 1, {"model.hidden": 16})
    with pytest.raises(C.CheckpointError, match=r"belongs to another model or graph \(model.hidden: 16 -> 8\)"):
        store.newest_valid(FP)
    with pytest.raises(C.CheckpointError, match="belongs to another model"):
        C.load_checkpoint(path, FP)


def test_disk_full_during_a_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    store = C.CheckpointStore(tmp_path, keep_last=1)
    first = store.save(_state(1), 1, FP)
    real_write = os.write

    def full(fd, data):
        if len(data) > 100:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(C.os, "write", full)
    with pytest.raises(
        C.CheckpointError,
        match=r"failed: the disk is full; the previous checkpoint .*ckpt-e000001.pt "
        r"is intact",
    ):
        store.save(_state(2), 2, FP)
    monkeypatch.undo()
    assert store.newest_valid(FP).epoch == 1 and first.is_file()
    assert not list(tmp_path.glob(".ckpt-*")) and not C.CheckpointStore.pt_path(tmp_path, 2).exists()


def test_rng_states_round_trip_through_a_weights_only_file(tmp_path):
    torch.manual_seed(1)
    np.random.seed(2)
    random.seed(3)
    np.random.standard_normal()  # a cached Gaussian in numpy's state
    state = C.rng_state()
    expected = (torch.rand(3), np.random.rand(3), np.random.standard_normal(), random.random())
    path = C.CheckpointStore(tmp_path).save({"model": {}, "rng": state}, 1, FP)
    torch.manual_seed(99)
    np.random.seed(99)
    random.seed(99)
    C.set_rng_state(torch.load(path, weights_only=True)["rng"])
    got = (torch.rand(3), np.random.rand(3), np.random.standard_normal(), random.random())
    assert torch.equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
    assert got[2] == expected[2] and got[3] == expected[3]


def test_the_fingerprint_holds_what_a_resume_must_share_and_nothing_else():
    base = C.fingerprint(load_config(None, []))
    assert (
        C.fingerprint(
            load_config(
                None,
                [
                    "--train.epochs=50",
                    "--train.lr=0.1",
                    "--run.timeout_s=5",
                    "--checkpoint.every=3",
                    "--train.eval_every=1",
                ],
            )
        )
        == base
    )
    for change in (
        "--model.hidden=32",
        "--data.synthetic.num_nodes=999",
        "--partition.num_parts=3",
        "--train.optimizer=sgd",
        "--schedule.k=2",
    ):
        assert C.fingerprint_problem(base, C.fingerprint(load_config(None, [change]))) is not None, change
    # a checkpoint from before model.gcn_norm existed was written with its default: it resumes, and
    # only under that default
    older = {k: v for k, v in base.items() if k != "model.gcn_norm"}
    assert "model.gcn_norm" in base and C.fingerprint_problem(older, base) is None
    # a link checkpoint is not a node-classification one, nor one of another held-out split
    link = ["--train.task=link", "--grappa.correction=none"]
    lfp = C.fingerprint(load_config(None, link))
    assert C.fingerprint_problem(lfp, base) == "train.task: 'link' -> 'node'"
    assert C.fingerprint_problem(lfp, C.fingerprint(load_config(None, link + ["--link.seed=1"]))) == "link.seed: 0 -> 1"
    assert C.fingerprint(load_config(None, link + ["--link.eval_negatives=50"])) == lfp
    both = C.fingerprint(load_config(None, ["--model.name=gcn", "--model.gcn_norm=both"]))
    assert "model.gcn_norm: (absent) -> 'both'" in C.fingerprint_problem(
        {k: v for k, v in both.items() if k != "model.gcn_norm"}, both
    )
