"""An existing DistDGL script through the drop-in: DGL's example style (its own SAGEConv model,
unmodified), on partitions made by plain ``dgl.distributed.partition_graph`` and then prepared.

Real DistDGL servers and trainers (examples/dist_graphsage.py run by the package's launcher).
The first block's output against the full-graph first layer is checked in tests/test_dropin.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import dgl
import pytest

from dgl_grappa.cluster.netns import check_isolation
from dgl_grappa.config import ConfigError, load_config
from dgl_grappa.data import load_dataset
from dgl_grappa.distdgl import run_distdgl
from dgl_grappa.partition.aggregates import prepare

ROOT = Path(__file__).resolve().parent.parent
WHY_NOT = check_isolation(net=True, shm="64m")

YAML = """
name: script
data:
  name: synthetic
  synthetic: {{preset: hard, num_nodes: 3000, avg_degree: 10, seed: 2}}
partition: {{num_parts: 3, method: random, prebuilt: {parts}}}
model: {{name: {model}, num_layers: 2, hidden: 16, dropout: 0.5}}
train: {{epochs: 10, batch_size: 300, fanouts: [5, 10], eval_every: 5, lr: 0.02}}
compare: {{script: {script}}}
run: {{output_dir: {out}, timeout_s: 300, progress: false}}
"""


@pytest.mark.skipif(WHY_NOT is not None, reason=f"private namespaces unavailable: {WHY_NOT}")
@pytest.mark.parametrize("model", ["sage", "gcn"])
def test_a_dgl_style_script_trains_through_the_dropin_on_partitions_made_elsewhere(tmp_path, model):
    cfg_text = YAML.format(
        parts=tmp_path / "parts", script=ROOT / "examples" / "dist_graphsage.py", out=tmp_path / "out", model=model
    )
    (tmp_path / "c.yaml").write_text(cfg_text)
    cfg = load_config(str(tmp_path / "c.yaml"))
    g = load_dataset(cfg.data)
    dgl.seed(0)
    dgl.distributed.partition_graph(g, "grappa", 3, str(tmp_path / "parts"), num_hops=1, part_method="random")
    prepare(tmp_path / "parts" / "grappa.json", gcn=model == "gcn")

    s = run_distdgl(cfg, grappa=True, quiet=True)

    assert s["system"] == "distdgl-grappa" and s["halo"] == "keep"
    # every row of every batch came from the machine's own memory: no remote pull, no sampling RPC
    assert s["remote_rows_total"] == 0 and s["feature_bytes_per_epoch"] == 0 and s["rpc_bytes_per_epoch"] == 0
    # the kept halo's rows were read once, through the KVStore, before the epochs
    assert s["one_time_bytes_total"] > 0
    # the trainers' own tables (aggregates, halo rows) fit next to the servers' features
    assert s["resident_ratio_max"] <= 1.5 + 1e-9
    recs = [json.loads(ln) for ln in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in recs] == list(range(10))
    assert s["test_acc"] > 0.3  # 16 classes: it learned (chance 0.06)


@pytest.mark.skipif(WHY_NOT is not None, reason=f"private namespaces unavailable: {WHY_NOT}")
def test_the_script_says_what_is_missing_when_a_folder_was_not_prepared(tmp_path):
    cfg_text = YAML.format(
        parts=tmp_path / "parts", script=ROOT / "examples" / "dist_graphsage.py", out=tmp_path / "out", model="sage"
    )
    (tmp_path / "c.yaml").write_text(cfg_text)
    cfg = load_config(str(tmp_path / "c.yaml"))
    g = load_dataset(cfg.data)
    dgl.distributed.partition_graph(g, "grappa", 3, str(tmp_path / "parts"), num_hops=1, part_method="random")
    # refused before any server starts: the script's loader call is read from its source
    with pytest.raises(
        ConfigError, match="dist_graphsage.py:\\d+ makes GrappaLoader.*python -m dgl_grappa prepare --part-config"
    ):
        run_distdgl(cfg, grappa=True, quiet=True)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


# ---------------------------------------------------------------------------------------
# The drop-in of every kind: link prediction, learnable embeddings, a heterogeneous graph
# ---------------------------------------------------------------------------------------

KINDS = {
    # DGL's train_dist_unsupervised.py: DistEdgeDataLoader -> GrappaEdgeLoader
    "link": (
        "dist_link.py",
        """
name: script-link
data: {{name: synthetic, synthetic: {{num_nodes: 2000, avg_degree: 10, seed: 2}}}}
partition: {{num_parts: 2, method: random, out_dir: {parts}}}
model: {{name: sage, num_layers: 2, hidden: 16, dropout: 0.5}}
train: {{task: link, epochs: 3, batch_size: 500, fanouts: [5, 10], eval_every: 3, lr: 0.01}}
compare: {{script: {script}}}
run: {{output_dir: {out}, timeout_s: 300, progress: false}}
""",
    ),
    # DGL's train_dist_transductive.py: DistEmbedding -> loader.embedding
    "transductive": (
        "dist_transductive.py",
        """
name: script-embed
data: {{name: synthetic, synthetic: {{num_nodes: 2000, avg_degree: 10, featureless: true, seed: 2}}}}
partition: {{num_parts: 2, method: metis, out_dir: {parts}}}
model: {{name: sage, num_layers: 2, hidden: 16, dropout: 0.5, embed: true, embed_dim: 16, embed_lr: 0.05}}
train: {{epochs: 6, batch_size: 250, fanouts: [5, 10], first_hop: sampled, eval_every: 3, lr: 0.02}}
compare: {{script: {script}}}
run: {{output_dir: {out}, timeout_s: 300, progress: false}}
""",
    ),
    # DGL's entity_classify_dist.py: DistNodeDataLoader + a DistEmbedding per featureless type -> GrappaHeteroLoader
    "rgcn": (
        "dist_rgcn.py",
        """
name: script-rgcn
data: {{name: hetsynth, target: paper, hetsynth: {{num_papers: 1500, num_authors: 800, num_fields: 50}}}}
partition: {{num_parts: 2, method: metis, out_dir: {parts}}}
model: {{name: rgcn, num_layers: 2, hidden: 16, dropout: 0.2, embed: true, embed_dim: 16, embed_lr: 0.05}}
train: {{epochs: 4, batch_size: 300, fanouts: [5, 5], eval_every: 2, lr: 0.01}}
compare: {{script: {script}}}
run: {{output_dir: {out}, timeout_s: 300, progress: false}}
""",
    ),
}


def _kind_config(tmp_path: Path, kind: str):
    script, text = KINDS[kind]
    (tmp_path / "c.yaml").write_text(
        text.format(parts=tmp_path / "parts", script=ROOT / "examples" / script, out=tmp_path / "out")
    )
    return load_config(str(tmp_path / "c.yaml"))


@pytest.mark.skipif(WHY_NOT is not None, reason=f"private namespaces unavailable: {WHY_NOT}")
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_of_dgl_style_script_trains_through_the_dropin(tmp_path, kind):
    """examples/dist_{link,transductive,rgcn}.py with --grappa, on real partitions: every batch from the machine's
    own memory (no remote row, no sampling request, no embedding byte), every epoch trained, and it learned."""
    cfg = _kind_config(tmp_path, kind)
    s = run_distdgl(cfg, grappa=True, quiet=True)

    assert s["system"] == "distdgl-grappa" and s["halo"] == "keep"
    assert s["remote_rows_total"] == 0 and s["feature_bytes_per_epoch"] == 0 and s["rpc_bytes_per_epoch"] == 0
    assert s["embed_bytes_per_epoch"] == 0
    recs = [json.loads(ln) for ln in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in recs] == list(range(cfg.train.epochs))
    if kind == "link":
        assert s["task"] == "link" and s["usable_edge_fraction"] == 1.0
        assert s["test_mrr"] > 0.08, s["test_mrr"]  # chance: 0.051 (100 negatives)
    else:
        assert s["one_time_bytes_total"] > 0 if kind == "rgcn" else True  # the halo's paper rows, read once
        assert s["test_acc"] > 0.3, s["test_acc"]  # 8 (rgcn) or 16 classes: it learned


@pytest.mark.skipif(WHY_NOT is not None, reason=f"private namespaces unavailable: {WHY_NOT}")
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_of_dgl_style_script_runs_as_plain_distdgl_too(tmp_path, kind):
    """The same scripts without --grappa: DistDGL's own loaders, pulling what the machine lacks."""
    cfg = _kind_config(tmp_path, kind)
    s = run_distdgl(cfg, grappa=False, quiet=True)

    assert s["system"] == "distdgl" and s["remote_rows_total"] > 0
    if kind != "link":
        assert s["embed_bytes_per_epoch"] > 0  # DistEmbedding rows pulled and their gradients sent back
    recs = [json.loads(ln) for ln in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in recs] == list(range(cfg.train.epochs))
