"""Distributed link prediction written the way DGL's distributed examples are, switched to Grappa by ``--grappa``.

The script follows the shape of DGL's ``examples/pytorch/graphsage/dist/train_dist_unsupervised.py``:
a GraphSAGE encoder of its own (``DistSAGE``, DGL's ``SAGEConv('mean')`` layers), a
``DistEdgeDataLoader`` over this trainer's share of the edges with a uniform negative sampler, and
a loss that scores every pair by the dot product of its ends' rows (binary cross-entropy, positives
1, negatives 0). Grappa changes the lines marked ``# Grappa``: the loader (``GrappaEdgeLoader``
yields the same ``(input_nodes, pair_graph, neg_pair_graph, blocks)``: this machine's own edges,
negatives drawn from the nodes it holds) and the feature read (every row from this machine's
memory). The first hop is exact for the unmodified encoder (``first_hop="block"``).

The package's DistDGL launcher runs it (servers, trainers, and --ip_config / --part_config /
--out_dir for each trainer) on partitions cut without the held-out edges (``train.task: link``)::

    python -m dgl_grappa.distdgl --config configs/link.yaml --compare.script=examples/dist_link.py           # DistDGL
    python -m dgl_grappa.distdgl --config configs/link.yaml --compare.script=examples/dist_link.py --grappa  # Grappa

Time, bytes, the evaluation (MRR and hits@k of the held-out edges on rank 0) and summary.json come
from :class:`dgl_grappa.distdgl.TrainerMeter`; drop those lines and the script trains the same.
"""

import argparse

import dgl
import torch as th
import torch.nn as nn
import torch.nn.functional as F
from dgl.nn import SAGEConv
from torch.nn.parallel import DistributedDataParallel

import dgl_grappa.distdgl  # noqa: F401  (several DistDGL "machines" on one host: each trainer its machine id)
from dgl_grappa import GrappaEdgeLoader, load_config  # Grappa
from dgl_grappa.distdgl import TrainerMeter


class DistSAGE(nn.Module):
    """A GraphSAGE encoder of DGL's layers: ``forward`` takes sampled blocks, or one graph for every layer."""

    def __init__(self, in_feats, n_hidden, n_layers, dropout):
        super().__init__()
        dims = [in_feats] + [n_hidden] * n_layers
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


class PairLoss(nn.Module):
    """Every pair's score is the dot product of its two ends' rows; positives should score high, negatives low."""

    def forward(self, h, pos_graph, neg_graph):
        scores, labels = [], []
        for graph, label in ((pos_graph, 1.0), (neg_graph, 0.0)):
            u, v = graph.edges()
            s = (h[u.long()] * h[v.long()]).sum(-1)
            scores.append(s)
            labels.append(th.full_like(s, label))
        return F.binary_cross_entropy_with_logits(th.cat(scores), th.cat(labels))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="dgl_grappa YAML: fan-outs, batch size, epochs, lr, link")
    parser.add_argument("--graph_name", default="grappa")
    parser.add_argument("--ip_config", required=True)
    parser.add_argument("--part_config", required=True)
    parser.add_argument("--out_dir", required=True)
    parser.add_argument(
        "--grappa", action="store_true", help="train the Grappa way: local edges and rows, gradients only"
    )
    parser.add_argument("--start_epoch", type=int, default=0)  # the launcher's epoch range
    parser.add_argument("--stop_epoch", type=int, default=None)
    args, overrides = parser.parse_known_args()
    cfg = load_config(args.config, overrides)
    th.manual_seed(cfg.train.seed)
    th.set_num_threads(1)
    dgl.distributed.initialize(args.ip_config)
    th.distributed.init_process_group(backend="gloo")
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)

    sampler = dgl.dataloading.NeighborSampler(cfg.train.fanouts)
    neg_sampler = dgl.dataloading.negative_sampler.Uniform(cfg.link.negatives)
    if args.grappa:
        # Grappa: this machine's own edges (their sources held here), negatives from the nodes it holds
        loader = GrappaEdgeLoader(
            g,
            sampler,
            cfg.train.batch_size,
            negative_sampler=neg_sampler,  # Grappa
            seed=cfg.train.seed,
            halo=cfg.train.halo,
            first_hop="block",
            part_config=args.part_config,
            memory_budget=cfg.train.memory_budget,
        )
    else:
        train_eids = dgl.distributed.edge_split(
            th.ones((g.num_edges(),), dtype=th.bool), g.get_partition_book(), force_even=True
        )
        loader = dgl.dataloading.DistEdgeDataLoader(
            g,
            train_eids,
            sampler,
            negative_sampler=neg_sampler,
            batch_size=cfg.train.batch_size,
            shuffle=True,
            drop_last=False,
        )

    model = DistributedDataParallel(
        DistSAGE(g.ndata["feat"].shape[1], cfg.model.hidden, len(cfg.train.fanouts), cfg.model.dropout)
    )
    loss_fcn = PairLoss()
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

    for epoch in range(args.start_epoch, args.stop_epoch or cfg.train.epochs):
        model.train()
        if args.grappa:
            loader.set_epoch(epoch)  # Grappa: an epoch's batches are a function of its index
        # DistEdgeDataLoader may give one trainer a batch more; GrappaEdgeLoader gives every trainer the same number
        with model.join():
            for input_nodes, pos_graph, neg_graph, blocks in meter.epoch(loader, epoch):
                x = loader.features(input_nodes) if args.grappa else g.ndata["feat"][input_nodes]  # Grappa
                loss = loss_fcn(model(blocks, x), pos_graph, neg_graph)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                meter.step(loss)
        meter.end_epoch(epoch, model.module)
    meter.finish(model.module)


if __name__ == "__main__":
    main()
