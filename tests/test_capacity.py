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
