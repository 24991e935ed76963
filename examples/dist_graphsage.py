"""Distributed GraphSAGE written the way DGL's distributed examples are, switched to Grappa by ``--grappa``.

The model (``DistSAGE``: DGL's ``SAGEConv`` layers, or ``GraphConv`` with ``model.name: gcn``) and
the training loop are this script's own and stay as they are; Grappa changes the lines marked
``# Grappa``: the loader, the communication hook on the DDP model, and the feature read (every
row, the kept halo's included, is served from this machine's memory). The first hop is exact
for the unmodified model: the loader adds a first block in which each node's one virtual
in-neighbour carries its precomputed aggregate (``first_hop="block"``).

The package's DistDGL launcher runs it (servers, trainers, and --ip_config / --part_config /
--out_dir for each trainer); the partition folder needs the aggregates (``python -m
dgl_grappa prepare --part-config PATH``, with ``--gcn`` for GraphConv)::

    python -m dgl_grappa.distdgl --config configs/cora.yaml --compare.script=examples/dist_graphsage.py --grappa

Time, bytes, the evaluation and summary.json come from :class:`dgl_grappa.distdgl.TrainerMeter`
(what the package's reports read); drop those lines and the script trains the same.
"""

import argparse

import dgl
import torch as th
import torch.nn as nn
import torch.nn.functional as F
from dgl.nn import GraphConv, SAGEConv
from torch.nn.parallel import DistributedDataParallel

import dgl_grappa.distdgl  # several DistDGL "machines" on one host: each trainer its machine id (before initialize)
from dgl_grappa import GrappaLoader, load_config, make_correction  # Grappa
from dgl_grappa.distdgl import TrainerMeter


class DistSAGE(nn.Module):
    """GraphSAGE (or GCN) of DGL's layers; ``forward`` takes sampled blocks, or one graph for every layer."""

    def __init__(self, in_feats, n_hidden, n_classes, n_layers, dropout, conv="sage"):
        super().__init__()
        dims = [in_feats] + [n_hidden] * (n_layers - 1) + [n_classes]
        if conv == "sage":
            self.layers = nn.ModuleList(SAGEConv(a, b, "mean") for a, b in zip(dims[:-1], dims[1:]))
        else:
            self.layers = nn.ModuleList(
                GraphConv(a, b, norm="both", allow_zero_in_degree=True) for a, b in zip(dims[:-1], dims[1:])
            )
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
    parser.add_argument("--config", required=True, help="dgl_grappa YAML: fan-outs, batch size, epochs, lr")
    parser.add_argument("--graph_name", default="grappa")
    parser.add_argument("--ip_config", required=True)
    parser.add_argument("--part_config", required=True)
    parser.add_argument("--out_dir", required=True)
    parser.add_argument("--grappa", action="store_true", help="train the Grappa way: local rows only, gradients only")
    parser.add_argument("--start_epoch", type=int, default=0)  # the launcher's epoch range
    parser.add_argument("--stop_epoch", type=int, default=None)
    args, overrides = parser.parse_known_args()
    cfg = load_config(args.config, overrides)
    conv = "sage" if cfg.model.name == "sage" else "gcn"
    th.manual_seed(cfg.train.seed)
    th.set_num_threads(1)
    dgl.distributed.initialize(args.ip_config)
    th.distributed.init_process_group(backend="gloo")
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)

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
            first_hop="block",
            part_config=args.part_config,
            memory_budget=cfg.train.memory_budget,
            aggregate="mean" if conv == "sage" else "gcn",
        )
    else:
        correction = None
        train_nid = dgl.distributed.node_split(g.ndata["train_mask"], g.get_partition_book(), force_even=True)
        loader = dgl.dataloading.DistNodeDataLoader(
            g, train_nid, sampler, batch_size=cfg.train.batch_size, shuffle=True, drop_last=False
        )

    model = DistSAGE(
        g.ndata["feat"].shape[1],
        cfg.model.hidden,
        dgl_grappa.distdgl.num_classes(g),
        len(cfg.train.fanouts),
        cfg.model.dropout,
        conv,
    )
    model = DistributedDataParallel(model)
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

    for epoch in range(args.start_epoch, args.stop_epoch or cfg.train.epochs):
        model.train()
        # DistNodeDataLoader may give one trainer a batch more; GrappaLoader gives every trainer
        # the same number, so join() never has a finished rank to shadow there.
        with model.join():
            for input_nodes, seeds, blocks in meter.epoch(loader, epoch):
                x = loader.features(input_nodes) if args.grappa else g.ndata["feat"][input_nodes]  # Grappa
                y = g.ndata["label"][seeds].long()
                loss = F.cross_entropy(model(blocks, x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                meter.step(loss)
        meter.end_epoch(epoch, model.module)
    meter.finish(model.module)


if __name__ == "__main__":
    main()
