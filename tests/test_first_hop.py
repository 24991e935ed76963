"""First-hop completion and GraphSAGE's empty-neighbourhood rule: the math, and the data path.

* the precomputed first layer (x, mean of the in-neighbours' x, in-degree) is the full
  first layer: a whole-graph forward with aggregates equals the plain one;
* the aggregates a worker loads (inner rows from its part, halo rows from their owners)
  are the full graph's, and their one-time bytes are counted;
* with the halo kept and the first hop exact, a 2-layer model's local output equals the
  full-graph output exactly with full fan-outs, and in expectation (Monte Carlo) with a
  sampled last layer (the last layer is linear in the sampled neighbour mean);
* ``empty=self`` imputes exactly the empty sampled neighbourhoods, and changes nothing else.
"""

from __future__ import annotations

from pathlib import Path

import dgl
import numpy as np
import pytest
import torch

from dgl_grappa.config import ConfigError, ModelConfig, PartitionConfig
from dgl_grappa.method.local_part import load_local
from dgl_grappa.method.models import build_model
from dgl_grappa.method.sampler import LocalBatches, SeedsOnly, layer_sampler
from dgl_grappa.partition.aggregates import neighbour_mean
from dgl_grappa.partition.store import partition

N, E, F, C = 200, 1000, 12, 5


def _graph(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, N, (E,), generator=gen)
    dst = torch.randint(10, N, (E,), generator=gen)  # nodes 0..9: no in-neighbour
    return dgl.graph((src, dst), num_nodes=N), torch.randn(N, F, generator=gen)


def _model(name: str, layers: int, in_feats: int = F, classes: int = C, **kw):
    torch.manual_seed(0)
    return build_model(ModelConfig(name=name, num_layers=layers, hidden=16, dropout=0.3, **kw), in_feats, classes)


@pytest.mark.unit
@pytest.mark.parametrize("name", ["sage", "gcn", "gin"])
@pytest.mark.parametrize("layers", [1, 2, 3])
def test_precomputed_first_layer_is_the_full_first_layer(name, layers):
    g, x = _graph()
    model = _model(name, layers).eval()
    with torch.no_grad():
        full = model(g, x)
        exact = model(g, x, agg=neighbour_mean(g, x), deg=g.in_degrees())
        # a 1-layer model on the seeds alone: no graph at all
        seeds = torch.tensor([0, 5, 17, 150])
        alone = _model(name, 1).eval()
        rows = alone([], x[seeds], agg=neighbour_mean(g, x)[seeds], deg=g.in_degrees()[seeds])
    assert torch.allclose(full, exact, atol=1e-5), float((full - exact).abs().max())
    assert torch.allclose(rows, alone(g, x)[seeds], atol=1e-5)


def _gcn_sum(g, x):
    """GraphConv(norm='both')'s neighbour sum on the whole graph: sum_u x_u / sqrt(d_out(u) d_in(v))."""
    dout = g.out_degrees().clamp(min=1).float().rsqrt().unsqueeze(1)
    din = g.in_degrees().clamp(min=1).float().rsqrt().unsqueeze(1)
    return dgl.ops.copy_u_sum(g, x * dout) * din


@pytest.mark.unit
def test_graphconv_both_first_layer_from_its_aggregate():
    """model.gcn_norm=both is DGL's GraphConv(norm='both'); its layer 0 from the symmetric sum equals it."""
    g, x = _graph()
    model = _model("gcn", 2, gcn_norm="both").eval()
    ref = dgl.nn.GraphConv(F, 16, norm="both", allow_zero_in_degree=True)
    ref.load_state_dict(model.layers[0].state_dict())
    with torch.no_grad():
        assert torch.allclose(model.layers[0](g, x), ref(g, x), atol=1e-5)
        full = model(g, x)
        exact = model(g, x, agg=_gcn_sum(g, x), deg=g.in_degrees())
    assert torch.allclose(full, exact, atol=1e-5), float((full - exact).abs().max())


@pytest.mark.unit
def test_loaded_gcn_table_gives_graphconvs_first_layer(parts4):
    """load_local(aggregate='gcn') serves the folder's gcn table: one GraphConv(norm='both') layer from
    local rows equals the layer on the whole graph, for inner and kept halo nodes alike."""
    g, stats = parts4
    orig = torch.from_numpy(np.load(Path(stats["part_config"]).parent / "orig_ids.npy"))
    model = _model("gcn", 1, g.ndata["feat"].shape[1], C, gcn_norm="both").eval()
    with torch.no_grad():
        full = model(g, g.ndata["feat"])
        for part in range(4):
            lp = load_local(stats["part_config"], part, "keep", "exact", aggregate="gcn")
            rows = torch.arange(lp.graph.num_nodes())
            local = model([], lp.feat[rows], agg=lp.agg[rows], deg=lp.in_degree[rows])
            assert torch.allclose(local, full[orig[lp.global_ids]], atol=1e-4)


@pytest.mark.unit
def test_gat_refuses_aggregates_and_blocks_must_match():
    g, x = _graph()
    agg, deg = neighbour_mean(g, x), g.in_degrees()
    with pytest.raises(ValueError, match="GAT"):
        _model("gat", 2, heads=2)(g, x, agg=agg, deg=deg)
    with pytest.raises(ValueError, match="deg"):
        _model("sage", 2)(g, x, agg=agg)
    _, _, blocks = dgl.dataloading.NeighborSampler([3, 3]).sample(g, torch.tensor([20, 30]))
    with pytest.raises(ValueError, match="exact first layer"):
        _model("sage", 2)(blocks, x, agg=agg, deg=deg)  # 2 blocks, but only layer 1 is sampled


@pytest.mark.unit
def test_layer_sampler_skips_the_first_layer():
    assert layer_sampler([5, 10], "sampled").fanouts == [5, 10]
    assert layer_sampler([5, 10], "exact").fanouts == [10]
    assert isinstance(layer_sampler([5], "exact"), SeedsOnly)


@pytest.mark.unit
def test_dropout_acts_on_x_only():
    # train mode, dropout on: the aggregate rows pass untouched (x = 0, so only agg reaches the output)
    g, x = _graph()
    model = _model("sage", 1)
    model.train()
    agg = neighbour_mean(g, x)
    zero = torch.zeros_like(x)
    with torch.no_grad():
        a = model([], zero, agg=agg, deg=g.in_degrees())
        b = model.eval()([], zero, agg=agg, deg=g.in_degrees())
    assert torch.equal(a, b)


@pytest.fixture(scope="module")
def parts4(small_graph, tmp_path_factory):
    out = tmp_path_factory.mktemp("parts_random4")
    return small_graph, partition(small_graph, PartitionConfig(num_parts=4, method="random", seed=1), out)


@pytest.mark.unit
@pytest.mark.parametrize("halo", ["keep", "drop"])
def test_loaded_aggregates_are_the_full_graphs(parts4, halo):
    g, stats = parts4
    out = Path(stats["part_config"]).parent
    orig = torch.from_numpy(np.load(out / "orig_ids.npy"))
    full = neighbour_mean(g, g.ndata["feat"])
    row = g.ndata["feat"].shape[1] * 4
    for part in range(4):
        lp = load_local(stats["part_config"], part, halo, "exact")
        ids = orig[lp.global_ids]
        assert lp.agg.shape == lp.feat.shape and torch.allclose(lp.agg.full(), full[ids], atol=1e-6)
        n_halo = stats["halo_nodes"][part]
        if halo == "keep":  # halo features + in-degree + aggregate, once
            assert lp.one_time_bytes == n_halo * (2 * row + 8) and lp.rows_held == 2 * lp.graph.num_nodes()
        else:  # every other owner of an inner node's in-neighbours sends it one partial sum, once
            src, dst = g.edges()
            assignment = torch.from_numpy(np.load(out / "assignment.npy"))
            into = (assignment[dst] == part) & (assignment[src] != part)
            pairs = torch.unique(dst[into] * 4 + assignment[src[into]]).numel()  # (inner node, other owner)
            assert pairs == stats["aggregate_remote_pairs"][part] > 0
            assert lp.one_time_bytes == pairs * row and lp.rows_held == 2 * lp.num_inner
        plain = load_local(stats["part_config"], part, halo, "sampled")
        assert plain.agg is None and plain.one_time_bytes == (n_halo * (row + 8) if halo == "keep" else 0)


@pytest.mark.unit
def test_exact_first_hop_needs_the_aggregates(parts4, tmp_path):
    _, stats = parts4
    src = Path(stats["part_config"]).parent
    import shutil

    dst = tmp_path / "noagg"
    shutil.copytree(src, dst)
    for p in range(4):
        (dst / f"part{p}" / "grappa" / "agg.npy").unlink()
    with pytest.raises(ConfigError, match="first_hop=sampled"):
        load_local(dst / "grappa.json", 0, "keep", "exact")
    assert load_local(dst / "grappa.json", 0, "keep", "sampled").agg is None


def _local_and_full(g, stats, part, model, fanouts, draws, seed=0):
    """(mean over ``draws`` sampled local outputs of the part's train seeds, the full-graph output on them)."""
    out = Path(stats["part_config"]).parent
    orig = torch.from_numpy(np.load(out / "orig_ids.npy"))
    lp = load_local(stats["part_config"], part, "keep", "exact")
    seeds = lp.train_ids[:64]
    batches = LocalBatches(lp.graph, seeds, layer_sampler(fanouts, "exact"), steps=1, seed=seed)
    total = 0
    with torch.no_grad():
        for epoch in range(draws):
            input_nodes, out_nodes, blocks = next(batches.epoch(epoch))
            # LocalBatches shuffles the seeds: order the output rows back
            order = torch.argsort(out_nodes)
            res = model(blocks, lp.feat[input_nodes], agg=lp.agg[input_nodes], deg=lp.in_degree[input_nodes])
            total = total + res[order]
        full = model(g, g.ndata["feat"])[orig[lp.global_ids[seeds.sort().values]]]
    return total / draws, full


@pytest.mark.unit
@pytest.mark.parametrize("name", ["sage", "gcn"])
def test_halo_keep_and_exact_first_hop_give_the_full_graph_output(parts4, name):
    g, stats = parts4
    model = _model(name, 2, g.ndata["feat"].shape[1], 16).eval()
    for part in range(4):
        local, full = _local_and_full(g, stats, part, model, [-1, -1], draws=1)
        assert torch.allclose(local, full, atol=1e-4), float((local - full).abs().max())


def test_sampled_last_layer_is_unbiased_monte_carlo(parts4):
    # 2-layer SAGE, fan-out 2 on the (sampled) last layer: every draw differs, the mean converges
    # to the full-graph output (the last layer is linear in the sampled neighbour mean).
    g, stats = parts4
    model = _model("sage", 2, g.ndata["feat"].shape[1], 16).eval()
    one, full = _local_and_full(g, stats, 0, model, [-1, 2], draws=1)
    many, _ = _local_and_full(g, stats, 0, model, [-1, 2], draws=300)
    err_one = float((one - full).abs().mean())
    err_many = float((many - full).abs().mean())
    assert err_one > 0.01  # sampling noise is real ...
    assert err_many < err_one / 8, (err_one, err_many)  # ... and averages out (~1/sqrt(300))


@pytest.mark.unit
def test_empty_self_imputes_only_empty_sampled_neighbourhoods():
    g, x = _graph()
    deg = g.in_degrees()
    with torch.no_grad():
        # whole graph: nodes without in-neighbours keep 0, so the output is bit-identical
        m_self, m_zero = _model("sage", 2).eval(), _model("sage", 2, empty="zero").eval()
        assert torch.equal(m_self(g, x, deg=deg), m_zero(g, x))
        assert torch.equal(m_self(g, x), m_zero(g, x))  # without degrees: DGL's rule
        # a block in which node 20 (in-degree > 0) sampled nothing, node 0 has no in-neighbour
        seeds = torch.tensor([0, 20, 30])
        sub = dgl.in_subgraph(g, torch.tensor([30]))  # only node 30 keeps its in-edges
        block = dgl.to_block(sub, seeds)
        inp = block.srcdata[dgl.NID]
        layer = m_self.layers[0]
        got = layer(block, x[inp], deg[inp])
        ref = m_zero.layers[0](block, x[inp])
        assert torch.equal(got[[0, 2]], ref[[0, 2]])  # untouched rows
        assert torch.allclose(got[1], ref[1] + layer.fc_neigh(x[20]), atol=1e-6)
        # with the neighbour mean imputed by the node's own row
        assert torch.allclose(got[1], layer.fc_self(x[20]) + layer.fc_neigh(x[20]), atol=1e-6)
    with pytest.raises(ConfigError, match="model.empty"):
        _model("sage", 1, empty="mean")
