"""The chunked generator (data/bigsynth.py) and the bounded-memory DGL-layout writer (bigpart.py).

The reference is DGL itself: the same graph and the same node assignment written by
``dgl.distributed.partition_graph`` (through the project's ``partition.partition``) and by
``bigpart.write_partitions`` must load identically through ``dgl.distributed.load_partition``
and ``dgl_grappa.method.local_part.load_local``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

os.environ.setdefault("DGLBACKEND", "pytorch")

import dgl  # noqa: E402

from dgl_grappa.config import ConfigError, PartitionConfig, SyntheticConfig  # noqa: E402
from dgl_grappa.data.bigsynth import BigGraph, generate_big  # noqa: E402
from dgl_grappa.method.local_part import load_local  # noqa: E402
from dgl_grappa.partition import bigpart  # noqa: E402
from dgl_grappa.partition.layout import read_stats
from dgl_grappa.partition.store import partition

pytestmark = pytest.mark.unit

CFG = SyntheticConfig(num_nodes=20_000, avg_degree=10, feat_dim=16, seed=3)
# Small chunks so that the graph spans several edge chunks, buckets and top-up rounds.
GEN = {"chunk_edges": 30_000, "feat_rows": 3_000}


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> BigGraph:
    return generate_big(CFG, tmp_path_factory.mktemp("bigsynth"), **GEN)


def _edges(g: BigGraph) -> tuple[np.ndarray, np.ndarray]:
    chunks = list(g.edge_chunks())
    return np.concatenate([c[1] for c in chunks]), np.concatenate([c[2] for c in chunks])


# ----------------------------------------------------------------------------- generator


def test_generated_graph_is_simple_symmetric_and_as_configured(big):
    n = CFG.num_nodes
    src, dst = _edges(big)
    assert len(big.meta["chunks"]) > 1 and big.meta["topup_rounds"] >= 1
    assert big.num_edges == src.shape[0] == 2 * round(n * CFG.avg_degree / 2)
    assert not np.any(src == dst)
    keys = src * n + dst
    assert np.unique(keys).shape[0] == keys.shape[0]  # no duplicates
    assert np.array_equal(np.sort(keys), np.sort(dst * n + src))  # both directions stored
    assert np.array_equal(big.in_degree, np.bincount(dst, minlength=n))
    assert np.array_equal(big.label, big.block % CFG.num_classes)
    assert abs(float((big.block[src] == big.block[dst]).mean()) - CFG.homophily) < 0.02
    masks = np.stack([big.mask(k) for k in ("train_mask", "val_mask", "test_mask")])
    assert np.array_equal(masks.sum(0), np.ones(n))
    assert abs(masks[0].sum() - CFG.train_frac * n) <= 1
    feat = big.feat
    assert feat.dtype == np.float32 and feat.shape == (n, CFG.feat_dim) and isinstance(feat, np.memmap)
    # power law: the largest degree is far above the mean
    assert big.in_degree.max() > 10 * CFG.avg_degree


def test_generation_is_deterministic(big, tmp_path):
    again = generate_big(CFG, tmp_path / "a", **GEN)
    for f in sorted(p.relative_to(big.root) for p in big.root.rglob("*.npy")):
        assert (big.root / f).read_bytes() == (again.root / f).read_bytes(), f
    other = generate_big(SyntheticConfig(**{**CFG.__dict__, "seed": 4}), tmp_path / "b", **GEN)
    assert not np.array_equal(_edges(other)[0], _edges(big)[0])
    with pytest.raises(ConfigError, match="already holds"):
        generate_big(CFG, tmp_path / "a", **GEN)


def _ncm_accuracy(x, y, train, test, c):
    mu = np.stack([x[train & (y == k)].mean(0) for k in range(c)])
    d = (x[test] ** 2).sum(1, keepdims=True) - 2.0 * x[test] @ mu.T + (mu**2).sum(1)
    return float((d.argmin(1) == y[test]).mean())


def test_features_are_noisy_class_means_that_aggregation_recovers(big):
    n = big.num_nodes
    src, dst = _edges(big)
    a = sp.csr_matrix((np.ones(src.shape[0]), (dst, src)), shape=(n, n)) + sp.eye(n, format="csr")
    p = sp.diags(1.0 / np.asarray(a.sum(1)).ravel()) @ a
    x = np.asarray(big.feat, dtype=np.float64)
    y, tr, te = big.label, big.mask("train_mask"), big.mask("test_mask")
    acc_feat = _ncm_accuracy(x, y, tr, te, CFG.num_classes)
    acc_2hop = _ncm_accuracy(p @ (p @ x), y, tr, te, CFG.num_classes)
    assert acc_feat < 0.6 and acc_2hop >= acc_feat + 0.25, (acc_feat, acc_2hop)


def test_read_feat_rows_equals_the_memmap(big):
    ids = np.random.default_rng(0).integers(0, big.num_nodes, 3000)
    ids[:10] = ids[0]  # repeats
    assert np.array_equal(big.read_feat_rows(ids, block_rows=777), np.asarray(big.feat)[ids])
    assert big.read_feat_rows(np.empty(0, dtype=np.int64)).shape == (0, CFG.feat_dim)


# ----------------------------------------------------------------------------- assignment


def _cut(src, dst, a):
    return float((a[src] != a[dst]).mean())


def test_assignments(big):
    src, dst = _edges(big)
    n, p = big.num_nodes, 4
    c = bigpart.assign_contiguous(n, p)
    assert np.all(np.diff(c) >= 0) and np.ptp(np.bincount(c)) <= 1
    r = bigpart.assign_random(n, p, seed=1)
    assert np.array_equal(r, bigpart.assign_random(n, p, seed=1)) and set(np.unique(r)) == set(range(p))
    csr = bigpart.build_csr(big)
    assert np.array_equal(np.diff(csr[0]), np.bincount(src, minlength=n))
    assert np.array_equal(np.sort(csr[1][csr[0][7] : csr[0][8]]), np.sort(dst[src == 7]))
    ldg = bigpart.assign_ldg(big, p, passes=3, block=64, seed=0, csr=csr)
    assert np.array_equal(ldg, bigpart.assign_ldg(big, p, passes=3, block=64, seed=0, csr=csr))
    # On a 0.9-homophilous SBM a streaming greedy finds most of the planted structure.
    assert _cut(src, dst, ldg) < 0.4 * _cut(src, dst, r), (_cut(src, dst, ldg), _cut(src, dst, r))
    # capacity (1 + slack) N / P, overshot by at most one block
    assert np.bincount(ldg, minlength=p).max() <= 1.05 * n / p + 64
    with pytest.raises(ConfigError, match="not allowed"):
        bigpart.assign(big, "metis", p)


# ----------------------------------------------------------------------------- writer vs DGL


def _edge_set(pg: dgl.DGLGraph) -> list[tuple[int, int, int]]:
    """(global src, global dst, inner_edge) of every edge of a loaded partition, sorted."""
    s, d = pg.edges()
    gid = pg.ndata[dgl.NID]
    return sorted(zip(gid[s].tolist(), gid[d].tolist(), pg.edata["inner_edge"].tolist()))


def _check_edge_ids(cfg_path: str, num_parts: int) -> None:
    """DGL's edge-id invariants: part p's inner edges hold exactly the ids of edge_map[p],
    and an edge has the same id in every part that stores it."""
    meta = json.loads(Path(cfg_path).read_text())
    seen: dict[int, tuple[int, int]] = {}
    for p in range(num_parts):
        pg = dgl.distributed.load_partition(cfg_path, p, load_feats=False)[0]
        s, d = pg.edges()
        gid, eid, inner = pg.ndata[dgl.NID], pg.edata[dgl.EID], pg.edata["inner_edge"].bool()
        lo, hi = meta["edge_map"]["_N:_E:_N"][p]
        assert torch.equal(torch.sort(eid[inner]).values, torch.arange(lo, hi))
        for e, u, v in zip(eid.tolist(), gid[s].tolist(), gid[d].tolist()):
            assert seen.setdefault(e, (u, v)) == (u, v)
    assert len(seen) == meta["num_edges"]


@pytest.fixture(scope="module")
def both(big, tmp_path_factory):
    """The same graph and random 3-part assignment, written by DGL and by bigpart."""
    root = tmp_path_factory.mktemp("layouts")
    ref = partition(big.to_dgl(), PartitionConfig(num_parts=3, method="random"), root / "dgl")
    a = np.load(root / "dgl" / "assignment.npy")
    order = np.load(root / "dgl" / "orig_ids.npy")  # DGL's (unstable-sort) order within parts
    mine = bigpart.write_partitions(big, a, 3, root / "mine", method="random", order=order)
    return ref, mine


def test_writer_matches_partition_graph_file_by_file(both, monkeypatch):
    ref, mine = both
    assert json.loads(Path(ref["part_config"]).read_text()) == json.loads(Path(mine["part_config"]).read_text())
    monkeypatch.setenv("DGL_DIST_DEBUG", "1")  # load_partition then runs DGL's own partition checks
    for p in range(3):
        ga, na, ea, gpa, *ra = dgl.distributed.load_partition(ref["part_config"], p)
        gb, nb, eb, gpb, *rb = dgl.distributed.load_partition(mine["part_config"], p)
        assert ra == rb and ea == eb == {}
        assert gb.formats()["created"] == ga.formats()["created"] == ["coo"]
        assert set(gb.ndata) == set(ga.ndata) == {dgl.NID, "inner_node", "part_id"}
        assert set(gb.edata) == set(ga.edata) == {dgl.EID, "inner_edge"}
        assert (ga.num_nodes(), ga.num_edges()) == (gb.num_nodes(), gb.num_edges())
        k = int(ga.ndata["inner_node"].sum())
        assert int(gb.ndata["inner_node"].sum()) == k and bool(gb.ndata["inner_node"][:k].all())
        for key in ga.ndata:  # inner nodes: same ids, same order, same dtypes
            assert ga.ndata[key].dtype == gb.ndata[key].dtype, key
            assert torch.equal(ga.ndata[key][:k], gb.ndata[key][:k]), key
        halo_a = dict(zip(ga.ndata[dgl.NID][k:].tolist(), ga.ndata["part_id"][k:].tolist()))
        halo_b = dict(zip(gb.ndata[dgl.NID][k:].tolist(), gb.ndata["part_id"][k:].tolist()))
        assert halo_a == halo_b and len(halo_a) > 0
        for key in ga.edata:
            assert ga.edata[key].dtype == gb.edata[key].dtype, key
        assert _edge_set(ga) == _edge_set(gb)
        # partition.py also writes the first-hop aggregates (agg); bigpart does not (first_hop=exact
        # refuses such a partition with a one-line error: test_first_hop)
        assert [key for key in na if key != "_N/agg"] == list(nb)
        for key in nb:
            assert na[key].dtype == nb[key].dtype and torch.equal(na[key], nb[key]), key
        assert torch.equal(gpa.nid2partid(torch.arange(CFG.num_nodes)), gpb.nid2partid(torch.arange(CFG.num_nodes)))
    _check_edge_ids(ref["part_config"], 3)
    _check_edge_ids(mine["part_config"], 3)
    # the project's statistics file: same cut and halo counts as partition.py computes
    sa, sb = read_stats(Path(ref["part_config"]).parent), read_stats(Path(mine["part_config"]).parent)
    assert sb["edge_cut"] == pytest.approx(sa["edge_cut"])
    assert (sb["inner_nodes"], sb["halo_nodes"], sb["num_edges"]) == (
        sa["inner_nodes"],
        sa["halo_nodes"],
        sa["num_edges"],
    )
    for f in ("assignment.npy", "orig_ids.npy"):
        assert np.array_equal(
            np.load(Path(ref["part_config"]).parent / f), np.load(Path(mine["part_config"]).parent / f)
        )
    assert not (Path(mine["part_config"]).parent / "_work").exists()


@pytest.mark.parametrize("halo", ["drop", "keep"])
def test_load_local_sees_the_same_partition(both, halo):
    ref, mine = both
    for p in range(3):
        la, lb = load_local(ref["part_config"], p, halo), load_local(mine["part_config"], p, halo)
        assert (la.num_inner, la.num_parts, la.graph.num_nodes(), la.graph.num_edges()) == (
            lb.num_inner,
            lb.num_parts,
            lb.graph.num_nodes(),
            lb.graph.num_edges(),
        )
        assert torch.equal(la.label, lb.label) and torch.equal(la.train_ids, lb.train_ids)
        assert la.halo_bytes_loaded == lb.halo_bytes_loaded
        # halo rows may sit in another order: compare per global id
        ia, ib = torch.argsort(la.global_ids), torch.argsort(lb.global_ids)
        assert torch.equal(la.global_ids[ia], lb.global_ids[ib])
        for x, y in ((la.feat.full(), lb.feat.full()), (la.in_degree, lb.in_degree), (la.owner, lb.owner)):
            assert torch.equal(x[ia], y[ib])
        ea = sorted(zip(la.global_ids[la.src].tolist(), la.global_ids[la.dst].tolist()))
        eb = sorted(zip(lb.global_ids[lb.src].tolist(), lb.global_ids[lb.dst].tolist()))
        assert ea == eb


def test_default_layout_reconstructs_the_graph(big, tmp_path):
    """Own order (original ids ascending within a part), LDG parts: every original edge is
    an inner edge of exactly one part, features and in-degrees follow their nodes."""
    a = bigpart.assign_ldg(big, 4, block=64)
    stats = bigpart.write_partitions(big, a, 4, tmp_path, method="ldg")
    orig = np.load(tmp_path / "orig_ids.npy")
    assert np.array_equal(np.sort(orig), np.arange(big.num_nodes))
    src, dst = _edges(big)
    n = big.num_nodes
    got, feat = [], np.asarray(big.feat)
    for p in range(4):
        lp = load_local(stats["part_config"], p, "keep")
        ids = orig[lp.global_ids.numpy()]
        assert np.all(a[ids[: lp.num_inner]] == p) and np.all(np.diff(ids[: lp.num_inner]) > 0)
        assert np.array_equal(lp.feat.full().numpy(), feat[ids])
        assert np.array_equal(lp.in_degree.numpy(), big.in_degree[ids])
        # inner nodes keep their whole in-neighbourhood
        assert torch.equal(
            torch.bincount(lp.dst, minlength=lp.graph.num_nodes())[: lp.num_inner], lp.in_degree[: lp.num_inner]
        )
        inner = lp.dst < lp.num_inner
        got.append(ids[lp.src[inner].numpy()] * n + ids[lp.dst[inner].numpy()])
    assert np.array_equal(np.sort(np.concatenate(got)), np.sort(src * n + dst))
    assert stats["edge_cut"] == pytest.approx(_cut(src, dst, a))


def test_single_part_and_bad_inputs(big, tmp_path):
    stats = bigpart.write_partitions(big, np.zeros(big.num_nodes, dtype=np.int64), 1, tmp_path / "one")
    pg = dgl.distributed.load_partition(stats["part_config"], 0)[0]
    assert "part_id" not in pg.ndata  # as DGL writes a single part
    assert torch.equal(pg.ndata[dgl.NID], torch.arange(big.num_nodes)) and pg.num_edges() == big.num_edges
    assert stats["edge_cut"] == 0.0 and stats["halo_nodes"] == [0]
    a = bigpart.assign_random(big.num_nodes, 2)
    with pytest.raises(ConfigError, match="one part id"):
        bigpart.bucket_edges(big, a, 1, tmp_path / "w")
    with pytest.raises(ConfigError, match="part 0 first"):
        bigpart.bucket_edges(big, a, 2, tmp_path / "w", order=np.arange(big.num_nodes))
    with pytest.raises(ConfigError, match="permutation"):
        bigpart.bucket_edges(big, a, 2, tmp_path / "w", order=np.zeros(big.num_nodes, dtype=np.int64))


def test_directed_graph_matches_partition_graph(tmp_path):
    """A directed graph: DGL's 1-hop part also holds the out-edges of inner nodes and their
    targets as halo nodes, which a symmetric graph cannot tell apart from the in-edges."""
    from dgl_grappa.data.bigsynth import write_arrays

    rng = np.random.default_rng(5)
    n, m = 3000, 15000
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    big = write_arrays(
        tmp_path / "g",
        src,
        dst,
        feat=rng.standard_normal((n, 8)),
        label=rng.integers(0, 4, n),
        split=rng.integers(0, 3, n).astype(np.int8),
        chunk_edges=4000,
    )
    ref = partition(big.to_dgl(), PartitionConfig(num_parts=3, method="random"), tmp_path / "dgl")
    a, order = np.load(tmp_path / "dgl" / "assignment.npy"), np.load(tmp_path / "dgl" / "orig_ids.npy")
    mine = bigpart.write_partitions(big, a, 3, tmp_path / "mine", method="random", order=order)
    for p in range(3):
        ga = dgl.distributed.load_partition(ref["part_config"], p)[0]
        gb = dgl.distributed.load_partition(mine["part_config"], p)[0]
        k = int(ga.ndata["inner_node"].sum())
        assert sorted(ga.ndata[dgl.NID][k:].tolist()) == sorted(gb.ndata[dgl.NID][k:].tolist())
        assert _edge_set(ga) == _edge_set(gb)
    _check_edge_ids(mine["part_config"], 3)
    assert read_stats(tmp_path / "mine")["halo_nodes"] == read_stats(tmp_path / "dgl")["halo_nodes"]
