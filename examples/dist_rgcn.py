"""Distributed RGCN on a heterogeneous graph, written the way DGL's distributed examples are, switched to Grappa
by ``--grappa``.

The script follows the shape of DGL's ``examples/pytorch/rgcn/experimental/entity_classify_dist.py`` (ogbn-mag):
``DistNodeDataLoader`` over this trainer's share of the target type's training nodes, sampling every relation;
each batch's input rows per node type, features for the types that have them and a ``DistEmbedding`` row per
node of a featureless type, pulled through the KVStore; DGL's distributed ``SparseAdam`` for the embeddings; an
RGCN of its own (``RelGraphLayer``: a ``GraphConv`` per relation summed by DGL's ``HeteroGraphConv``, a self-loop
and a bias per node type). Grappa changes the lines marked ``# Grappa``: the loader (``GrappaHeteroLoader``: this
machine's own seeds, sampled per relation inside its local heterograph) and the inputs: ``loader.features`` serves
the featured types' rows from this machine's memory, and ``loader.embedding(dim)`` replaces the ``DistEmbedding``
per featureless type with this machine's own rows (trained here by PyTorch's ``SparseAdam``) and the kept halo's
frozen initial rows; no row and no gradient leaves the machine.

The package's DistDGL launcher runs it (servers, trainers, and --ip_config / --part_config / --out_dir for each
trainer)::

    python -m dgl_grappa.distdgl --config configs/hetero.yaml --compare.script=examples/dist_rgcn.py
    python -m dgl_grappa.distdgl --config configs/hetero.yaml --compare.script=examples/dist_rgcn.py --grappa

Time, bytes, the evaluation and summary.json come from :class:`dgl_grappa.distdgl.TrainerMeter`; for its
whole-graph evaluation rank 0 needs every featureless row once per evaluation (``eval_rows`` below); drop those
lines and the script trains the same.
"""

import argparse

import dgl
import torch as th
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from dgl.nn import GraphConv, HeteroGraphConv
from torch.nn.parallel import DistributedDataParallel

from dgl_grappa import GrappaHeteroLoader, load_config  # Grappa
from dgl_grappa.distdgl import TrainerMeter
from dgl_grappa.kinds import embeddings as dh


class RelGraphLayer(nn.Module):
    """One RGCN layer: per relation the mean of its in-neighbours' rows times the relation's weight, summed over
    the relations into a node type, plus a self-loop weight and a bias per node type."""

    def __init__(self, in_dims, out_dim, rels):
        super().__init__()
        self.conv = HeteroGraphConv(
            {r: GraphConv(in_dims[r[0]], out_dim, norm="right", bias=False, allow_zero_in_degree=True) for r in rels},
            aggregate="sum",
        )
        self.loop = nn.ModuleDict({t: nn.Linear(d, out_dim) for t, d in in_dims.items()})

    def forward(self, g, x):
        x_dst = {t: x[t][: g.num_dst_nodes(t)] for t in g.dsttypes if t in x} if g.is_block else x
        h = self.conv(g, x)
        return {t: self.loop[t](v) + h[t] if t in h else self.loop[t](v) for t, v in x_dst.items()}


class EntityClassify(nn.Module):
    """A stack of RGCN layers returning the target type's rows; ``forward`` takes sampled blocks or the whole graph."""

    def __init__(self, in_dims, hidden, n_classes, rels, n_layers, dropout, target):
        super().__init__()
        dims = [dict(in_dims)] + [{t: hidden for t in in_dims}] * (n_layers - 1)
        outs = [hidden] * (n_layers - 1) + [n_classes]
        self.layers = nn.ModuleList(RelGraphLayer(d, o, rels) for d, o in zip(dims, outs))
        self.dropout = nn.Dropout(dropout)
        self.target = target

    def forward(self, blocks, x):
        if not isinstance(blocks, (list, tuple)):
            blocks = [blocks] * len(self.layers)
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i != len(self.layers) - 1:
                h = {t: self.dropout(F.relu(v)) for t, v in h.items()}
        # A batch need not use every weight (a relation it sampled no edge of): a zero term gives each one a
        # gradient, so DDP's all-reduce always carries the same parameters (no unused-parameter search).
        return h[self.target] + 0.0 * sum(p.sum() for p in self.parameters())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="dgl_grappa YAML: fan-outs, batch size, epochs, lr, embed_*")
    parser.add_argument("--graph_name", default="grappa")
    parser.add_argument("--ip_config", required=True)
    parser.add_argument("--part_config", required=True)
    parser.add_argument("--out_dir", required=True)
    parser.add_argument("--grappa", action="store_true", help="train the Grappa way: local rows only, gradients only")
    parser.add_argument("--start_epoch", type=int, default=0)  # the launcher's epoch range
    parser.add_argument("--stop_epoch", type=int, default=None)
    args, overrides = parser.parse_known_args()
    cfg = load_config(args.config, overrides)
    th.manual_seed(cfg.train.seed)
    th.set_num_threads(1)
    dgl.distributed.initialize(args.ip_config)
    th.distributed.init_process_group(backend="gloo")
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    target = cfg.data.target or next(t for t in g.ntypes if "label" in g.nodes[t].data)
    dim = cfg.model.embed_dim

    sampler = dgl.dataloading.MultiLayerNeighborSampler(cfg.train.fanouts)
    if args.grappa:
        loader = GrappaHeteroLoader(
            g,
            sampler,
            cfg.train.batch_size,
            target=target,
            halo=cfg.train.halo,  # Grappa
            seed=cfg.train.seed,
            memory_budget=cfg.train.memory_budget,
        )
        emb = loader.embedding(dim, seed=cfg.train.seed)  # Grappa: the featureless types' rows on this machine
        emb_optimizer = emb.optimizer(lr=cfg.model.embed_lr)  # Grappa: PyTorch's SparseAdam, on this machine
    else:
        train_nid = dgl.distributed.node_split(
            g.nodes[target].data["train_mask"], g.get_partition_book(), ntype=target, force_even=True
        )
        loader = dgl.dataloading.DistNodeDataLoader(
            g, {target: train_nid}, sampler, batch_size=cfg.train.batch_size, shuffle=True, drop_last=False
        )
        # a DistEmbedding per featureless type whose rows start as Grappa's (the package's helper)
        embeds = dh.dist_embeddings(g, [t for t in g.ntypes if "feat" not in g.nodes[t].data], dim, seed=cfg.train.seed)
        emb_optimizer = dgl.distributed.optim.SparseAdam(list(embeds.values()), lr=cfg.model.embed_lr)

    in_dims = {t: g.nodes[t].data["feat"].shape[1] if "feat" in g.nodes[t].data else dim for t in g.ntypes}
    model = EntityClassify(
        in_dims,
        cfg.model.hidden,
        dh.dist_num_classes(g, target),
        list(g.canonical_etypes),
        len(cfg.train.fanouts),
        cfg.model.dropout,
        target,
    )
    model = DistributedDataParallel(model)
    optimizer = th.optim.Adam(model.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    meter = TrainerMeter(
        cfg,
        g,
        args.out_dir,
        None,
        "distdgl-grappa" if args.grappa else "distdgl",
        halo=getattr(loader, "halo", "remote"),
        model=model,
        optimizer=optimizer,
        held=loader if args.grappa else None,
        one_time_bytes=getattr(loader, "one_time_bytes", 0),
    )
    # DGL's sparse optimizer exchanges gradients among all trainers at every step, so every trainer takes the same
    # number of steps: the fewest any trainer has (GrappaHeteroLoader gives every trainer the same number anyway)
    steps = th.tensor([len(loader) if args.grappa else -(-len(train_nid) // cfg.train.batch_size)])  # its batches
    dist.all_reduce(steps, op=dist.ReduceOp.MIN)

    def inputs(input_nodes):
        if args.grappa:  # Grappa: every row from this machine's memory
            return {**loader.features(input_nodes), **emb(input_nodes)}
        return {t: embeds[t](ids) if t in embeds else g.nodes[t].data["feat"][ids] for t, ids in input_nodes.items()}

    def eval_rows():
        """Every featureless type's rows on rank 0, in the graph's node order (the meter's whole-graph evaluation)."""
        if args.grappa:  # every trainer hands its own rows to rank 0
            return emb.gather_rows(args.part_config)
        return dh.eval_rows(g, embeds, args.part_config)  # rank 0 pulls them from the KVStore

    for epoch in range(args.start_epoch, args.stop_epoch or cfg.train.epochs):
        model.train()
        if args.grappa:
            loader.set_epoch(epoch)  # Grappa: an epoch's batches are a function of its index
        for input_nodes, seeds, blocks in meter.epoch(loader, epoch, cap=int(steps)):
            logits = model(blocks, inputs(input_nodes))
            loss = F.cross_entropy(logits, g.nodes[target].data["label"][seeds[target]].long())
            emb_optimizer.zero_grad()
            optimizer.zero_grad()
            loss.backward()
            emb_optimizer.step()  # DistDGL: the rows' gradients go to their owners; Grappa: local
            optimizer.step()
            meter.step(loss)
        meter.end_epoch(epoch, model.module, eval_rows)
    meter.finish(model.module)


if __name__ == "__main__":
    main()
