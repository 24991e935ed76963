"""Reducers against hand computations, on real 2-process gloo groups."""

import pytest
import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from dgl_grappa.cluster.testing import run_distributed
from dgl_grappa.method.reducers import make_correction

WORLD = 2
N_PER_RANK = 6


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))


def _data(rank):
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(N_PER_RANK, 5, generator=g)
    y = torch.randint(0, 3, (N_PER_RANK,), generator=g)
    w = torch.rand(N_PER_RANK, generator=g) * 0.9 + 0.1
    return x, y, w


def _grads(module):
    return [p.grad.detach().clone() for p in module.parameters()]


def _local_mean_grads(rank):
    """g_i: the ordinary mean-loss gradient of worker `rank`, computed without any communication."""
    m = _model()
    x, y, _ = _data(rank)
    F.cross_entropy(m(x), y).backward()
    return _grads(m)


def _ddp_step(correction_name, rank, **kw):
    model = _model()
    ddp = DDP(model)
    corr = None
    if correction_name is not None:
        corr = make_correction(correction_name, **kw)
        corr.register(ddp)
    x, y, w = _data(rank)
    per_node = F.cross_entropy(ddp(x), y, reduction="none")
    loss = per_node.mean() if corr is None else corr.loss(per_node, w)
    loss.backward()
    return _grads(model), corr


def worker_none_equals_ddp(rank, world_size):
    plain, _ = _ddp_step(None, rank)
    ours, corr = _ddp_step("none", rank)
    for a, b in zip(plain, ours):
        assert torch.equal(a, b), "correction=none must give exactly the gradients of plain DDP"
    # batch with equal weights on every worker is plain averaging up to float rounding
    model = _model()
    ddp = DDP(model)
    c = make_correction("batch")
    c.register(ddp)
    x, y, _ = _data(rank)
    c.loss(F.cross_entropy(ddp(x), y, reduction="none"), torch.full((N_PER_RANK,), 0.37)).backward()
    for a, b in zip(plain, _grads(model)):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    # bytes: one bucket of all parameters, counted in the hook
    nbytes = sum(p.numel() * 4 for p in model.parameters())
    assert corr.take_bytes() == nbytes
    assert c.take_bytes() == nbytes + 4  # + the normaliser scalar


def worker_batch_weights(rank, world_size):
    ours, corr = _ddp_step("batch", rank)
    a = [float(_data(r)[2].mean()) for r in range(world_size)]
    g = [_local_mean_grads(r) for r in range(world_size)]
    for k, got in enumerate(ours):
        expected = sum(a[r] * g[r][k] for r in range(world_size)) / sum(a)
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    assert corr.last_weight == pytest.approx(a[rank])


def worker_node_weights(rank, world_size):
    ours, _ = _ddp_step("node", rank)
    # hand computation on one process: sum over all nodes of w_v * grad l_v / sum of w_v
    m = _model()
    xs, ys, ws = zip(*[_data(r) for r in range(world_size)])
    x, y, w = torch.cat(xs), torch.cat(ys), torch.cat(ws)
    ((w * F.cross_entropy(m(x), y, reduction="none")).sum() / w.sum()).backward()
    for got, expected in zip(ours, _grads(m)):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def worker_shrinkage(rank, world_size):
    a = [float(_data(r)[2].mean()) for r in range(world_size)]
    g = [_local_mean_grads(r) for r in range(world_size)]
    abar = sum(a) / world_size
    for lam, target in [(0.3, "mean"), (0.3, "one"), (1.0, "mean"), (0.0, "one")]:
        t = abar if target == "mean" else 1.0
        s = [(1 - lam) * ar + lam * t for ar in a]
        ours, corr = _ddp_step("shrinkage", rank, lam=lam, shrink_target=target)
        for k, got in enumerate(ours):
            expected = sum(s[r] * g[r][k] for r in range(world_size)) / sum(s)
            torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
        extra = 4 + (4 if target == "mean" else 0)
        assert corr.state.scalar_bytes == extra
    # lam = 1 with target mean is plain averaging
    ours, _ = _ddp_step("shrinkage", rank, lam=1.0, shrink_target="mean")
    for got, k in zip(ours, range(len(ours))):
        torch.testing.assert_close(got, sum(g[r][k] for r in range(world_size)) / world_size, rtol=1e-5, atol=1e-6)


def worker_half_precision(rank, world_size):
    """grad_dtype float16 / bfloat16: the same averages rounded to 16 bits, half the bytes."""
    g = [_local_mean_grads(r) for r in range(world_size)]
    full = sum(p.numel() * 4 for p in _model().parameters())
    for name in ("none", "batch"):
        a = [float(_data(r)[2].mean()) if name == "batch" else 1.0 for r in range(world_size)]
        for dtype, tol in (("float16", 2e-3), ("bfloat16", 1e-2)):
            model = _model()
            ddp = DDP(model)
            corr = make_correction(name)
            corr.register(ddp, dtype)
            x, y, w = _data(rank)
            corr.loss(
                F.cross_entropy(ddp(x), y, reduction="none"), w if name == "batch" else torch.ones(len(y))
            ).backward()
            got = _grads(model)
            for k, grad in enumerate(got):
                assert grad.dtype == torch.float32
                expected = sum(a[r] * g[r][k] for r in range(world_size)) / sum(a)
                torch.testing.assert_close(grad, expected, rtol=tol, atol=tol)
            assert any(not torch.equal(grad, p) for grad, p in zip(got, _ddp_step(name, rank)[0]))  # really rounded
            assert corr.take_bytes() == full // 2 + (2 if name == "batch" else 0)  # its normaliser in 16 bits too


@pytest.mark.parametrize(
    "worker",
    [worker_none_equals_ddp, worker_batch_weights, worker_node_weights, worker_shrinkage, worker_half_precision],
    ids=lambda f: f.__name__,
)
def test_reducer(worker):
    run_distributed(worker, WORLD)


def _empty_batch_worker(rank, world_size):
    # rank 1 has no seeds this step: it contributes zero weight and the others' gradient survives
    model = _model()
    ddp = DDP(model)
    c = make_correction("batch")
    c.register(ddp)
    x, y, w = _data(rank)
    if rank == 1:
        x, y, w = x[:0], y[:0], w[:0]
    c.loss(F.cross_entropy(ddp(x), y, reduction="none"), w).backward()
    for got, expected in zip(_grads(model), _local_mean_grads(0)):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_empty_batch_has_zero_weight():
    run_distributed(_empty_batch_worker, WORLD)


@pytest.mark.unit
def test_unknown_correction():
    with pytest.raises(ValueError, match="unknown correction"):
        make_correction("median")


def _seedless_worker(rank, world_size):
    # Rank 2 has no training seeds at all (its part holds none): it takes the step with
    # weight 0, and every variant's result is the one of the two workers that have seeds.
    g = [_local_mean_grads(r) for r in range(2)]
    x_all = [_data(r) for r in range(2)]
    a = [float(w.mean()) for _, _, w in x_all]
    for name, kw in [("none", {}), ("batch", {}), ("node", {}), ("shrinkage", {"lam": 0.4, "shrink_target": "mean"})]:
        model = _model()
        ddp = DDP(model)
        corr = make_correction(name, **kw)
        corr.register(ddp)
        corr.set_contributors(2)  # what LocalRuntime agrees once per partitioning (sampler.seeded_workers)
        x, y, w = _data(rank)
        if rank == 2:
            x, y, w = x[:1], y[:0], w[:0]  # a placeholder row goes through the model, no seed is trained on
        out = ddp(x)[: y.numel()]
        corr.loss(F.cross_entropy(out, y, reduction="none"), w).backward()
        got = _grads(model)
        if name == "none":
            expected = [(g[0][k] + g[1][k]) / 2 for k in range(len(got))]
        elif name == "node":
            num = []
            for r in range(2):  # sum_v w_v grad l_v per worker, by hand
                m = _model()
                xr, yr, wr = _data(r)
                (wr * F.cross_entropy(m(xr), yr, reduction="none")).sum().backward()
                num.append(_grads(m))
            total = sum(float(xw[2].sum()) for xw in x_all)
            expected = [(num[0][k] + num[1][k]) / total for k in range(len(got))]
        else:
            s = a if name == "batch" else [(1 - 0.4) * ar + 0.4 * (sum(a) / 2) for ar in a]
            expected = [(s[0] * g[0][k] + s[1] * g[1][k]) / sum(s) for k in range(len(got))]
        for gk, ek in zip(got, expected):
            torch.testing.assert_close(gk, ek, rtol=1e-5, atol=1e-6, msg=name)


def test_a_worker_without_seeds_does_not_bias_the_average():
    run_distributed(_seedless_worker, 3)
