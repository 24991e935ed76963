"""The capacity model's formulas (dgl_grappa/bench/capacity.py), against simulation and measured runs."""

import math

import numpy as np
import pytest

from dgl_grappa.bench.capacity import (
    Workload,
    distdgl_feature_step_bytes,
    epoch_bytes,
    epoch_seconds,
    grappa_step_bytes,
    part_bytes,
    random_remote_fraction,
    reach_fractions,
    ring_factor,
)

pytestmark = pytest.mark.unit


def test_ring_factor_is_what_a_ring_allreduce_sends():
    # reduce-scatter + all-gather: each of P-1 rounds sends 1/P of the payload, twice
    for p in (2, 3, 4, 8, 64):
        assert ring_factor(p) == pytest.approx(2 * (p - 1) * (1 / p))
    assert ring_factor(1) == 0.0


def test_random_remote_fraction_matches_a_simulation():
    rng = np.random.default_rng(0)
    n, p, batch, rows = 200_000, 4, 1000, 20_000
    owner = rng.integers(0, p, n)
    seeds = rng.choice(np.flatnonzero(owner == 0), batch, replace=False)
    others = rng.choice(np.setdiff1d(np.arange(n), seeds), rows - batch, replace=False)
    inputs = np.concatenate([seeds, others])
    assert float((owner[inputs] != 0).mean()) == pytest.approx(random_remote_fraction(p, rows, batch), abs=0.01)


def test_distdgl_bytes_reproduce_the_measured_100k_runs():
    # notes/distdgl-recipe.md section 3: METIS, 2 parts, 30 steps, 1.28M input rows per
    # trainer per epoch, 15.5 % remote, 64-dim features -> 50-52 MB remote feature bytes;
    # Grappa: 30 x 41.3 KB = 1.24 MB per rank.
    w = Workload("metis2", 1e5, 1e6, 64, 6e4, 2, 41_280, 1.28e6 / 30, 0.155, corr_bytes=0)
    eb = epoch_bytes(w)
    assert eb["steps"] == 30
    assert 50e6 <= eb["distdgl_features"] <= 53.5e6
    assert eb["grappa"] == pytest.approx(1.24e6, rel=0.01)
    assert distdgl_feature_step_bytes(w) / grappa_step_bytes(w) == pytest.approx(42, rel=0.05)  # "~42x"


def test_part_bytes_and_epoch_seconds_arithmetic():
    w = Workload("x", 1000, 10_000, 8, 500, 4, 100, 50, 0.5, halo_share=0.5)
    d = part_bytes(w, edge_bytes=4, halo="drop", cut=0.2)
    assert d["features"] == 250 * 32 and d["structure"] == 2500 * 0.8 * 4 + 8 * 250
    k = part_bytes(w, edge_bytes=4, halo="keep", cut=0.2)
    assert k["features"] == 375 * 32 and k["structure"] == 2500 * 1.2 * 4 + 8 * 375
    t = epoch_seconds(w, step_compute_s=1.0, bandwidth_Bps=1e9, latency_s=0.0)
    assert t["grappa"] == pytest.approx(w.steps * (1.0 + grappa_step_bytes(w) / 1e9))
    assert t["distdgl_low"] == pytest.approx(w.steps * 1.0) and t["distdgl_high"] > t["grappa"]
    assert w.steps == math.ceil(500 / 4000)


def test_resident_bytes_count_every_table_and_the_budget_samples_the_halo():
    from dgl_grappa.bench.capacity import resident_bytes, stored_row_bytes

    w = Workload("x", 1000, 10_000, 8, 500, 4, 100, 50, 0.5, halo_share=2.0)
    own = 250 * 32
    # no pruning, fp32: own + halo rows, twice with the aggregates
    assert resident_bytes(w)["resident"] == (250 + 500) * 2 * 32
    assert resident_bytes(w, exact=False, halo="drop")["ratio"] == 1.0
    assert stored_row_bytes(8, "int8") == 12 and stored_row_bytes(8, "fp16") == 16
    r = resident_bytes(w, precision="int8", inner_frac=0.8, halo_frac=0.5)
    assert r["resident"] == (200 + 250) * 2 * 12
    # a budget below that keeps what fits of the halo
    b = resident_bytes(w, precision="int8", inner_frac=0.8, halo_frac=0.5, budget=1.0)
    assert b["resident"] == pytest.approx(own) and b["halo_kept_frac"] == pytest.approx((own / 24 - 200) / 250)


def test_random_halo_share_matches_a_random_partition():
    from dgl_grappa.bench.capacity import random_halo_share

    rng = np.random.default_rng(1)
    n, p = 40_000, 8
    deg = rng.integers(1, 30, n)
    src = np.repeat(np.arange(n), deg)
    dst = rng.integers(0, n, src.size)
    owner = rng.integers(0, p, n)
    into0 = (owner[dst] == 0) & (owner[src] != 0)
    measured = np.unique(src[into0]).size / (owner == 0).sum()
    assert random_halo_share(p, deg) == pytest.approx(measured, rel=0.03)


def test_stored_row_bytes_are_what_the_loaders_tables_hold():
    import torch

    from dgl_grappa.bench.capacity import stored_row_bytes
    from dgl_grappa.method.storage import PRECISIONS, NodeTable

    for width in (1, 7, 8, 127, 128):
        for precision in PRECISIONS:
            held = NodeTable.store(torch.randn(5, width), precision).nbytes / 5
            assert stored_row_bytes(width, precision) == held, (width, precision)
    # int4: two values a byte (an odd width padded) plus one fp32 scale per row
    assert stored_row_bytes(128, "int4") == 68 and stored_row_bytes(127, "int4") == 68
    with pytest.raises(ValueError):
        stored_row_bytes(8, "int2")


def test_resident_bytes_in_int4_and_under_a_budget():
    from dgl_grappa.bench.capacity import resident_bytes

    w = Workload("x", 1000, 10_000, 8, 500, 4, 100, 50, 0.5, halo_share=2.0)
    own = 250 * 32
    r = resident_bytes(w, precision="int4", inner_frac=1.0, halo_frac=0.5)  # 4 B of values + 4 B scale a row
    assert r["resident"] == (250 + 250) * 2 * 8 and r["ratio"] == pytest.approx(8000 / own)
    b = resident_bytes(w, precision="int4", inner_frac=1.0, halo_frac=0.5, budget=0.75)
    assert b["resident"] == pytest.approx(0.75 * own) and b["halo_kept_frac"] == pytest.approx((6000 / 16 - 250) / 250)


def test_zero_truncated_poisson_rate_and_part_cut():
    from dgl_grappa.bench.capacity import part_cut, zero_truncated_poisson_rate

    for lam in (0.01, 0.3, 1.0, 4.0, 30.0):
        assert zero_truncated_poisson_rate(lam / -math.expm1(-lam)) == pytest.approx(lam, rel=1e-6)
    assert zero_truncated_poisson_rate(1.0) == 0.0 and zero_truncated_poisson_rate(0.5) == 0.0
    # a part's cut in proportion to its halo share; the partitioning's cut is their mean over the parts' nodes
    halo, inner = [0.2, 0.4, 0.9], [100, 300, 200]
    cuts = [part_cut(0.1, halo, inner, p) for p in range(3)]
    assert sum(c * n for c, n in zip(cuts, inner)) / sum(inner) == pytest.approx(0.1)
    assert cuts[1] == pytest.approx(2 * cuts[0]) and part_cut(0.9, halo, inner, 2) == 1.0


def test_reach_fractions_limits():
    from dgl_grappa.bench.capacity import zero_truncated_poisson_rate

    d, cut, h = 4.0, 0.75, 1.9
    # no hops: the seeds; no seeds: nothing
    assert reach_fractions(0.3, d, cut, h, 0) == (0.3, 0.0)
    assert reach_fractions(0.0, d, cut, h, 3) == (0.0, 0.0)
    # few seeds: disjoint trees, counted node by node. One hop: a seed and its a = d (1 - cut)
    # inner neighbours; a halo node is reached through one of its m = d cut / h edges into the part.
    t, a, b = 1e-7, d * (1 - cut), d * cut
    lam = zero_truncated_poisson_rate(b / h)
    inner, halo = reach_fractions(t, d, cut, h, 1)
    assert inner == pytest.approx(t * (1 + a), rel=1e-5) and halo == pytest.approx(t * b / h, rel=1e-5)
    # two hops: the inner nodes two inner steps away, and those behind a halo node (lambda more
    # edges into the part each, the size-biased count, not m - 1); the halo behind one-hop nodes
    inner, halo = reach_fractions(t, d, cut, h, 2)
    assert inner == pytest.approx(t * (1 + a + a * a + b * lam), rel=1e-5)
    assert halo == pytest.approx(t * (1 + a) * b / h, rel=1e-5)
    assert lam > b / h - 1
    # more hops reach more, up to everything where the degree is well above 1 ...
    shares = [reach_fractions(0.01, 20, 0.5, 3.0, k) for k in range(12)]
    assert all(x[0] <= y[0] + 1e-12 and x[1] <= y[1] + 1e-12 for x, y in zip(shares, shares[1:]))
    assert shares[-1][0] > 0.999 and shares[-1][1] > 0.999
    # ... and only the seeds' finite trees where it is below 1
    assert reach_fractions(0.01, 0.5, 0.2, 0.1, 200)[0] < 0.03
    # no halo kept: no halo reached, the inner trees alone
    one_hop = 1 - 0.95 * math.exp(-a * 0.05)
    assert reach_fractions(0.05, d, cut, 0.0, 2) == (pytest.approx(1 - 0.95 * math.exp(-a * one_hop)), 0.0)


def test_reach_fractions_match_a_random_graph_on_a_random_partition():
    # the loader's reach (in-edge steps from the seeds over the inner nodes and the kept halo)
    # on a random graph cut at random: the estimate's assumptions hold, so it matches
    rng = np.random.default_rng(3)
    n, d, p, t = 100_000, 4, 4, 0.1
    u, v = rng.integers(0, n, n * d // 2), rng.integers(0, n, n * d // 2)
    u, v = u[u != v], v[u != v]
    src, dst = np.concatenate([u, v]), np.concatenate([v, u])
    owner = rng.integers(0, p, n)
    inner, train = owner == 0, rng.random(n) < t
    into = inner[dst]
    halo = np.zeros(n, dtype=bool)
    halo[src[into & ~inner[src]]] = True
    local = into | (inner[src] & halo[dst])  # a part's in-edges, and its edges into the halo
    s, e = src[local], dst[local]
    reached = train & inner
    frontier = reached.copy()
    cut = float((owner[src] != owner[dst]).mean())
    for hops in (1, 2, 3):
        step = np.zeros(n, dtype=bool)
        step[s[frontier[e]]] = True
        frontier = step & ~reached
        reached |= frontier
        est = reach_fractions(float(train[inner].mean()), src.size / n, cut, halo.sum() / inner.sum(), hops)
        assert est[0] == pytest.approx(reached[inner].mean(), rel=0.05)
        assert est[1] == pytest.approx(reached[halo].mean(), rel=0.05)
