"""Heterogeneous graphs (``data.name: hetsynth``, ``model.name: rgcn``): the generator, DGL partitions, a
worker's local heterograph, RGCN, learnable rows of the featureless types, and both systems end to end.

The in-process tests (``unit``) check the rules on a real 2-part METIS partitioning of a small
hetsynth graph (3 node types, 6 relations): the graph is a pure function of its seed, every
relation has its reverse, features sit on the featured types only and the relations carry the
label; a worker's local heterograph holds every in-edge of its inner nodes, relation by relation,
and its rows are the whole graph's (halo rows read once); the per-relation first-hop aggregates
are the whole graph's means; RGCN on full-fan-out blocks, and with the aggregates in place of its
first-hop relations from papers, is the whole graph's RGCN; the featureless types' own rows learn
locally while the halo's stay frozen (``model.embed_halo_sync=0``); the kept halo's in-edges from
featureless types are completed from their owners once (``train.halo_in_edges``); the config's
one-line errors. Spawned workers check that a halo sync moves every row by the mean change of the
workers holding it, with the bytes it counts. The end-to-end tests train real spawned workers
(2 parts, 4 epochs) well above chance with only gradients and the synced halo rows on the
network, resume the rows bit for bit, and run ``compare`` against DistDGL (``DistNodeDataLoader``
on papers, ``DistEmbedding`` per featureless type) and the drop-in (``GrappaHeteroLoader``), which
needs private namespaces (root) and skips where there are none.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dgl
import numpy as np
import pytest
import torch
from clitools import train

from dgl_grappa.cluster.launch import Identity
from dgl_grappa.cluster.testing import run_distributed
from dgl_grappa.config import (
    Config,
    ConfigError,
    DataConfig,
    HetSynthConfig,
    ModelConfig,
    PartitionConfig,
    load_config,
)
from dgl_grappa.kinds import resolve
from dgl_grappa.kinds.hetero import HeteroRuntime
from dgl_grappa.method.embedding import initial_rows
from dgl_grappa.method.hetero import HeteroEmbedding, load_local_hetero, type_seed
from dgl_grappa.method.hetero_halo import EDGE_BYTES
from dgl_grappa.method.models import gradient_bytes

ROOT = Path(__file__).resolve().parent.parent
CONFIG = str(ROOT / "configs" / "hetero.yaml")
SIZE = ["--data.hetsynth.num_papers=1500", "--data.hetsynth.num_authors=800", "--data.hetsynth.num_fields=50"]
SMALL = SIZE + [
    "--model.hidden=16",
    "--model.embed_dim=16",
    "--train.batch_size=300",
    "--train.fanouts=[5,5]",
    "--train.eval_every=1",
    "--run.timeout_s=300",
]
SMALL_GRAPH = HetSynthConfig(num_papers=1500, num_authors=800, num_fields=50)
CHANCE = 1 / 8  # 8 balanced classes
PER_STEP_OVERHEAD = 4096  # TCP/IP headers of the ring's messages, per step (as in test_distdgl)


def _graph(cfg: HetSynthConfig = SMALL_GRAPH) -> dgl.DGLGraph:
    from dgl_grappa.data import load_dataset

    return load_dataset(DataConfig(name="hetsynth", hetsynth=cfg))


def _ck(path: Path) -> dict:
    return torch.load(path, weights_only=True)


# ---------------------------------------------------------------------------------------
# In process: the graph, the partitions, the local view, the model
# ---------------------------------------------------------------------------------------


@pytest.mark.unit
def test_the_generated_graph_has_three_types_six_relations_with_reverses_and_a_label_signal():
    g = _graph()
    assert sorted(g.ntypes) == ["author", "field", "paper"] and len(g.canonical_etypes) == 6
    edges = {e[1]: g.edges(etype=e) for e in g.canonical_etypes}
    for fwd, rev in (("writes", "written_by"), ("cites", "cited_by"), ("has_topic", "topic_of")):
        a = sorted(zip(*(t.tolist() for t in edges[fwd])))
        b = sorted(zip(*(t.tolist() for t in reversed(edges[rev]))))
        assert a == b and a, fwd  # every relation's reverse holds the same pairs
    assert [t for t in g.ntypes if "feat" in g.nodes[t].data] == ["paper"]
    assert {"label", "train_mask", "val_mask", "test_mask"} <= set(g.nodes["paper"].data)
    assert not g.nodes["author"].data and not g.nodes["field"].data
    masks = torch.stack([g.nodes["paper"].data[k] for k in ("train_mask", "val_mask", "test_mask")])
    assert bool((masks.sum(0) == 1).all())  # disjoint and covering
    # a pure function of the seed
    again, other = _graph(), _graph(HetSynthConfig(num_papers=1500, num_authors=800, num_fields=50, seed=1))
    for e in g.canonical_etypes:
        assert all(torch.equal(x, y) for x, y in zip(g.edges(etype=e), again.edges(etype=e)))
    assert torch.equal(g.nodes["paper"].data["feat"], again.nodes["paper"].data["feat"])
    assert not torch.equal(g.nodes["paper"].data["label"], other.nodes["paper"].data["label"])
    # the relations carry the label: papers two hops apart through an author share their class far above chance
    label = g.nodes["paper"].data["label"]
    a, p = g.edges(etype="writes")
    pairs = [(x, y) for ps in _group(a, p).values() for x in ps for y in ps if x < y]
    same = float(np.mean([int(label[x] == label[y]) for x, y in pairs]))
    assert same > 2 * CHANCE, same
    # features on other types too, when asked for
    assert (
        "feat"
        in _graph(HetSynthConfig(num_papers=100, num_authors=50, num_fields=10, feat_types=["paper", "field"]))
        .nodes["field"]
        .data
    )


def _group(keys: torch.Tensor, values: torch.Tensor) -> dict:
    out: dict = {}
    for k, v in zip(keys.tolist(), values.tolist()):
        out.setdefault(k, []).append(v)
    return out


@pytest.mark.unit
def test_one_line_config_errors_name_the_key():
    def error(*overrides, config=CONFIG):
        with pytest.raises(ConfigError) as exc:
            resolve(load_config(config, list(overrides)))  # the config tree's rules, then the kind's
        msg = str(exc.value)
        assert "\n" not in msg
        return msg

    assert error("--data.target=venue").startswith("data.target='venue' is not a node type of data.name=hetsynth")
    assert error("--data.target=author").startswith("data.target=author has no labels")
    assert "--data.target=paper" in error("--data.target=author")
    assert error("--data.etypes=[cites,likes]").startswith("data.etypes entry 'likes' is not a relation of the graph")
    msg = error("--model.embed=false")
    assert msg.startswith("node types author, field of data.name=hetsynth have no features, so model.embed=false")
    assert "--model.embed=true" in msg
    assert "--model.name=rgcn" in error("--model.name=sage")
    assert "--data.name=hetsynth" in error("--model.name=rgcn", config=None)
    assert error("--data.target=paper", config=None).startswith("data.target / data.etypes name node and edge types")
    assert error("--data.hetsynth.feat_types=[venue]").startswith("data.hetsynth.feat_types entry 'venue'")
    for bad, fix in (
        ("--train.task=link", "--train.task=node"),
        ("--grappa.correction=batch", "--grappa.correction=none"),
        ("--schedule.k=2", "--schedule.k=0"),
        ("--run.floor=true", "--run.floor=false"),
        ("--train.mode=fullgraph", "--train.mode=minibatch"),
    ):
        assert fix in error(bad), bad
    # all types featured: no learnable rows needed; a subset of relations: only their types need inputs
    all_featured = ["--model.embed=false", "--data.hetsynth.feat_types=[paper,author,field]"]
    assert not load_config(CONFIG, all_featured).model.embed
    assert load_config(CONFIG, ["--model.embed=false", "--data.etypes=[cites,cited_by]"]).data.etypes
    cfg = load_config(CONFIG, ["--train.first_hop=exact"])
    assert cfg.hetero and cfg.first_hop == "exact"  # per relation from a featured type; with learnable rows too
    assert load_config(CONFIG, ["--train.first_hop=sampled"]).first_hop == "sampled"


@pytest.mark.unit
def test_the_partition_fingerprint_of_a_homogeneous_run_is_unchanged():
    from dgl_grappa.partition.store import partition_fingerprint

    fp = partition_fingerprint(Config())
    assert not {"hetsynth", "target", "etypes"} & set(fp["data"])  # cached folders and benchmark hashes stay valid
    het = partition_fingerprint(load_config(CONFIG, []))
    assert het["data"]["hetsynth"]["num_papers"] == 6000 and "synthetic" not in het["data"]


@pytest.fixture(scope="module")
def het_parts(tmp_path_factory):
    """The small hetsynth graph cut into 2 METIS parts with DGL's partition_graph (in this process)."""
    from dgl_grappa.partition.store import partition

    g = _graph()
    return g, partition(g, PartitionConfig(num_parts=2), tmp_path_factory.mktemp("hetero"))


def _orig(stats: dict, ntype: str) -> torch.Tensor:
    return torch.from_numpy(np.load(Path(stats["part_config"]).parent / f"orig_ids.{ntype}.npy"))


@pytest.mark.unit
def test_the_partitioning_is_dgls_layout_with_per_type_statistics(het_parts):
    g, stats = het_parts
    meta = json.loads(Path(stats["part_config"]).read_text())
    assert set(meta["node_map"]) == set(g.ntypes) and len(meta["etypes"]) == 6
    h = stats["hetero"]
    assert h["target"] == "paper" and h["featured"] == ["paper"] and len(h["etypes"]) == 6
    assert stats["num_nodes"] == g.num_nodes() and stats["num_edges"] == g.num_edges()
    assert sum(stats["train_nodes"]) == int(g.nodes["paper"].data["train_mask"].sum())
    assert 0 < stats["edge_cut"] < 0.5 and all(n > 0 for n in stats["halo_nodes"])
    for t in g.ntypes:
        assert sorted(_orig(stats, t).tolist()) == list(range(g.num_nodes(t)))  # a permutation per type
        assert sum(h["inner_nodes"][t]) == g.num_nodes(t)


@pytest.mark.unit
@pytest.mark.parametrize("method", ["random", "ldg"])
def test_random_and_ldg_cut_the_heterograph_through_dgl_too(tmp_path, method):
    from dgl_grappa.partition.store import partition

    g = _graph()
    stats = partition(g, PartitionConfig(num_parts=2, method=method), tmp_path / method)
    assert stats["method"] == method and sorted(stats["hetero"]["ntypes"]) == ["author", "field", "paper"]
    assert sum(stats["inner_nodes"]) == g.num_nodes() and min(stats["train_nodes"]) > 0
    assignment = np.load(tmp_path / method / "assignment.npy")
    assert assignment.shape == (g.num_nodes(),) and set(assignment.tolist()) == {0, 1}
    if method == "ldg":  # a locality-preserving cut: far below random's
        assert stats["edge_cut"] < 0.4, stats["edge_cut"]


@pytest.mark.unit
@pytest.mark.parametrize("halo", ["keep", "drop"])
def test_a_workers_local_heterograph_holds_its_nodes_in_edges_and_the_whole_graphs_rows(het_parts, halo):
    from dgl_grappa.method.hetero import load_local_hetero

    g, stats = het_parts
    orig = {t: _orig(stats, t) for t in g.ntypes}
    for part in range(2):
        lp = load_local_hetero(stats["part_config"], part, halo)
        assert lp.target == "paper" and lp.bare_types == ["author", "field"]
        n_in = lp.num_inner_by_type
        # features: own and halo rows equal the whole graph's (halo rows read once from their owners)
        mine = orig["paper"][lp.global_ids["paper"]]
        assert torch.equal(lp.feat["paper"].full(), g.nodes["paper"].data["feat"][mine])
        assert torch.equal(lp.label, g.nodes["paper"].data["label"][mine[: n_in["paper"]]])
        assert bool(g.nodes["paper"].data["train_mask"][mine[lp.train_ids]].all())
        n_halo = lp.graph.num_nodes("paper") - n_in["paper"]
        assert lp.one_time_bytes == n_halo * 32 * 4 and (n_halo > 0) == (halo == "keep")
        for e in g.canonical_etypes:  # relation by relation: the same edges as the whole graph's, in global ids
            s, d = lp.graph.edges(etype=e)
            local = set(zip(orig[e[0]][lp.global_ids[e[0]][s]].tolist(), orig[e[2]][lp.global_ids[e[2]][d]].tolist()))
            whole = set(zip(*(x.tolist() for x in g.edges(etype=e))))
            assert local <= whole
            inner_dst = orig[e[2]][lp.global_ids[e[2]][: n_in[e[2]]]]
            full_in = int(g.in_degrees(inner_dst, etype=e).sum())
            got = int((d < n_in[e[2]]).sum())
            if halo == "keep":
                assert got == full_in, e  # every in-edge of an inner node, from inner and halo nodes
            else:
                assert got <= full_in and bool((s < n_in[e[0]]).all())


@pytest.mark.unit
def test_the_halos_in_edges_from_featureless_types_are_completed_from_their_owners_once(het_parts):
    g, stats = het_parts
    orig = {t: _orig(stats, t) for t in g.ntypes}
    bare = [e for e in g.canonical_etypes if e[0] in ("author", "field")]
    for part in range(2):
        plain = load_local_hetero(stats["part_config"], part, "keep", first_hop="exact")
        lp = load_local_hetero(stats["part_config"], part, "keep", first_hop="exact", halo_in_edges="featureless")
        done = lp.keep["halo_in_edges"]
        papers = orig["paper"][lp.global_ids["paper"]]
        for e in bare:  # every local paper, halo ones too, has all its authors and fields, as in the whole graph
            s, d = lp.graph.edges(etype=e)
            local = set(zip(orig[e[0]][lp.global_ids[e[0]][s]].tolist(), papers[d].tolist()))
            src, dst = g.in_edges(papers, etype=e)
            assert local == set(zip(src.tolist(), dst.tolist())), e
        halo_papers = papers[plain.num_inner_by_type["paper"] :]
        assert int(g.in_degrees(halo_papers, etype=bare[0]).sum()) > int(
            plain.graph.in_degrees(etype=bare[0])[plain.num_inner_by_type["paper"] :].sum()
        )  # the part lacked some
        # every other relation, the papers' features and the aggregates are the plain part's
        for e in g.canonical_etypes:
            if e not in bare:
                assert lp.graph.num_edges(e) == plain.graph.num_edges(e), e
        assert torch.equal(lp.feat["paper"].full(), plain.feat["paper"].full())
        # the new sources (authors of halo papers this part did not hold) join the halo with learnable rows only
        added = done["nodes_added"]["author"] + done["nodes_added"]["field"]
        assert added > 0 and added == sum(lp.graph.num_nodes(t) - plain.graph.num_nodes(t) for t in ("author", "field"))
        for e, table in lp.agg.items():
            assert torch.equal(table.full(), plain.agg[e].full()), e  # no aggregate row for them
        assert lp.one_time_bytes == plain.one_time_bytes + done["edges_read"] * EDGE_BYTES
        emb = HeteroEmbedding(lp, 8)
        assert emb.types["author"].halo_rows.shape[0] == lp.graph.num_nodes("author") - lp.num_inner_by_type["author"]
        # a first block of full fan-out over those relations sees every author of every paper it samples for
        cfg = load_config(CONFIG, [*SIZE, "--train.fanouts=[-1,-1]", "--train.batch_size=300"])
        b0 = next(HeteroRuntime(cfg, Identity(part, 2, part), lp).epoch_inputs(0)).graph[0]
        for e in bare:
            dst = papers[b0.dstnodes["paper"].data[dgl.NID]]
            assert int(b0.in_degrees(etype=e).sum()) == int(g.in_degrees(dst, etype=e).sum()) > 0, e


@pytest.mark.unit
def test_per_relation_first_hop_aggregates_are_the_whole_graphs_means_read_once(het_parts):
    from dgl_grappa.method.hetero import load_local_hetero
    from dgl_grappa.partition.hetero import relation_agg_path, relation_means

    g, stats = het_parts
    from_papers = [e for e in g.canonical_etypes if e[0] == "paper"]  # the featured type's relations
    assert sorted(stats["hetero"]["aggregates"]) == sorted(":".join(e) for e in from_papers)
    orig = {t: _orig(stats, t) for t in g.ntypes}
    lp = load_local_hetero(stats["part_config"], 1, "keep", first_hop="exact")
    assert set(lp.agg) == set(from_papers)  # none of learnable rows: they would go stale
    halo_rows = 0
    for e, rows in lp.agg.items():
        whole = relation_means(g, e, g.nodes["paper"].data["feat"])
        assert torch.allclose(rows.full(), whole[orig[e[2]][lp.global_ids[e[2]]]], atol=1e-6), e
        halo_rows += rows.shape[0] - lp.num_inner_by_type[e[2]]
    feat_halo = lp.graph.num_nodes("paper") - lp.num_inner_by_type["paper"]
    assert lp.one_time_bytes == (feat_halo + halo_rows) * 32 * 4  # the halo's features and aggregates, once
    assert lp.memory["agg_halo"] == halo_rows * 32 * 4 and lp.resident_bytes == lp.memory["resident"]
    sampled = load_local_hetero(stats["part_config"], 1, "keep", first_hop="sampled")
    assert not sampled.agg and sampled.one_time_bytes == feat_halo * 32 * 4
    f = relation_agg_path(stats["part_config"], 1, from_papers[0])
    f.rename(f.with_suffix(".bak"))
    try:
        with pytest.raises(ConfigError, match="--train.first_hop=sampled"):
            load_local_hetero(stats["part_config"], 1, "keep", first_hop="exact")
    finally:
        f.with_suffix(".bak").rename(f)


@pytest.mark.unit
@pytest.mark.parametrize("budget", [1.5, 1.0, 0.6])
def test_the_memory_budget_holds_the_featured_tables_of_a_local_heterograph(het_parts, budget):
    """train.memory_budget on real partitions: the paper rows and the relations' aggregates (own and halo) fit
    budget x the part's own paper rows in fp32, in the most exact precision that fits (a halo sample past int4),
    and every stored row is the whole graph's within its precision's bound."""
    from dgl_grappa.method.hetero import load_local_hetero
    from dgl_grappa.method.local_part import Keep
    from dgl_grappa.method.storage import max_error

    g, stats = het_parts
    orig = {t: _orig(stats, t) for t in g.ntypes}
    feats = g.nodes["paper"].data["feat"]
    for part in range(2):
        full = load_local_hetero(stats["part_config"], part, "keep", first_hop="exact")
        assert full.keep["precision"] == "fp32" and full.resident_bytes > 3 * full.own_fp32_bytes  # unbudgeted
        lp = load_local_hetero(
            stats["part_config"],
            part,
            "keep",
            first_hop="exact",
            keep=Keep(reach=1, storage="auto", budget=budget, seed=0),
        )
        assert lp.own_fp32_bytes == full.own_fp32_bytes == lp.part_inner_by_type["paper"] * 32 * 4
        assert lp.resident_bytes <= budget * lp.own_fp32_bytes, (budget, lp.resident_bytes / lp.own_fp32_bytes)
        assert lp.resident_bytes == lp.memory["resident"] and lp.keep["precision"] != "fp32"
        assert lp.keep["budget_bytes"] == budget * lp.own_fp32_bytes
        # every own author and field stays (their learnable rows are trained here); every seed stays
        for t in ("author", "field"):
            assert lp.num_inner_by_type[t] == lp.part_inner_by_type[t] == full.num_inner_by_type[t]
        seeds = orig["paper"][lp.global_ids["paper"][lp.train_ids]]
        assert torch.equal(seeds.sort().values, orig["paper"][full.global_ids["paper"][full.train_ids]].sort().values)
        # rows: the whole graph's, within the stored precision's bound
        mine = orig["paper"][lp.global_ids["paper"]]
        bound = max_error(feats[mine], lp.keep["precision"])
        assert bool(((lp.feat["paper"].full() - feats[mine]).abs() <= bound[:, None] + 1e-7).all())
        halo_feat = lp.graph.num_nodes("paper") - lp.num_inner_by_type["paper"]
        assert lp.memory["feat_halo"] == halo_feat * lp.feat["paper"].nbytes // max(lp.graph.num_nodes("paper"), 1)
        assert lp.one_time_bytes == lp.memory["feat_halo"] + lp.memory["agg_halo"]  # the halo's rows, once, stored
        if budget < 1.0:  # even int4 does not hold the whole halo: a sample of it, as many as fit
            assert lp.keep["precision"] == "int4" and lp.keep["halo_kept"] < lp.keep["halo_reach"]
    with pytest.raises(ConfigError, match="--train.memory_budget="):
        load_local_hetero(
            stats["part_config"], 0, "keep", first_hop="exact", keep=Keep(reach=1, storage="auto", budget=0.05)
        )


@pytest.mark.unit
@pytest.mark.parametrize("first_hop", ["exact", "sampled"])
def test_what_the_seeds_reach_is_all_a_workers_trees_need(het_parts, first_hop):
    """Keeping only the nodes the seeds' trees reach changes no tree: RGCN on full-fan-out blocks of the seeds gives
    the same rows on the pruned local heterograph as on the whole part (fp32, no budget)."""
    from dgl_grappa.method.embedding import initial_rows
    from dgl_grappa.method.hetero import HeteroFeatures, load_local_hetero
    from dgl_grappa.method.local_part import Keep
    from dgl_grappa.method.rgcn import build_rgcn

    g, stats = het_parts
    exact = first_hop == "exact"
    full = load_local_hetero(stats["part_config"], 0, "keep", first_hop=first_hop)
    lp = load_local_hetero(
        stats["part_config"], 0, "keep", first_hop=first_hop, keep=Keep(reach=1 if exact else 2, storage="fp32")
    )
    assert lp.keep["precision"] == "fp32" and lp.keep["halo_kept"] == lp.keep["halo_reach"]
    assert lp.graph.num_nodes() <= full.graph.num_nodes()
    torch.manual_seed(0)
    model = build_rgcn(
        ModelConfig(name="rgcn", hidden=16, num_layers=2),
        {"paper": 32, "author": 8, "field": 8},
        8,
        g.canonical_etypes,
        "paper",
    ).eval()

    def out(part):
        first = {e: 0 if e in part.agg else -1 for e in part.graph.canonical_etypes}
        seeds = part.train_ids
        inputs, _, blocks = dgl.dataloading.NeighborSampler([first, -1], fused=False).sample(
            part.graph, {"paper": seeds}
        )
        x = HeteroFeatures(part.feat).gather(inputs)
        for t in ("author", "field"):
            x[t] = initial_rows(part.global_ids[t][inputs[t]], 8, 0)
        agg = {e: part.agg[e].gather(inputs[e[2]][: blocks[0].num_dst_nodes(e[2])]) for e in part.agg}
        rows = model(blocks, x, agg=agg or None)
        return dict(zip(part.global_ids["paper"][seeds].tolist(), rows))

    a, b = out(full), out(lp)
    assert a.keys() == b.keys()
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)


@pytest.mark.unit
def test_rgcn_with_exact_first_hop_relations_is_the_whole_graphs_rgcn(het_parts):
    from dgl_grappa.method.rgcn import build_rgcn
    from dgl_grappa.partition.hetero import relation_means

    g, _ = het_parts
    torch.manual_seed(0)
    x = {
        "paper": g.nodes["paper"].data["feat"],
        "author": torch.randn(g.num_nodes("author"), 8),
        "field": torch.randn(g.num_nodes("field"), 8),
    }
    model = build_rgcn(
        ModelConfig(name="rgcn", hidden=16, num_layers=2),
        {"paper": 32, "author": 8, "field": 8},
        8,
        g.canonical_etypes,
        "paper",
    ).eval()
    whole = model(g, x)
    exact = [e for e in g.canonical_etypes if e[0] == "paper"]
    # the first block samples only the relations from featureless types (here all of their edges); not fused: see
    # kinds.hetero.HeteroRuntime
    first = {e: 0 if e in exact else -1 for e in g.canonical_etypes}
    seeds = torch.arange(0, g.num_nodes("paper"), 7)
    inputs, _, blocks = dgl.dataloading.NeighborSampler([first, -1], fused=False).sample(g, {"paper": seeds})
    assert all(blocks[0].num_edges(e) == 0 for e in exact)
    agg = {e: relation_means(g, e, x["paper"])[inputs[e[2]][: blocks[0].num_dst_nodes(e[2])]] for e in exact}
    out = model(blocks, {t: x[t][inputs[t]] for t in inputs}, agg=agg)
    assert torch.allclose(out, whole[seeds], atol=1e-5)


@pytest.mark.unit
def test_rgcn_on_full_fanout_blocks_is_the_whole_graphs_rgcn(het_parts):
    from dgl_grappa.method.rgcn import build_rgcn

    g, _ = het_parts
    torch.manual_seed(0)
    dims = {"paper": 32, "author": 8, "field": 8}
    x = {
        "paper": g.nodes["paper"].data["feat"],
        "author": torch.randn(g.num_nodes("author"), 8),
        "field": torch.randn(g.num_nodes("field"), 8),
    }
    model = build_rgcn(ModelConfig(name="rgcn", hidden=16, num_layers=2), dims, 8, g.canonical_etypes, "paper").eval()
    whole = model(g, x)
    seeds = torch.arange(0, g.num_nodes("paper"), 7)
    inputs, _, blocks = dgl.dataloading.NeighborSampler([-1, -1]).sample(g, {"paper": seeds})
    out = model(blocks, {t: x[t][inputs[t]] for t in inputs})
    assert torch.allclose(out, whole[seeds], atol=1e-5)
    assert gradient_bytes(model) > 0


@pytest.mark.unit
def test_featureless_types_learn_their_own_rows_locally_and_keep_the_halo_frozen(het_parts):
    from dgl_grappa.method.embedding import initial_rows
    from dgl_grappa.method.hetero import (
        HeteroEmbedding,
        HeteroFeatures,
        TargetSeeds,
        load_local_hetero,
        type_seed,
    )

    _, stats = het_parts
    lp = load_local_hetero(stats["part_config"], 0, "keep")
    emb = HeteroEmbedding(lp, 8, seed=3)
    opt = emb.optimizer(lr=0.1)
    a = emb.types["author"]
    start = a.own.weight.detach().clone()
    assert torch.equal(start, initial_rows(lp.global_ids["author"][: a.num_inner], 8, type_seed(3, "author")))
    sampler = TargetSeeds(dgl.dataloading.NeighborSampler([-1]), "paper")
    inputs, _, _ = sampler.sample(lp.graph, lp.train_ids[:200])
    x = emb(HeteroFeatures(lp.feat).gather(inputs))
    assert x["author"].shape == (inputs["author"].numel(), 8) and x["paper"].shape[1] == 32
    opt.zero_grad()
    (x["author"].sum() + x["field"].sum()).backward()
    opt.step()
    ids = inputs["author"]
    own, halo = ids[ids < a.num_inner], ids[ids >= a.num_inner]
    assert own.numel() and halo.numel()
    assert not torch.equal(a.own.weight[own], start[own])  # trained here
    frozen = initial_rows(lp.global_ids["author"][halo], 8, type_seed(3, "author"))
    assert torch.equal(a(halo), frozen)  # the halo's rows: their owner's initial rows, never updated
    assert emb.take_bytes()[0] == 0  # no remote path
    m = emb.memory()
    assert m["embed_inner"] == sum(e.num_inner for e in emb.types.values()) * 8 * 4
    assert m["embed"] == 3 * m["embed_inner"] + m["embed_halo"]
    # a checkpoint's shard restores every type's rows and the optimizer bit for bit
    shard = emb.shard_state(opt)
    other = HeteroEmbedding(lp, 8, seed=3)
    other_opt = other.optimizer(lr=0.1)
    other.load_shard(shard, other_opt)
    for t in emb.types:
        assert torch.equal(other.types[t].own.weight, emb.types[t].own.weight)
    with pytest.raises(ConfigError, match="other node types"):
        other.load_shard({"types": {}, "optimizer": shard["optimizer"]}, other_opt)


def _sync_worker(rank, world_size, part_config, out):
    lp = load_local_hetero(part_config, rank, "keep")
    emb = HeteroEmbedding(lp, 8, seed=3, sync_every=2)
    assert all(p.requires_grad for p in emb.parameters()) and len(list(emb.parameters())) == 4  # own and halo rows

    def state():
        return {
            t: (e.global_ids.clone(), torch.cat([e.own.weight, e.halo_rows]).detach().clone())
            for t, e in emb.types.items()
        }

    seen = []
    for epoch in range(5):
        with torch.no_grad():  # "training": own rows and every third halo copy move, by amounts rank and epoch fix
            for e in emb.types.values():
                e.own.weight[::2] += 0.01 * (epoch + 1) * (rank + 1)
                e.halo_rows[::3] -= 0.02 * (epoch + 1) * (rank + 1)
        before = state()
        got = emb.sync_halo(epoch)
        seen.append(
            {
                "epoch": epoch,
                "got": got,
                "bytes": emb.take_bytes()[0],
                "before": before,
                "after": state(),
                "inner": {t: e.num_inner for t, e in emb.types.items()},
            }
        )
    torch.save(seen, Path(out) / f"sync{rank}.pt")


def test_a_sync_moves_each_row_by_the_mean_change_of_the_workers_that_hold_it(het_parts, tmp_path):
    _, stats = het_parts
    run_distributed(_sync_worker, 2, stats["part_config"], str(tmp_path), timeout_s=180)
    seen = [torch.load(tmp_path / f"sync{r}.pt", weights_only=False) for r in range(2)]

    def by_gid(rec, t, rows_of):
        gids, rows = rec[rows_of][t]
        return dict(zip(gids.tolist(), rows))

    # every row starts as its owner's initial row (halo copies included): the first sync's starting point
    base = {
        r: {t: dict(zip(g.tolist(), initial_rows(g, 8, type_seed(3, t)))) for t, (g, _) in seen[r][0]["before"].items()}
        for r in range(2)
    }
    synced = 0
    for epoch in range(5):
        due = epoch in (2, 4)  # every 2 epochs from epoch 2 on
        for r in range(2):
            rec, other = seen[r][epoch], seen[1 - r][epoch]
            for t in rec["before"]:
                n_in = rec["inner"][t]
                gids, rows = rec["after"][t]
                if not due:  # nothing moves
                    assert torch.equal(rows, rec["before"][t][1]), (epoch, t)
                    continue
                mine, theirs = by_gid(rec, t, "before"), by_gid(other, t, "before")
                for i, g in enumerate(gids.tolist()):
                    owner = r if i < n_in else 1 - r
                    start = base[owner][t][g]
                    changes = [x - start for x in (mine[g], theirs.get(g)) if x is not None]
                    moved = [c for c in changes if bool((c != 0).any())]
                    want = start + (sum(moved) / len(moved) if moved else 0)
                    assert torch.allclose(rows[i], want, atol=1e-6), (epoch, t, g)
                    synced += int(len(moved) == 2)
        if due:  # the rows after the sync are the next changes' starting point
            base = {r: {t: by_gid(seen[r][epoch], t, "after") for t in seen[r][epoch]["after"]} for r in range(2)}
        for r in range(2):
            rec = seen[r][epoch]
            # what a sync moves to this worker: the other's changes of the rows it owns and its own halo rows, 8 wide
            # in fp32; the first one also the other worker's halo ids (16 bytes each, once) and the two counts
            halo = {
                q: sum(g.numel() - seen[q][epoch]["inner"][t] for t, (g, _) in seen[q][epoch]["before"].items())
                for q in range(2)
            }
            rows_bytes = (halo[r] + halo[1 - r]) * 8 * 4 if due else 0
            once = halo[1 - r] * 16 + 2 * 8 if epoch == 2 else 0
            assert rec["got"] == rec["bytes"] == rows_bytes + once, epoch
    assert synced > 0  # rows both workers changed were averaged


# ---------------------------------------------------------------------------------------
# Native runtime: spawned workers
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def straight(tmp_path_factory, namespaces_missing):
    """4 epochs in one go (a checkpoint every 2), in a private network namespace where possible."""
    out = tmp_path_factory.mktemp("het-straight")
    isolated = namespaces_missing is None
    s = train(
        out,
        *SMALL,
        "--train.epochs=4",
        "--checkpoint.every=2",
        "--checkpoint.keep_last=3",
        f"--network.isolate={str(isolated).lower()}",
        config=CONFIG,
    )
    return out, s, isolated


def test_native_rgcn_trains_the_heterogeneous_graph_and_moves_gradients_and_synced_halo_rows(straight):
    out, s, isolated = straight
    h = s["hetero"]
    assert h["target"] == "paper" and len(h["ntypes"]) == 3 and len(h["etypes"]) == 6
    assert h["featureless"] == ["author", "field"] and s["first_hop"] == "exact"
    assert s["test_acc"] > 3 * CHANCE, s["test_acc"]
    assert s["feature_bytes_per_epoch"] == 0
    assert s["grad_bytes_per_epoch"] == s["steps_per_epoch"] * s["model_grad_bytes"]
    # model.embed_halo_sync=1: from epoch 1 on every epoch's sync moves each worker's halo rows of authors and
    # fields (16 wide, fp32) twice: their changes to the owners, the averaged rows back
    halo = [w["hetero"]["halo_by_type"]["author"] + w["hetero"]["halo_by_type"]["field"] for w in s["workers"]]
    assert s["embed_bytes_per_epoch"] == 2 * sum(halo) * 16 * 4
    assert s["app_bytes_per_epoch"] == 2 * s["grad_bytes_per_epoch"] + s["embed_bytes_per_epoch"]  # gloo's ring of 2
    assert 0 < h["budgeted_ratio_max"] <= 1.5 and s["resident_ratio_max"] > h["budgeted_ratio_max"]
    records = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]
    assert records[0]["embed_bytes"] == 0 and all(r["embed_bytes"] > 0 for r in records[1:])
    assert all(r["local_embed_bytes"] > 0 for r in records)
    for w in s["workers"]:  # every table: paper features, the relations' aggregates, author and field rows, moments
        m = w["memory"]
        assert m["feat_inner"] > 0 and m["feat_halo"] > 0 and set(m["embed_by_type"]) == {"author", "field"}
        assert len(m["agg_by_relation"]) == 4 and m["agg_inner"] > 0 and m["agg_halo"] > 0  # the relations from papers
        # the halo's copies are trained too (Adam moments), and the sync keeps every row as it was at the last one
        assert m["embed_optimizer"] == 2 * (m["embed_inner"] + m["embed_halo"])
        assert m["embed_sync"] == m["embed_inner"] + m["embed_halo"]
        assert m["embed"] == m["embed_inner"] + m["embed_optimizer"] + m["embed_halo"] + m["embed_sync"]
        assert w["resident_bytes"] == m["feat_inner"] + m["feat_halo"] + m["agg_inner"] + m["agg_halo"] + m["embed"]
        # the budget (1.5) holds the paper rows and the aggregates against the own paper rows in fp32; the
        # learnable rows are outside it, counted as model.embed counts them
        assert m["budgeted_bytes"] == m["feat_inner"] + m["feat_halo"] + m["agg_inner"] + m["agg_halo"]
        assert m["budgeted_bytes"] <= 1.5 * m["budget_unit_bytes"] and m["precision"] != "fp32"
        assert w["own_fp32_bytes"] == m["budget_unit_bytes"] + m["embed_inner"]
        # once: the halo's paper rows and aggregates, and the halo's in-edges from authors and fields (16 bytes each)
        edges = w["hetero"]["halo_in_edges"]
        assert edges["edges_read"] > 0 and edges["one_time_bytes"] == 16 * edges["edges_read"]
        assert w["one_time_bytes"] == m["feat_halo"] + m["agg_halo"] + edges["one_time_bytes"]
        assert sum(w["hetero"]["inner_by_type"].values()) == w["inner_nodes"]


def test_native_rgcn_puts_only_gradients_and_synced_halo_rows_on_the_wire(straight, namespaces_missing):
    _, s, isolated = straight
    if not isolated:  # a skip, said in the summary; under CI=true it fails (conftest)
        pytest.skip(f"the wire is measured in a private network namespace, unavailable here: {namespaces_missing}")
    expected = 2 * s["grad_bytes_per_epoch"] + s["embed_bytes_per_epoch"]  # the all-reduce and the syncs
    assert expected <= s["wire_bytes_per_epoch"] <= 1.05 * expected + PER_STEP_OVERHEAD * (s["steps_per_epoch"] + 2)


def test_a_resumed_heterogeneous_run_has_the_same_rows_bit_for_bit(straight, tmp_path):
    out, _, _ = straight
    mid = tmp_path / "ckpt-e000002.pt"
    shutil.copy(out / "checkpoints" / "ckpt-e000002.pt", mid)
    shutil.copy(out / "checkpoints" / "ckpt-e000002.json", mid.with_suffix(".json"))
    resumed = tmp_path / "resumed"
    s = train(
        resumed,
        *SMALL,
        "--train.epochs=4",
        "--checkpoint.every=2",
        f"--checkpoint.resume={mid}",
        f"--partition.out_dir={out / 'partitions' / '0'}",
        config=CONFIG,
    )
    assert s["epochs"] == 4
    a, b = _ck(out / "checkpoints" / "ckpt-e000004.pt"), _ck(resumed / "checkpoints" / "ckpt-e000004.pt")
    for ra, rb in zip(a["ranks"], b["ranks"]):
        ta, tb = ra["shard"]["embedding"]["types"], rb["shard"]["embedding"]["types"]
        assert set(ta) == {"author", "field"}
        for t in ta:
            assert torch.equal(ta[t]["weight"], tb[t]["weight"]), t
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k


# ---------------------------------------------------------------------------------------
# DistDGL: one `compare` (needs root for the namespaces)
# ---------------------------------------------------------------------------------------

COMPARE = """
name: hetero-small
data:
  name: hetsynth
  hetsynth: {{num_papers: 1500, num_authors: 800, num_fields: 50}}
partition: {{num_parts: 2, method: metis, out_dir: {parts}}}
model: {{name: rgcn, num_layers: 2, hidden: 16, embed: true, embed_dim: 16, embed_lr: 0.05, dropout: 0.2}}
train: {{epochs: 4, batch_size: 300, fanouts: [5, 5], lr: 0.01, eval_every: 1}}
compare: {{variants: [none], dropin: true}}
run: {{output_dir: {out}, timeout_s: 300, progress: false}}
"""


@pytest.fixture(scope="module")
def compared(compare_run):
    """distdgl (DistNodeDataLoader, a DistEmbedding per featureless type), grappa-none and distdgl-grappa
    (GrappaHeteroLoader) on one hetsynth graph."""
    out, _, sums = compare_run
    return out, sums


def test_distdgl_pulls_features_and_embedding_rows_of_every_type(compared):
    out, sums = compared
    s = sums["distdgl"]
    records = [json.loads(ln) for ln in (out / "distdgl" / "metrics.jsonl").read_text().splitlines()]
    for r in records:
        assert r["feature_bytes"] > 0  # remote paper rows
        assert r["embed_pull_bytes"] > 0 and r["embed_grad_bytes"] == r["embed_pull_bytes"]  # authors', fields'
    assert s["embed_bytes_per_epoch"] > s["grad_bytes_per_epoch"]
    assert abs(s["wire_bytes_per_epoch"] - s["app_bytes_per_epoch"]) <= 0.10 * s["app_bytes_per_epoch"]
    assert s["test_acc"] > 2 * CHANCE
    ck = _ck(sorted((out / "distdgl" / "checkpoints").glob("ckpt-e*.pt"))[-1])
    for r in ck["ranks"]:
        assert set(r["shard"]["embedding"]["types"]) == {"author", "field"}


@pytest.mark.parametrize("system", ["grappa-none", "distdgl-grappa"])
def test_grappa_and_the_dropin_move_a_fraction_of_distdgls_bytes_on_the_same_partitions(compared, system):
    _, sums = compared
    g, d = sums[system], sums["distdgl"]
    assert g["model_grad_bytes"] == d["model_grad_bytes"]  # the same RGCN
    assert g["feature_bytes_per_epoch"] == 0
    # both sync the halo's author and field rows every epoch (model.embed_halo_sync): those rows' bytes and the
    # gradients' are all that crosses the network
    assert g["embed_bytes_per_epoch"] > 0
    expected = 2 * g["grad_bytes_per_epoch"] + g["embed_bytes_per_epoch"]
    assert expected <= g["wire_bytes_per_epoch"] <= 1.05 * expected + PER_STEP_OVERHEAD * (g["steps_per_epoch"] + 2)
    assert g["wire_bytes_per_epoch"] < 0.5 * d["wire_bytes_per_epoch"]
    assert g["test_acc"] > 3 * CHANCE
    if system == "distdgl-grappa":  # the drop-in inside DistDGL's job: not a row pulled, not a sampling request
        assert g["remote_rows_total"] == 0 and g["rpc_bytes_per_epoch"] == 0
        # + its halo rows, its embeddings
        assert all(w["resident_bytes"] > w["own_fp32_bytes"] > 0 for w in g["workers"])
