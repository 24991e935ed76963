"""What a worker holds: aggregates prepared part by part, stored precisions, the reached nodes, the budget.

Real partitions: DGL's own ``partition_graph`` writes the folder that ``prepare`` completes
(as a user's pipeline would), and ``load_local`` reads it as a worker does.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import dgl
import numpy as np
import pytest
import torch

from dgl_grappa.config import ConfigError, DataConfig, SyntheticConfig, load_config
from dgl_grappa.data import load_dataset
from dgl_grappa.kinds import kind_of
from dgl_grappa.method.local_part import Keep, choose_kept, load_local, positive_sources, reached_nodes
from dgl_grappa.method.sampler import LocalBatches, layer_sampler
from dgl_grappa.method.storage import PRECISIONS, NodeTable, max_error, row_bytes
from dgl_grappa.partition.aggregates import neighbour_mean, prepare, read_prepared

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def dgl_parts(tmp_path_factory):
    """A 2,000-node graph with 5 % labels, cut by plain dgl.distributed.partition_graph (random, 3 parts)."""
    g = load_dataset(DataConfig(name="synthetic", synthetic=SyntheticConfig(num_nodes=2000, avg_degree=8, seed=5)))
    g.ndata["train_mask"] = torch.rand(g.num_nodes(), generator=torch.Generator().manual_seed(0)) < 0.05
    out = tmp_path_factory.mktemp("dglparts")
    dgl.seed(0)
    orig, _ = dgl.distributed.partition_graph(
        g, "users_graph", 3, str(out), num_hops=1, part_method="random", return_mapping=True
    )
    return g, out / "users_graph.json", orig


def _digests(folder: Path) -> dict:
    return {
        str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(folder.rglob("*"))
        if f.is_file()
    }


def test_prepare_completes_a_folder_it_did_not_write(dgl_parts):
    g, part_config, orig = dgl_parts
    folder = part_config.parent
    before = _digests(folder)
    rec = prepare(part_config)
    after = _digests(folder)
    # DGL's files are untouched; only the sidecars and the record are new
    assert {k: v for k, v in after.items() if k in before} == before
    new = sorted(set(after) - set(before))
    assert new == ["grappa_prepare.json"] + sorted(
        f"part{p}/grappa/{n}" for p in range(3) for n in ("agg.npy", "in_degree.npy", "remote_owners.npy")
    )
    # the aggregates and degrees equal the whole graph's
    full = neighbour_mean(g, g.ndata["feat"])
    for p in range(3):
        lp = load_local(part_config, p, "keep", "exact")
        ids = orig[lp.global_ids]
        assert torch.allclose(lp.agg.full(), full[ids], atol=1e-5)
        assert torch.equal(lp.in_degree, g.in_degrees()[ids])
    # (inner node, other owner) pairs, counted independently
    meta = json.loads(part_config.read_text())
    lo = [a for a, _ in meta["node_map"]["_N"]]
    owner_of = torch.from_numpy(
        np.searchsorted(np.array(lo + [g.num_nodes()]), np.arange(g.num_nodes()), side="right") - 1
    )
    new_of_orig = torch.empty_like(orig)
    new_of_orig[orig] = torch.arange(orig.numel())
    src, dst = (new_of_orig[t] for t in g.edges())
    for p in range(3):
        into = (owner_of[dst] == p) & (owner_of[src] != p)
        assert rec["parts"][p]["remote_pairs"] == torch.unique(dst[into] * 3 + owner_of[src[into]]).numel() > 0
    # a second run does nothing
    mtimes = {f: (folder / f).stat().st_mtime_ns for f in new}
    assert prepare(part_config) == rec == read_prepared(part_config)
    assert {f: (folder / f).stat().st_mtime_ns for f in new} == mtimes


def test_prepare_errors_are_one_line(dgl_parts, tmp_path):
    _, part_config, _ = dgl_parts
    with pytest.raises(ConfigError, match="holds no partition json") as e:
        prepare(tmp_path)
    assert "\n" not in str(e.value)
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(ConfigError, match="not a partition json"):
        prepare(tmp_path / "x.json")
    folder = part_config.parent
    os.chmod(folder, 0o555)
    try:
        with pytest.raises(ConfigError, match="read-only") as e:
            prepare(part_config, force=True)
        assert "\n" not in str(e.value)
    finally:
        os.chmod(folder, 0o755)
    with pytest.raises(ConfigError, match="no node data 'nope'"):
        prepare(part_config, feat_key="nope")


@pytest.mark.parametrize("precision", PRECISIONS)
def test_stored_tables_come_back_within_the_stated_error(precision):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(500, 37, generator=gen) * torch.logspace(-3, 3, 500)[:, None]
    x[7] = 0.0  # an all-zero row (int8: scale 1, exact)
    t = NodeTable.store(x, precision)
    back = t.full()
    assert back.dtype == torch.float32 and back.shape == x.shape
    err = (back - x).abs().amax(dim=1)
    assert bool((err <= max_error(x, precision)).all())
    assert torch.equal(back[7], x[7])
    assert t.nbytes == int(row_bytes(37, precision) * 500)
    if precision != "fp32":  # the bound is tight enough to mean something: some row is off
        assert float(err.max()) > 0
    ids = torch.tensor([3, 3, 499, 0])
    assert torch.equal(t.gather(ids), back[ids]) and torch.equal(t[ids], back[ids])


def test_reached_nodes_are_what_sampled_trees_can_contain():
    src, dst = torch.tensor([0, 1, 2, 4, 5]), torch.tensor([1, 2, 3, 3, 4])  # 0->1->2->3, 5->4->3
    assert reached_nodes(src, dst, 7, torch.tensor([3]), 1).nonzero().flatten().tolist() == [2, 3, 4]
    assert reached_nodes(src, dst, 7, torch.tensor([3]), 2).nonzero().flatten().tolist() == [1, 2, 3, 4, 5]
    assert reached_nodes(src, dst, 7, torch.tensor([3]), 0).nonzero().flatten().tolist() == [3]


@pytest.mark.parametrize("halo,first_hop,layers", [("keep", "exact", 3), ("keep", "sampled", 2), ("drop", "exact", 3)])
def test_a_pruned_part_holds_every_row_a_seeds_tree_needs(dgl_parts, halo, first_hop, layers):
    """Batches sampled on the whole local graph never leave the pruned one, and the pruned rows are the same."""
    _, part_config, _ = dgl_parts
    prepare(part_config)
    reach = layers - (1 if first_hop == "exact" else 0)
    full = load_local(part_config, 1, halo, first_hop)
    pruned = load_local(part_config, 1, halo, first_hop, keep=Keep(reach=reach))
    assert pruned.graph.num_nodes() < full.graph.num_nodes()
    pos = {int(g): i for i, g in enumerate(pruned.global_ids)}
    seeds = full.train_ids
    batches = LocalBatches(full.graph, seeds, layer_sampler([4] * layers, first_hop), steps=4, seed=1)
    seen = set()  # local ids of the full view
    for epoch in range(30):
        for input_nodes, _, _ in batches.epoch(epoch):
            seen |= set(input_nodes.tolist())
    mine = torch.tensor(sorted(seen))
    missing = set(full.global_ids[mine].tolist()) - set(pos)
    assert not missing, f"{len(missing)} sampled nodes are not held"
    rows = torch.tensor([pos[int(g)] for g in full.global_ids[mine]])
    assert torch.equal(pruned.feat[rows], full.feat[mine]) and torch.equal(pruned.in_degree[rows], full.in_degree[mine])
    if first_hop == "exact":
        assert torch.equal(pruned.agg[rows], full.agg[mine])
    assert torch.equal(pruned.global_ids[pruned.train_ids].sort().values, full.global_ids[full.train_ids].sort().values)
    # every edge of the pruned graph is an edge of the full local graph
    fe = set(zip(full.global_ids[full.src].tolist(), full.global_ids[full.dst].tolist()))
    assert set(zip(pruned.global_ids[pruned.src].tolist(), pruned.global_ids[pruned.dst].tolist())) <= fe


def test_the_budget_picks_precision_then_samples_the_halo_and_names_the_smallest(dgl_parts):
    _, part_config, _ = dgl_parts
    prepare(part_config)
    whole = load_local(part_config, 0, "keep", "exact")
    own = whole.own_fp32_bytes
    assert whole.resident_bytes == pytest.approx(2 * whole.graph.num_nodes() / whole.num_inner * own, rel=1e-9)
    n, width = whole.graph.num_nodes(), whole.feat.shape[1]
    for precision in ("fp32", "fp16", "int8", "int4"):  # the ladder: the most exact that holds every node
        budget = n * 2 * row_bytes(width, precision) / own * 1.001
        lp = load_local(part_config, 0, "keep", "exact", keep=Keep(storage="auto", budget=budget))
        assert lp.keep["precision"] == precision and lp.keep["halo_kept"] == lp.keep["halo"]
        assert lp.resident_bytes <= budget * own
    # int4 with a sampled halo: as many halo rows as fit, and not one more
    per_row = 2 * row_bytes(width, "int4")
    budget = (whole.num_inner + 0.5 * (n - whole.num_inner)) * per_row / own
    lp = load_local(part_config, 0, "keep", "exact", keep=Keep(storage="auto", budget=budget, seed=3))
    assert lp.keep["precision"] == "int4" and 0 < lp.keep["halo_kept"] < lp.keep["halo"]
    assert lp.resident_bytes <= budget * own < lp.resident_bytes + per_row
    assert lp.memory["resident"] == lp.resident_bytes and lp.memory["feat_halo"] > 0
    again = load_local(part_config, 0, "keep", "exact", keep=Keep(storage="auto", budget=budget, seed=3))
    assert torch.equal(again.global_ids, lp.global_ids)  # the sample is seeded
    # below the own rows in int4: one line naming the smallest budget, which then loads
    with pytest.raises(ConfigError, match=r"--train.memory_budget=([0-9.]+) or more") as e:
        load_local(part_config, 0, "keep", "exact", keep=Keep(storage="auto", budget=0.1))
    assert "\n" not in str(e.value)
    smallest = float(str(e.value).split("--train.memory_budget=")[1].split()[0])
    lp = load_local(part_config, 0, "keep", "exact", keep=Keep(storage="auto", budget=smallest))
    # (the named budget is rounded up to 3 decimals: what it adds holds a few halo rows at most)
    assert lp.keep["halo_kept"] <= 0.001 * own / per_row + 1 and lp.resident_bytes <= smallest * own
    # a byte budget works the same way
    lp = load_local(part_config, 0, "keep", "exact", keep=Keep(storage="auto", budget_bytes=int(budget * own), seed=3))
    assert torch.equal(lp.global_ids, again.global_ids)


def test_the_budget_samples_only_the_halo_nodes_that_no_positive_or_pool_needs(dgl_parts, caplog):
    """choose_kept: required halo nodes (link prediction's positives' sources, the negative pool's) are never sampled
    away; the budget's rest goes to a uniform sample of the others; required ones beyond int4 are kept over the budget
    with a one-line warning that names the budget holding them; every sample says so."""
    _, part_config, _ = dgl_parts
    prepare(part_config)
    lp = load_local(part_config, 1, "keep", "exact")
    n, k, width = lp.graph.num_nodes(), lp.num_inner, lp.feat.shape[1]
    own, per = k * width * 4, 2 * row_bytes(width, "int4")
    halo = torch.arange(k, n)
    required = torch.zeros(n, dtype=torch.bool)
    required[halo[::3]] = True  # a third of the halo must stay
    n_req = int(required.sum())
    room = (n - k - n_req) // 2  # and the budget holds half of the rest besides
    budget = (k + n_req + room + 0.5) * per / own
    args = dict(inner_tables=2, halo_tables=2, part_id=1, top=float(lp.feat.gather(torch.arange(n)).abs().max()))
    with caplog.at_level("WARNING", logger="dgl_grappa"):
        kept, inner, reach, precision = choose_kept(
            lp.src, lp.dst, n, k, lp.train_ids, Keep(storage="auto", budget=budget), width, required=required, **args
        )
    assert precision == "int4" and torch.equal(inner, torch.arange(k)) and torch.equal(reach, halo)
    assert bool(torch.isin(halo[::3], kept).all()) and kept.numel() == k + n_req + room
    assert [r for r in caplog.records if "a uniform sample; every seed kept" in r.getMessage()]
    # extra pool nodes outside the halo take their rows first: the sample shrinks by as many
    kept_x = choose_kept(
        lp.src,
        lp.dst,
        n,
        k,
        lp.train_ids,
        Keep(storage="auto", budget=budget),
        width,
        required=required,
        extra=10,
        **args,
    )[0]
    assert kept_x.numel() == kept.numel() - 10 and bool(torch.isin(halo[::3], kept_x).all())
    # the required ones alone beyond the budget: all kept, one warning line naming the budget that holds them
    caplog.clear()
    small = (k + 0.5 * n_req) * per / own
    with caplog.at_level("WARNING", logger="dgl_grappa"):
        kept_s = choose_kept(
            lp.src, lp.dst, n, k, lp.train_ids, Keep(storage="auto", budget=small), width, required=required, **args
        )[0]
    assert torch.equal(kept_s, torch.cat([torch.arange(k), halo[::3]]))
    [msg] = [r.getMessage() for r in caplog.records if "over the budget" in r.getMessage()]
    assert "\n" not in msg and f"--train.memory_budget={math.ceil((k + n_req) * per / own * 1000) / 1000} " in msg
    # Keep(positives=True): every halo source of an edge into an inner node is required (here: the whole halo)
    pos = positive_sources(lp.src, lp.dst, k, n)
    assert bool(pos[halo].all()) and not bool(pos[:k].any())
    kept_p = choose_kept(
        lp.src, lp.dst, n, k, lp.train_ids, Keep(storage="auto", budget=budget, positives=True), width, **args
    )[0]
    assert torch.equal(kept_p, torch.arange(n))


def test_keep_follows_the_model_depth_and_first_hop():
    cfg = load_config(None, ["--model.num_layers=3", "--train.fanouts=[5,5,5]", "--train.memory_budget=2GB"])
    k = kind_of(cfg).keep(cfg)
    assert (k.reach, k.budget, k.budget_bytes, k.storage) == (2, 0.0, 2 * 10**9, "auto")
    cfg = load_config(None, ["--train.first_hop=sampled", "--grappa.correction=batch", "--grappa.hops=3"])
    assert kind_of(cfg).keep(cfg).reach == 3 and kind_of(cfg).keep(cfg).budget == 1.5


def test_the_prepare_command(dgl_parts, tmp_path, capsys):
    from dgl_grappa import cli

    _, part_config, _ = dgl_parts
    assert cli.main(["prepare", "--part-config", str(part_config.parent)]) == 0
    out = capsys.readouterr().out
    assert "part 2:" in out and "a second run is a no-op" in out
    assert cli.main(["prepare", "--part-config", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dgl_grappa: error:") and "does not exist" in err and "\n" not in err


def test_prepare_gcn_is_graphconvs_symmetric_aggregate(dgl_parts):
    """gcn.npy: sum_u x_u / sqrt(d_out(u) d_in(v)) with full-graph degrees, as GraphConv(norm='both') on the graph."""
    from dgl.nn import GraphConv

    from dgl_grappa.partition.aggregates import load_sidecar

    g, part_config, orig = dgl_parts
    rec = prepare(part_config, gcn=True)
    assert rec["gcn"] is True and all("gcn" in p for p in rec["parts"])
    conv = GraphConv(g.ndata["feat"].shape[1], 3, norm="both", weight=False, bias=False, allow_zero_in_degree=True)
    with torch.no_grad():
        full = conv(g, g.ndata["feat"])  # no weight: the normalised aggregate itself
    meta = json.loads(part_config.read_text())
    for p in range(3):
        lo, hi = meta["node_map"]["_N"][p]
        assert torch.allclose(load_sidecar(part_config, p, what="gcn"), full[orig[lo:hi]], atol=1e-5)
    assert prepare(part_config) == rec  # a plain request is served by the record that has more
