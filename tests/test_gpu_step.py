"""The local pipeline on the GPU (marker ``gpu``; scripts/test.sh deselects it where no GPU exists).

The torch sampler draws on the device with DGL's caps and block layout, on its own stream; a whole
``train --run.device=cuda`` run holds its tables on the GPU, samples there (with ``train.prefetch`` the
next batch during the backward pass) and trains.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import dgl
import pytest
import torch

from dgl_grappa.cluster.launch import Identity
from dgl_grappa.config import load_config
from dgl_grappa.kinds import resolve
from dgl_grappa.method.kernels import PlainGraph
from dgl_grappa.method.kernels.sample import TorchNeighborSampler
from dgl_grappa.method.local_part import load_local
from dgl_grappa.partition.store import ensure_partitions

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent


def _cuda() -> torch.device:
    if not torch.cuda.is_available():
        pytest.fail("no CUDA device visible to torch (scripts/test.sh deselects -m gpu where nvidia-smi finds none)")
    return torch.device("cuda", 0)


def test_the_torch_sampler_on_the_gpu_caps_degrees_and_keeps_dgls_layout(small_parts):
    dev = _cuda()
    _, stats = small_parts
    lp = load_local(stats["part_config"], 0, "keep")
    g, seeds = lp.graph, lp.train_ids[:300]
    fanouts = [3, 5]
    s = TorchNeighborSampler(fanouts, device=dev, layout="plain")
    s.reseed(4)
    input_nodes, output_nodes, blocks = s.sample(g, seeds)
    torch.cuda.synchronize()
    assert input_nodes.device == dev and output_nodes.device == dev
    assert torch.equal(output_nodes.cpu(), seeds)
    # the last block ends at the seeds; the first block's destinations are the first of its sources (the input)
    inputs = input_nodes.cpu()
    assert blocks[0].num_src == inputs.numel() and blocks[1].num_src == blocks[0].num_dst
    for block, dst_nodes, fanout in (
        (blocks[1], seeds, fanouts[1]),
        (blocks[0], inputs[: blocks[0].num_dst], fanouts[0]),
    ):
        assert block.src.device == dev and block.dst.device == dev
        assert torch.equal(block.in_degrees().cpu(), g.in_degrees(dst_nodes).clamp(max=fanout))
    s.reseed(4)
    again = s.sample(g, seeds)[0]
    assert torch.equal(again, input_nodes)  # the same seed, the same draw


@pytest.mark.parametrize("resident", ["device", "host"])
def test_a_batch_is_on_the_device_or_in_pinned_host_memory(tmp_path, resident):
    dev = _cuda()
    torch.cuda.set_device(dev)
    cfg = load_config(
        None,
        [
            "--data.synthetic.num_nodes=1500",
            "--partition.num_parts=2",
            "--train.batch_size=200",
            "--train.fanouts=[5,5]",
            "--run.device=cuda",
            f"--train.resident={resident}",
            f"--run.output_dir={tmp_path}",
        ],
    )
    kind = resolve(cfg)
    stats, _ = ensure_partitions(cfg)
    rt = kind.make_runtime(cfg, Identity(0, 1, 0), kind.load_part(cfg, stats["part_config"], 0))
    assert rt.where == resident and rt.sampler_kind == "torch"
    batch = next(rt.epoch_inputs(0))
    tensors = [batch.inputs, *batch.extra.values()]
    assert all(isinstance(b, PlainGraph) for b in batch.graph)
    if resident == "device":
        assert all(t.device == dev for t in tensors + [batch.target] + [b.src for b in batch.graph])
    else:  # the rows in pinned host memory, copied to the device at the step without a host wait
        assert all(t.device.type == "cpu" and t.is_pinned() for t in tensors)


def test_train_on_cuda_with_the_tables_and_the_sampler_on_the_gpu(tmp_path):
    _cuda()
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "dgl_grappa",
            "train",
            "--config",
            "configs/default.yaml",
            "--data.synthetic.num_nodes=4000",
            "--train.epochs=2",
            "--partition.num_parts=2",
            "--train.prefetch=true",
            "--run.device=cuda",
            f"--run.output_dir={tmp_path}",
            "--run.progress=false",
        ],
        cwd=ROOT,
        env=dict(os.environ, DGLBACKEND="pytorch"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["device"] == "cuda:0" and s["kernels"] == "torch" and s["val_acc"] > 0.1
    for w in s["workers"]:
        assert w["sampler"] == "torch" and w["resident"] == "device" and w["resident_device_bytes"] > 0
    assert dgl.__version__  # the CPU-only DGL of the registry is all the run needed
