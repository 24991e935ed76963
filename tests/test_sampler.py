"""Local-only sampling: never leaves the partition, equal step counts, counted feature reads."""

from pathlib import Path

import numpy as np
import pytest
import torch
from dgl.dataloading import NeighborSampler

from dgl_grappa.cluster.testing import run_distributed
from dgl_grappa.method.local_part import load_local
from dgl_grappa.method.sampler import LocalBatches, LocalFeatures, equal_steps


@pytest.mark.unit
def test_halo_drop_never_leaves_the_partition(small_parts):
    g, stats = small_parts
    assignment = torch.from_numpy(np.load(Path(stats["part_config"]).parent / "assignment.npy"))
    orig = torch.from_numpy(np.load(Path(stats["part_config"]).parent / "orig_ids.npy"))
    for part in range(2):
        lp = load_local(stats["part_config"], part, "drop")
        feats = LocalFeatures(lp.feat)
        batches = LocalBatches(lp.graph, lp.train_ids, NeighborSampler([5, 10]), steps=4, seed=part)
        seen = []
        for epoch in range(2):
            for input_nodes, seeds, blocks in batches.epoch(epoch):
                assert int(input_nodes.max()) < lp.num_inner
                owners = assignment[orig[lp.global_ids[input_nodes]]]
                assert bool((owners == part).all()), "a sampled node belongs to another partition"
                x = feats.gather(input_nodes)
                assert torch.equal(x, g.ndata["feat"][orig[lp.global_ids[input_nodes]]])
                seen.append(seeds)
        remote, local = feats.take_bytes()
        assert remote == 0 and local > 0
        # every train seed is used once per epoch
        assert torch.equal(torch.cat(seen).sort().values, lp.train_ids.repeat(2).sort().values)


@pytest.mark.unit
def test_halo_keep_samples_halo_nodes_as_leaves(small_parts):
    _, stats = small_parts
    lp = load_local(stats["part_config"], 0, "keep")
    batches = LocalBatches(lp.graph, lp.train_ids, NeighborSampler([-1, -1]), steps=2, seed=0)
    halo_seen = False
    for input_nodes, seeds, blocks in batches.epoch(0):
        assert bool((seeds < lp.num_inner).all())
        halo_seen |= bool((input_nodes >= lp.num_inner).any())
    assert halo_seen


@pytest.mark.unit
def test_feature_reads_outside_the_resident_rows_are_counted_or_refused():
    table = torch.arange(12, dtype=torch.float32).reshape(6, 2)
    resident = torch.tensor([True, True, True, False, False, True])
    with pytest.raises(RuntimeError, match="remote"):
        LocalFeatures(table, resident=resident).gather(torch.tensor([0, 3]))
    fetched = []
    f = LocalFeatures(
        table, fetch_remote=lambda ids: fetched.append(ids) or -torch.ones(len(ids), 2), resident=resident
    )
    out = f.gather(torch.tensor([0, 3, 4, 5]))
    assert torch.equal(out[1:3], -torch.ones(2, 2)) and torch.equal(out[0], table[0])
    assert f.take_bytes() == (2 * 8, 2 * 8)
    with pytest.raises(RuntimeError, match="outside"):
        f.gather(torch.tensor([6]))


@pytest.mark.unit
def test_exact_step_count_with_fewer_seeds_than_steps(small_parts):
    _, stats = small_parts
    lp = load_local(stats["part_config"], 0, "drop")
    few = lp.train_ids[:3]
    batches = list(LocalBatches(lp.graph, few, NeighborSampler([5, 5]), steps=7, seed=0).epoch(0))
    assert len(batches) == 7 and all(b[1].numel() >= 1 for b in batches)
    # A part without training nodes still takes every agreed step (collectives stay matched):
    # blocks around a placeholder, no seeds, so the trainer gives the step weight 0.
    empty = list(LocalBatches(lp.graph, few[:0], NeighborSampler([5, 5]), steps=3, seed=0).epoch(0))
    assert len(empty) == 3 and all(b[1].numel() == 0 and b[2][-1].num_dst_nodes() == 1 for b in empty)


def _equal_steps_worker(rank, world_size):
    n = [2500, 900][rank]
    assert equal_steps(n, 1000) == 3  # max(ceil(2500/1000), ceil(900/1000))


def test_equal_steps_is_the_max_over_workers():
    run_distributed(_equal_steps_worker, 2)
