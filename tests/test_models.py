"""Tests of dgl_grappa.method.models: shapes, finiteness, block == whole-graph equivalence, grads."""

from __future__ import annotations

import os

os.environ.setdefault("DGLBACKEND", "pytorch")

import dgl  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from dgl_grappa.config import ConfigError, ModelConfig  # noqa: E402
from dgl_grappa.method.models import GNN, MODEL_NAMES, build_model, gradient_bytes  # noqa: E402

N, E, F, C = 200, 1000, 12, 5
NUM_ISOLATED_DST = 10  # nodes 0..9 get no in-edges (as after dropping halo nodes)
# Fan-outs cycle through sampled and full (-1) layers; input layer first.
FANOUT_POOL = [3, -1, 4, 2, -1, 5]
CASES = [(name, layers) for name in MODEL_NAMES for layers in (1, 2, 3)] + [("gat", 6), ("sage", 6)]


def _graph(seed: int = 0) -> tuple[dgl.DGLGraph, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, N, (E,), generator=gen)
    dst = torch.randint(NUM_ISOLATED_DST, N, (E,), generator=gen)
    g = dgl.graph((src, dst), num_nodes=N)
    assert (g.in_degrees()[:NUM_ISOLATED_DST] == 0).all()
    x = torch.randn(N, F, generator=gen)
    return g, x


def _model(name: str, layers: int, dropout: float = 0.3, hidden: int = 16) -> GNN:
    torch.manual_seed(0)
    return build_model(ModelConfig(name=name, num_layers=layers, hidden=hidden, dropout=dropout, heads=4), F, C)


def _seeds() -> torch.Tensor:
    # Mix of zero-in-degree seeds and ordinary ones.
    return torch.tensor([0, 3, 9, 10, 17, 50, 99, 123, 150, 199])


def _sample(g: dgl.DGLGraph, seeds: torch.Tensor, fanouts: list[int]):
    dgl.seed(0)
    input_nodes, output_nodes, blocks = dgl.dataloading.NeighborSampler(fanouts).sample(g, seeds)
    assert torch.equal(output_nodes, seeds)
    return input_nodes, blocks


@pytest.fixture(scope="module")
def data():
    return _graph()


@pytest.mark.unit
@pytest.mark.parametrize("name,layers", CASES)
def test_block_and_graph_forward_shapes(data, name, layers):
    g, x = data
    model = _model(name, layers)
    model.train()
    seeds = _seeds()
    input_nodes, blocks = _sample(g, seeds, FANOUT_POOL[:layers])
    out = model(blocks, x[input_nodes])
    assert out.shape == (len(seeds), C)
    assert torch.isfinite(out).all()

    full = model(g, x)
    assert full.shape == (N, C)
    assert torch.isfinite(full).all()


@pytest.mark.unit
@pytest.mark.parametrize("name,layers", CASES)
def test_full_fanout_blocks_equal_whole_graph(data, name, layers):
    # In eval mode (no dropout), blocks with every in-edge kept compute exactly the
    # whole-graph function restricted to the seeds: the two modes are the same model.
    g, x = data
    model = _model(name, layers).eval()
    seeds = _seeds()
    input_nodes, blocks = _sample(g, seeds, [-1] * layers)
    with torch.no_grad():
        out_blocks = model(blocks, x[input_nodes])
        out_graph = model(g, x)[seeds]
    torch.testing.assert_close(out_blocks, out_graph, atol=1e-5, rtol=1e-5)


@pytest.mark.unit
@pytest.mark.parametrize("name,layers", CASES)
def test_backward_gives_finite_grads_on_every_parameter(data, name, layers):
    g, x = data
    model = _model(name, layers).train()
    seeds = _seeds()
    input_nodes, blocks = _sample(g, seeds, FANOUT_POOL[:layers])
    labels = torch.arange(len(seeds)) % C
    loss = torch.nn.functional.cross_entropy(model(blocks, x[input_nodes]), labels)
    loss.backward()
    for pname, p in model.named_parameters():
        assert p.grad is not None, f"{pname} got no gradient"
        assert torch.isfinite(p.grad).all(), f"{pname} has a non-finite gradient"


@pytest.mark.unit
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_graph_without_edges_is_finite(name):
    # Every node has zero in-degree: no crash, no NaN, and outputs depend on the features.
    model = _model(name, 2).eval()
    g = dgl.graph((torch.tensor([], dtype=torch.int64), torch.tensor([], dtype=torch.int64)), num_nodes=7)
    x = torch.randn(7, F)
    out = model(g, x)
    assert out.shape == (7, C)
    assert torch.isfinite(out).all()
    assert not torch.allclose(out[0], out[1]), "zero-in-degree nodes lost their own features"


@pytest.mark.unit
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_wrong_number_of_blocks_raises(data, name):
    g, x = data
    model = _model(name, 3)
    input_nodes, blocks = _sample(g, _seeds(), [2, 2])
    with pytest.raises(ValueError, match=r"2 blocks.*num_layers=3"):
        model(blocks, x[input_nodes])
    # A lone block counts as one block.
    with pytest.raises(ValueError, match=r"1 blocks.*num_layers=3"):
        model(blocks[-1], x)
    with pytest.raises(TypeError):
        model("not a graph", x)


@pytest.mark.unit
@pytest.mark.parametrize("name,layers", CASES)
def test_gradient_bytes_is_four_bytes_per_float32_parameter(name, layers):
    model = _model(name, layers)
    params = list(model.parameters())
    assert all(p.dtype == torch.float32 for p in params)
    assert gradient_bytes(model) == 4 * sum(p.numel() for p in params)
    # Frozen parameters are not all-reduced.
    params[0].requires_grad_(False)
    assert gradient_bytes(model) == 4 * sum(p.numel() for p in params[1:])
    assert gradient_bytes(model.double()) == 8 * sum(p.numel() for p in params[1:])


@pytest.mark.unit
def test_gat_widths():
    model = build_model(ModelConfig(name="gat", num_layers=3, hidden=16, heads=4), F, C)
    assert [conv._out_feats for conv in model.layers] == [4, 4, C]  # hidden // heads, then C
    assert all(conv._num_heads == 4 for conv in model.layers)


@pytest.mark.unit
def test_one_layer_is_a_single_conv(data):
    g, x = data
    for name in MODEL_NAMES:
        model = _model(name, 1)
        assert len(model.layers) == 1
        assert model(g, x).shape == (N, C)


@pytest.mark.unit
@pytest.mark.parametrize(
    "bad, message",
    [
        (dict(name="mlp"), "model.name"),
        (dict(num_layers=0), "model.num_layers"),
        (dict(num_layers=7), "model.num_layers"),
        (dict(name="gat", hidden=10, heads=4), "divisible"),
        (dict(dropout=1.0), "model.dropout"),
    ],
)
def test_bad_config_raises(bad, message):
    with pytest.raises(ConfigError, match=message):
        build_model(ModelConfig(**bad), F, C)


def test_two_layer_sage_overfits_small_graph():
    # Sanity check that the model trains: random features (distinct per node) and labels
    # on a 100-node graph are memorisable by a 2-layer SAGE in 200 Adam steps.
    torch.manual_seed(0)
    dgl.seed(0)
    gen = torch.Generator().manual_seed(1)
    n = 100
    g = dgl.rand_graph(n, 400)
    x = torch.randn(n, 16, generator=gen)
    y = torch.randint(0, 4, (n,), generator=gen)
    model = build_model(ModelConfig(name="sage", num_layers=2, hidden=64, dropout=0.1), 16, 4)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(200):
        model.train()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(g, x), y)
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        acc = (model(g, x).argmax(1) == y).float().mean().item()
    assert acc > 0.9, f"train accuracy {acc:.3f} after 200 steps"
