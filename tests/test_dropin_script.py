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
from dgl_grappa.config import load_config
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
    cfg_text = YAML.format(parts=tmp_path / "parts", script=ROOT / "examples" / "dist_graphsage.py",
                           out=tmp_path / "out", model=model)
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
    cfg_text = YAML.format(parts=tmp_path / "parts", script=ROOT / "examples" / "dist_graphsage.py",
                           out=tmp_path / "out", model="sage")
    (tmp_path / "c.yaml").write_text(cfg_text)
    cfg = load_config(str(tmp_path / "c.yaml"))
    g = load_dataset(cfg.data)
    dgl.distributed.partition_graph(g, "grappa", 3, str(tmp_path / "parts"), num_hops=1, part_method="random")
    from dgl_grappa.cluster.procs import JobFailed

    with pytest.raises(JobFailed, match="python -m dgl_grappa prepare --part-config"):
        run_distdgl(cfg, grappa=True, quiet=True)
