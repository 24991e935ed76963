"""Every registered kind of job holds to the interface, on a real partition, in this process.

For each kind of :data:`dgl_grappa.kinds.KINDS`: a config that asks for it resolves to it; its part
loads from a real DGL partitioning; its data side yields batches whose one step runs forward, loss
and backward through the kind's own model (and learnable rows); and what it holds and reports is
well formed. No process group: one worker, world size 1 (the multi-process runs are in the kinds'
own test files).
"""

from __future__ import annotations

import pytest
import torch

from dgl_grappa.cluster.launch import Identity
from dgl_grappa.config import Config, ConfigError, load_config
from dgl_grappa.data import load_dataset
from dgl_grappa.data.common import num_classes
from dgl_grappa.kinds import KINDS, JobKind, LocalRuntime, kind_of, resolve
from dgl_grappa.kinds.base import LoadedPart, RowSource
from dgl_grappa.method.dropin import GrappaEdgeLoader, GrappaLoader
from dgl_grappa.partition.store import ensure_partitions

SMALL = [
    "--partition.num_parts=2",
    "--train.batch_size=200",
    "--train.fanouts=[5,5]",
    "--model.hidden=16",
    "--run.progress=false",
]
# One config per registered kind (a kind added to KINDS needs its line here: the test below says so).
CONFIGS = {
    "node": ["--data.synthetic.num_nodes=1500"],
    "link": ["--data.synthetic.num_nodes=1500", "--train.task=link"],
    "hetero": [
        "--data.name=hetsynth",
        "--model.name=rgcn",
        "--model.embed=true",
        "--model.embed_dim=8",
        "--data.hetsynth.num_papers=600",
        "--data.hetsynth.num_authors=300",
        "--data.hetsynth.num_fields=20",
    ],
}


@pytest.mark.unit
def test_every_kind_is_registered_once_under_its_name_and_selectable():
    package = [name for name, k in KINDS.items() if type(k).__module__.startswith("dgl_grappa.")]
    assert sorted(package) == sorted(CONFIGS), "give every kind of the package a config in CONFIGS"
    assert all(isinstance(k, JobKind) and k.name == name for name, k in KINDS.items())
    # a config selects one kind: no two kinds share a task on the same kind of graph
    keys = [(k.task, k.heterogeneous) for k in KINDS.values()]
    assert len(keys) == len(set(keys))


@pytest.mark.unit
def test_the_drop_in_loaders_are_the_row_source_a_distdgl_job_reads():
    assert issubclass(GrappaLoader, RowSource) and issubclass(GrappaEdgeLoader, RowSource)


@pytest.mark.unit
def test_a_task_no_kind_of_the_graph_serves_is_one_line():
    cfg = Config()
    cfg.data.name = "hetsynth"
    cfg.train.task = "link"  # set past the config's own checks: the registry must still answer in one line
    with pytest.raises(
        ConfigError, match=r"train.task=link is not trained on a heterogeneous graph.*use --train.task=node"
    ):
        kind_of(cfg)


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_kind_trains_one_step_on_a_real_part(name, tmp_path):
    cfg = load_config(None, SMALL + CONFIGS[name] + [f"--run.output_dir={tmp_path}"])
    kind = resolve(cfg)
    assert kind is KINDS[name]
    stats, _ = ensure_partitions(cfg)
    g = load_dataset(cfg.data)
    torch.manual_seed(0)
    lp = kind.load_part(cfg, stats["part_config"], 0)
    assert isinstance(lp, LoadedPart)  # the fields the runtimes read of a part
    rt = kind.make_runtime(cfg, Identity(0, 1, 0), lp)
    assert isinstance(rt, LocalRuntime) and rt.steps >= 1 and rt.contributors == 1
    embedding = kind.make_embedding(cfg, lp)
    assert embedding.learnable == (cfg.model.embed or name == "hetero")  # none: a no-op (NoEmbedding)
    model = kind.build_model(cfg, lp, num_classes(g))
    rt.epoch_start(1, embedding)  # the trainer's call at every epoch's start: one worker holds no halo to sync
    assert embedding.record_bytes().get("embed_bytes", 0) == 0
    batch = next(rt.epoch_inputs(0))
    x = embedding(batch.inputs)  # learnable rows of the input ids, or the input rows themselves
    out = model(batch.graph, x, **batch.extra)
    per_item, weights = rt.losses(out, batch, torch.device("cpu"))
    assert per_item.shape == weights.shape and per_item.numel() > 0 and torch.isfinite(per_item).all()
    (per_item * weights).mean().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
    held = kind.holding(cfg, lp, embedding)
    assert held["resident_bytes"] > 0 and held["own_fp32_bytes"] > 0
    assert isinstance(rt.coverage_stats(), dict)
    summary = {**rt.summary(), **kind.worker_summary(lp)}
    assert isinstance(kind.run_summary(cfg, [summary]), dict)
