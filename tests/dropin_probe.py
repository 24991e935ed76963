"""A DistDGL trainer that puts the drop-in's batches next to DistDGL's own loaders' on the same partition and
writes what it found to ``<out>/probe<rank>.json`` (tests/test_dropin_dgl.py runs it through the package's launcher
with its own arguments, tests/dglscript.py).

What it records, for both systems: every field of every block (``srcdata``/``dstdata``/``edata`` keys), the dict
shapes of ``input_nodes`` and the seeds, and whether every id is a global id of the graph: the blocks' edge ids
are checked against the DistGraph (``g.find_edges``) and their node ids, ``input_nodes`` against the first
block, the seeds against the last. Then what :meth:`loader.serve` serves, in and outside an epoch; a served
``DistEmbedding`` trained one step by DGL's own ``SparseAdam``; a loader made under a small memory budget
(its warning goes to stderr: this script sets up no logging); and the error of a budget too small for any loader.
"""

import argparse
import json
from pathlib import Path

import dgl
import torch as th
from dgl.nn import GraphConv, HeteroGraphConv

from dgl_grappa import GrappaEdgeLoader, GrappaHeteroLoader, GrappaLoader
from dgl_grappa.config import ConfigError


def fields(block) -> dict:
    return {"src": sorted(block.srcdata.keys()), "dst": sorted(block.dstdata.keys()), "e": sorted(block.edata.keys())}


def homo_ids_ok(g, blocks, input_nodes, seeds, virtual_first: bool) -> dict:
    """Whether the ids of a homogeneous batch are the graph's global ids (the virtual block 0 aside)."""
    n = g.num_nodes()
    real = blocks[1:] if virtual_first else blocks
    edges_ok = True
    for b in real:
        u, v = b.edges()
        su, sv = g.find_edges(b.edata[dgl.EID])
        edges_ok &= bool(th.equal(su, b.srcdata[dgl.NID][u]) and th.equal(sv, b.dstdata[dgl.NID][v]))
    chain = all(th.equal(a.dstdata[dgl.NID], b.srcdata[dgl.NID]) for a, b in zip(blocks[:-1], blocks[1:]))
    out = {
        "edges": edges_ok,
        "chain": bool(chain),
        "input": bool(th.equal(blocks[0].srcdata[dgl.NID], input_nodes)),
        "dtype": str(blocks[-1].srcdata[dgl.NID].dtype),
    }
    if seeds is not None:
        out["seeds"] = bool(th.equal(blocks[-1].dstdata[dgl.NID], seeds))
    if virtual_first:
        b0 = blocks[0]
        m = b0.num_dst_nodes()
        out["virtual"] = bool(
            th.equal(b0.srcdata[dgl.NID][m:], b0.dstdata[dgl.NID] + n) and bool((b0.edata[dgl.EID] == -1).all())
        )
    return out


def pair_ok(g, pos, neg) -> dict:
    u, v = pos.edges()
    su, sv = g.find_edges(pos.edata[dgl.EID])
    return {
        "pos": {"n": sorted(pos.ndata.keys()), "e": sorted(pos.edata.keys())},
        "neg": {"n": sorted(neg.ndata.keys()), "e": sorted(neg.edata.keys())},
        "pos_edges": bool(th.equal(su, pos.ndata[dgl.NID][u]) and th.equal(sv, pos.ndata[dgl.NID][v])),
    }


def remote_in_edges(g, loader, fanout: int) -> dict:
    """What the edge loader holds of other machines' nodes' in-edges, against the graph's own (all of them, asked
    here from the servers): each a real edge from another machine's node, none held twice, and every held node of
    another machine given min(fanout, its in-edges from other machines' nodes) of them."""
    src, dst, eid = loader.tables.pool_edges
    first, n_own = loader.tables._first, loader.tables._n_inner
    mine = lambda x: (x >= first) & (x < first + n_own)  # noqa: E731
    su, sv = g.find_edges(eid)
    held = th.sort(loader.core.global_ids[n_own:].long()).values
    every = dgl.distributed.sample_neighbors(g, held, -1)
    u, v = every.edges()
    theirs = th.bincount(th.searchsorted(held, v.long()[~mine(u.long())]), minlength=held.numel())
    got = th.bincount(th.searchsorted(held, dst.long()), minlength=held.numel())
    return {
        "edges": int(eid.numel()),
        "real": bool(th.equal(su.long(), src.long()) and th.equal(sv.long(), dst.long())),
        "from_other_machines": not bool(mine(src.long()).any() or mine(dst.long()).any()),
        "once": int(th.unique(loader.core.edge_ids).numel()) == int(loader.core.edge_ids.numel()),
        "counts": bool(th.equal(got, theirs.clamp(max=fanout))),
    }


def halo_in_edges(g, loader) -> dict:
    """Per relation, whether each of the part's halo nodes whose in-edges the first block samples (one hop from the
    training seeds, the probe's two layers) holds every one of its in-edges in the loader's graph (against the
    graph's edges, all of them read here by edge id), and whether those edges are real (their ids' endpoints);
    ``short``: how many such nodes hold fewer."""
    from dgl_grappa.method.dropin.hetero import reached_by_type

    pb = g.get_partition_book()
    sampled = reached_by_type(loader.graph, {loader.target: loader.train_ids}, 1)
    pg = g.local_partition
    ntype, type_gid = pb.map_to_per_ntype(pg.ndata[dgl.NID][~pg.ndata["inner_node"].bool()])
    complete, real, short, checked = True, True, 0, 0
    for rel in g.canonical_etypes:
        t = rel[2]
        n_in = loader.num_inner_by_type[t]
        kept = loader.global_ids[t][n_in:]
        part_halo = type_gid[ntype == g.ntypes.index(t)]
        local = n_in + (th.isin(kept, part_halo) & sampled[t][n_in:]).nonzero(as_tuple=True)[0]
        if not local.numel():
            continue
        gids = th.sort(loader.global_ids[t][local]).values
        _, v_all = g.find_edges(th.arange(g.num_edges(rel)), etype=rel)
        v_all = v_all[th.isin(v_all, gids)]
        want = th.bincount(th.searchsorted(gids, v_all), minlength=gids.numel())
        order = th.argsort(loader.global_ids[t][local])
        have = loader.graph.in_degrees(local[order], etype=rel)
        complete &= bool(th.equal(have, want))
        short += int((have < want).sum())
        checked += int(gids.numel())
        u, v, e = loader.graph.in_edges(local, form="all", etype=rel)
        su, sv = g.find_edges(loader.edge_ids[rel][e.long()], etype=rel)
        real &= bool(th.equal(su, loader.global_ids[rel[0]][u.long()]) and th.equal(sv, loader.global_ids[t][v.long()]))
    return {"complete": complete, "real": real, "short": short, "checked": checked}


def homogeneous(g, args) -> dict:
    pb = g.get_partition_book()
    sampler = dgl.dataloading.NeighborSampler([3, 4])
    rec = {}
    nid = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True)
    inp, seeds, blocks = next(iter(dgl.dataloading.DistNodeDataLoader(g, nid, sampler, batch_size=16)))
    rec["dgl_node"] = {"blocks": [fields(b) for b in blocks], "ids": homo_ids_ok(g, blocks, inp, seeds, False)}
    loader = GrappaLoader(g, sampler, 16, first_hop="block", part_config=args.part_config)
    rec["feat_key"] = loader.feat_key
    batches = iter(loader)
    inp, seeds, blocks = next(batches)
    rec["grappa_node"] = {"blocks": [fields(b) for b in blocks], "ids": homo_ids_ok(g, blocks, inp, seeds, True)}
    # serve(g): during an epoch the loader's own rows (virtual ones too), outside it the DistTensor's
    served = loader.serve(g)
    rec["served_in_epoch"] = bool(th.equal(served.ndata["features"][inp], loader.features(inp)))
    rec["labels_not_served"] = type(served.ndata["labels"]).__name__
    for _ in batches:
        pass
    every = th.arange(g.num_nodes())
    rec["served_outside"] = bool(th.equal(served.ndata["features"][every], g.ndata["features"][every]))

    eids = dgl.distributed.edge_split(th.ones(g.num_edges(), dtype=th.bool), pb, force_even=True)
    neg = dgl.dataloading.negative_sampler.Uniform(1)
    inp, pos, negg, blocks = next(
        iter(dgl.dataloading.DistEdgeDataLoader(g, eids, sampler, negative_sampler=neg, batch_size=16))
    )
    rec["dgl_edge"] = {
        "blocks": [fields(b) for b in blocks],
        "ids": homo_ids_ok(g, blocks, inp, None, False),
        "pairs": pair_ok(g, pos, negg),
    }
    edge_loader = GrappaEdgeLoader(
        g, sampler, 16, negative_sampler=neg, first_hop="block", part_config=args.part_config
    )
    inp, pos, negg, blocks = next(iter(edge_loader))
    rec["grappa_edge"] = {
        "blocks": [fields(b) for b in blocks],
        "ids": homo_ids_ok(g, blocks, inp, None, True),
        "pairs": pair_ok(g, pos, negg),
        "remote_in_edges": remote_in_edges(g, edge_loader, 10),
    }
    # a budget that leaves no room for fp32 tables: the loader says so (a warning on stderr)
    small = GrappaLoader(g, sampler, 16, first_hop="block", part_config=args.part_config, memory_budget="1.25")
    rec["small_budget"] = {
        "precision": small.precision,
        "halo_kept": small.tables.halo_kept,
        "halo_reach": small.tables.halo_reach,
    }
    # below the server's own features (1.0): every machine refuses it, before any collective step
    try:
        GrappaLoader(g, sampler, 16, first_hop="block", part_config=args.part_config, memory_budget="0.5")
    except ConfigError as exc:
        rec["too_small_budget"] = str(exc)
    return rec


def heterogeneous(g, args) -> dict:
    pb = g.get_partition_book()
    sampler = dgl.dataloading.NeighborSampler([3, 4])
    rec = {}
    conv = HeteroGraphConv({e: GraphConv(4, 4, norm="right", allow_zero_in_degree=True) for e in g.etypes})

    def describe(inp, seeds, blocks):
        ids_ok = True
        for b in blocks:
            for rel in b.canonical_etypes:
                u, v = b.edges(etype=rel)
                su, sv = g.find_edges(b.edges[rel].data[dgl.EID], etype=rel)
                ids_ok &= bool(
                    th.equal(su, b.srcnodes[rel[0]].data[dgl.NID][u])
                    and th.equal(sv, b.dstnodes[rel[2]].data[dgl.NID][v])
                )
        h = {t: th.ones(x.numel(), 4) for t, x in inp.items()}
        for b in blocks:
            h = {t: th.ones(x.shape[0], 4) for t, x in conv(b, h).items()}
        return {
            "input": sorted(inp),
            "seeds": sorted(seeds),
            "input_is_block0": all(th.equal(inp[t], blocks[0].srcnodes[t].data[dgl.NID]) for t in inp),
            "blocks": [
                {
                    "src": sorted(b.srcdata[dgl.NID]),
                    "dst": sorted(b.dstdata[dgl.NID]),
                    "e": sorted(":".join(r) for r in b.edata[dgl.EID]),
                    "empty_relations": sum(b.num_edges(r) == 0 for r in b.canonical_etypes),
                }
                for b in blocks
            ],
            "edges": ids_ok,
            "output_types": sorted(h),
        }

    nid = dgl.distributed.node_split(g.nodes["paper"].data["train_mask"], pb, ntype="paper", force_even=True)
    rec["dgl"] = describe(*next(iter(dgl.dataloading.DistNodeDataLoader(g, {"paper": nid}, sampler, batch_size=16))))
    loader = GrappaHeteroLoader(g, sampler, 16, target="paper")
    rec["feat_key"] = loader.feat_key
    rec["halo_in_edges"] = halo_in_edges(g, loader)
    rec["halo_in_edges_part"] = halo_in_edges(
        g, GrappaHeteroLoader(g, sampler, 16, target="paper", halo_in_edges="part")
    )
    # a DistEmbedding of a featureless type, row i = i (per-type id) in every column, served by the loader
    emb = dgl.distributed.DistEmbedding(
        g.num_nodes("author"), 4, "probe_author", part_policy=g.get_node_partition_policy("author")
    )
    own = pb.partid2nids(pb.partid, "author")
    emb.weight[own] = own.float().unsqueeze(1).repeat(1, 4)
    g.barrier()
    once = loader.one_time_bytes
    loader.serve(emb)
    rec["served_once_bytes"] = loader.one_time_bytes - once
    opt = dgl.distributed.optim.SparseAdam([emb], lr=0.5)
    batches = iter(loader)
    inp, seeds, blocks = next(batches)
    rec["grappa"] = describe(inp, seeds, blocks)
    ids = inp["author"]
    rows = emb(ids)
    rec["embedding_rows"] = bool(th.equal(rows, ids.float().unsqueeze(1).repeat(1, 4)))
    rec["embedding_traced"] = len(emb._trace) == 1 and rows.requires_grad
    mine = (ids >= int(own[0])) & (ids <= int(own[-1])) if own.numel() else th.zeros_like(ids, dtype=th.bool)
    # only own rows carry a gradient to DGL's optimizer: it sends none to another machine
    rec["traced_only_own"] = bool(th.equal(emb._trace[0][0], ids[mine]))
    rows.sum().backward()
    opt.step()
    with th.no_grad():
        after = emb.weight[ids[mine]]
    rec["own_rows_trained"] = bool(mine.any()) and bool((after != ids[mine].float().unsqueeze(1)).all())
    rec["frozen_in_epoch"] = bool(th.equal(emb(ids[~mine])[:, 0], ids[~mine].float()))
    for _ in batches:
        pass
    with th.no_grad():
        rec["outside_epoch_is_dgl"] = bool(th.equal(emb(ids), emb.weight[ids]))
    # the next epoch starts with the halo's rows read again: what their owners' steps made of them
    halo = ids[~mine]
    batches = iter(loader)
    next(batches)
    with th.no_grad():
        served, now = emb(halo), emb.weight[halo]
    rec["halo_refreshed"] = bool(th.equal(served, now)) and loader.refresh_bytes > 0
    rec["halo_moved"] = bool((now[:, 0] != halo.float()).any())
    for _ in batches:
        pass
    # the memory budget: the kept halo's feature rows fit what the budget leaves beside the server's own rows
    own_fp32 = sum(x.numel() * 4 for x in loader._own.values())
    for name, budget in (("default_budget", "1.5"), ("small_budget", "1.05")):
        held = loader if budget == "1.5" else GrappaHeteroLoader(g, sampler, 16, target="paper", memory_budget=budget)
        rec[name] = {
            "precision": held.precision,
            "own_fp32": own_fp32,
            "budget": float(budget),
            "halo_bytes": sum(x.nbytes for x in held._halo_feat.values()),
            "halo_kept": sum(held.halo_kept[t] for t in held.featured),
            "halo_reach": sum(held.halo_reach[t] for t in held.featured),
            "steps": len(held),
        }
    try:
        GrappaHeteroLoader(g, sampler, 16, target="paper", memory_budget="0.5")
    except ConfigError as exc:
        rec["too_small_budget"] = str(exc)
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graph_name")
    ap.add_argument("--ip_config")
    ap.add_argument("--part_config")
    ap.add_argument("--out")
    ap.add_argument("--kind", choices=["homogeneous", "heterogeneous"])
    args = ap.parse_args()
    dgl.distributed.initialize(args.ip_config)
    th.distributed.init_process_group("gloo")
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    rec = homogeneous(g, args) if args.kind == "homogeneous" else heterogeneous(g, args)
    Path(args.out, f"probe{g.rank()}.json").write_text(json.dumps(rec, indent=1))
    g.barrier()


if __name__ == "__main__":
    main()
