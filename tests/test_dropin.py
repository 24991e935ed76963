"""The drop-in loader and the native runtime are one implementation of the method.

The drop-in's core (:class:`PartitionLoader`) is fed from a real 2-part METIS partitioning
loaded with ``dgl.distributed.load_partition`` (no servers, no root), next to the native
runtime's data side (the node kind's NodeRuntime) on the same part, in a real 2-process gloo group. Both must give
the same node weights, the same batches (in global ids), and after every step the same
hook state: the native path primes through ``Correction.loss``, the drop-in through
``Correction.prime`` alone, and shrinkage towards the mean all-reduces in both.
"""
from __future__ import annotations

import dgl
import pytest
import torch
from dgl_grappa.cluster.launch import Identity
from dgl_grappa.cluster.testing import run_distributed

from dgl_grappa.config import load_config
from dgl_grappa.method import coverage as cov
from dgl_grappa.method.dropin import PartitionLoader
from dgl_grappa.method.local_part import load_local
from dgl_grappa.method.reducers import make_correction


def _both_paths(rank, world_size, part_config, correction, first_hop):
    from dgl_grappa.kinds.node import NodeRuntime

    cfg = load_config(None, ["--train.batch_size=300", "--train.fanouts=[5,10]", f"--grappa.correction={correction}",
                             "--grappa.lam=0.4", "--grappa.w_min=0.2", "--train.seed=3", "--train.halo=drop",
                             f"--train.first_hop={first_hop}"])
    g = cfg.grappa
    native = NodeRuntime(cfg, Identity(rank, world_size, rank), load_local(part_config, rank, "drop", first_hop))
    lp = native.lp

    pg, node, *_ = dgl.distributed.load_partition(part_config, rank)
    core = PartitionLoader(pg, pg.ndata["inner_node"], pg.ndata[dgl.NID], node["_N/train_mask"],
                           node["_N/in_degree"], dgl.dataloading.NeighborSampler(cfg.train.fanouts),
                           cfg.train.batch_size, make_correction(g.correction, g.lam, g.shrink_target),
                           hops=cfg.hops, w_min=g.w_min, self_loops=g.self_loops, seed=cfg.train.seed,
                           first_hop=first_hop)

    # The weights vary between nodes (the test means something) and are the same on both paths.
    assert torch.equal(core.weights, native.weights) and torch.equal(core.coverage, native.coverage)
    assert float(native.weights.min()) < 1.0 and native.weights.unique().numel() > 10
    assert float(native.weights.min()) >= g.w_min
    assert core.steps == native.steps and torch.equal(core.global_ids, lp.global_ids)

    ours = make_correction(g.correction, g.lam, g.shrink_target)
    for epoch in (0, 1):
        expected = list(native.batches.epoch(epoch))  # sampled first: both paths re-seed DGL per epoch
        core.set_epoch(epoch)
        got = iter(core)
        for input_nodes, seeds, _ in expected:
            g_input, g_seeds, _ = next(got)  # primes core.correction
            w = native.weights[seeds]
            ours.loss(torch.zeros(seeds.numel()), w)  # the native path: loss() primes
            assert torch.equal(g_seeds, lp.global_ids[seeds]) and torch.equal(g_input, lp.global_ids[input_nodes])
            assert core.correction.state == ours.state, (core.correction.state, ours.state)
            assert core.correction.last_weight == ours.last_weight
            if correction == "batch":
                assert ours.state.scale == pytest.approx(float(cov.batch_weight(w)))
        assert next(got, None) is None  # exactly `steps` batches
    assert ours.take_bytes() == core.correction.take_bytes()


@pytest.mark.parametrize("correction,first_hop", [("batch", "sampled"), ("shrinkage", "sampled"), ("none", "exact")])
def test_dropin_core_matches_the_native_runtime(small_parts, correction, first_hop):
    _, stats = small_parts
    run_distributed(_both_paths, 2, stats["part_config"], correction, first_hop, timeout_s=180)


@pytest.mark.unit
def test_dropin_refuses_the_node_correction_and_an_unknown_halo(small_parts):
    _, stats = small_parts
    pg, node, *_ = dgl.distributed.load_partition(stats["part_config"], 0)
    args = (pg, pg.ndata["inner_node"], pg.ndata[dgl.NID], node["_N/train_mask"], node["_N/in_degree"],
            dgl.dataloading.NeighborSampler([5, 5]), 100)
    with pytest.raises(ValueError, match="halo='far' is not allowed"):
        PartitionLoader(*args, halo="far")
    with pytest.raises(ValueError, match="grappa.correction=node"):
        PartitionLoader(*args, make_correction("node"))
    with pytest.raises(ValueError, match="first_hop='block' needs num_nodes"):
        PartitionLoader(*args, first_hop="block")


@pytest.mark.unit
@pytest.mark.parametrize("layer", ["sage", "graphconv-right"])
def test_the_block_first_hop_gives_an_unmodified_dgl_layer_the_full_graph_first_layer(small_parts, layer):
    """first_hop="block": block 0 (one virtual in-neighbour per destination, its row the aggregate)
    makes DGL's own SAGEConv('mean') / GraphConv(norm='right') compute the full graph's first layer."""
    import numpy as np
    from dgl.nn import GraphConv, SAGEConv
    from pathlib import Path

    g, stats = small_parts
    part_config = stats["part_config"]
    orig = torch.from_numpy(np.load(Path(part_config).parent / "orig_ids.npy"))  # global (shuffled) id -> original
    pg, node, *_ = dgl.distributed.load_partition(part_config, 1)
    lp = load_local(part_config, 1, "keep", "exact")
    n = g.num_nodes()
    core = PartitionLoader(pg, pg.ndata["inner_node"], pg.ndata[dgl.NID], node["_N/train_mask"],
                           torch.cat([node["_N/in_degree"], lp.in_degree[lp.num_inner:]]),
                           dgl.dataloading.NeighborSampler([4, 3]), 64, halo="keep", first_hop="block", num_nodes=n)
    torch.manual_seed(0)
    conv = SAGEConv(g.ndata["feat"].shape[1], 8, "mean") if layer == "sage" else \
        GraphConv(g.ndata["feat"].shape[1], 8, norm="right", allow_zero_in_degree=True)
    row = {int(v): i for i, v in enumerate(lp.global_ids)}
    feats, aggs = lp.feat.full(), lp.agg.full()
    input_nodes, seeds, blocks = next(iter(core))
    assert len(blocks) == 2 and blocks[0].num_src_nodes() == 2 * blocks[0].num_dst_nodes() == input_nodes.numel()
    real, virtual = input_nodes[input_nodes < n], input_nodes[input_nodes >= n] - n
    assert torch.equal(real, virtual) and bool((real < n).all())
    # every row of the batch is one this worker holds (inner or kept halo), and blocks chain
    assert all(int(v) in row for v in real)
    assert torch.equal(blocks[0].dstdata[dgl.NID] if dgl.NID in blocks[0].dstdata else real,
                       real) and blocks[1].num_src_nodes() == blocks[0].num_dst_nodes()
    x = torch.cat([feats[[row[int(v)] for v in real]], aggs[[row[int(v)] for v in virtual]]])
    with torch.no_grad():
        got = conv(blocks[0], x)
        full = conv(g, g.ndata["feat"])[orig[real]]
    torch.testing.assert_close(got, full, atol=1e-5, rtol=1e-4)
