"""Link prediction (``train.task: link``): Grappa's local edge batches, the drop-in, the DistDGL baseline.

The in-process tests (``unit``) check the rules on a real 2-part random partitioning of a
3000-node graph without its held-out edges: held-out pairs leave in both directions and are
the same every time; a worker's batches hold only edges it owns with both ends held, and
negatives drawn from the nodes it holds (none but inner nodes with the halo dropped) or, with
the negative pool, as a global draw would; the memory budget never costs a positive edge; the
drop-in's core yields the native runtime's batches; MRR and hits@k against a hand computation;
the embeddings' node-classification accuracy; the config's one-line errors; the docstring
examples. The end-to-end tests train real spawned workers (2 parts, 3 epochs) to an MRR clearly
above chance, and run ``compare`` (DistDGL's DistEdgeDataLoader, Grappa, the drop-in), which
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
from dgl_grappa.config import (
    ConfigError,
    DataConfig,
    LinkConfig,
    ModelConfig,
    PartitionConfig,
    SyntheticConfig,
    load_config,
)
from dgl_grappa.data.links import hold_out_edges, link_split
from dgl_grappa.kinds import kind_of, resolve
from dgl_grappa.method.link import LocalNegativeSampler, link_loss, positive_edges
from dgl_grappa.method.local_part import Keep, load_local
from dgl_grappa.method.models import build_model, gradient_bytes
from dgl_grappa.method.storage import row_bytes
from dgl_grappa.runtime.evaluation import embedding_accuracy, evaluate_link, ranking_metrics

ROOT = Path(__file__).resolve().parent.parent
CONFIG = str(ROOT / "configs" / "link.yaml")
SMALL = [
    "--data.synthetic.num_nodes=3000",
    "--partition.method=random",
    "--train.epochs=3",
    "--train.batch_size=500",
    "--train.fanouts=[5,10]",
    "--model.hidden=32",
    "--train.lr=0.01",
    "--train.eval_every=1",
    "--run.timeout_s=300",
]
K = 100  # link.eval_negatives of configs/link.yaml
CHANCE_MRR = sum(1 / r for r in range(1, K + 2)) / (K + 1)  # a random score: rank uniform on 1..K+1 (0.051)
CHANCE_HITS = 10 / (K + 1)
PER_STEP_OVERHEAD = 4096  # TCP/IP headers of the ring's messages, per step (as in test_distdgl)


# ---------------------------------------------------------------------------------------
# In process: the rules
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def link_parts(tmp_path_factory):
    """A 3000-node graph without its held-out edges, cut into 2 random parts (in this process)."""
    from dgl_grappa.data import load_dataset
    from dgl_grappa.partition.store import partition

    g = load_dataset(DataConfig(synthetic=SyntheticConfig(num_nodes=3000, seed=3)))
    split = link_split(g, LinkConfig())
    stats = partition(split.graph, PartitionConfig(num_parts=2, method="random"), tmp_path_factory.mktemp("link"))
    return g, split, stats


@pytest.mark.unit
def test_held_out_pairs_leave_in_both_directions_and_are_the_same_every_time(link_parts):
    g, split, _ = link_parts
    rest = split.graph
    assert rest.num_nodes() == g.num_nodes() and set(rest.ndata) == set(g.ndata)
    n = g.num_nodes()
    key = lambda s, d: set((s * n + d).tolist())  # noqa: E731
    have = key(*rest.edges())
    for u, v in (split.val, split.test):
        assert bool((u < v).all())
        assert not (key(u, v) & have) and not (key(v, u) & have), "a held-out pair left an edge behind"
        assert key(u, v) <= key(*g.edges()) and key(v, u) <= key(*g.edges())
    val, test = key(*split.val), key(*split.test)
    assert not val & test
    pairs = split.num_pairs
    assert len(val) == -(-pairs * 5 // 100) and len(test) == -(-pairs * 10 // 100)  # ceil(frac x pairs)
    assert rest.num_edges() == g.num_edges() - 2 * (len(val) + len(test))  # the graph is symmetric
    # A pure function of the graph and the seed: every system (and rank 0's evaluation) gets the same.
    again = link_split(g, LinkConfig())
    assert torch.equal(again.test[0], split.test[0]) and torch.equal(again.test_neg, split.test_neg)
    assert torch.equal(again.graph.edges()[0], rest.edges()[0])
    other = link_split(g, LinkConfig(seed=1))
    assert not torch.equal(other.test[0], split.test[0])
    assert split.val_neg.shape == (len(val), 100) and int(split.test_neg.max()) < n
    # Self-loops are never held out; a graph with nothing else is a one-line error.
    loops = dgl.graph((torch.arange(5), torch.arange(5)))
    with pytest.raises(ConfigError, match=r"no edge to hold out \(its 5 edges are self-loops\)"):
        hold_out_edges(loops, 0.1, 0.1)
    with pytest.raises(ConfigError, match="too few"):
        hold_out_edges(dgl.graph(([0, 1], [1, 0])), 0.1, 0.1)  # one pair: nothing left to train on


@pytest.mark.unit
def test_ranking_metrics_and_the_loss_match_a_hand_computation():
    pos = torch.tensor([5.0, 1.0, 2.0, 0.0])
    neg = torch.tensor(
        [
            [1.0, 2.0, 3.0],  # rank 1
            [2.0, 3.0, 0.0],  # rank 3
            [2.0, 2.0, 1.0],  # two ties: rank 1 + 0 + 0.5 * 2 = 2
            [1.0, 1.0, 1.0],
        ]
    )  # rank 4
    m = ranking_metrics(pos, neg, k=2)
    assert m["mrr"] == pytest.approx((1 + 1 / 3 + 1 / 2 + 1 / 4) / 4)
    assert m["hits"] == pytest.approx(2 / 4)  # ranks 1 and 2 are in the top 2
    assert ranking_metrics(pos, neg, k=4)["hits"] == 1.0
    assert ranking_metrics(pos[:0], neg[:0], k=2) == {"mrr": None, "hits": None}
    # The loss of DGL's example: binary cross-entropy of dot products, positives 1, negatives 0.
    h = torch.tensor([[1.0, 0.0], [2.0, 1.0], [0.0, 3.0]])
    pairs, negs = dgl.graph(([0], [1]), num_nodes=3), dgl.graph(([0, 0], [2, 1]), num_nodes=3)
    s_pos, s_neg = torch.tensor([2.0]), torch.tensor([0.0, 2.0])  # h0.h1, h0.h2, h0.h1
    want = -(torch.log(torch.sigmoid(s_pos)).sum() + torch.log(1 - torch.sigmoid(s_neg)).sum()) / 3
    assert float(link_loss(h, pairs, negs)) == pytest.approx(float(want))


@pytest.mark.unit
def test_the_embeddings_are_classified_as_dgls_example_classifies_them(link_parts):
    """evaluate_link adds the node-classification accuracy of the encoder's rows (DGL's train_dist_unsupervised.py
    evaluation: standardised rows, a multinomial logistic regression fitted on the training nodes)."""
    g, split, _ = link_parts
    nd = split.graph.ndata
    label, masks = nd["label"], (nd["train_mask"], nd["val_mask"], nd["test_mask"])
    classes = int(label.max()) + 1
    onehot = torch.nn.functional.one_hot(label, classes).float() + 0.01 * torch.randn(label.numel(), classes)
    assert embedding_accuracy(onehot, label, *masks) == {"val": 1.0, "test": 1.0}  # rows that say the label
    noise = torch.randn(label.numel(), 16, generator=torch.Generator().manual_seed(0))
    chance = embedding_accuracy(noise, label, *masks)
    assert all(v < 2.5 / classes for v in chance.values()), chance  # rows that say nothing
    feat = embedding_accuracy(nd["feat"], label, *masks)
    assert all(2.5 / classes < v < 1.0 for v in feat.values()), feat  # the noisy class means between
    with pytest.raises(ValueError, match="train_mask selects none"):
        embedding_accuracy(nd["feat"], label, torch.zeros_like(masks[0]), *masks[1:])

    class Rows(torch.nn.Module):  # an "encoder" returning fixed rows: evaluate_link reports their accuracy
        def __init__(self, h):
            super().__init__()
            self.h = torch.nn.Parameter(h)

        def forward(self, graph, x):
            return self.h

    out = evaluate_link(Rows(onehot), split, k=10)
    assert (out["val_emb_acc"], out["test_emb_acc"]) == (1.0, 1.0) and 0 < out["test_mrr"] < 1
    assert evaluate_link(Rows(nd["feat"].clone()), split, k=10)["test_emb_acc"] == feat["test"]  # deterministic


@pytest.mark.unit
@pytest.mark.parametrize("dist,fanout", [("uniform", 0), ("degree", 0), ("uniform", 4)])
def test_the_negative_pool_draws_negatives_as_a_global_draw_would(link_parts, dist, fanout):
    """link.negative_pool: a uniform sample of the other part's nodes, rows read once from their owners (the
    whole graph's features and in-degrees), with link.pool_fanout of their in-edges each (their sources held
    as leaves) or none; negatives from the own nodes with their share of a global draw, else from the pool,
    never from a halo node outside it."""
    g, split, stats = link_parts
    cfg = _cfg(
        "--link.negative_pool=0.5",
        f"--link.negative_dist={dist}",
        "--link.negatives=20",
        f"--link.pool_fanout={fanout}",
    )
    kind = kind_of(cfg)
    lp = kind.load_part(cfg, stats["part_config"], 1)
    n_total = split.graph.num_nodes()
    assert lp.num_nodes_total == n_total and lp.pool.numel() == lp.keep["pool"] == -(-lp.part_inner // 2)
    assert bool((lp.pool >= lp.num_inner).all()) and bool((lp.owner[lp.pool] != 1).all())  # other parts' nodes
    outside = lp.pool[lp.pool >= lp.keep["kept"]]
    appended = torch.arange(lp.keep["kept"], lp.graph.num_nodes())
    assert appended.numel() == lp.keep["pool_read"] >= outside.numel() > 0
    orig = torch.from_numpy(np.load(Path(stats["part_config"]).parent / "orig_ids.npy")).long()
    go = orig[lp.global_ids.long()]
    full = split.graph
    assert torch.equal(lp.feat.gather(appended), full.ndata["feat"][go[appended]])  # fp32: exact
    assert torch.equal(lp.in_degree[appended], full.in_degrees(go[appended]))
    # a node read for the pool points only at a pool node outside the part (its drawn in-edges; one pool node
    # may be another's drawn neighbour), never into the part: the own nodes' trees are the part's
    assert bool(torch.isin(lp.graph.out_edges(appended)[1], outside).all())
    drawn = lp.graph.in_degrees(outside)
    assert torch.equal(drawn, full.in_degrees(go[outside]).clamp(max=fanout))  # fanout in-edges, or none
    s, d = (t.long() for t in lp.graph.in_edges(outside))
    assert bool(full.has_edges_between(go[s], go[d]).all())  # real edges, drawn once
    assert torch.unique(s * lp.graph.num_nodes() + d).numel() == s.numel() == lp.keep["pool_edges"]
    others = appended[~torch.isin(appended, outside)]  # the drawn neighbours: leaves
    assert (others.numel() > 0) == (fanout > 0) and int(lp.graph.in_degrees(others).sum()) == 0
    width = lp.feat.shape[1]
    n_read = lp.keep["halo_kept"] + lp.keep["pool_read"]
    assert lp.one_time_bytes == n_read * (2 * row_bytes(width, "fp32") + 8) + 8 * lp.keep["pool_edges"]
    rt = kind.make_runtime(cfg, Identity(0, 1, 0), lp)
    drawn = torch.cat([neg.ndata[dgl.NID][neg.edges()[1].long()] for _, (_, neg), *_ in rt.epoch_inputs(0)]).long()
    own = drawn < lp.num_inner
    remote = n_total - lp.part_inner
    if dist == "uniform":
        want = lp.part_inner / n_total
    else:
        w = lp.in_degree.double() ** 0.75
        w_own, w_pool = float(w[: lp.num_inner].sum()), float(w[lp.pool].sum()) * remote / lp.pool.numel()
        want = w_own / (w_own + w_pool)
    assert rt.negatives.own_share == pytest.approx(want)
    assert abs(float(own.double().mean()) - want) < 0.02, (float(own.double().mean()), want)
    assert bool(torch.isin(drawn[~own], lp.pool).all()), "a remote negative outside the pool"
    assert torch.unique(drawn[~own]).numel() > 0.9 * lp.pool.numel()
    assert rt.summary()["negatives"] == {"pool": lp.pool.numel(), "own_share": rt.negatives.own_share}
    # without a pool: every node held may be drawn, the pool's share of the graph is not imitated
    plain = kind.make_runtime(
        _cfg("--link.negative_pool=0"),
        Identity(0, 1, 0),
        kind.load_part(_cfg("--link.negative_pool=0"), stats["part_config"], 1),
    )
    assert plain.negatives.pool is None and plain.summary()["negatives"]["pool"] == 0


@pytest.mark.unit
def test_the_memory_budget_never_costs_a_positive_edge(link_parts, caplog):
    """A budget that int4 cannot hold the halo in: node classification samples the halo (neighbours, not seeds);
    link prediction keeps every positive's source, over the budget, and says so with the figure to set."""
    _, _, stats = link_parts
    kind = kind_of(_cfg())
    whole = kind.make_runtime(_cfg(), Identity(0, 1, 0), kind.load_part(_cfg(), stats["part_config"], 0))
    assert whole.edges["usable_fraction"] == 1.0
    tight = _cfg("--train.memory_budget=0.3")
    with caplog.at_level("WARNING", logger="dgl_grappa"):
        lp = kind.load_part(tight, stats["part_config"], 0)
    rt = kind.make_runtime(tight, Identity(0, 1, 0), lp)
    assert lp.keep["precision"] == "int4" and lp.keep["halo_kept"] == lp.keep["halo"]
    assert rt.edges == whole.edges and rt.positives.numel() == whole.positives.numel()  # every positive kept
    over = lp.keep["over_budget_bytes"]
    assert over > 0 and lp.resident_bytes == pytest.approx(lp.keep["budget_bytes"] + over, abs=1)
    msg = [r.getMessage() for r in caplog.records if "sources of its positive edges" in r.getMessage()]
    assert len(msg) == 1 and "\n" not in msg[0]
    hint = float(msg[0].split("--train.memory_budget=")[1].split()[0])
    assert hint == pytest.approx(lp.resident_bytes / lp.own_fp32_bytes, abs=1e-3)
    caplog.clear()
    with caplog.at_level("WARNING", logger="dgl_grappa"):  # the named budget holds them: no warning
        named = kind.load_part(_cfg(f"--train.memory_budget={hint}"), stats["part_config"], 0)
    assert named.keep["over_budget_bytes"] == 0 and named.keep["halo_kept"] == named.keep["halo"]
    assert not [r for r in caplog.records if "positive edges" in r.getMessage()]
    # What the budget did before: a halo sample, and the positives of the dropped sources lost with them.
    sampled = load_local(stats["part_config"], 0, "keep", "exact", keep=Keep(storage="auto", budget=0.3))
    assert sampled.keep["halo_kept"] < sampled.keep["halo"]
    assert positive_edges(sampled.src, sampled.dst, sampled.num_inner).numel() < whole.positives.numel()


def _cfg(*overrides):
    return load_config(
        None,
        [
            "--train.task=link",
            "--train.batch_size=700",
            "--train.fanouts=[5,10]",
            "--train.memory_budget=0",
            *overrides,
        ],
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    "halo,first_hop,dist,pool",
    [("keep", "exact", "uniform", 0.0), ("drop", "sampled", "degree", 0.0), ("drop", "exact", "uniform", 0.25)],
)
def test_a_workers_batches_hold_only_its_edges_and_negatives_from_what_it_holds(
    link_parts, halo, first_hop, dist, pool
):
    _, _, stats = link_parts
    cfg = _cfg(
        f"--train.halo={halo}",
        f"--train.first_hop={first_hop}",
        f"--link.negative_dist={dist}",
        "--link.negatives=3",
        f"--link.negative_pool={pool}",
    )
    kind = kind_of(cfg)
    lp = kind.load_part(cfg, stats["part_config"], 1)
    rt = kind.make_runtime(cfg, Identity(0, 1, 1), lp)
    n_local, n_inner = lp.graph.num_nodes(), lp.num_inner
    pooled = torch.zeros(n_local, dtype=torch.bool)
    if pool:  # the pool's nodes (no halo here: all of them read from their owners) are held, without edges
        pooled[lp.pool] = True
        assert lp.pool.numel() == lp.keep["pool_read"] > 0 and n_local == n_inner + lp.pool.numel()
    local_edges = set((lp.src.long() * n_local + lp.dst.long()).tolist())
    seen = []
    batches = list(rt.epoch_inputs(0))
    assert len(batches) == rt.steps
    for blocks, (pair, neg), x, rows, extra in batches:
        assert rows is None and x.shape[0] == extra["deg"].shape[0]
        assert ("agg" in extra) == (first_hop == "exact")
        assert blocks[-1].num_dst_nodes() == pair.num_nodes() == neg.num_nodes()
        ids = pair.ndata[dgl.NID].long()  # the pair graphs' nodes, as local ids
        u, v = (ids[t.long()] for t in pair.edges())
        assert bool((v < n_inner).all()), "a positive whose destination this worker does not own"
        assert set((u * n_local + v).tolist()) <= local_edges, "a positive that is not an edge of the local graph"
        nu, nv = (ids[t.long()] for t in neg.edges())
        assert torch.equal(nu, u.repeat_interleave(3))  # k negatives per positive, from its source
        assert bool((nv < n_local).all()), "a negative this worker does not hold"
        if halo == "drop":  # nothing but inner nodes (and the pool's negatives), ends and sampled neighbours alike
            src_ids = blocks[0].srcdata[dgl.NID].long()
            assert n_local == n_inner + int(pooled.sum()) and bool(((src_ids < n_inner) | pooled[src_ids]).all())
            assert bool((u < n_inner).all()), "a positive from a node it does not own"
        seen.append(u * n_local + v)
    # An epoch trains on every edge this worker owns and holds, once.
    assert torch.sort(torch.cat(seen)).values.tolist() == sorted(
        (lp.src.long() * n_local + lp.dst.long())[rt.positives].tolist()
    )
    e = rt.edges
    assert e["owned"] == int(lp.in_degree[:n_inner].sum()) > 0
    inner_inner = int(((lp.src < n_inner) & (lp.dst < n_inner)).sum())
    assert e["positives_halo_drop"] == inner_inner < e["owned"]  # random parts: most pairs are cut
    if halo == "keep":  # the whole halo: every edge it owns has its source here
        assert e["positives"] == e["owned"] and e["usable_fraction"] == 1.0 and lp.graph.num_nodes() > n_inner
    else:
        assert e["positives"] == inner_inner and 0.3 < e["usable_fraction"] == e["usable_fraction_halo_drop"] < 0.7
    # Drawn as the distribution says: degree-weighted negatives favour high in-degrees.
    if dist == "degree":
        drawn = torch.cat([b[1][1].ndata[dgl.NID][b[1][1].edges()[1].long()] for b in batches]).long()
        d = lp.in_degree.double()
        want = float((d**1.75).sum() / (d**0.75).sum())  # E[deg] under deg^0.75 weights (uniform: 8.6)
        assert want > 1.15 * float(d.mean())
        assert abs(float(lp.in_degree[drawn].double().mean()) - want) < 0.05 * want


@pytest.mark.unit
def test_degree_weighted_negatives_follow_degree_to_the_power_three_quarters():
    g = dgl.graph((torch.zeros(4, dtype=torch.int64), torch.arange(1, 5)), num_nodes=5)
    degree = torch.tensor([0, 1, 16, 81, 0])
    sampler = LocalNegativeSampler(5000, "degree", degree, seed=3)
    src, dst = sampler(g, torch.tensor([0]))
    assert bool((src == 0).all())
    freq = torch.bincount(dst, minlength=5).double() / dst.numel()
    want = degree.double() ** 0.75 / (degree.double() ** 0.75).sum()  # 1 : 8 : 27
    assert freq[0] == 0 and freq[4] == 0
    torch.testing.assert_close(freq, want, atol=0.02, rtol=0)
    sampler.reseed(7)
    a = sampler(g, torch.tensor([0]))[1]
    sampler.reseed(7)
    assert torch.equal(a, sampler(g, torch.tensor([0]))[1])  # the same seed, the same negatives
    with pytest.raises(ValueError, match="bind"):
        LocalNegativeSampler(1, "degree")(g, torch.tensor([0]))


@pytest.mark.unit
def test_the_drop_in_core_yields_the_native_batches_in_global_ids(link_parts):
    """PartitionEdgeLoader (fed from dgl.distributed.load_partition) and the native link runtime
    (kinds.link.EdgeRuntime, fed from load_local) are one method: the same positives, negatives and blocks, in
    global ids."""
    from dgl_grappa.method.dropin import PartitionEdgeLoader

    _, _, stats = link_parts
    # the drop-in's core draws its negatives from the nodes it holds: the native runtime without a pool
    cfg = _cfg("--train.halo=keep", "--train.first_hop=exact", "--link.negative_pool=0")
    kind = kind_of(cfg)
    lp = kind.load_part(cfg, stats["part_config"], 0)
    native = kind.make_runtime(cfg, Identity(0, 1, 0), lp)
    pg, node, *_ = dgl.distributed.load_partition(stats["part_config"], 0)
    core = PartitionEdgeLoader(
        pg,
        pg.ndata["inner_node"],
        pg.ndata[dgl.NID],
        node["_N/train_mask"],
        torch.cat([node["_N/in_degree"], lp.in_degree[lp.num_inner :]]),
        dgl.dataloading.NeighborSampler(cfg.train.fanouts),
        cfg.train.batch_size,
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(1),
        halo="keep",
        first_hop="exact",
        seed=cfg.train.seed,
    )
    assert core.steps == native.steps and core.edges == native.edges
    assert torch.equal(core.global_ids, lp.global_ids)
    gid = lp.global_ids
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # DGL's sampling threads each draw their own stream: one thread, one order
    try:
        for epoch in (0, 1):
            expected = list(native.epoch_inputs(epoch))  # sampled first: both paths re-seed DGL's RNG per epoch
            core.set_epoch(epoch)
            got = iter(core)
            for blocks, (pair, neg), *_ in expected:
                g_input, g_pair, g_neg, g_blocks = next(got)
                assert torch.equal(g_input, gid[blocks[0].srcdata[dgl.NID].long()])
                for mine, theirs in ((pair, g_pair), (neg, g_neg)):
                    assert torch.equal(theirs.ndata[dgl.NID], gid[mine.ndata[dgl.NID].long()])
                    assert all(torch.equal(a, b) for a, b in zip(mine.edges(), theirs.edges()))
                assert len(g_blocks) == len(blocks)
            assert next(got, None) is None
    finally:
        torch.set_num_threads(threads)
    # first_hop="block": the loader adds block 0 (one virtual neighbour per node), for the script's own layers
    n = int(stats["num_nodes"])
    block = PartitionEdgeLoader(
        pg,
        pg.ndata["inner_node"],
        pg.ndata[dgl.NID],
        node["_N/train_mask"],
        torch.cat([node["_N/in_degree"], lp.in_degree[lp.num_inner :]]),
        dgl.dataloading.NeighborSampler(cfg.train.fanouts),
        cfg.train.batch_size,
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(1),
        halo="keep",
        first_hop="block",
        num_nodes=n,
    )
    input_nodes, pair, neg, blocks = next(iter(block))
    assert len(blocks) == 2 and blocks[0].num_src_nodes() == 2 * blocks[0].num_dst_nodes() == input_nodes.numel()
    real, virtual = input_nodes[: blocks[0].num_dst_nodes()], input_nodes[blocks[0].num_dst_nodes() :]
    assert bool((real < n).all()) and torch.equal(virtual - n, real)
    assert blocks[-1].num_dst_nodes() == pair.num_nodes() and torch.equal(pair.ndata[dgl.NID], real[: pair.num_nodes()])
    # as DistEdgeDataLoader's: the positive pairs' global edge ids (an edge into the pair's destination), none on
    # the negatives (tests/test_dropin.py checks the ids against the whole graph)
    assert pair.edata[dgl.EID].dtype == torch.int64 and dgl.EID not in neg.edata


@pytest.mark.unit
def test_one_line_errors_for_what_link_prediction_cannot_serve():
    def error(*overrides):
        with pytest.raises(ConfigError) as exc:
            resolve(load_config(CONFIG, list(overrides)))  # the config tree's rules, then the kind's
        msg = str(exc.value)
        assert "\n" not in msg
        return msg

    assert error("--link.val_frac=0.6", "--link.test_frac=0.5").startswith("link.val_frac=0.6 and link.test_frac=0.5")
    assert error("--link.test_frac=0").startswith("link.test_frac=0.0 must be in (0, 1)")
    assert error("--link.val_frac=0").startswith("link.val_frac=0.0 must be in (0, 1)")
    assert error("--link.negatives=0").startswith("link.negatives=0 must be >= 1")
    assert error("--link.negative_pool=-1").startswith("link.negative_pool=-1.0 must be >= 0")
    assert error("--link.pool_fanout=-2").startswith("link.pool_fanout=-2 must be >= 0")
    assert "link.hits_k=200" in error("--link.hits_k=200")
    assert error("--link.negative_dist=global").startswith("link.negative_dist='global' is not allowed")
    assert "--grappa.correction=none" in error("--grappa.correction=shrinkage")
    assert "--train.mode=minibatch" in error("--train.mode=fullgraph")
    assert "model.embed=true" in error("--model.embed=true")
    assert "--schedule.k=0" in error("--schedule.k=2")
    assert "train.eval_mode=layerwise" in error("--train.eval_mode=layerwise")
    assert error("--train.task=edge").startswith("train.task=edge is not trained on a homogeneous graph")
    assert "use --train.task=link or node" in error("--train.task=edge")  # (and any kind registered in this process)
    assert "or name the module of a kind of your own with --train.kind_module" in error("--train.task=edge")
    # Node classification ignores the link section.
    assert load_config(CONFIG, ["--train.task=node", "--link.test_frac=0"]).train.task == "node"


@pytest.mark.unit
def test_a_link_partitioning_is_never_reused_for_node_classification(tmp_path):
    from dgl_grappa.partition.store import ensure_partitions, partition_fingerprint

    base = ["--data.synthetic.num_nodes=300", "--data.synthetic.num_communities=16", f"--run.output_dir={tmp_path}"]
    node, link = load_config(None, base), load_config(None, base + ["--train.task=link"])
    assert "held_out" not in partition_fingerprint(node)  # node tasks' fingerprints are as they were
    assert partition_fingerprint(link)["held_out"] == {"val_frac": 0.05, "test_frac": 0.1, "seed": 0}
    stats, _ = ensure_partitions(link)
    assert stats["held_out_edges"] > 0 and stats["num_edges"] + stats["held_out_edges"] > stats["num_edges"]
    again, _ = ensure_partitions(node)  # cut again, with every edge
    assert "held_out_edges" not in again and again["num_edges"] == stats["num_edges"] + stats["held_out_edges"]


# ---------------------------------------------------------------------------------------
# Spawned workers: the native runtime, and compare (DistDGL, Grappa, the drop-in)
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def straight(tmp_path_factory, namespaces_missing):
    """3 epochs in one go, a checkpoint after every epoch (all kept), in a private network namespace where possible."""
    out = tmp_path_factory.mktemp("link-straight")
    isolated = namespaces_missing is None
    s = train(
        out,
        *SMALL,
        "--checkpoint.every=1",
        "--checkpoint.keep_last=3",
        f"--network.isolate={str(isolated).lower()}",
        config=CONFIG,
    )
    return out, s, isolated


def test_native_link_prediction_trains_on_local_edges_to_an_mrr_above_chance(straight):
    tmp_path, s, isolated = straight
    assert s["task"] == "link" and s["halo"] == "keep" and s["negative_dist"] == "uniform"
    assert s["test_mrr"] > 1.5 * CHANCE_MRR and s["test_hits"] > 1.5 * CHANCE_HITS, (s["test_mrr"], s["test_hits"])
    assert "val_acc" not in s and s["best_val_mrr"] >= s["val_mrr"] > CHANCE_MRR  # graded by MRR, not accuracy
    # Only gradients travel: an encoder of 64 -> 32 -> 32, one bucket a step.
    model_bytes = gradient_bytes(build_model(ModelConfig(hidden=32), 64, 32))
    assert s["model_grad_bytes"] == model_bytes and s["grad_bytes_per_epoch"] == s["steps_per_epoch"] * model_bytes
    assert s["feature_bytes_per_epoch"] == 0 and s["app_bytes_per_epoch"] == 2 * s["grad_bytes_per_epoch"]
    # Cut edges: with the halo kept every edge is some worker's positive; dropped, random parts lose about half.
    assert s["usable_edge_fraction"] == 1.0
    assert 0.3 < s["usable_edge_fraction_halo_drop"] < 0.7
    for w in s["workers"]:
        e = w["link_edges"]
        assert e["positives"] == e["owned"] > e["positives_halo_drop"] > 0
        # the default negative pool: a quarter of its own nodes from the other part, read once with the halo
        assert w["negatives"]["pool"] == w["keep"]["pool"] == -(-w["inner_nodes"] // 4)
        assert 0.3 < w["negatives"]["own_share"] < 0.7 and w["one_time_bytes"] > 0
    records = [json.loads(ln) for ln in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records if "val_mrr" in r] == [0, 1, 2]


def test_native_link_prediction_puts_only_gradients_on_the_wire(straight, namespaces_missing):
    _, s, isolated = straight
    if not isolated:  # a skip, said in the summary; under CI=true it fails (conftest)
        pytest.skip(f"the wire is measured in a private network namespace, unavailable here: {namespaces_missing}")
    grad_on_wire = 2 * s["grad_bytes_per_epoch"]
    overhead = PER_STEP_OVERHEAD * s["steps_per_epoch"]
    assert grad_on_wire <= s["wire_bytes_per_epoch"] <= 1.05 * grad_on_wire + overhead


def _ck(path: Path) -> dict:
    return torch.load(path, weights_only=True)


def _same(a, b, where: str = "") -> None:
    """``a`` and ``b`` (a checkpoint's nested dicts, lists and tensors) are equal, tensors bit for bit."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), where
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def test_a_resumed_link_run_ends_bit_for_bit_where_the_straight_run_does(straight, tmp_path):
    """Resume after epoch 1 of 3 (a checkpoint copied from the straight run, on its partition folder): the same
    model, optimizer state, RNG states, losses and MRRs at the end as the run that never stopped."""
    out, s, _ = straight
    mid = tmp_path / "ckpt-e000001.pt"
    shutil.copy(out / "checkpoints" / "ckpt-e000001.pt", mid)
    shutil.copy(out / "checkpoints" / "ckpt-e000001.json", mid.with_suffix(".json"))
    resumed = tmp_path / "resumed"
    r = train(
        resumed,
        *SMALL,
        "--checkpoint.every=1",
        f"--checkpoint.resume={mid}",
        f"--partition.out_dir={out / 'partitions' / '0'}",
        config=CONFIG,
    )
    assert r["epochs"] == 3 and r["task"] == "link"
    a, b = _ck(out / "checkpoints" / "ckpt-e000003.pt"), _ck(resumed / "checkpoints" / "ckpt-e000003.pt")
    assert a["epoch"] == b["epoch"] == 3 and a["step"] == b["step"]
    _same(a["model"], b["model"], "model")
    _same(a["optimizer"], b["optimizer"], "optimizer")
    for i, (ra, rb) in enumerate(zip(a["ranks"], b["ranks"])):
        _same(ra["rng"], rb["rng"], f"rank {i} rng")
        keys = ("epoch", "loss", "val_mrr", "test_mrr", "val_hits", "test_hits")
        assert [{k: x.get(k) for k in keys} for x in ra["records"]] == [
            {k: x.get(k) for k in keys} for x in rb["records"]
        ], i
    assert (r["test_mrr"], r["val_mrr"]) == (s["test_mrr"], s["val_mrr"])


COMPARE = """
name: link-small
data:
  name: synthetic
  synthetic: {{num_nodes: 3000, avg_degree: 10}}
partition: {{num_parts: 2, method: random, out_dir: {parts}}}
model: {{name: sage, num_layers: 2, hidden: 32}}
train: {{task: link, epochs: 3, batch_size: 500, fanouts: [5, 10], lr: 0.01, eval_every: 1}}
compare: {{variants: [none], dropin: true}}
run: {{output_dir: {out}, timeout_s: 300, progress: false}}
"""


@pytest.fixture(scope="module")
def compared(compare_run):
    """distdgl (DistEdgeDataLoader), grappa-none and distdgl-grappa (GrappaEdgeLoader) on one graph."""
    return compare_run


def test_the_distdgl_baseline_trains_on_every_edge_and_pulls_remote_rows(compared):
    _, _, sums = compared
    s = sums["distdgl"]
    assert s["task"] == "link" and s["usable_edge_fraction"] == 1.0
    assert s["test_mrr"] > 1.5 * CHANCE_MRR, s["test_mrr"]
    assert s["feature_bytes_per_epoch"] > 0 and s["remote_rows_total"] > 0 and s["rpc_bytes_per_epoch"] > 0
    assert s["wire_bytes_per_epoch"] > 5 * sums["grappa-none"]["wire_bytes_per_epoch"]


@pytest.mark.parametrize("system", ["grappa-none", "distdgl-grappa"])
def test_grappa_and_the_drop_in_train_on_local_edges_and_send_only_gradients(compared, system):
    _, _, sums = compared
    s = sums[system]
    assert s["test_mrr"] > 1.5 * CHANCE_MRR and s["test_hits"] > 1.5 * CHANCE_HITS, (s["test_mrr"], s["test_hits"])
    assert s["feature_bytes_per_epoch"] == 0
    assert s["grad_bytes_per_epoch"] == s["steps_per_epoch"] * s["model_grad_bytes"]
    grad_on_wire = 2 * s["grad_bytes_per_epoch"]
    assert grad_on_wire <= s["wire_bytes_per_epoch"] <= 1.05 * grad_on_wire + PER_STEP_OVERHEAD * s["steps_per_epoch"]
    assert s["usable_edge_fraction"] == 1.0 and 0.3 < s["usable_edge_fraction_halo_drop"] < 0.7
    if system == "distdgl-grappa":  # not one remote row, sampling request or edge lookup
        assert s["remote_rows_total"] == 0 and s["rpc_bytes_per_epoch"] == 0


def test_compare_reports_mrr_and_hits_next_to_bytes_and_time(compared, capsys):
    out, result, _ = compared
    assert result["task"] == "link" and "test hits@10" in [f["label"] for f in result["metric"]["figures"]]
    rows = {r["system"]: r for r in result["rows"]}
    assert set(rows) == {"distdgl", "grappa-none", "distdgl-grappa"}
    for r in rows.values():
        assert r["test_mrr"] is not None and r["test_hits"] is not None and r["epoch_time_s"] > 0
    assert rows["grappa-none"]["test_mrr_ratio"] == pytest.approx(
        rows["grappa-none"]["test_mrr"] / rows["distdgl"]["test_mrr"]
    )
    report = (out / "report.md").read_text()
    assert "| system | epoch time |" in report and "test MRR" in report and "test hits@10" in report
    assert "edges trained on" in report


@pytest.mark.parametrize("system", ["distdgl", "distdgl-grappa"])
def test_a_distdgl_link_job_resumes_from_its_checkpoint(compared, tmp_path, system):
    """DistDGL's link trainer checkpoints as its node path does; resumed at epoch 2 of 3 it loads the checkpointed
    model. The drop-in (GrappaEdgeLoader: local sampling, batches and negatives a function of the epoch) ends bit for
    bit where the straight run did; DistDGL's own loader samples on its servers, so its resume is statistical."""
    from dgl_grappa.distdgl import run_distdgl

    out, _, _ = compared
    mid = tmp_path / "ckpt-e000002.pt"
    shutil.copy(out / system / "checkpoints" / "ckpt-e000002.pt", mid)
    shutil.copy(out / system / "checkpoints" / "ckpt-e000002.json", mid.with_suffix(".json"))
    cfg = load_config(str(out.parent / "cmp.yaml"), [f"--checkpoint.resume={mid}"])
    s = run_distdgl(cfg, tmp_path / "resumed", grappa=system == "distdgl-grappa", quiet=True)
    r = s["restart"]
    assert r["resumed_epoch"] == 2 and r["checksum_loaded"] == r["checksum_checkpoint"]
    assert s["task"] == "link" and s["epochs"] == 3 and s["test_mrr"] > CHANCE_MRR
    recs = [json.loads(ln) for ln in (tmp_path / "resumed" / "metrics.jsonl").read_text().splitlines()]
    assert [x["epoch"] for x in recs] == [0, 1, 2]
    if system == "distdgl-grappa":
        a = _ck(out / system / "checkpoints" / "ckpt-e000003.pt")
        b = _ck(tmp_path / "resumed" / "checkpoints" / "ckpt-e000003.pt")
        _same(a["model"], b["model"], "model")
        _same(a["optimizer"], b["optimizer"], "optimizer")
