"""Learnable node embeddings (``model.embed``) on a graph without features: Grappa, the drop-in, DistDGL.

Grappa's workers hold and update their own nodes' rows (a sparse optimizer, locally), so no
embedding byte crosses the network: the gradient all-reduce carries the dense weights alone,
the wire shows nothing else, and the rows survive a checkpoint bit for bit. DistDGL keeps one
``DistEmbedding`` in the KVStore and pays for every remote row twice (pull, gradient back).

The in-process tests (``unit``) check the rules: the initial rows, the frozen halo, the
optimizer state's round trip, the featureless graph and part, the config's one-line errors.
The end-to-end tests train real spawned workers on a 3000-node featureless graph (2 parts,
3-4 epochs); the DistDGL ones need private namespaces (root) and skip where there are none.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from clitools import train

from dgl_grappa.config import ConfigError, DataConfig, ModelConfig, SyntheticConfig, load_config
from dgl_grappa.method.embedding import LocalEmbedding, gather_rows, initial_rows
from dgl_grappa.method.models import build_model, gradient_bytes

ROOT = Path(__file__).resolve().parent.parent
CONFIG = str(ROOT / "configs" / "embed.yaml")
SMALL = [
    "--data.synthetic.num_nodes=3000",
    "--model.embed_dim=16",
    "--model.hidden=16",
    "--train.batch_size=400",
    "--train.fanouts=[5,10]",
    "--train.lr=0.03",
    "--model.embed_lr=0.1",
    "--train.eval_every=1",
    "--run.timeout_s=240",
]
# The wire may exceed the all-reduce's payload by 5 % plus this much per step (TCP/IP headers, as in test_distdgl).
PER_STEP_OVERHEAD = 4096


def _ck(path: Path) -> dict:
    return torch.load(path, weights_only=True)


# ---------------------------------------------------------------------------------------
# In process: the rules
# ---------------------------------------------------------------------------------------


@pytest.mark.unit
def test_initial_rows_are_a_function_of_the_seed_and_the_global_id():
    rows = initial_rows(torch.arange(20_000), 32, seed=0)
    assert rows.dtype == torch.float32 and rows.shape == (20_000, 32)
    assert float(rows.min()) >= -1.0 and float(rows.max()) < 1.0
    assert abs(float(rows.mean())) < 0.01 and abs(float(rows.std()) - (1 / 3) ** 0.5) < 0.01  # uniform(-1, 1)
    # any subset, in any order, gets the same rows: a halo row is computed where it is needed
    ids = torch.tensor([19_999, 7, 123])
    assert torch.equal(initial_rows(ids, 32, seed=0), rows[ids])
    assert not torch.equal(initial_rows(ids, 32, seed=1), rows[ids])
    assert initial_rows(torch.arange(2_000), 32).unique(dim=0).shape[0] == 2_000


@pytest.mark.unit
def test_own_rows_learn_locally_the_halo_stays_frozen_and_the_shard_round_trips():
    gids = torch.tensor([10, 11, 12, 50, 51])  # 3 own nodes, then 2 halo nodes
    emb = LocalEmbedding(gids, num_inner=3, dim=4, seed=5)
    opt = emb.optimizer(lr=0.1)
    start = emb.own.weight.detach().clone()
    assert torch.equal(start, initial_rows(gids[:3], 4, 5))

    def step(module, optimizer):
        optimizer.zero_grad(set_to_none=True)
        rows = module(torch.tensor([0, 3, 1, 4]))
        (rows * torch.arange(16.0).reshape(4, 4)).sum().backward()
        grad = module.own.weight.grad
        optimizer.step()
        return rows, grad

    rows, grad = step(emb, opt)
    assert grad.is_sparse and sorted(grad.coalesce().indices()[0].tolist()) == [0, 1]  # only the own rows asked for
    assert torch.equal(rows[[1, 3]], initial_rows(gids[3:], 4, 5))  # halo rows: owners' initial
    after = emb.own.weight.detach()
    assert not torch.equal(after[0], start[0]) and not torch.equal(after[1], start[1])
    assert torch.equal(after[2], start[2])  # untouched row: unchanged
    assert torch.equal(emb(torch.tensor([3, 4])), initial_rows(gids[3:], 4, 5))  # halo: never updated
    m = emb.memory()
    assert m["embed_inner"] == 3 * 4 * 4 and m["embed_halo"] == 2 * 4 * 4
    assert m["embed_optimizer"] == 2 * m["embed_inner"]
    assert emb.take_bytes() == (0, (4 + 2) * 4 * 4) and emb.take_bytes() == (0, 0)

    # A checkpoint's shard restores rows and optimizer state bit for bit: the next step matches too.
    shard = emb.shard_state(opt)
    other = LocalEmbedding(gids, num_inner=3, dim=4, seed=5)
    other_opt = other.optimizer(lr=0.1)
    other.load_shard(shard, other_opt)
    assert torch.equal(other.own.weight, emb.own.weight)
    step(emb, opt)
    step(other, other_opt)
    assert torch.equal(other.own.weight, emb.own.weight)
    with pytest.raises(ConfigError, match="belong to other nodes"):
        LocalEmbedding(gids + 1, num_inner=3, dim=4).load_shard(shard, other_opt)


@pytest.mark.unit
def test_gathered_rows_are_in_global_id_order_and_cover_every_node():
    rows = torch.arange(12.0).reshape(4, 3)
    table = gather_rows(torch.tensor([2, 0, 3, 1]), rows)
    assert torch.equal(table[[2, 0, 3, 1]], rows)
    with pytest.raises(RuntimeError, match="exactly once"):
        gather_rows(torch.tensor([0, 0, 3, 1]), rows)


@pytest.mark.unit
def test_the_featureless_graph_is_the_same_graph_without_features():
    from dgl_grappa.data import load_dataset

    with_feat = load_dataset(DataConfig(synthetic=SyntheticConfig(num_nodes=500, seed=2)))
    without = load_dataset(DataConfig(synthetic=SyntheticConfig(num_nodes=500, seed=2, featureless=True)))
    assert "feat" in with_feat.ndata and "feat" not in without.ndata
    assert all(torch.equal(a, b) for a, b in zip(with_feat.edges(), without.edges()))
    for k in ("label", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(with_feat.ndata[k], without.ndata[k]), k


@pytest.mark.unit
def test_one_line_config_errors_and_the_first_hop_switch():
    def error(*overrides):
        with pytest.raises(ConfigError) as exc:
            load_config(CONFIG, list(overrides))
        msg = str(exc.value)
        assert "\n" not in msg
        return msg

    assert error("--model.embed=false").startswith(
        "data.synthetic.featureless=true gives the nodes no features, so model.embed=false"
    )
    assert "--model.embed=true" in error("--model.embed=false")
    assert "schedule.k=2" in error("--schedule.k=2") and "--schedule.k=0" in error("--schedule.k=2")
    assert "train.eval_mode=layerwise" in error("--train.eval_mode=layerwise")
    assert "run.floor=true" in error("--run.floor=true")
    assert error("--model.embed_dim=0") == "model.embed_dim=0 must be >= 1"
    assert error("--model.embed_lr=0") == "model.embed_lr=0.0 must be > 0"
    # Aggregates of learnable rows would go stale: an exact first hop is switched to sampled.
    cfg = load_config(CONFIG, ["--train.first_hop=exact"])
    assert cfg.train.first_hop == "exact" and cfg.first_hop == "sampled"
    # Embeddings on a graph that has features: allowed (the features are not loaded).
    assert load_config(None, ["--model.embed=true"]).model.embed
    assert load_config(None, []).first_hop == "exact"


@pytest.mark.unit
def test_the_cli_stops_on_a_featureless_graph_without_embeddings_before_anything_runs(tmp_path, capsys):
    from dgl_grappa.cli import main

    out = tmp_path / "run"
    for cmd in ("train", "compare", "partition"):
        rc = main([cmd, "--config", CONFIG, "--model.embed=false", f"--run.output_dir={out}"])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and "model.embed=false" in err[0], (cmd, err)
    assert not out.exists()


@pytest.fixture(scope="module")
def featureless_parts(tmp_path_factory):
    """The 3000-node featureless graph cut into 2 METIS parts (in this process); its statistics."""
    from dgl_grappa.config import PartitionConfig
    from dgl_grappa.data import load_dataset
    from dgl_grappa.partition.store import partition

    g = load_dataset(DataConfig(synthetic=SyntheticConfig(num_nodes=3000, featureless=True)))
    return partition(g, PartitionConfig(num_parts=2), tmp_path_factory.mktemp("featureless"))


@pytest.mark.unit
def test_a_featureless_part_loads_without_features_and_its_halo_costs_its_degrees(featureless_parts):
    from dgl_grappa.method.local_part import load_local

    stats = featureless_parts
    assert stats["featureless"] and "aggregate_remote_pairs" not in stats  # nothing to precompute
    assert not list(Path(stats["part_config"]).parent.glob("part*/grappa/agg.npy"))
    lp = load_local(stats["part_config"], 0, "keep", "sampled", features=False)
    assert lp.feat.shape == (lp.graph.num_nodes(), 0) and lp.resident_bytes == 0
    n_halo = lp.graph.num_nodes() - lp.num_inner
    assert n_halo > 0 and lp.keep["halo_kept"] == n_halo
    assert lp.one_time_bytes == 8 * n_halo  # only the halo's in-degrees are read once; no row of features
    with pytest.raises(ConfigError, match=r"lacks node data \['feat'\]"):
        load_local(stats["part_config"], 0, "keep", "sampled")
    with pytest.raises(ValueError, match="features=False"):
        load_local(stats["part_config"], 0, "keep", "exact", features=False)


# ---------------------------------------------------------------------------------------
# Native runtime: spawned workers
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def straight(tmp_path_factory, namespaces_missing):
    """4 epochs in one go (a checkpoint every 2), in a private network namespace where possible."""
    out = tmp_path_factory.mktemp("straight")
    isolated = namespaces_missing is None
    s = train(
        out,
        *SMALL,
        "--train.epochs=4",
        "--checkpoint.every=2",
        "--checkpoint.keep_last=3",
        f"--network.isolate={str(isolated).lower()}",
        config=CONFIG,
    )
    return out, s, isolated


def test_native_embeddings_train_and_move_no_byte(straight):
    out, s, isolated = straight
    assert s["embed"] and s["first_hop"] == "sampled" and s["halo"] == "keep"
    # The all-reduce carries the dense model alone: 16-wide input rows, 16 classes, one bucket a step.
    model_bytes = gradient_bytes(build_model(ModelConfig(hidden=16), 16, 16))
    assert s["model_grad_bytes"] == model_bytes
    assert s["grad_bytes_per_epoch"] == s["steps_per_epoch"] * model_bytes
    assert s["embed_bytes_per_epoch"] == 0 and s["feature_bytes_per_epoch"] == 0
    assert s["app_bytes_per_epoch"] == 2 * s["grad_bytes_per_epoch"]  # gloo's ring with 2 workers
    records = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]
    assert all(r["embed_bytes"] == 0 and r["local_embed_bytes"] > 0 for r in records)
    # Memory counts the embedding: own rows, SparseAdam's two moments, the frozen halo rows.
    for w in s["workers"]:
        m = w["memory"]
        assert m["embed_inner"] == w["inner_nodes"] * 16 * 4 and m["embed_optimizer"] == 2 * m["embed_inner"]
        assert m["embed_halo"] == (w["local_nodes"] - w["inner_nodes"]) * 16 * 4 > 0
        assert w["resident_bytes"] == m["embed"] and w["own_fp32_bytes"] == m["embed_inner"]
        assert w["one_time_bytes"] == 8 * (w["local_nodes"] - w["inner_nodes"])  # halo in-degrees only
    assert s["resident_ratio_max"] > 3.0
    # Trained: well above chance (1/16), and the own rows moved away from their initial values.
    assert s["test_acc"] > 0.5, s["test_acc"]
    final = _ck(out / "checkpoints" / "ckpt-e000004.pt")
    for shard in (r["shard"]["embedding"] for r in final["ranks"]):
        moved = (shard["weight"] != initial_rows(shard["global_ids"], 16, 0)).any(dim=1)
        assert float(moved.float().mean()) > 0.5


def test_native_embeddings_put_only_gradients_on_the_wire(straight, namespaces_missing):
    _, s, isolated = straight
    if not isolated:  # a skip, said in the summary; under CI=true it fails (conftest)
        pytest.skip(f"the wire is measured in a private network namespace, unavailable here: {namespaces_missing}")
    grad_on_wire = 2 * s["grad_bytes_per_epoch"]  # the all-reduce and nothing of an embedding's size
    assert grad_on_wire <= s["wire_bytes_per_epoch"] <= 1.05 * grad_on_wire + PER_STEP_OVERHEAD * s["steps_per_epoch"]


def test_a_resumed_run_has_the_same_embedding_rows_bit_for_bit(straight, tmp_path):
    out, _, _ = straight
    mid = tmp_path / "ckpt-e000002.pt"
    shutil.copy(out / "checkpoints" / "ckpt-e000002.pt", mid)
    shutil.copy(out / "checkpoints" / "ckpt-e000002.json", mid.with_suffix(".json"))
    resumed = tmp_path / "resumed"
    # On the same partition folder: a worker's rows are its part's (DGL's METIS need not cut the same
    # parts in another process; a shard of other nodes is a one-line error).
    s = train(
        resumed,
        *SMALL,
        "--train.epochs=4",
        "--checkpoint.every=2",
        f"--checkpoint.resume={mid}",
        f"--partition.out_dir={out / 'partitions' / '0'}",
        config=CONFIG,
    )
    assert s["epochs"] == 4
    a, b = _ck(out / "checkpoints" / "ckpt-e000004.pt"), _ck(resumed / "checkpoints" / "ckpt-e000004.pt")
    for rank, (ra, rb) in enumerate(zip(a["ranks"], b["ranks"])):
        ea, eb = ra["shard"]["embedding"], rb["shard"]["embedding"]
        assert torch.equal(ea["global_ids"], eb["global_ids"])
        assert torch.equal(ea["weight"], eb["weight"]), f"rank {rank}: embedding rows differ"
        sa, sb = ea["optimizer"]["state"], eb["optimizer"]["state"]
        assert sa.keys() == sb.keys() and sa
        for i in sa:
            for key in sa[i]:
                va, vb = sa[i][key], sb[i][key]
                assert torch.equal(va, vb) if torch.is_tensor(va) else va == vb, f"rank {rank}: {key}"
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k


# ---------------------------------------------------------------------------------------
# DistDGL and the drop-in: one `compare` (needs root for the namespaces)
# ---------------------------------------------------------------------------------------

COMPARE = """
name: embed-small
data:
  name: synthetic
  synthetic: {{num_nodes: 3000, avg_degree: 10, featureless: true}}
partition: {{num_parts: 2, method: metis, out_dir: {parts}}}
model: {{name: sage, num_layers: 2, hidden: 16, embed: true, embed_dim: 16, embed_lr: 0.1}}
train: {{epochs: 3, batch_size: 400, fanouts: [5, 10], lr: 0.03, first_hop: sampled, eval_every: 1}}
compare: {{variants: [none], dropin: true}}
run: {{output_dir: {out}, timeout_s: 240, progress: false}}
"""


@pytest.fixture(scope="module")
def compared(compare_run):
    """distdgl (DistEmbedding), grappa-none and distdgl-grappa (loader.embedding) on one featureless graph."""
    out, _, sums = compare_run
    return out, sums


def test_distdgl_pulls_embedding_rows_and_pushes_their_gradients(compared):
    out, sums = compared
    s = sums["distdgl"]
    assert s["embed"] and s["feature_bytes_per_epoch"] == 0  # no features: every input row is the embedding's
    records = [json.loads(ln) for ln in (out / "distdgl" / "metrics.jsonl").read_text().splitlines()]
    for r in records:
        assert r["embed_pull_bytes"] > 0 and r["embed_grad_bytes"] == r["embed_pull_bytes"]
    assert s["embed_bytes_per_epoch"] > 10 * s["grad_bytes_per_epoch"]  # rows cost far more than the model
    assert s["app_bytes_per_epoch"] >= s["embed_bytes_per_epoch"]
    # The loopback's bytes match the application's count: the pulls and the gradients back are on the wire.
    assert abs(s["wire_bytes_per_epoch"] - s["app_bytes_per_epoch"]) <= 0.10 * s["app_bytes_per_epoch"], (
        s["wire_bytes_per_epoch"],
        s["app_bytes_per_epoch"],
    )
    # Its machines hold their shard of the rows and of DGL's SparseAdam state (a step and two moments).
    assert all(w["resident_bytes"] >= w["own_fp32_bytes"] * 3 for w in s["workers"])
    assert s["test_acc"] > 0.3, s["test_acc"]  # it learned: the majority class is 0.097 of the test split (0.56 here)
    # Its checkpoint holds every trainer's rows and sparse optimizer state.
    ck = _ck(sorted((out / "distdgl" / "checkpoints").glob("ckpt-e*.pt"))[-1])
    for r in ck["ranks"]:
        shard = r["shard"]["embedding"]
        rows = shard["types"]["_N"]  # a homogeneous graph's one node type, as DGL names it
        assert rows["weight"].shape == (rows["global_ids"].numel(), 16) and shard["optimizer"]["emb_states"]


@pytest.mark.parametrize("system", ["grappa-none", "distdgl-grappa"])
def test_grappa_and_the_dropin_move_no_embedding_byte(compared, system):
    _, sums = compared
    s = sums[system]
    assert s["embed"] and s["embed_bytes_per_epoch"] == 0 and s["feature_bytes_per_epoch"] == 0
    assert s["grad_bytes_per_epoch"] == s["steps_per_epoch"] * s["model_grad_bytes"]  # dense weights only
    grad_on_wire = 2 * s["grad_bytes_per_epoch"]
    assert grad_on_wire <= s["wire_bytes_per_epoch"] <= 1.05 * grad_on_wire + PER_STEP_OVERHEAD * s["steps_per_epoch"]
    assert s["wire_bytes_per_epoch"] < 0.2 * sums["distdgl"]["wire_bytes_per_epoch"]
    assert s["test_acc"] > 0.3
    if system == "distdgl-grappa":
        assert s["remote_rows_total"] == 0 and s["rpc_bytes_per_epoch"] == 0
        # the loader holds the embedding: own rows, Adam's moments, the frozen halo rows
        assert all(w["resident_bytes"] > 3 * w["own_fp32_bytes"] > 0 for w in s["workers"])
