"""A worker's tables where ``train.resident`` puts them, and the torch sampler inside the kinds' data side.

The device path is the CPU path with another device: the runtime's tables, the sampler's structure and a
batch's every tensor must sit on ``rt.device``; the gathers must not read the host (checked on the ``meta``
device, where any read of a value fails), and the placement must count bytes against the device's room.
"""

from __future__ import annotations

import pytest
import torch

from dgl_grappa.cluster.launch import Identity
from dgl_grappa.config import ConfigError, load_config
from dgl_grappa.data import load_dataset
from dgl_grappa.data.common import num_classes
from dgl_grappa.kinds import resolve
from dgl_grappa.method.kernels import PlainGraph
from dgl_grappa.method.kernels.sample import TorchNeighborSampler
from dgl_grappa.method.resident import residence
from dgl_grappa.method.sampler import LocalFeatures
from dgl_grappa.method.storage import NodeTable
from dgl_grappa.partition.store import ensure_partitions

SMALL = [
    "--data.synthetic.num_nodes=1500",
    "--partition.num_parts=2",
    "--train.batch_size=200",
    "--train.fanouts=[5,5]",
    "--model.hidden=16",
    "--run.progress=false",
    "--train.sampler=torch",
]


@pytest.fixture(scope="module")
def parts_dirs(tmp_path_factory):
    """A partitioning folder per task, shared by the tests of this module (link prediction's differs)."""
    return {task: tmp_path_factory.mktemp(f"parts-{task}") for task in ("node", "link")}


def _runtime(tmp_path, parts_dirs, task, *extra):
    cfg = load_config(
        None,
        SMALL
        + [f"--train.task={task}", *extra, f"--run.output_dir={tmp_path}", f"--partition.out_dir={parts_dirs[task]}"],
    )
    kind = resolve(cfg)
    stats, _ = ensure_partitions(cfg)
    lp = kind.load_part(cfg, stats["part_config"], 0)
    return cfg, kind, lp, kind.make_runtime(cfg, Identity(0, 1, 0), lp)


@pytest.mark.unit
def test_the_tables_go_to_the_device_when_they_fit_and_not_otherwise():
    cuda = torch.device("cuda", 0)
    assert residence("auto", cuda, need=10, allowance=10) == "device"
    assert residence("auto", cuda, need=11, allowance=10) == "host"
    assert residence("host", cuda, need=1, allowance=10) == "host"
    assert residence("device", torch.device("cpu"), need=10**12) == "host"  # the host is the CPU's device
    with pytest.raises(ConfigError, match=r"train.resident=device: .* 0.1 MiB.*--train.resident=auto"):
        residence("device", cuda, need=10**5, allowance=10)
    with pytest.raises(ConfigError, match="train.resident='gpu'"):
        residence("gpu", cuda, need=1, allowance=10)


@pytest.mark.unit
@pytest.mark.parametrize("storage", ["fp32", "fp16", "int8", "int4"])
def test_a_gather_reads_no_host_memory(storage):
    # On the meta device a tensor has no values: any host read of one (a bound check, .item()) raises.
    x = torch.randn(50, 6)
    table = NodeTable.store(x, storage)
    rows = LocalFeatures(table.to("meta")).gather(torch.tensor([3, 1, 4]).to("meta"))
    assert rows.device.type == "meta" and rows.shape == (3, 6) and rows.dtype == torch.float32
    ids = torch.tensor([3, 1, 4])
    assert torch.equal(LocalFeatures(table.to("cpu")).gather(ids), table.gather(ids))


@pytest.mark.unit
@pytest.mark.parametrize("task,kernels", [("node", "torch"), ("node", "dgl"), ("link", "torch")])
def test_a_kind_steps_on_the_torch_samplers_batches_with_every_tensor_on_its_device(
    tmp_path, parts_dirs, task, kernels
):
    cfg, kind, lp, rt = _runtime(tmp_path, parts_dirs, task, f"--train.kernels={kernels}")
    assert rt.sampler_kind == "torch" and rt.where == "host" and rt.device == torch.device("cpu")
    assert isinstance(rt.batches.sampler, TorchNeighborSampler)
    assert rt.summary()["sampler"] == "torch"
    model = kind.build_model(cfg, lp, num_classes(load_dataset(cfg.data)))
    batch = next(rt.epoch_inputs(0))
    blocks = batch.graph
    assert all(isinstance(b, PlainGraph) for b in blocks) == (kernels == "torch")
    tensors = [batch.inputs, *batch.extra.values()] + ([batch.target] if task == "node" else [])
    assert all(t.device == rt.device for t in tensors)
    out = model(blocks, batch.inputs, **batch.extra)
    per_item, weights = rt.losses(out, batch, torch.device("cpu"))
    assert per_item.numel() > 0 and torch.isfinite(per_item).all()
    (per_item * weights).mean().backward()


@pytest.mark.unit
def test_a_heterogeneous_graph_refuses_the_torch_sampler_in_one_line():
    cfg = load_config(
        None, ["--data.name=hetsynth", "--model.name=rgcn", "--model.embed=true", "--train.sampler=torch"]
    )
    with pytest.raises(ConfigError, match=r"train.sampler=torch.*--train.sampler=dgl") as err:
        resolve(cfg)  # the kind's rules, checked before any run
    assert "\n" not in str(err.value)
