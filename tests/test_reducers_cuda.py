"""The DDP comm hooks under NCCL on CUDA tensors (marker ``gpu``; deselected where no GPU exists).

World size: 2 processes on 2 GPUs where there are two; with a single GPU, 1 process,
because NCCL refuses two ranks on one device ("Duplicate GPU detected"). With one process
the hooks still run on CUDA buckets through NCCL, and the node-level quotient is still
checked against a hand computation; the cross-worker weighting needs two GPUs.

The references are computed on the CPU in float64 from the same data, so a hook that
mixes devices, drops the appended normaliser or reduces the wrong thing fails.
"""

import datetime
import os
import socket
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

pytestmark = pytest.mark.gpu

N_PER_RANK = 6


def _model(device="cpu", dtype=torch.float32):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).to(device, dtype)


def _data(rank):
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(N_PER_RANK, 5, generator=g)
    y = torch.randint(0, 3, (N_PER_RANK,), generator=g)
    w = torch.rand(N_PER_RANK, generator=g) * 0.9 + 0.1
    return x, y, w


def _grads(module):
    return [p.grad.detach().cpu().double() for p in module.parameters()]


def _reference(world, weights):
    """sum_r s_r * grad(loss_r) / sum_r n_r on the CPU in float64; weights(r, w) -> (s_r, n_r, per-node w or None)."""
    total, norm = None, 0.0
    for r in range(world):
        m = _model(dtype=torch.float64)
        x, y, w = _data(r)
        s, n, node_w = weights(r, w.double())
        per = F.cross_entropy(m(x.double()), y, reduction="none")
        loss = (node_w * per).sum() if node_w is not None else per.mean()
        loss.backward()
        g = [s * p.grad for p in m.parameters()]
        total = g if total is None else [a + b for a, b in zip(total, g)]
        norm += n
    return [t / norm for t in total]


def _step(rank, correction, w_override=None, **kw):
    from torch.nn.parallel import DistributedDataParallel as DDP

    from dgl_grappa.method.reducers import make_correction

    dev = torch.device("cuda", rank)
    model = _model(dev)
    ddp = DDP(model, device_ids=[rank])
    corr = None
    if correction is not None:
        corr = make_correction(correction, **kw)
        corr.register(ddp)
    x, y, w = _data(rank)
    w = w if w_override is None else w_override
    per = F.cross_entropy(ddp(x.to(dev)), y.to(dev), reduction="none")
    (per.mean() if corr is None else corr.loss(per, w.to(dev))).backward()
    assert all(p.grad.is_cuda for p in model.parameters())
    return _grads(model), corr


def _worker(rank, world, port):
    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )
    try:
        close = dict(rtol=1e-5, atol=1e-6)
        plain, _ = _step(rank, None)  # DDP's own NCCL all-reduce
        ours, corr = _step(rank, "none")
        for a, b in zip(plain, ours):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
        nbytes = sum(p.numel() * 4 for p in _model().parameters())
        assert corr.take_bytes() == nbytes
        # equal weights on every worker: the weighted hook is plain DDP
        eq, corr = _step(rank, "batch", w_override=torch.full((N_PER_RANK,), 0.37))
        for a, b in zip(plain, eq):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
        assert corr.take_bytes() == nbytes + 4  # + the normaliser riding in the bucket
        # batch-level: sum_i a_i g_i / sum_i a_i
        got, _ = _step(rank, "batch")
        ref = _reference(world, lambda r, w: (float(w.mean()), float(w.mean()), None))
        for a, b in zip(got, ref):
            torch.testing.assert_close(a, b, **close)
        # node-level: sum over all nodes of w_v grad l_v / sum of w_v
        got, _ = _step(rank, "node")
        ref = _reference(world, lambda r, w: (1.0, float(w.sum()), w))
        for a, b in zip(got, ref):
            torch.testing.assert_close(a, b, **close)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_hooks_under_nccl_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch (scripts/test.sh deselects -m gpu where nvidia-smi finds none)")
    if not dist.is_nccl_available():
        pytest.skip("this torch build has no NCCL")
    world = min(2, torch.cuda.device_count())
    print(f"NCCL reducer test on {world} process(es), {torch.cuda.device_count()} GPU(s)")
    ctx = mp.start_processes(_worker, args=(world, _free_port()), nprocs=world, join=False, start_method="spawn")
    deadline = time.monotonic() + 240
    try:
        while not ctx.join(timeout=1):
            assert time.monotonic() < deadline, "NCCL workers ran past 240 s"
    finally:
        for p in ctx.processes:
            if p.is_alive():
                os.kill(p.pid, 9)
            p.join(timeout=10)
