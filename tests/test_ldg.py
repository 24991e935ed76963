"""The restreaming LDG partitioner (partition.method=ldg): cut, balance, determinism, DGL's layout."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from dgl_grappa.config import PartitionConfig
from dgl_grappa.method.local_part import load_local
from dgl_grappa.partition.assign import balance_stats, edge_cut_stats, ldg_assignment, undirected_csr
from dgl_grappa.partition.store import partition, partition_fingerprint

pytestmark = pytest.mark.unit


def _cut(src, dst, a):
    return float((a[src] != a[dst]).mean())


@pytest.fixture(scope="module")
def csr(small_graph):
    src, dst = (t.numpy() for t in small_graph.edges())
    return src, dst, undirected_csr(src, dst, small_graph.num_nodes())


@pytest.mark.parametrize("k", [4, 8])
def test_cut_balance_and_determinism(small_graph, csr, k):
    src, dst, (indptr, indices) = csr
    n = small_graph.num_nodes()
    train = small_graph.ndata["train_mask"].numpy().astype(bool)
    a = ldg_assignment(indptr, indices, k, seed=0, train_mask=train)
    rand = np.random.default_rng(0).integers(0, k, n)
    assert a.dtype == np.int64 and a.min() >= 0 and a.max() < k
    assert _cut(src, dst, a) < 0.5 * _cut(src, dst, rand), (_cut(src, dst, a), _cut(src, dst, rand))
    b = balance_stats(a, k, train)
    assert b["node_balance"] <= 1.05 + 1e-9 and b["train_balance"] <= 1.05 + 1e-9, b
    assert np.array_equal(a, ldg_assignment(indptr, indices, k, seed=0, train_mask=train))
    assert not np.array_equal(a, ldg_assignment(indptr, indices, k, seed=1, train_mask=train))
    # restreaming helps: 3 passes cut less than 1
    one = ldg_assignment(indptr, indices, k, seed=0, passes=1, train_mask=train)
    assert _cut(src, dst, a) < _cut(src, dst, one)


def test_hard_caps_hold_with_large_blocks(csr):
    # blocks far larger than the slack of a part (default: slack * N / P / 4 = 4 nodes here): the
    # per-block capacity resolution must still keep both caps
    _, _, (indptr, indices) = csr
    n = indptr.shape[0] - 1
    train = np.zeros(n, dtype=bool)
    train[: n // 3] = True
    a = ldg_assignment(indptr, indices, 4, seed=3, slack=0.02, train_mask=train, block=128)
    assert np.bincount(a, minlength=4).max() <= int(1.02 * n / 4)
    assert np.bincount(a[train], minlength=4).max() <= int(1.02 * train.sum() / 4)


def test_tiny_inputs():
    indptr, indices = undirected_csr(np.array([0, 1]), np.array([1, 2]), 3)
    assert ldg_assignment(indptr, indices, 1).tolist() == [0, 0, 0]
    a = ldg_assignment(indptr, indices, 3, seed=0)
    assert sorted(a.tolist()) == [0, 1, 2]  # cap = 1 node per part


def test_written_by_partition_graph(small_graph, tmp_path):
    cfg = PartitionConfig(num_parts=4, method="ldg", seed=5)
    stats = partition(small_graph, cfg, tmp_path)
    a = np.load(tmp_path / "assignment.npy")
    src, dst = (t.numpy() for t in small_graph.edges())
    assert stats["method"] == "ldg" and stats["edge_cut"] == pytest.approx(_cut(src, dst, a))
    assert stats["edge_cut"] < 0.4 and stats["node_balance"] <= 1.05 and stats["train_balance"] <= 1.05
    assert edge_cut_stats(src, dst, a, 4)["halo_nodes"] == stats["halo_nodes"]
    # the same seed gives the same assignment as the function itself (DGL wrote ours)
    indptr, indices = undirected_csr(src, dst, small_graph.num_nodes())
    mine = ldg_assignment(indptr, indices, 4, seed=5, train_mask=small_graph.ndata["train_mask"].numpy().astype(bool))
    assert np.array_equal(a, mine)
    assert json.loads((tmp_path / "grappa.json").read_text())["num_parts"] == 4
    lp = load_local(stats["part_config"], 2, "keep", "exact")
    assert lp.num_inner == int((a == 2).sum())
    # the seed is part of an ldg partitioning's fingerprint (not of METIS's)
    from dgl_grappa.config import load_config

    fp = [
        partition_fingerprint(load_config(None, [f"--partition.method={m}", f"--partition.seed={s}"]))
        for m in ("ldg", "metis")
        for s in (0, 1)
    ]
    assert fp[0] != fp[1] and fp[2] == fp[3] and "ldg_passes" not in fp[2]["partition"]


def test_bigpart_and_the_scheduler_use_the_same_ldg(small_graph):
    from dgl_grappa.partition import bigpart
    from dgl_grappa.partition.schedule import AssignmentSpec, compute_assignment

    spec = AssignmentSpec(num_parts=4, method="ldg", seed=2)
    a0, a1 = compute_assignment(small_graph, spec, 0), compute_assignment(small_graph, spec, 1)
    src, dst = (t.numpy() for t in small_graph.edges())
    assert not np.array_equal(a0, a1) and _cut(src, dst, a0) < 0.4 and _cut(src, dst, a1) < 0.4
    assert np.array_equal(a0, compute_assignment(small_graph, spec, 0))
    import inspect

    assert "ldg_assignment(" in inspect.getsource(bigpart.assign_ldg)
    assert torch.is_tensor(small_graph.ndata["train_mask"])
