"""Repartition scheduler: assignments, DGL layout, background builder, switches in training."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import dgl
import numpy as np
import pytest
import torch

from dgl_grappa.cluster.launch import Identity
from dgl_grappa.cluster.testing import run_distributed
from dgl_grappa.config import SyntheticConfig, load_config
from dgl_grappa.data import num_classes, synthetic_graph
from dgl_grappa.method.local_part import load_local
from dgl_grappa.partition import schedule as S
from dgl_grappa.runtime import repartition as R

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def small_graph():
    return synthetic_graph(SyntheticConfig(num_nodes=3000, avg_degree=10, seed=3))


@pytest.fixture(scope="module")
def big_graph():
    return synthetic_graph(SyntheticConfig(num_nodes=100_000, avg_degree=10, preset="hard"))


def _edges(g):
    return tuple(t.numpy() for t in g.edges())


@pytest.mark.unit
def test_schedule_arithmetic():
    assert [S.partitioning_index(e, 2) for e in range(5)] == [0, 0, 1, 1, 2]
    assert [S.partitioning_index(e, 0) for e in range(3)] == [0, 0, 0]
    assert [S.is_switch_epoch(e, 2) for e in range(5)] == [False, False, True, False, True]
    assert not any(S.is_switch_epoch(e, 0) for e in range(5))
    assert S.num_partitionings(10, 1) == 10 and S.num_partitionings(10, 3) == 4
    assert S.num_partitionings(10, 0) == 1 and S.num_partitionings(10, 20) == 1


@pytest.mark.unit
@pytest.mark.parametrize("method", S.METHODS)
def test_assignments_are_balanced_and_change_at_every_switch(small_graph, method):
    spec = S.AssignmentSpec(num_parts=3, method=method, seed=5)
    a1, a2 = (S.compute_assignment(small_graph, spec, j) for j in (1, 2))
    assert not np.array_equal(a1, a2), "successive partitionings must differ"
    assert S.overlap(a1, a2, 3) < 0.9
    for a in (a1, a2):
        assert a.shape == (small_graph.num_nodes(),) and a.min() >= 0 and a.max() < 3
        sizes = np.bincount(a, minlength=3)
        assert sizes.min() > 0.8 * sizes.mean(), sizes
    if method in ("random", "chunk-rotation"):  # exactly reproducible (METIS may flip, see _metis)
        assert np.array_equal(a1, S.compute_assignment(small_graph, spec, 1))
        assert not np.array_equal(a1, S.compute_assignment(small_graph, S.AssignmentSpec(3, method, seed=6), 1))


@pytest.mark.unit
def test_metis_inputs_per_method(small_graph, monkeypatch):
    """What METIS is given: the graph itself at j=0, then the method's perturbation."""
    seen = []

    def fake_metis(n, src, dst, spec, balance):
        seen.append((src.copy(), dst.copy()))
        return np.zeros(n, dtype=np.int64)

    monkeypatch.setattr(S, "_metis", fake_metis)
    src, dst = _edges(small_graph)
    n = small_graph.num_nodes()
    key = lambda s, d: np.sort(np.minimum(s, d) * n + np.maximum(s, d))  # noqa: E731 - undirected multiset
    full = key(src, dst)
    for method in ("metis-perm", "metis-subsample", "metis-weights"):
        seen.clear()
        for j in (0, 1):
            S.compute_assignment(small_graph, S.AssignmentSpec(2, method), j)
        (s0, d0), (s1, d1) = seen
        assert np.array_equal(s0, src) and np.array_equal(d0, dst), f"{method}: j=0 must be unperturbed"
        if method == "metis-perm":  # same multiset of edges under other node names
            assert s1.shape == src.shape and not np.array_equal(s1, src)
            assert sorted(np.bincount(s1, minlength=n)) == sorted(np.bincount(src, minlength=n))
        elif method == "metis-subsample":  # a subset of the undirected edges, one direction each
            assert np.isin(key(s1, d1), full).all()
            assert abs(s1.shape[0] / (full.shape[0] / 2) - S.SUBSAMPLE_KEEP) < 0.02
        else:  # every undirected edge 1..WEIGHT_MAX times
            counts = np.unique(key(s1, d1), return_counts=True)[1]
            assert counts.shape[0] == full.shape[0] // 2 and counts.min() == 1 and counts.max() == S.WEIGHT_MAX


@pytest.mark.unit
def test_chunk_rotation_is_base_plus_rotating_chunk():
    n, w = 1003, 4
    parts = np.stack([S.chunk_rotation(n, w, seed=1, j=j) for j in range(w + 1)])
    assert np.array_equal(parts[0], parts[w]), "the rotation has period W"
    kept = (parts[1:] == parts[:-1]).all(axis=0)  # nodes that never move: the base chunks
    assert abs(kept.mean() - 0.5) < 0.01
    for j in range(w):
        sizes = np.bincount(parts[j], minlength=w)
        assert sizes.max() - sizes.min() <= 2
        # a variable node moves one part down at every switch
        assert np.array_equal(parts[j + 1][~kept], (parts[j][~kept] - 1) % w)
    # every variable chunk visits every worker once per period
    assert all(len(set(parts[:w, v])) == w for v in np.nonzero(~kept)[0][:20])


@pytest.mark.unit
def test_overlap_matches_part_labels():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 4, 10_000)
    relabelled = np.array([2, 0, 3, 1])[a]
    assert S.overlap(a, relabelled, 4) == 1.0
    b = a.copy()
    b[:1000] = (b[:1000] + 1) % 4
    assert S.overlap(a, np.array([2, 0, 3, 1])[b], 4) == pytest.approx(0.9)
    assert S.overlap(a, rng.integers(0, 4, 10_000), 4) < 0.3


@pytest.mark.unit
@pytest.mark.parametrize("method", ["metis-perm", "metis-subsample", "metis-weights"])
def test_perturbed_metis_makes_99pct_of_edges_local_within_10_switches(big_graph, method):
    # 100k-node hard synthetic graph, 4 parts: partitioning 0 + 10 switches.
    src, dst = _edges(big_graph)
    spec = S.AssignmentSpec(num_parts=4, method=method, seed=0)
    tracker = S.LocalityTracker(src, dst)
    fractions = [tracker.add(S.compute_assignment(big_graph, spec, j)) for j in range(11)]
    assert fractions[0] < 0.95, "one METIS partitioning alone must leave edges cut (else the test is vacuous)"
    assert all(b >= a for a, b in zip(fractions, fractions[1:]))
    assert fractions[-1] >= 0.99, fractions


@pytest.mark.unit
@pytest.mark.parametrize("method", ["chunk-rotation", "metis-subsample"])
def test_layout_is_dgl_standard_and_matches_assignment(small_graph, tmp_path, method):
    spec = S.AssignmentSpec(num_parts=2, method=method, seed=2)
    prev = S.compute_assignment(small_graph, spec, 0)
    stats, a = S.build_partitioning(small_graph, spec, 1, tmp_path, prev=prev)
    if method == "chunk-rotation":
        assert np.array_equal(a, S.chunk_rotation(small_graph.num_nodes(), 2, 2, 1))
    assert stats["index"] == 1 and stats["method"] == method and 0 <= stats["overlap_prev"] <= 1
    assert Path(stats["part_config"]) == tmp_path / "1" / "grappa.json"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1"], "nothing but the finished folder"
    orig = np.load(tmp_path / "1" / "orig_ids.npy")  # shuffled id -> original node
    for part in range(2):
        lp = load_local(stats["part_config"], part, halo="keep")
        inner = orig[lp.global_ids[: lp.num_inner].numpy()]
        assert np.array_equal(np.sort(inner), np.nonzero(a == part)[0]), "part must own exactly its assigned nodes"
        nodes = orig[lp.global_ids.numpy()]
        torch.testing.assert_close(lp.feat.full(), small_graph.ndata["feat"][nodes])
        assert torch.equal(lp.in_degree, small_graph.in_degrees()[nodes])
        assert torch.equal(lp.label, small_graph.ndata["label"][inner])
    gpb = dgl.distributed.load_partition_book(stats["part_config"], 0)[0]
    assert gpb.num_partitions() == 2


@pytest.mark.unit
def test_remove_old_keeps_the_newest(tmp_path):
    for j in range(5):
        (tmp_path / str(j)).mkdir()
    (tmp_path / ".building-5").mkdir()
    assert S.remove_old(tmp_path, active=4, keep_last=2) == [0, 1, 2]
    assert sorted(S.partitioning_dirs(tmp_path)) == [3, 4]
    assert (tmp_path / ".building-5").exists(), "a build in progress is not touched"


def test_builder_errors_and_timeouts_are_bounded(tmp_path):
    cfg = load_config(
        None,
        ["--data.synthetic.num_nodes=500", "--partition.num_parts=2", "--schedule.k=1", f"--run.output_dir={tmp_path}"],
    )
    builder = R.BackgroundBuilder(cfg, S.partition_root(tmp_path), tmp_path / "builder.log")
    try:
        with pytest.raises(R.BuildError, match="not ready"):
            builder.wait(3, timeout_s=1.0)  # never requested
        builder.request(1)  # partitioning 0 is missing: the build fails in the builder
        with pytest.raises(R.BuildError, match="assignment.npy"):
            builder.wait(1, timeout_s=60.0)
    finally:
        builder.close()
    assert not builder.proc.is_alive()


# ---------------------------------------------------------------------------------------
# Model and optimizer state across a switch (2 workers, real gloo group)
# ---------------------------------------------------------------------------------------


def _snapshot(ddp, opt):
    return ({k: v.detach().clone() for k, v in ddp.module.state_dict().items()}, copy.deepcopy(opt.state_dict()))


def _assert_same(a, b, where):
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


class StateProbe:
    """Trainer hook: the state an epoch starts with must be the state the previous one ended with."""

    def __init__(self, out_dir: str, rank: int):
        self.out, self.rank = out_dir, rank
        self.end, self.rt, self.checked = None, None, 0

    def epoch_end(self, epoch, ddp, opt, rt):
        self.end, self.rt = _snapshot(ddp, opt), rt

    def epoch_start(self, epoch, ddp, opt, rt):
        if self.end is None:
            return
        model, optim = _snapshot(ddp, opt)
        assert rt is not self.rt and not torch.equal(rt.lp.feat.full(), self.rt.lp.feat.full()), "no switch happened"
        assert optim["state"], "the optimizer state is empty after a trained epoch (reset by the switch?)"
        _assert_same(self.end[0], model, "model")
        _assert_same(self.end[1], optim, "optimizer")
        # the optimizer must still update the parameters the model trains with
        assert all(p is q for p, q in zip(opt.param_groups[0]["params"], ddp.module.parameters()))
        self.checked += 1
        Path(self.out, f"probe{self.rank}.json").write_text(json.dumps({"checked": self.checked}))


def _worker_with_probe(rank, world_size, cfg, part_config, n_classes, out_dir):
    from dgl_grappa.native.trainer import run_worker

    run_worker(Identity(rank, world_size, rank), cfg, part_config, n_classes, out_dir, hooks=StateProbe(out_dir, rank))


def test_model_and_optimizer_state_survive_a_switch(tmp_path):
    cfg = load_config(
        None,
        [
            "--data.synthetic.num_nodes=3000",
            "--partition.num_parts=2",
            "--train.epochs=3",
            "--train.batch_size=500",
            "--model.hidden=16",
            "--train.eval_every=0",
            "--schedule.k=1",
            "--schedule.method=metis-subsample",
            "--run.progress=false",
            "--run.collective_timeout_s=60",
            f"--run.output_dir={tmp_path}",
        ],
    )
    from dgl_grappa.data import load_dataset

    g = load_dataset(cfg.data)
    stats = S.prepare_schedule(cfg, g)
    run_distributed(_worker_with_probe, 2, cfg, stats["part_config"], num_classes(g), str(tmp_path), timeout_s=120)
    for rank in range(2):
        assert json.loads((tmp_path / f"probe{rank}.json").read_text())["checked"] == 2
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [s["index"] for s in summary["switches"]] == [1, 2]


# ---------------------------------------------------------------------------------------
# End to end through the CLI
# ---------------------------------------------------------------------------------------


def test_cli_train_repartitions_every_epoch(tmp_path):
    out = tmp_path / "run"
    env = dict(os.environ, DGLBACKEND="pytorch", PYTHONPATH=str(ROOT))
    cmd = [
        sys.executable,
        "-m",
        "dgl_grappa",
        "train",
        "--data.synthetic.num_nodes=5000",
        "--train.epochs=3",
        "--partition.num_parts=2",
        "--schedule.k=1",
        "--schedule.keep_last=2",
        "--model.hidden=16",
        "--train.eval_every=0",
        "--run.progress=false",
        "--run.timeout_s=150",
        f"--run.output_dir={out}",
    ]
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    switches = summary["switches"]
    assert [s["index"] for s in switches] == [1, 2] and [s["epoch"] for s in switches] == [1, 2]
    for s in switches:
        for key in ("build_s", "stall_s", "load_s", "overlap_prev", "edge_cut", "ever_local_edges"):
            assert isinstance(s[key], float) and s[key] >= 0, key
        assert set(s["coverage_train"]) >= {"mean", "p10", "p50", "p90"}
        assert 0 < s["coverage_train"]["p10"] <= s["coverage_train"]["p50"] <= s["coverage_train"]["p90"] <= 1
    sched = summary["schedule"]
    assert sched["num_partitionings"] == 3 and 0 <= sched["stall_fraction"] <= 1
    assert [json.loads(line)["partitioning"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [0, 1, 2]
    assert sorted(S.partitioning_dirs(out / "partitions")) == [1, 2], "keep_last=2 keeps the two newest"
    assert "switch to partitioning 2 at epoch 2" in res.stderr


@pytest.mark.unit
def test_k_for_two_percent_stall():
    from dgl_grappa.runtime.repartition import k_for_stall

    # build 0.8 s, load 0.02 s, epochs of 0.2 s: k >= 4 (no stall) and k >= 0.02 / 0.004 = 5
    assert k_for_stall(0.8, 0.02, 0.2) == 5
    assert k_for_stall(3.0, 0.0, 1.0) == 3 and k_for_stall(0.0, 0.0, 1.0) == 1
    assert k_for_stall(1.0, 1.0, 0.0) is None
