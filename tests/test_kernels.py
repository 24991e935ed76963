"""The torch kernels (``train.kernels: torch``, dgl_grappa/method/kernels/) against DGL's layers.

Every layer of the package, forward and backward (the gradients of the inputs and of every parameter),
on the same sampled blocks of a generated graph (DGL's ``NeighborSampler``), with the weights copied by
``state_dict``: equal to float tolerance. A checkpoint of one kernel loads into the other; the ``gpu``
tests hold the torch kernels on a CUDA device to the CPU ones.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

os.environ.setdefault("DGLBACKEND", "pytorch")

import dgl  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from dgl_grappa.config import ConfigError, HetSynthConfig, ModelConfig, SyntheticConfig, load_config  # noqa: E402
from dgl_grappa.data.hetsynth import hetsynth_graph  # noqa: E402
from dgl_grappa.data.synthetic import synthetic_graph  # noqa: E402
from dgl_grappa.method.kernels import (  # noqa: E402
    AUTO_CPU,
    PlainGraph,
    build_model_for,
    build_rgcn_for,
    place_blocks,
    resolve_kernels,
    to_plain,
)
from dgl_grappa.method.kernels.plain import edge_softmax, mean_src  # noqa: E402
from dgl_grappa.partition.aggregates import neighbour_mean  # noqa: E402

ATOL = 2e-5
# (model section overrides, first-hop completion): every layer the package builds, both GCN normalisations
CASES = [
    (dict(name="sage"), False),
    (dict(name="sage", empty="zero"), False),
    (dict(name="sage"), True),
    (dict(name="gcn"), False),
    (dict(name="gcn"), True),
    (dict(name="gcn", gcn_norm="both"), False),
    (dict(name="gin"), False),
    (dict(name="gin"), True),
    (dict(name="gat", heads=2), False),
    (dict(name="gat", heads=1, hidden=12), False),
]


@pytest.fixture(scope="module")
def graph():
    g = synthetic_graph(SyntheticConfig(num_nodes=400, avg_degree=6, num_communities=8, num_classes=4, feat_dim=12))
    full_deg = g.in_degrees()
    # a few nodes lose their in-edges, as after the halo is dropped: GraphSAGE's empty-neighbourhood rule
    # reads their full-graph in-degree (deg) where the block has none
    g = dgl.remove_edges(g, g.in_edges(torch.arange(5), form="eid"))
    g.ndata["full_deg"] = full_deg
    return g


def _pair(cfg: ModelConfig, in_dim: int, out_dim: int):
    torch.manual_seed(3)
    ref = build_model_for(cfg, in_dim, out_dim, "dgl")
    new = build_model_for(cfg, in_dim, out_dim, "torch")
    new.load_state_dict(ref.state_dict())
    return ref.eval(), new.eval()


def _close(a: torch.Tensor, b: torch.Tensor, what: str):
    assert a.shape == b.shape, what
    err = float((a - b).abs().max()) if a.numel() else 0.0
    assert err <= ATOL * max(1.0, float(a.abs().max()) if a.numel() else 1.0), f"{what}: max error {err}"


def _check_grads(ref, new, xs_ref, xs_new):
    for (name, p), q in zip(ref.named_parameters(), new.parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if p.grad is not None:
            _close(p.grad, q.grad, f"grad of {name}")
    for a, b in zip(xs_ref, xs_new):
        _close(a.grad, b.grad, "grad of the input rows")


@pytest.mark.unit
@pytest.mark.parametrize("over,exact", CASES, ids=lambda v: str(v))
def test_each_layer_forward_and_backward_equal_dgl_on_sampled_blocks(graph, over, exact):
    cfg = ModelConfig(num_layers=2, hidden=over.pop("hidden", 16), dropout=0.0, **over)
    ref, new = _pair(cfg, 12, 4)
    layers = 1 if exact else 2
    dgl.seed(7)
    seeds = torch.tensor([0, 1, 2, 10, 50, 77, 123, 200, 301, 399])
    inp, _, blocks = dgl.dataloading.NeighborSampler([4, 6][-layers:]).sample_blocks(graph, seeds)
    feat, deg = graph.ndata["feat"], graph.ndata["full_deg"]
    extra = {"deg": deg[inp]}
    if exact:
        extra["agg"] = neighbour_mean(graph, feat)[inp]
    x_ref = feat[inp].clone().requires_grad_()
    x_new = feat[inp].clone().requires_grad_()
    out_ref = ref(blocks, x_ref, **extra)
    out_new = new(to_plain(blocks), x_new, **extra)
    _close(out_ref, out_new, "forward")
    # a loss that weighs every output differently, so that each gradient entry is checked
    w = torch.linspace(-1, 1, out_ref.numel()).view_as(out_ref)
    (out_ref * w).sum().backward()
    (out_new * w).sum().backward()
    _check_grads(ref, new, [x_ref], [x_new])


@pytest.mark.unit
@pytest.mark.parametrize("name", ["sage", "gcn", "gin", "gat"])
def test_whole_graph_and_layer_by_layer_forwards_equal_dgl(graph, name):
    ref, new = _pair(ModelConfig(name=name, num_layers=2, hidden=16, heads=2), 12, 4)
    feat = graph.ndata["feat"]
    _close(ref(graph, feat), new(graph, feat), "whole graph (a DGL graph given to the torch layers)")
    _close(ref(graph, feat), new(to_plain(graph), feat), "whole graph as plain tensors")
    _close(ref.layer(0, graph, feat), new.layer(0, graph, feat), "layer 0 alone (layer-wise evaluation)")


@pytest.fixture(scope="module")
def hetgraph():
    return hetsynth_graph(HetSynthConfig(num_papers=300, num_authors=150, num_fields=20, feat_dim=10))


@pytest.mark.unit
@pytest.mark.parametrize("exact", [False, True])
def test_rgcn_forward_and_backward_equal_dgl_on_heterogeneous_blocks(hetgraph, exact):
    g = hetgraph
    torch.manual_seed(0)
    x_all = {"paper": g.nodes["paper"].data["feat"], "author": torch.randn(150, 6), "field": torch.randn(20, 6)}
    dims = {t: v.shape[1] for t, v in x_all.items()}
    cfg = ModelConfig(name="rgcn", num_layers=2, hidden=8, dropout=0.0)
    torch.manual_seed(5)
    ref = build_rgcn_for(cfg, dims, 4, g.canonical_etypes, "paper", "dgl").eval()
    new = build_rgcn_for(cfg, dims, 4, g.canonical_etypes, "paper", "torch").eval()
    new.load_state_dict(ref.state_dict())
    dgl.seed(3)
    seeds = {"paper": torch.tensor([0, 5, 17, 42, 99, 250])}
    inp, _, blocks = dgl.dataloading.NeighborSampler([3, 5]).sample_blocks(g, seeds)
    agg = None
    if exact:
        # per relation from the featured type: the first block's destinations' means over the whole graph
        rel = ("paper", "cites", "paper")
        sub = dgl.edge_type_subgraph(g, [rel])
        agg = {rel: neighbour_mean(sub, x_all["paper"])[blocks[0].dstnodes["paper"].data[dgl.NID]]}
    xr = {t: x_all[t][ids].clone().requires_grad_() for t, ids in inp.items()}
    xn = {t: x_all[t][ids].clone().requires_grad_() for t, ids in inp.items()}
    out_ref, out_new = ref(blocks, xr, agg=agg), new(to_plain(blocks, hetero=True), xn, agg=agg)
    _close(out_ref, out_new, "RGCN forward")
    w = torch.linspace(-1, 1, out_ref.numel()).view_as(out_ref)
    (out_ref * w).sum().backward()
    (out_new * w).sum().backward()
    _check_grads(ref, new, [xr[t] for t in sorted(xr)], [xn[t] for t in sorted(xn)])
    _close(ref(g, x_all), new(g, x_all), "RGCN on the whole heterograph")


@pytest.mark.unit
@pytest.mark.parametrize("name", ["sage", "gcn", "gin", "gat"])
def test_a_checkpoint_moves_between_the_kernels(graph, name, tmp_path):
    cfg = ModelConfig(name=name, num_layers=2, hidden=16, heads=2)
    torch.manual_seed(11)
    a = build_model_for(cfg, 12, 4, "dgl")
    torch.manual_seed(11)
    b = build_model_for(cfg, 12, 4, "torch")
    # the same parameters, drawn the same way: the same seed gives the same initial model
    assert list(a.state_dict()) == list(b.state_dict())
    assert all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))
    with torch.no_grad():
        for p in a.parameters():
            p.add_(torch.randn_like(p))  # a trained model, not the initial one
    torch.save(a.state_dict(), tmp_path / "dgl.pt")
    b.load_state_dict(torch.load(tmp_path / "dgl.pt"), strict=True)
    feat = graph.ndata["feat"]
    _close(a.eval()(graph, feat), b.eval()(graph, feat), "dgl checkpoint in the torch model")
    torch.save(b.state_dict(), tmp_path / "torch.pt")
    torch.manual_seed(12)
    c = build_model_for(cfg, 12, 4, "dgl").eval()
    c.load_state_dict(torch.load(tmp_path / "torch.pt"), strict=True)
    _close(c(graph, feat), b(graph, feat), "torch checkpoint in the dgl model")


@pytest.mark.unit
def test_plain_ops_match_their_definition():
    g = PlainGraph(torch.tensor([0, 1, 2, 2, 3]), torch.tensor([1, 1, 0, 1, 0]), 4, 3)
    x = torch.tensor([[1.0], [2.0], [3.0], [5.0]])
    assert mean_src(g, x).squeeze(-1).tolist() == [4.0, 2.0, 0.0]  # node 2: no in-edge, mean 0
    e = torch.tensor([[1.0], [2.0], [100.0], [0.5], [101.0]])  # large scores must not overflow
    a = edge_softmax(g, e)
    assert torch.isfinite(a).all()
    sums = torch.zeros(3, 1).index_add_(0, g.dst, a)
    assert torch.allclose(sums[:2], torch.ones(2, 1)) and sums[2].item() == 0.0
    assert g.in_degrees().tolist() == [2, 3, 0] and g.out_degrees().tolist() == [1, 1, 2, 1]


@pytest.mark.unit
def test_kernels_setting_resolves_and_refuses_bad_values():
    assert resolve_kernels("auto", "cuda") == "torch"  # the registry's DGL cannot run on a GPU
    assert resolve_kernels("auto", "cpu") == AUTO_CPU
    assert resolve_kernels("dgl", "cpu") == "dgl" and resolve_kernels("torch", "cpu") == "torch"
    assert load_config(None, ["--train.kernels=torch"]).train.kernels == "torch"
    assert load_config(None, []).train.kernels == "auto"
    with pytest.raises(ConfigError, match=r"train.kernels='cudnn' is not allowed; use one of auto, dgl, torch"):
        load_config(None, ["--train.kernels=cudnn"])
    blocks = place_blocks([dgl.rand_graph(5, 9)], torch.device("cpu"), "torch")
    assert isinstance(blocks[0], PlainGraph) and blocks[0].num_edges() == 9


def _cuda():
    if not torch.cuda.is_available():
        pytest.fail("the gpu tests need a CUDA device (scripts/test.sh deselects them where nvidia-smi finds none)")
    return torch.device("cuda", 0)


@pytest.mark.gpu
@pytest.mark.parametrize("over,exact", CASES, ids=lambda v: str(v))
def test_torch_kernels_on_cuda_equal_the_cpu_ones(graph, over, exact):
    dev = _cuda()
    cfg = ModelConfig(num_layers=2, hidden=over.pop("hidden", 16), dropout=0.0, **over)
    _, cpu = _pair(cfg, 12, 4)
    gpu = build_model_for(cfg, 12, 4, "torch").to(dev).eval()
    gpu.load_state_dict(cpu.state_dict())
    dgl.seed(7)
    seeds = torch.tensor([0, 1, 2, 10, 50, 77, 123, 200, 301, 399])
    inp, _, blocks = dgl.dataloading.NeighborSampler([4, 6][-(1 if exact else 2) :]).sample_blocks(graph, seeds)
    feat, deg = graph.ndata["feat"], graph.ndata["full_deg"]
    extra = {"deg": deg[inp]}
    if exact:
        extra["agg"] = neighbour_mean(graph, feat)[inp]
    x_c = feat[inp].clone().requires_grad_()
    x_g = feat[inp].clone().to(dev).requires_grad_()
    out_c = cpu(place_blocks(blocks, torch.device("cpu"), "torch"), x_c, **extra)
    out_g = gpu(place_blocks(blocks, dev, "torch"), x_g, **{k: v.to(dev) for k, v in extra.items()})
    _close(out_c, out_g.cpu(), "forward on cuda")
    out_c.square().sum().backward()
    out_g.square().sum().backward()
    for (name, p), q in zip(cpu.named_parameters(), gpu.parameters()):
        if p.grad is not None:
            _close(p.grad, q.grad.cpu(), f"grad of {name} on cuda")
    _close(x_c.grad, x_g.grad.cpu(), "grad of the input rows on cuda")


def test_gpu_check_says_in_one_line_that_there_is_no_gpu_and_exits_0():
    # CUDA_VISIBLE_DEVICES="" hides any GPU, so this runs the no-GPU branch on every machine
    root = Path(__file__).resolve().parent.parent
    p = subprocess.run(
        ["bash", str(root / "scripts" / "gpu_check.sh")],
        cwd=root,
        capture_output=True,
        text=True,
        env=dict(os.environ, CUDA_VISIBLE_DEVICES=""),
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("\n") == 1 and p.stdout.startswith("gpu_check: no GPU here") and not p.stderr, p
