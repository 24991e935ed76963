"""The torch sampler against DGL's on a real partition: degree caps, block layout, neighbour frequencies.

Both samplers draw each seed's in-edges uniformly without replacement, ``min(in-degree, fan-out)`` of
them. Over R independent draws of one seed with in-degree d and fan-out k, the vector of per-edge counts
has mean R k/d and covariance R p(1-p) d/(d-1) (I - 11^T/d) with p = k/d (a uniform k-subset's
indicators), so the sum over edges of (count - R p)^2 / (R p(1-p) d/(d-1)) is chi-square with d - 1
degrees of freedom, independently per seed. The tests sum it over seeds for each sampler against the
exact expectation, and for the difference of the two samplers' counts (variance doubled) against each
other, with fixed seeds (so a run's outcome is fixed) and a threshold of p >= 1e-4; a sampler that
prefers its first edges must fail the same test (checked).
"""

import dgl
import pytest
import torch
from dgl.dataloading import NeighborSampler
from scipy.stats import chi2

from dgl_grappa.config import ConfigError
from dgl_grappa.method.kernels import to_plain
from dgl_grappa.method.kernels.sample import TorchNeighborSampler
from dgl_grappa.method.local_part import load_local
from dgl_grappa.method.sampler import LocalBatches, layer_sampler, resolve_sampler

ALPHA = 1e-4
ROUNDS = 200
FANOUT = 4


@pytest.fixture(scope="module")
def part(small_parts):
    _, stats = small_parts
    return load_local(stats["part_config"], 0, "keep")


def _heavy_seeds(graph: dgl.DGLGraph, fanout: int) -> torch.Tensor:
    """Every node whose in-degree exceeds the fan-out (the others take all their in-edges: nothing to test)."""
    return (graph.in_degrees() > fanout).nonzero().squeeze(1)


def _edge_counts(graph, seeds, draw, rounds: int) -> torch.Tensor:
    """How often each edge of the graph was drawn into seeds' first block over ``rounds`` draws."""
    counts = torch.zeros(graph.num_edges(), dtype=torch.float64)
    for r in range(rounds):
        block = draw(r)
        eids = block.edata[dgl.EID].long()
        assert eids.unique().numel() == eids.numel(), "an edge drawn twice in one draw (not without replacement)"
        counts.index_add_(0, eids, torch.ones(eids.numel(), dtype=torch.float64))
    return counts


def _statistic(graph, seeds, counts, expected_from, fanout: int, rounds: int, scale: float = 1.0):
    """Sum over seeds of the standardised squared deviations (see the module docstring) and its dof."""
    _, _, eids = graph.adj_tensors("csc")
    indptr = graph.adj_tensors("csc")[0]
    q, dof = 0.0, 0
    for v in seeds.tolist():
        e = eids[indptr[v] : indptr[v + 1]].long()
        d = e.numel()
        p = fanout / d
        var = scale * rounds * p * (1 - p) * d / (d - 1)
        q += float(((counts[e] - expected_from(e, p)) ** 2).sum() / var)
        dof += d - 1
    return q, dof


def _torch_draw(graph, seeds, fanout, hub_ratio=None):
    s = TorchNeighborSampler([fanout], layout="dgl")
    if hub_ratio is not None:
        s.hub_ratio = hub_ratio

    def draw(r):
        s.reseed(1000 + r)
        return s.sample(graph, seeds)[2][0]

    return draw


def _dgl_draw(graph, seeds, fanout):
    s = NeighborSampler([fanout])

    def draw(r):
        dgl.seed(5000 + r)
        return s.sample(graph, seeds)[2][0]

    return draw


@pytest.mark.unit
def test_each_seed_gets_min_degree_fanout_distinct_in_edges_in_dgls_block_layout(part):
    g = part.graph
    fanouts = [3, 5, -1]
    ours, dgls = TorchNeighborSampler(fanouts, layout="dgl"), NeighborSampler(fanouts)
    ours.reseed(0)
    dgl.seed(0)
    seeds = part.train_ids[:200]
    for sampler in (ours, dgls):
        input_nodes, output_nodes, blocks = sampler.sample(g, seeds)
        assert torch.equal(output_nodes, seeds)
        assert torch.equal(blocks[-1].dstdata[dgl.NID], seeds)
        assert torch.equal(blocks[0].srcdata[dgl.NID], input_nodes)
        for i, (block, fanout) in enumerate(zip(blocks, fanouts)):
            dst_nodes, src_nodes = block.dstdata[dgl.NID], block.srcdata[dgl.NID]
            # a block's destinations are its first sources; the next block's destinations are its sources
            assert torch.equal(src_nodes[: block.num_dst_nodes()], dst_nodes)
            if i + 1 < len(blocks):
                assert torch.equal(blocks[i + 1].srcdata[dgl.NID], dst_nodes)
            assert src_nodes.unique().numel() == src_nodes.numel()
            deg = g.in_degrees(dst_nodes)
            cap = deg if fanout == -1 else deg.clamp(max=fanout)
            assert torch.equal(block.in_degrees(), cap), type(sampler).__name__
            # every drawn edge is an edge of the graph between the rows it names, and none twice
            eids = block.edata[dgl.EID]
            assert eids.unique().numel() == eids.numel()
            u, v = block.edges()
            gu, gv = g.find_edges(eids)
            assert torch.equal(src_nodes[u.long()], gu) and torch.equal(dst_nodes[v.long()], gv)


@pytest.mark.unit
def test_neighbour_frequencies_are_uniform_and_match_dgls_sampler(part):
    g = part.graph
    seeds = _heavy_seeds(g, FANOUT)
    assert seeds.numel() >= 500, "the partition has too few nodes above the fan-out for the test"
    ours = _edge_counts(g, seeds, _torch_draw(g, seeds, FANOUT), ROUNDS)  # sorted random keys
    floyd = _edge_counts(g, seeds, _torch_draw(g, seeds, FANOUT, hub_ratio=0.0), ROUNDS)  # Floyd's algorithm
    dgls = _edge_counts(g, seeds, _dgl_draw(g, seeds, FANOUT), ROUNDS)

    def exact(e, p):
        return ROUNDS * p

    for name, counts in (("torch", ours), ("torch, Floyd", floyd), ("dgl", dgls)):
        q, dof = _statistic(g, seeds, counts, exact, FANOUT, ROUNDS)
        assert chi2.sf(q, dof) >= ALPHA, f"{name}: chi2={q:.0f} on {dof} dof"
    # the two samplers against each other: the difference of two independent counts, variance doubled
    q, dof = _statistic(g, seeds, ours - dgls, lambda e, p: 0.0, FANOUT, ROUNDS, scale=2.0)
    assert chi2.sf(q, dof) >= ALPHA, f"torch vs dgl: chi2={q:.0f} on {dof} dof"

    # the test has power: a sampler that keeps the first edges of a node more often fails it
    biased = ours.clone()
    indptr, _, eids = g.adj_tensors("csc")
    for v in seeds.tolist():
        first = eids[indptr[v]].long()
        shift = 0.15 * ROUNDS * FANOUT / (indptr[v + 1] - indptr[v]).item()
        biased[first] += shift
        biased[eids[indptr[v + 1] - 1].long()] -= shift
    q, dof = _statistic(g, seeds, biased, exact, FANOUT, ROUNDS)
    assert chi2.sf(q, dof) < ALPHA


@pytest.mark.unit
def test_a_draw_depends_on_its_seed_only_and_plain_blocks_equal_dgl_ones(part):
    g, seeds = part.graph, part.train_ids[:300]
    a, b = TorchNeighborSampler([5, 10], layout="dgl"), TorchNeighborSampler([5, 10], layout="plain")
    a.reseed(7)
    b.reseed(7)
    torch.manual_seed(123)  # the global RNG plays no part
    ia, _, ba = a.sample(g, seeds)
    ib, _, bb = b.sample(g, seeds)
    assert torch.equal(ia, ib)
    for block, plain in zip(to_plain(ba), bb):
        assert torch.equal(block.src, plain.src) and torch.equal(block.dst, plain.dst)
        assert (block.num_src, block.num_dst) == (plain.num_src, plain.num_dst)
    a.reseed(8)
    assert not torch.equal(a.sample(g, seeds)[0], ia)


@pytest.mark.unit
def test_local_batches_with_the_torch_sampler_repeat_each_epoch_and_cover_every_seed(part):
    sampler = layer_sampler([10, 25], "exact", "torch", layout="plain")
    batches = LocalBatches(part.graph, part.train_ids, sampler, steps=3, seed=2)
    first = [inp for inp, _, _ in batches.epoch(1)]
    again = [inp for inp, _, _ in batches.epoch(1)]
    assert all(torch.equal(x, y) for x, y in zip(first, again))
    seen = torch.cat([seeds for _, seeds, _ in batches.epoch(0)])
    assert torch.equal(seen.sort().values, part.train_ids.sort().values)
    assert not all(torch.equal(x, y) for x, y in zip(first, (inp for inp, _, _ in batches.epoch(0))))


@pytest.mark.unit
def test_the_sampler_setting_resolves_and_refuses_what_it_cannot_serve():
    assert resolve_sampler("auto", "cuda") == "torch"
    assert resolve_sampler("torch", "cpu") == "torch"
    assert resolve_sampler("auto", "cuda", heterogeneous=True) == "dgl"
    assert resolve_sampler("auto", "cuda", kernels="dgl") == "dgl"  # DGL's layers read DGL's blocks
    with pytest.raises(ConfigError, match="train.sampler=torch on a GPU.*--train.kernels=torch"):
        resolve_sampler("torch", "cuda", kernels="dgl")
    with pytest.raises(ConfigError, match="train.sampler=torch.*heterogeneous"):
        resolve_sampler("torch", "cpu", heterogeneous=True)
    with pytest.raises(ConfigError, match="train.sampler='fast'"):
        resolve_sampler("fast", "cpu")
    with pytest.raises(ValueError, match="layout='plain'"):
        TorchNeighborSampler([5], device="meta", layout="dgl")
    with pytest.raises(TypeError, match="heterogeneous"):
        TorchNeighborSampler([5]).sample(dgl.rand_graph(5, 10), {"a": torch.tensor([0])})
