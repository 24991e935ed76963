"""Where an epoch goes, its floor, the hot path's optimisations, TensorBoard, prebuilt partitions.

Real spawned gloo workers on small synthetic graphs. Nothing here asserts on speed (the
machine is shared): the phase figures must be present, fit inside the epoch and add up; the floor
must send no gradient bytes; every optimisation must leave the training trajectory
bit-identical; prebuilt partitions (bigpart) must train and evaluate like the normal path.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from clitools import train

from dgl_grappa.cluster.netns import check_isolation
from dgl_grappa.runtime.metrics import PHASE_KEYS, PHASES, PhaseTimes, read_jsonl

SMALL = [
    "--data.synthetic.num_nodes=4000",
    "--data.synthetic.preset=easy",
    "--train.lr=0.01",
    "--train.epochs=3",
    "--train.eval_every=1",
    "--train.batch_size=500",
    "--model.hidden=32",
]
WHY_NOT_NS = check_isolation(net=True)


def _timed_inside_the_epoch(r: dict, prefix: str = "") -> bool:
    """The timed phases (less what ran at once) fit in the worker's own part of the epoch.

    ``other_s`` and ``wait_s``, the rest, are clamped at 0 by :meth:`PhaseTimes.breakdown`,
    so only the raw figures can show a phase timed twice or outside the epoch.
    """
    timed = sum(r[f"{prefix}{p}_s"] for p in PHASES) - r[f"{prefix}overlap_s"]
    return timed <= r[f"{prefix}epoch_time_s"] - r[f"{prefix}wait_s"] + 1e-9


def _trajectory(out: Path) -> list[tuple]:
    return [
        (r["loss"], r.get("val_acc"), r.get("test_acc"), r["grad_bytes"]) for r in read_jsonl(out / "metrics.jsonl")
    ]


@pytest.mark.unit
def test_phase_times_add_up():
    t = PhaseTimes()
    for k, v in (("sample", 0.5), ("gather", 0.25), ("forward", 1.0), ("backward", 0.5), ("allreduce", 0.25)):
        t.add(k, v)
    t.overlap = 0.25
    b = t.breakdown(worker_s=3.0, epoch_s=3.5)
    assert set(b) == set(PHASE_KEYS)
    assert b["other_s"] == pytest.approx(3.0 - (2.5 - 0.25)) and b["wait_s"] == pytest.approx(0.5)
    assert sum(b[k] for k in PHASE_KEYS if k not in ("wait_s", "overlap_s")) - b["overlap_s"] == pytest.approx(3.0)


@pytest.mark.unit
def test_gather_is_bit_identical_to_indexing():
    from dgl_grappa.method.sampler import LocalFeatures

    table = torch.randn(1000, 24)
    ids = torch.randint(0, 1000, (5000,))
    for idx in (ids, ids.to(torch.int32), ids[:0]):
        assert torch.equal(LocalFeatures(table).gather(idx), table[idx.long()])
    resident = torch.rand(1000) > 0.2
    f = LocalFeatures(table, fetch_remote=lambda i: table[i] * 1, resident=resident)
    assert torch.equal(f.gather(ids), table[ids]) and f.take_bytes()[0] == int((~resident[ids]).sum()) * 24 * 4


@pytest.mark.unit
def test_step_cap_takes_the_first_batches_of_the_uncapped_split(small_parts):
    from dgl.dataloading import NeighborSampler

    from dgl_grappa.method.local_part import load_local
    from dgl_grappa.method.sampler import LocalBatches

    _, stats = small_parts
    lp = load_local(stats["part_config"], 0, "drop")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # DGL's seeded sampling repeats itself only on one OpenMP thread (as in a worker)
    try:
        full = list(LocalBatches(lp.graph, lp.train_ids, NeighborSampler([3, 3]), steps=5, seed=2).epoch(1))
        capped = list(LocalBatches(lp.graph, lp.train_ids, NeighborSampler([3, 3]), steps=5, seed=2, limit=2).epoch(1))
    finally:
        torch.set_num_threads(threads)
    assert len(full) == 5 and len(capped) == 2
    for (i0, s0, _), (i1, s1, _) in zip(full, capped):
        assert torch.equal(s0, s1) and torch.equal(i0, i1)


@pytest.fixture(scope="module")
def shared_parts(tmp_path_factory):
    """One partition folder for the runs that compare trajectories: DGL's partition_graph
    orders nodes within a part by an unstable sort, so two partitionings of one graph may
    number nodes differently (and then sample differently)."""
    return tmp_path_factory.mktemp("parts")


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory, shared_parts):
    out = tmp_path_factory.mktemp("plain")
    return out, train(out, *SMALL, f"--partition.out_dir={shared_parts}")


def test_every_epoch_is_broken_down(plain_run):
    out, s = plain_run
    recs = read_jsonl(out / "metrics.jsonl")
    for r in recs:
        assert _timed_inside_the_epoch(r) and r["worker_epoch_time_s"] <= r["epoch_time_s"], r
        busy = sum(r[k] for k in PHASE_KEYS if k not in ("wait_s", "overlap_s")) - r["overlap_s"]
        assert busy == pytest.approx(r["worker_epoch_time_s"], rel=1e-6, abs=1e-6)
        assert busy + r["wait_s"] == pytest.approx(r["epoch_time_s"], rel=1e-6, abs=1e-6)
        assert r["overlap_s"] == 0  # nothing runs at once without train.prefetch
        for k in ("sample_s", "gather_s", "forward_s", "backward_s", "allreduce_s", "optimizer_s"):
            assert r[k] > 0, k
        assert r["allreduce_inflight_s"] > 0
        # the process's CPU seconds over the same window (every thread: may exceed the wall time)
        assert 0 < r["worker_cpu_s"] < 8 * r["worker_epoch_time_s"], r
    assert s["cpu_time_s_rank0"] == pytest.approx(np.median([r["worker_cpu_s"] for r in recs]))
    assert s["phases"] == {k: pytest.approx(np.median([r[k] for r in recs])) for k in PHASE_KEYS}
    assert s["floor_s"] is None and s["epoch_over_floor"] is None  # not asked for


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_allreduce_sends_half_the_gradient_bytes(plain_run, shared_parts, tmp_path, dtype):
    """grappa.grad_dtype: the same steps with every bucket all-reduced in 16 bits: half the
    payload, the same trajectory up to the rounding of the averaged gradients."""
    base_out, base = plain_run
    s = train(tmp_path / dtype, *SMALL, f"--partition.out_dir={shared_parts}", f"--grappa.grad_dtype={dtype}")
    assert s["steps_per_epoch"] == base["steps_per_epoch"] and s["model_grad_bytes"] == base["model_grad_bytes"]
    assert 2 * s["grad_bytes_per_epoch"] == base["grad_bytes_per_epoch"]
    half, full = _trajectory(tmp_path / dtype), _trajectory(base_out)
    assert [r[3] * 2 for r in half] == [r[3] for r in full]
    # rounded gradients change the run (so the precision is really lower) but not its course
    assert [r[0] for r in half] != [r[0] for r in full]
    for h, f in zip(half, full):
        assert h[0] == pytest.approx(f[0], rel=0.05) and abs(h[1] - f[1]) <= 0.05, (h, f)


@pytest.mark.skipif(WHY_NOT_NS is not None, reason=f"private network namespaces unavailable: {WHY_NOT_NS}")
def test_floor_prefetch_and_tensorboard_leave_training_bit_identical(plain_run, shared_parts, tmp_path):
    """One run with the floor (no-op reducer + all-reduce alone), prefetching and TensorBoard."""
    base_out, base = plain_run
    out = tmp_path / "floor"
    s = train(
        out,
        *SMALL,
        f"--partition.out_dir={shared_parts}",
        "--run.floor=true",
        "--train.prefetch=true",
        "--run.tensorboard=true",
        "--network.isolate=true",
    )
    # Same losses, accuracies and bytes epoch by epoch: the floor's extra passes, the
    # prefetching thread and the event files change nothing in the training.
    assert _trajectory(out) == _trajectory(base_out)
    recs = read_jsonl(out / "metrics.jsonl")
    steps = s["steps_per_epoch"]
    for r in recs:
        # The no-op hook hands nothing to a collective; the floor pass's wire holds only the
        # epoch clock's barrier and 8-byte MAX (a few hundred bytes) ...
        assert r["floor_grad_bytes"] == 0 and r["grad_bytes"] > 0
        assert r["floor_wire_bytes"] < 4096 < r["grad_bytes"] <= r["wire_bytes"], r
        assert r["allreduce_only_s"] > 0 and r["floor_epoch_time_s"] > 0
        # The floor pass is an epoch like the others: its phases fit inside it.
        assert _timed_inside_the_epoch(r, "floor_"), r
        # Prefetching samples the next batch while the backward pass and its all-reduce run,
        # so what ran at once is part of that time (whether the threads did overlap at all
        # is up to the scheduler, so no lower bound).
        assert _timed_inside_the_epoch(r), r
        assert r["overlap_s"] <= r["backward_s"] + r["allreduce_s"] + 1e-9, r
        busy = sum(r[k] for k in PHASE_KEYS if k not in ("wait_s", "overlap_s")) - r["overlap_s"]
        assert busy == pytest.approx(r["worker_epoch_time_s"], rel=1e-6, abs=1e-6)
    assert s["floor_s"] == pytest.approx(s["floor_epoch_s"] + s["allreduce_only_s"])
    assert s["epoch_over_floor"] == pytest.approx(s["epoch_time_s"] / s["floor_s"])
    assert s["floor_grad_bytes_per_epoch"] == 0 and steps >= 2
    # TensorBoard: rank 0's event file holds the same scalars as metrics.jsonl, one per epoch.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = list((out / "tensorboard").glob("events.out.tfevents.*"))
    assert len(files) == 1
    ea = EventAccumulator(str(out / "tensorboard"))
    ea.Reload()
    tags = set(ea.Tags()["scalars"])
    for tag in (
        "train/loss",
        "accuracy/val_acc",
        "time/epoch_time_s",
        "phase/sample_s",
        "phase/allreduce_s",
        "bytes/grad_bytes",
        "time/floor_epoch_time_s",
    ):
        assert tag in tags, tag
    assert [e.step for e in ea.Scalars("train/loss")] == [r["epoch"] for r in recs]
    assert [e.value for e in ea.Scalars("accuracy/val_acc")] == pytest.approx([r["val_acc"] for r in recs])


# ---------------------------------------------------------------------------------------
# Prebuilt partitions (partition.prebuilt): lean loading and layer-wise evaluation
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_small(tmp_path_factory):
    """A 6k-node (easy) graph written by generate_big and cut into 2 LDG parts by bigpart."""
    from dgl_grappa.config import SyntheticConfig
    from dgl_grappa.data.bigsynth import generate_big
    from dgl_grappa.partition import bigpart

    root = tmp_path_factory.mktemp("bigsmall")
    g = generate_big(
        SyntheticConfig(num_nodes=6000, avg_degree=10, preset="easy", seed=2), root / "graph", chunk_edges=20000
    )
    stats = bigpart.write_partitions(g, bigpart.assign(g, "ldg", 2), 2, root / "parts", method="ldg")
    return root, g, stats


@pytest.mark.unit
def test_lean_loader_gives_the_same_local_view(big_small):
    from dgl_grappa.method.local_part import load_local, load_local_lean

    _, _, stats = big_small
    for halo in ("drop", "keep"):
        for p in (0, 1):
            a, b = load_local(stats["part_config"], p, halo), load_local_lean(stats["part_config"], p, halo)
            assert b.graph.idtype == torch.int32 and b.graph.formats()["created"] == ["csc"]
            assert a.graph.num_nodes() == b.graph.num_nodes() and a.num_inner == b.num_inner
            ea = set(zip(*(t.tolist() for t in a.graph.edges())))
            eb = set(zip(*(t.tolist() for t in b.graph.edges())))
            assert ea == eb and len(ea) == a.graph.num_edges() == b.graph.num_edges()
            for k in ("global_ids", "owner", "label", "in_degree"):
                assert torch.equal(getattr(a, k), getattr(b, k)), k
            assert torch.equal(a.feat.full(), b.feat.full())
            assert torch.equal(a.train_ids, b.train_ids.long()) and a.halo_bytes_loaded == b.halo_bytes_loaded
            # coverage from the lean edge list equals coverage from the normal one
            from dgl_grappa.method import coverage as cov

            ca = cov.coverage(a.src, a.dst, a.graph.num_nodes(), a.in_degree.long(), 2)
            cb = cov.coverage(b.src, b.dst, b.graph.num_nodes(), b.in_degree.long(), 2)
            assert torch.allclose(ca, cb, atol=1e-6)


@pytest.mark.unit
def test_lean_loader_reads_first_hop_aggregates_like_load_local(small_parts):
    """A prebuilt partitioning written by ``partition`` holds ``agg``: the lean loader serves first_hop=exact."""
    from dgl_grappa.method.local_part import load_local, load_local_lean

    _, stats = small_parts
    for halo in ("drop", "keep"):
        a = load_local(stats["part_config"], 1, halo, "exact")
        b = load_local_lean(stats["part_config"], 1, halo, "exact")
        assert b.agg is not None and torch.equal(a.agg.full(), b.agg.full()) and a.rows_held == b.rows_held
        if halo == "keep":
            assert a.one_time_bytes == b.one_time_bytes > 0


def test_prebuilt_partitions_train_and_evaluate_like_the_normal_path(big_small, tmp_path):
    """bigpart's parts, lean loader, layer-wise evaluation vs the whole graph, METIS, load_local."""
    root, g, stats = big_small
    # bigpart writes no first-hop aggregates: the sampled first hop, halo dropped (as at scale).
    common = [
        "--data.name=bigsynth",
        f"--data.path={root / 'graph'}",
        "--train.epochs=3",
        "--train.eval_every=0",
        "--train.batch_size=500",
        "--model.hidden=32",
        "--train.lr=0.01",
        "--train.first_hop=sampled",
        "--train.halo=drop",
    ]
    lw = train(
        tmp_path / "prebuilt",
        *common,
        "--partition.prebuilt=" + str(root / "parts"),
        "--train.eval_chunk_nodes=700",
        "--train.eval_concurrency=1",
        "--train.steps_per_epoch=50",
    )
    normal = train(tmp_path / "normal", *common)  # whole graph loaded, METIS, load_local, whole-graph eval
    rec = read_jsonl(tmp_path / "prebuilt" / "metrics.jsonl")[-1]
    assert rec["eval_stats"]["chunks"] >= 2 * 2  # two layers, several chunks, in turns
    assert not list((tmp_path / "prebuilt" / "eval").glob("*.npy"))  # the embedding files are gone
    assert lw["steps_per_epoch"] == normal["steps_per_epoch"] < 50  # a cap above the pass changes nothing
    assert lw["edge_cut"] == pytest.approx(stats["edge_cut"]) and lw["num_parts"] == normal["num_parts"] == 2
    # Other partitions (LDG vs METIS), other samples (int32 ids): the same accuracy within
    # 3 points on this graph.
    assert normal["val_acc"] > 0.8
    assert abs(lw["val_acc"] - normal["val_acc"]) <= 0.03 and abs(lw["test_acc"] - normal["test_acc"]) <= 0.03
    for w in lw["workers"]:
        assert w["setup"]["memory_after_setup"]["peak_rss_gb"] > 0 and w["memory_end"]["rss_gb"] > 0


def test_layerwise_evaluation_equals_whole_graph_inference(small_parts):
    """Every model, 3 layers, tiny chunks: the layer-wise logits equal whole-graph inference."""
    from dgl_grappa.cluster.testing import run_distributed

    g, stats = small_parts
    run_distributed(_layerwise_worker, 2, stats["part_config"], str(Path(stats["part_config"]).parent / "lw"))


def _layerwise_worker(rank, world_size, part_config, work):
    import torch.distributed as dist

    from dgl_grappa.config import Config, DataConfig, ModelConfig, SyntheticConfig
    from dgl_grappa.data import load_dataset
    from dgl_grappa.method.models import build_model
    from dgl_grappa.runtime.evaluation import LayerwiseEvaluator, evaluate

    cfg = Config()
    cfg.data = DataConfig(name="synthetic", synthetic=SyntheticConfig(num_nodes=3000, seed=3))
    cfg.train.eval_chunk_nodes = 333
    g = load_dataset(cfg.data)
    for name in ("sage", "gcn", "gat", "gin"):
        torch.manual_seed(0)
        model = build_model(ModelConfig(name=name, num_layers=3, hidden=16), g.ndata["feat"].shape[1], 16)
        ev = LayerwiseEvaluator(cfg, rank, world_size, part_config, f"{work}_{name}")
        got = ev.evaluate(model)
        want = evaluate(model, g)
        assert abs(got["val"] - want["val"]) <= 2e-3 and abs(got["test"] - want["test"]) <= 2e-3, (name, got, want)
        ev.close()
        dist.barrier()
