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

    cfg = load_config(
        None,
        [
            "--train.batch_size=300",
            "--train.fanouts=[5,10]",
            f"--grappa.correction={correction}",
            "--grappa.lam=0.4",
            "--grappa.w_min=0.2",
            "--train.seed=3",
            "--train.halo=drop",
            f"--train.first_hop={first_hop}",
        ],
    )
    g = cfg.grappa
    native = NodeRuntime(cfg, Identity(rank, world_size, rank), load_local(part_config, rank, "drop", first_hop))
    lp = native.lp

    pg, node, *_ = dgl.distributed.load_partition(part_config, rank)
    core = PartitionLoader(
        pg,
        pg.ndata["inner_node"],
        pg.ndata[dgl.NID],
        node["_N/train_mask"],
        node["_N/in_degree"],
        dgl.dataloading.NeighborSampler(cfg.train.fanouts),
        cfg.train.batch_size,
        make_correction(g.correction, g.lam, g.shrink_target),
        hops=cfg.hops,
        w_min=g.w_min,
        self_loops=g.self_loops,
        seed=cfg.train.seed,
        first_hop=first_hop,
    )

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
    args = (
        pg,
        pg.ndata["inner_node"],
        pg.ndata[dgl.NID],
        node["_N/train_mask"],
        node["_N/in_degree"],
        dgl.dataloading.NeighborSampler([5, 5]),
        100,
    )
    with pytest.raises(ValueError, match="halo='far' is not allowed"):
        PartitionLoader(*args, halo="far")
    with pytest.raises(ValueError, match="grappa.correction=node"):
        PartitionLoader(*args, make_correction("node"))
    with pytest.raises(ValueError, match="first_hop='block' needs num_nodes"):
        PartitionLoader(*args, first_hop="block")


@pytest.mark.unit
def test_loader_options_are_checked_once_and_every_loader_names_an_unknown_keyword():
    """The settings' checks are LoaderOptions' own (a loader's keywords end there before any graph is read), and a
    misspelt keyword is a TypeError that names it and the ones a loader takes."""
    import dataclasses

    from dgl_grappa.method.dropin import GrappaEdgeLoader, GrappaHeteroLoader, GrappaLoader, LoaderOptions

    for bad, match in [
        ({"halo": "far"}, "halo='far' is not allowed; use drop or keep"),
        ({"first_hop": "full"}, "first_hop='full' is not allowed; use sampled, exact or block"),
        ({"aggregate": "max"}, "aggregate='max' is not allowed; use mean or gcn"),
    ]:
        with pytest.raises(ValueError, match=match):
            LoaderOptions(**bad)
        with pytest.raises(ValueError, match=match):
            GrappaLoader(None, None, 8, **bad)  # no DistGraph: the options are refused first
        with pytest.raises(ValueError, match=match):
            GrappaEdgeLoader(None, None, 8, negative_sampler=None, options=LoaderOptions(), **bad)
    with pytest.raises(TypeError, match=r"GrappaLoader\(\) got an unexpected keyword argument 'firsthop'; .*first_hop"):
        GrappaLoader(None, None, 8, firsthop="block")
    with pytest.raises(TypeError, match=r"'first_hop'; its options \(LoaderOptions\) are halo, seed, feat_key"):
        GrappaHeteroLoader(None, None, 8, first_hop="block")
    with pytest.raises(ValueError, match="first_hop='block' is the homogeneous loaders'"):
        GrappaHeteroLoader(None, None, 8, options=LoaderOptions(first_hop="block"))
    with pytest.raises(TypeError, match=r"takes options=LoaderOptions\(...\), not dict"):
        GrappaLoader(None, None, 8, options={"halo": "drop"})
    opts = LoaderOptions(seed=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.seed = 4
    assert LoaderOptions.of("x", opts, {"halo": "drop"}) == LoaderOptions(seed=3, halo="drop")


@pytest.mark.unit
def test_a_core_loader_draws_the_same_batches_from_keywords_and_from_options(small_parts):
    """``options=LoaderOptions(...)`` and the same settings as keywords are one loader; keywords override the
    object's fields; without either a core loader drops the halo."""
    from dgl_grappa.method.dropin import LoaderOptions

    g, stats = small_parts
    pg, node, *_ = dgl.distributed.load_partition(stats["part_config"], 0)
    lp = load_local(stats["part_config"], 0, "keep", "sampled")
    args = (
        pg,
        pg.ndata["inner_node"],
        pg.ndata[dgl.NID],
        node["_N/train_mask"],
        torch.cat([node["_N/in_degree"], lp.in_degree[lp.num_inner :]]),
        dgl.dataloading.NeighborSampler([4, 3]),
        64,
    )
    keywords = dict(hops=3, w_min=0.2, self_loops=False, seed=4, halo="keep", first_hop="block")
    loaders = [
        PartitionLoader(*args, num_nodes=g.num_nodes(), **keywords),
        PartitionLoader(*args, num_nodes=g.num_nodes(), options=LoaderOptions(**keywords)),
        PartitionLoader(*args, num_nodes=g.num_nodes(), options=LoaderOptions(**{**keywords, "seed": 9}), seed=4),
    ]
    assert loaders[0].options == loaders[1].options == loaders[2].options == LoaderOptions(**keywords)
    assert all(torch.equal(x.weights, loaders[0].weights) for x in loaders)

    def batches(loader):
        return [[t for b in bs for t in (b.srcdata[dgl.NID], b.dstdata[dgl.NID], *b.edges())] for _, _, bs in loader]

    # DGL's neighbour sampling repeats a seeded draw on one thread only (on two, the same loader's batches differ)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ref, *others = [batches(x) for x in loaders]
    finally:
        torch.set_num_threads(threads)
    for got in others:
        assert len(got) == len(ref) and all(torch.equal(a, b) for r, o in zip(ref, got) for a, b in zip(r, o))
    assert PartitionLoader(*args).halo == "drop"


@pytest.mark.unit
@pytest.mark.parametrize("layer", ["sage", "graphconv-right", "graphconv-both"])
def test_the_block_first_hop_gives_an_unmodified_dgl_layer_the_full_graph_first_layer(small_parts, layer, tmp_path):
    """first_hop="block": block 0 (one virtual in-neighbour per destination, its row the aggregate)
    makes DGL's own SAGEConv('mean') / GraphConv(norm='right') compute the full graph's first layer from the
    mean aggregate, and GraphConv(norm='both') from the gcn aggregate (``prepare --gcn``)."""
    import shutil
    from pathlib import Path

    import numpy as np
    from dgl.nn import GraphConv, SAGEConv

    from dgl_grappa.partition.aggregates import prepare

    g, stats = small_parts
    part_config = stats["part_config"]
    aggregate = "agg"
    if layer == "graphconv-both":  # the gcn aggregate, added to a copy of the folder (the fixture is shared)
        shutil.copytree(Path(part_config).parent, tmp_path / "parts")
        part_config = str(tmp_path / "parts" / Path(part_config).name)
        prepare(part_config, gcn=True)
        aggregate = "gcn"
    orig = torch.from_numpy(np.load(Path(part_config).parent / "orig_ids.npy"))  # global (shuffled) id -> original
    pg, node, *_ = dgl.distributed.load_partition(part_config, 1)
    lp = load_local(part_config, 1, "keep", "exact", aggregate=aggregate)
    n = g.num_nodes()
    core = PartitionLoader(
        pg,
        pg.ndata["inner_node"],
        pg.ndata[dgl.NID],
        node["_N/train_mask"],
        torch.cat([node["_N/in_degree"], lp.in_degree[lp.num_inner :]]),
        dgl.dataloading.NeighborSampler([4, 3]),
        64,
        halo="keep",
        first_hop="block",
        num_nodes=n,
    )
    torch.manual_seed(0)
    conv = (
        SAGEConv(g.ndata["feat"].shape[1], 8, "mean")
        if layer == "sage"
        else GraphConv(g.ndata["feat"].shape[1], 8, norm=layer.split("-")[1], allow_zero_in_degree=True)
    )
    row = {int(v): i for i, v in enumerate(lp.global_ids)}
    feats, aggs = lp.feat.full(), lp.agg.full()
    input_nodes, seeds, blocks = next(iter(core))
    assert len(blocks) == 2 and blocks[0].num_src_nodes() == 2 * blocks[0].num_dst_nodes() == input_nodes.numel()
    real, virtual = input_nodes[input_nodes < n], input_nodes[input_nodes >= n] - n
    assert torch.equal(real, virtual) and bool((real < n).all())
    # every row of the batch is one this worker holds (inner or kept halo), and blocks chain
    assert all(int(v) in row for v in real)
    assert (
        torch.equal(blocks[0].dstdata[dgl.NID] if dgl.NID in blocks[0].dstdata else real, real)
        and blocks[1].num_src_nodes() == blocks[0].num_dst_nodes()
    )
    x = torch.cat([feats[[row[int(v)] for v in real]], aggs[[row[int(v)] for v in virtual]]])
    with torch.no_grad():
        got = conv(blocks[0], x)
        full = conv(g, g.ndata["feat"])[orig[real]]
    torch.testing.assert_close(got, full, atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------------------------------
# Batches as DistDGL's loaders make them: global ids in every block (no servers: load_partition)
# ---------------------------------------------------------------------------------------


def _dgl_partition(tmp_path, g, name="grappa"):
    """``g`` cut into 2 random parts by DGL's partition_graph; (part config, new->original node and edge ids)."""
    dgl.seed(0)
    orig_n, orig_e = dgl.distributed.partition_graph(
        g, name, 2, str(tmp_path), part_method="random", return_mapping=True
    )
    return tmp_path / f"{name}.json", orig_n, orig_e


@pytest.mark.unit
@pytest.mark.parametrize("halo,subset", [("keep", False), ("drop", False), ("keep", True)])
def test_the_cores_blocks_carry_global_node_and_edge_ids(tmp_path, halo, subset):
    """srcdata/dstdata[dgl.NID] and edata[dgl.EID] of every block are the graph's global ids, on a server's
    CSC-only part graph, with the halo kept, dropped or cut to a subset (the budget's kept nodes); the virtual
    first-hop block's ids are as documented; the pair graphs are DistEdgeDataLoader's."""
    from dgl_grappa.method.dropin import PartitionEdgeLoader

    torch.manual_seed(0)
    g = dgl.rand_graph(400, 3000)
    g.ndata["train_mask"] = torch.rand(400) < 0.5
    part_config, orig_n, orig_e = _dgl_partition(tmp_path, g)
    pg, node, *_ = dgl.distributed.load_partition(str(part_config), 0)
    pg = pg.formats("csc")  # a DistDGL server's graph: CSC only, whose edge order is not the edge ids'
    deg = g.in_degrees()[orig_n[pg.ndata[dgl.NID]]]
    n_inner = int(pg.ndata["inner_node"].sum())
    kept = None
    if subset:  # every inner node and every other halo node
        kept = torch.cat([torch.arange(n_inner), torch.arange(n_inner, pg.num_nodes(), 2)])
    args = (
        pg,
        pg.ndata["inner_node"],
        pg.ndata[dgl.NID],
        node["_N/train_mask"],
        deg,
        dgl.dataloading.NeighborSampler([3, 4]),
        20,
    )

    def real_edges_are_global(blocks):
        for b in blocks:
            u, v = b.edges()
            ou, ov = g.find_edges(orig_e[b.edata[dgl.EID]])
            assert torch.equal(ou, orig_n[b.srcdata[dgl.NID][u]]) and torch.equal(ov, orig_n[b.dstdata[dgl.NID][v]])

    core = PartitionLoader(*args, halo=halo, first_hop="block", num_nodes=400, kept=kept)
    input_nodes, seeds, blocks = next(iter(core))
    real_edges_are_global(blocks[1:])
    assert torch.equal(blocks[0].srcdata[dgl.NID], input_nodes) and torch.equal(blocks[-1].dstdata[dgl.NID], seeds)
    assert torch.equal(blocks[0].dstdata[dgl.NID], blocks[1].srcdata[dgl.NID])
    # the virtual block: sources are the destinations then num_nodes + each; its edges are no graph edge
    m = blocks[0].num_dst_nodes()
    assert torch.equal(blocks[0].srcdata[dgl.NID][m:], blocks[0].dstdata[dgl.NID] + 400)
    assert bool((blocks[0].edata[dgl.EID] == -1).all())

    edges = PartitionEdgeLoader(
        *args, halo=halo, kept=kept, negative_sampler=dgl.dataloading.negative_sampler.Uniform(1)
    )
    input_nodes, pos, neg, blocks = next(iter(edges))
    real_edges_are_global(blocks)
    u, v = pos.edges()
    ou, ov = g.find_edges(orig_e[pos.edata[dgl.EID]])
    assert torch.equal(ou, orig_n[pos.ndata[dgl.NID][u]]) and torch.equal(ov, orig_n[pos.ndata[dgl.NID][v]])
    assert dgl.EID not in neg.edata and torch.equal(neg.ndata[dgl.NID], pos.ndata[dgl.NID])


@pytest.mark.unit
def test_the_edge_core_gives_pool_nodes_their_in_edges_and_trains_on_none(tmp_path):
    """Negative-pool nodes outside the part (``extra``) with in-edges of theirs (``extra_edges``, global ids, their
    sources held): a pool node's sampled neighbourhood is drawn from them, the blocks' edges are the graph's
    (global edge ids), the positives stay the edges into own nodes, and an edge whose end is not held is
    refused."""
    from dgl_grappa.method.dropin import PartitionEdgeLoader

    torch.manual_seed(0)
    g = dgl.rand_graph(400, 500)  # sparse: many nodes outside part 0 and its halo
    g.ndata["train_mask"] = torch.rand(400) < 0.5
    part_config, orig_n, orig_e = _dgl_partition(tmp_path, g)
    pg, node, *_ = dgl.distributed.load_partition(str(part_config), 0)
    gids = pg.ndata[dgl.NID].to(torch.int64)
    n_inner = int(pg.ndata["inner_node"].sum())
    new_n, new_e = torch.argsort(orig_n), torch.argsort(orig_e)
    ou, ov = g.edges()
    src, dst, eid = new_n[ou], new_n[ov], new_e
    held = torch.zeros(400, dtype=torch.bool)
    held[gids] = True
    pool = (~held).nonzero(as_tuple=True)[0][:30]  # sorted global ids outside the part and its halo
    into = torch.isin(dst, pool)
    ps, pd, pe = src[into], dst[into], eid[into]
    extra = torch.unique(torch.cat([pool, ps[~held[ps]]]))
    deg = g.in_degrees()[orig_n]  # every node's full-graph in-degree, in the partition's (new) ids
    args = (
        pg,
        pg.ndata["inner_node"],
        gids,
        node["_N/train_mask"],
        deg[gids],
        dgl.dataloading.NeighborSampler([3, 4]),
        20,
    )
    neg = dgl.dataloading.negative_sampler.Uniform(1)

    def edge_core(held_extra):
        return PartitionEdgeLoader(
            *args,
            halo="keep",
            negative_sampler=neg,
            extra=(held_extra, deg[held_extra]),
            extra_edges=(ps, pd, pe),
            pool=pool,
            remote=400 - n_inner,
        )

    core = edge_core(extra)
    at = pg.num_nodes() + torch.searchsorted(extra, pool)
    assert torch.equal(core.global_ids[at], pool)
    assert torch.equal(core.graph.in_degrees(at), torch.bincount(torch.searchsorted(pool, pd), minlength=30))
    u, v = core.graph.edges()
    assert bool((v[core.positives] < n_inner).all()) and core.positives.numel() == int((v < n_inner).sum())
    pool_in = 0
    for _, pos, _, blocks in core:
        for b in blocks:
            bu, bv = b.edges()
            fu, fv = g.find_edges(orig_e[b.edata[dgl.EID]])
            assert torch.equal(fu, orig_n[b.srcdata[dgl.NID][bu]]) and torch.equal(fv, orig_n[b.dstdata[dgl.NID][bv]])
            pool_in += int(torch.isin(b.dstdata[dgl.NID][bv], pool).sum())
        assert bool(torch.isin(pos.ndata[dgl.NID][pos.edges()[1]], gids[:n_inner]).all())  # positives end at own nodes
    assert pool_in > 0  # the pool negatives' trees have edges
    with pytest.raises(RuntimeError, match="not held"):
        edge_core(pool)  # the pool without its edges' other sources


@pytest.mark.unit
@pytest.mark.parametrize("halo", ["keep", "drop"])
def test_heterogeneous_blocks_carry_per_type_global_ids_and_only_sampled_relations(tmp_path, halo):
    """The heterogeneous loader's blocks: per-type global node ids, per-relation global edge ids (a server's
    CSC-only part graph: its relation ids line up with its edges), and only the relations they sampled an edge
    of, so that a HeteroGraphConv over the last block outputs the target type alone (DistDGL's blocks)."""
    from dgl.nn import GraphConv, HeteroGraphConv

    from dgl_grappa.method.dropin.hetero import local_hetero_part, sampled_relations, to_global_hetero
    from dgl_grappa.method.hetero import TargetSeeds

    torch.manual_seed(0)

    def r(n, hi):
        return torch.randint(0, hi, (n,))

    g = dgl.heterograph(
        {
            ("paper", "cites", "paper"): (r(1500, 300), r(1500, 300)),
            ("author", "writes", "paper"): (r(800, 200), r(800, 300)),
            ("paper", "written-by", "author"): (r(800, 300), r(800, 200)),
        }
    )
    part_config, orig_n, orig_e = _dgl_partition(tmp_path, g)
    pg, _, _, gpb, *_ = dgl.distributed.load_partition(str(part_config), 1)
    graph, n_inner, gids, eids, _ = local_hetero_part(
        pg.formats("csc"), gpb, g.ntypes, [tuple(e) for e in g.canonical_etypes], halo
    )
    sampler = TargetSeeds(dgl.dataloading.NeighborSampler([3, 4]), "paper")
    _, _, blocks = sampler.sample(graph, torch.arange(min(12, n_inner["paper"])))
    blocks = [sampled_relations(to_global_hetero(b, gids, eids)) for b in blocks]
    for b in blocks:
        assert all(b.num_edges(rel) > 0 for rel in b.canonical_etypes)
        for rel in b.canonical_etypes:
            u, v = b.edges(etype=rel)
            ou, ov = g.find_edges(orig_e[rel][b.edges[rel].data[dgl.EID]], etype=rel)
            assert torch.equal(ou, orig_n[rel[0]][b.srcnodes[rel[0]].data[dgl.NID][u]])
            assert torch.equal(ov, orig_n[rel[2]][b.dstnodes[rel[2]].data[dgl.NID][v]])
    assert {rel[2] for rel in blocks[-1].canonical_etypes} == {"paper"}
    conv = HeteroGraphConv({e: GraphConv(2, 2, norm="right", allow_zero_in_degree=True) for e in g.etypes})
    h = {t: torch.ones(blocks[-1].num_src_nodes(t), 2) for t in blocks[-1].srctypes}
    assert list(conv(blocks[-1], h)) == ["paper"]


@pytest.mark.unit
def test_the_feature_key_is_found_or_its_error_names_the_real_fix():
    from dgl_grappa.config import ConfigError
    from dgl_grappa.partition.aggregates import feature_key

    dgl_names = {
        "features": torch.zeros(3, 4),
        "labels": torch.zeros(3, dtype=torch.int64),
        "train_mask": torch.zeros(3, dtype=torch.bool),
    }
    assert feature_key(dgl_names, "auto", "g") == "features"
    assert feature_key({"labels": torch.zeros(3)}, "auto", "g") is None  # featureless: learnable rows
    assert feature_key(dgl_names, None, "g") is None
    with pytest.raises(
        ConfigError,
        match=r"no node data 'feat' \(its node data: \['features', 'labels', "
        r"'train_mask'\]\); pass feat_key='features'",
    ):
        feature_key(dgl_names, "feat", "g")
    with pytest.raises(ConfigError, match=r"2 2-D float node tensors \['a', 'b'\].*--feat-key <one of them>"):
        feature_key({"a": torch.zeros(3, 2), "b": torch.zeros(3, 5)}, "auto", "g", "--feat-key ")


@pytest.mark.unit
def test_prepare_finds_dgls_features_key(tmp_path):
    """`python -m dgl_grappa prepare` on a folder of DGL's examples (node data `features`): no --feat-key needed."""
    from dgl_grappa.partition.aggregates import load_sidecar, neighbour_mean, prepare

    torch.manual_seed(0)
    g = dgl.rand_graph(300, 2000)
    g.ndata["features"] = torch.randn(300, 5)
    g.ndata["labels"] = torch.randint(0, 3, (300,))
    part_config, orig_n, _ = _dgl_partition(tmp_path, g)
    rec = prepare(part_config)
    assert rec["feat_key"] == "features"
    pg, *_ = dgl.distributed.load_partition(str(part_config), 0)
    own = orig_n[pg.ndata[dgl.NID][pg.ndata["inner_node"].bool()]]
    torch.testing.assert_close(load_sidecar(part_config, 0), neighbour_mean(g, g.ndata["features"])[own])


@pytest.mark.unit
def test_serve_refuses_what_it_cannot_serve():
    """loader.serve on a module that reads no DistGraph, DistTensor or DistEmbedding (e.g. PyTorch's own
    embedding, already this trainer's) is a one-line error naming what to pass instead, not a silent no-op."""
    from dgl_grappa.method.dropin.serve import serve

    with pytest.raises(TypeError, match="holds no DistGraph, DistTensor or DistEmbedding for the loader to serve"):
        serve(torch.nn.Embedding(4, 2, sparse=True), source=None)
    with pytest.raises(TypeError, match="takes a module of the script's, a DistGraph or a DistEmbedding, not list"):
        serve([], source=None)
