"""The drop-in loader and the native runtime are one implementation of the method.

The drop-in's core (:class:`PartitionLoader`) is fed from a real 2-part METIS partitioning
loaded with ``dgl.distributed.load_partition`` (no servers, no root), next to the native
runtime's LocalRuntime on the same part, in a real 2-process gloo group. Both must give
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
    from dgl_grappa.method.local_runtime import LocalRuntime

    cfg = load_config(None, ["--train.batch_size=300", "--train.fanouts=[5,10]", f"--grappa.correction={correction}",
                             "--grappa.lam=0.4", "--grappa.w_min=0.2", "--train.seed=3", "--train.halo=drop",
                             f"--train.first_hop={first_hop}"])
    g = cfg.grappa
    native = LocalRuntime(cfg, Identity(rank, world_size, rank), load_local(part_config, rank, "drop", first_hop))
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
def test_dropin_refuses_halo_keep_and_the_node_correction(small_parts):
    _, stats = small_parts
    pg, node, *_ = dgl.distributed.load_partition(stats["part_config"], 0)
    args = (pg, pg.ndata["inner_node"], pg.ndata[dgl.NID], node["_N/train_mask"], node["_N/in_degree"],
            dgl.dataloading.NeighborSampler([5, 5]), 100)
    with pytest.raises(ValueError, match="train.halo=keep"):
        PartitionLoader(*args, halo="keep")
    with pytest.raises(ValueError, match="grappa.correction=node"):
        PartitionLoader(*args, make_correction("node"))
