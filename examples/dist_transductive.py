"""Distributed GraphSAGE on learnable node embeddings, written the way DGL's distributed examples are,
switched to Grappa by ``--grappa``.

The script follows the shape of DGL's ``examples/pytorch/graphsage/dist/train_dist_transductive.py``: the
graph has no input features, so every node gets a learnable row of ``model.embed_dim`` values, kept in a
``DistEmbedding`` sharded over the KVStore and trained by DGL's distributed ``SparseAdam`` (every step pulls
the batch's rows from their owners and sends their gradients back). Its GraphSAGE (``DistSAGE``, DGL's
``SAGEConv('mean')`` layers) reads those rows. Grappa changes the lines marked ``# Grappa``: the loader
(``GrappaLoader`` with ``feat_key=None``: this machine's own seeds, sampled inside its partition), and the
embedding: ``loader.embedding(dim)`` holds a trainable row for every node this machine owns, updated here by
PyTorch's ``SparseAdam`` (``emb.optimizer(lr)``), and the kept halo's frozen initial rows; no row and no
gradient leaves the machine. The first hop is sampled (aggregates of trained rows would go stale).

The package's DistDGL launcher runs it (servers, trainers, and --ip_config / --part_config / --out_dir for
each trainer)::

    python -m dgl_grappa.distdgl --config configs/embed.yaml --compare.script=examples/dist_transductive.py
    python -m dgl_grappa.distdgl --config configs/embed.yaml --compare.script=examples/dist_transductive.py --grappa

Time, bytes, the evaluation and summary.json come from :class:`dgl_grappa.distdgl.TrainerMeter`; for its
whole-graph evaluation rank 0 needs every row once per evaluation (``eval_rows`` below); drop those lines and
the script trains the same.
"""

import argparse

import dgl
import torch as th
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from dgl.nn import SAGEConv
from torch.nn.parallel import DistributedDataParallel

import dgl_grappa.distdgl  # several DistDGL "machines" on one host: each trainer its machine id (before initialize)
from dgl_grappa import GrappaLoader, load_config, make_correction  # Grappa
from dgl_grappa.distdgl import TrainerMeter
from dgl_grappa.kinds.embeddings import dist_embeddings
from dgl_grappa.kinds.embeddings import eval_rows as kvstore_rows
from dgl_grappa.method.embedding import gather_rows
from dgl_grappa.partition.layout import to_original_order


class DistSAGE(nn.Module):
    """GraphSAGE of DGL's layers; ``forward`` takes sampled blocks, or one graph for every layer."""

    def __init__(self, in_feats, n_hidden, n_classes, n_layers, dropout):
        super().__init__()
        dims = [in_feats] + [n_hidden] * (n_layers - 1) + [n_classes]
        self.layers = nn.ModuleList(SAGEConv(a, b, "mean") for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, x):
        if not isinstance(blocks, (list, tuple)):
            blocks = [blocks] * len(self.layers)
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i != len(self.layers) - 1:
                h = self.dropout(F.relu(h))
        return h


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
    dim = cfg.model.embed_dim

    sampler = dgl.dataloading.NeighborSampler(cfg.train.fanouts)
    if args.grappa:
        correction = make_correction(cfg.grappa.correction)  # Grappa
        loader = GrappaLoader(
            g,
            sampler,
            cfg.train.batch_size,
            correction,
            seed=cfg.train.seed,  # Grappa
            halo=cfg.train.halo,
            feat_key=None,
        )  # no features: learnable rows instead
        emb = loader.embedding(dim, seed=cfg.train.seed)  # Grappa: this machine's rows and the halo's frozen ones
        emb_optimizer = emb.optimizer(lr=cfg.model.embed_lr)  # Grappa: PyTorch's SparseAdam, on this machine
    else:
        correction = None
        train_nid = dgl.distributed.node_split(g.ndata["train_mask"], g.get_partition_book(), force_even=True)
        loader = dgl.dataloading.DistNodeDataLoader(
            g, train_nid, sampler, batch_size=cfg.train.batch_size, shuffle=True, drop_last=False
        )
        # a DistEmbedding over every node whose rows start as Grappa's (the package's helper; DGL's example draws
        # them uniform in [-1, 1) too)
        emb = dist_embeddings(g, ["_N"], dim, seed=cfg.train.seed)["_N"]
        emb_optimizer = dgl.distributed.optim.SparseAdam([emb], lr=cfg.model.embed_lr)

    model = DistributedDataParallel(
        DistSAGE(dim, cfg.model.hidden, dgl_grappa.distdgl.num_classes(g), len(cfg.train.fanouts), cfg.model.dropout)
    )
    if args.grappa:
        correction.register(model)  # Grappa
    optimizer = th.optim.Adam(model.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    meter = TrainerMeter(
        cfg,
        g,
        args.out_dir,
        correction,
        "distdgl-grappa" if args.grappa else "distdgl",
        halo=getattr(loader, "halo", "remote"),
        model=model,
        optimizer=optimizer,
        held=loader if args.grappa else None,
        one_time_bytes=getattr(loader, "one_time_bytes", 0),
    )
    # DGL's sparse optimizer exchanges gradients among all trainers at every step, so every trainer takes the same
    # number of steps: the fewest any trainer has (GrappaLoader gives every trainer the same number anyway)
    steps = th.tensor([len(loader) if args.grappa else -(-len(train_nid) // cfg.train.batch_size)])  # its batches
    dist.all_reduce(steps, op=dist.ReduceOp.MIN)

    def eval_rows():
        """Every node's row on rank 0, in the graph's node order (the meter's whole-graph evaluation)."""
        if args.grappa:  # every trainer hands its own rows to rank 0
            table = gather_rows(emb.global_ids[: emb.num_inner], emb.own.weight)
            return to_original_order(table, args.part_config) if table is not None else None
        return (kvstore_rows(g, {"_N": emb}, args.part_config) or {}).get("_N")  # rank 0 pulls them from the KVStore

    for epoch in range(args.start_epoch, args.stop_epoch or cfg.train.epochs):
        model.train()
        if args.grappa:
            loader.set_epoch(epoch)  # Grappa: an epoch's batches are a function of its index
        for input_nodes, seeds, blocks in meter.epoch(loader, epoch, cap=int(steps)):
            x = emb(input_nodes)  # DistDGL: a KVStore pull; Grappa: rows of this machine's memory
            y = g.ndata["label"][seeds].long()
            loss = F.cross_entropy(model(blocks, x), y)
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
