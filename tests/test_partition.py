"""Partitions on disk (DGL's layout) and a worker's local view of them."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from dgl_grappa.method.local_part import load_local
from dgl_grappa.partition.assign import edge_cut_stats
from dgl_grappa.partition.layout import read_stats

pytestmark = pytest.mark.unit


def test_layout_and_stats(small_parts):
    g, stats = small_parts
    out = Path(stats["part_config"]).parent
    meta = json.loads(Path(stats["part_config"]).read_text())
    assert meta["num_parts"] == 2 and (out / "part0" / "graph.dgl").is_file()
    assert read_stats(out)["edge_cut"] == stats["edge_cut"]
    # the cut fraction agrees with a direct count over the original edges
    assignment = np.load(out / "assignment.npy")
    src, dst = (t.numpy() for t in g.edges())
    assert stats["edge_cut"] == pytest.approx(float((assignment[src] != assignment[dst]).mean()))
    assert 0 < stats["edge_cut"] < 0.3  # METIS on a 90%-homophilous SBM cuts few edges
    assert sum(stats["inner_nodes"]) == g.num_nodes()


def test_edge_cut_stats_by_hand():
    # path 0-1-2-3 stored both ways, parts {0,1} {2,3}: edges 1->2 and 2->1 are cut
    src = np.array([0, 1, 1, 2, 2, 3])
    dst = np.array([1, 0, 2, 1, 3, 2])
    s = edge_cut_stats(src, dst, np.array([0, 0, 1, 1]), 2)
    assert s["edge_cut"] == pytest.approx(2 / 6)
    assert s["halo_nodes"] == [1, 1] and s["halo_share"] == [0.5, 0.5]


@pytest.mark.parametrize("halo", ["drop", "keep"])
def test_local_view_matches_the_full_graph(small_parts, halo):
    g, stats = small_parts
    out = Path(stats["part_config"]).parent
    orig = torch.from_numpy(np.load(out / "orig_ids.npy"))
    assignment = torch.from_numpy(np.load(out / "assignment.npy"))
    for part in range(2):
        lp = load_local(stats["part_config"], part, halo)
        ids = orig[lp.global_ids]  # original id of every local node
        assert torch.equal(lp.feat.full(), g.ndata["feat"][ids])
        assert torch.equal(lp.in_degree, g.in_degrees()[ids])
        assert torch.equal(lp.label[: lp.num_inner], g.ndata["label"][ids[: lp.num_inner]])
        assert bool((assignment[ids[: lp.num_inner]] == part).all())
        assert torch.equal(g.ndata["train_mask"][ids[lp.train_ids]], torch.ones(lp.train_ids.numel(), dtype=torch.bool))
        # every local edge is an edge of the full graph
        assert bool(g.has_edges_between(ids[lp.src], ids[lp.dst]).all())
        if halo == "drop":
            assert lp.graph.num_nodes() == lp.num_inner and lp.halo_bytes_loaded == 0
        else:
            n_halo = lp.graph.num_nodes() - lp.num_inner
            assert n_halo == stats["halo_nodes"][part]
            assert lp.halo_bytes_loaded == n_halo * g.ndata["feat"].shape[1] * 4
            # inner nodes have their whole in-neighbourhood locally
            assert torch.equal(
                torch.bincount(lp.dst, minlength=lp.graph.num_nodes())[: lp.num_inner], lp.in_degree[: lp.num_inner]
            )


def test_bad_halo_value(small_parts):
    from dgl_grappa.config import ConfigError

    with pytest.raises(ConfigError, match="halo"):
        load_local(small_parts[1]["part_config"], 0, "half")


def test_single_part(small_graph, tmp_path):
    from dgl_grappa.config import PartitionConfig
    from dgl_grappa.partition.store import partition

    stats = partition(small_graph, PartitionConfig(num_parts=1), tmp_path)
    assert stats["edge_cut"] == 0.0 and stats["halo_nodes"] == [0]
    lp = load_local(stats["part_config"], 0, "keep")
    assert lp.num_inner == small_graph.num_nodes() and bool((lp.owner == 0).all())
    assert lp.graph.num_edges() == small_graph.num_edges()


def test_a_partitioning_is_reused_across_new_settings_at_their_default(tmp_path):
    """A folder written before a setting existed matches a config that leaves it at its default;
    a real change of settings into a chosen folder is a one-line error naming the key."""
    from dgl_grappa.config import ConfigError, load_config
    from dgl_grappa.partition.layout import STATS_FILE
    from dgl_grappa.partition.store import ensure_partitions

    out = tmp_path / "parts"
    args = [
        "--data.synthetic.num_nodes=600",
        "--partition.num_parts=2",
        "--partition.method=random",
        f"--partition.out_dir={out}",
    ]
    stats, g = ensure_partitions(load_config(None, args))
    assert g is not None  # partitioned now
    # as written before model-independent data keys were added: drop two of them from the record
    rec = json.loads((out / STATS_FILE).read_text())
    for key in ("homophily", "noise"):
        rec["fingerprint"]["data"]["synthetic"].pop(key)
    (out / STATS_FILE).write_text(json.dumps(rec))
    again, g2 = ensure_partitions(load_config(None, args))
    assert g2 is None and again["part_config"] == stats["part_config"]  # reused, not partitioned again
    with pytest.raises(
        ConfigError,
        match=r"holds a partitioning of another graph or settings "
        r"\(data.synthetic.noise: \(absent\) -> 3.0\)",
    ):
        ensure_partitions(load_config(None, args + ["--data.synthetic.noise=3.0"]))


def test_a_random_partitioning_is_the_seeded_draw_so_every_process_writes_the_same(small_graph, tmp_path):
    """``partition.method=random`` writes ``random_assignment``'s seeded draw (DGL's own random draw is not
    fixed by ``dgl.seed`` from one process to the next), and another seed draws other parts."""
    from dgl_grappa.config import PartitionConfig
    from dgl_grappa.partition.assign import random_assignment
    from dgl_grappa.partition.store import partition

    n = small_graph.num_nodes()
    for seed in (3, 4):
        partition(small_graph, PartitionConfig(num_parts=3, method="random", seed=seed), tmp_path / str(seed))
        assert np.array_equal(np.load(tmp_path / str(seed) / "assignment.npy"), random_assignment(n, 3, seed))
    assert not np.array_equal(random_assignment(n, 3, 3), random_assignment(n, 3, 4))
