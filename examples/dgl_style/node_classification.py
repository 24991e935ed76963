"""Distributed GraphSAGE node classification, in the shape of DGL's
``examples/distributed/graphsage/node_classification.py`` (DGL 2.1): its arguments, its ``DistSAGE`` of
``SAGEConv('mean')`` layers with layer-wise distributed inference, its training loop (features pulled with
``g.ndata["features"][input_nodes]``, ``blocks[0].srcdata[dgl.NID]`` counted) and its evaluation.

Plain DistDGL as it is; ``node_classification.diff`` beside it is the drop-in (docs/dropin.md), and
tests/test_dgl_style.py runs both on partitions made with ``dgl.distributed.partition_graph``.
"""
import argparse
import socket
import time

import dgl
import dgl.nn.pytorch as dglnn
import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class DistSAGE(nn.Module):
    """GraphSAGE for distributed training: ``forward`` on sampled blocks, ``inference`` layer by layer."""

    def __init__(self, in_feats, n_hidden, n_classes, n_layers, activation, dropout):
        super().__init__()
        self.n_layers, self.n_hidden, self.n_classes = n_layers, n_hidden, n_classes
        widths = [in_feats] + [n_hidden] * (n_layers - 1) + [n_classes]
        self.layers = nn.ModuleList(dglnn.SAGEConv(a, b, "mean") for a, b in zip(widths[:-1], widths[1:]))
        self.dropout = nn.Dropout(dropout)
        self.activation = activation

    def forward(self, blocks, x):
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i < len(self.layers) - 1:
                h = self.dropout(self.activation(h))
        return h

    def inference(self, g, x, batch_size, device):
        """Every node's output, one layer at a time over full neighbourhoods, into DistTensors."""
        nodes = dgl.distributed.node_split(np.arange(g.num_nodes()), g.get_partition_book(), force_even=True)
        for i, layer in enumerate(self.layers):
            last = i == len(self.layers) - 1
            y = dgl.distributed.DistTensor((g.num_nodes(), self.n_classes if last else self.n_hidden), th.float32,
                                           "h_last" if last else "h", persistent=True)
            sampler = dgl.dataloading.NeighborSampler([-1])
            loader = dgl.dataloading.DistNodeDataLoader(g, nodes, sampler, batch_size=batch_size, shuffle=False,
                                                        drop_last=False)
            for input_nodes, output_nodes, blocks in loader:
                block = blocks[0].to(device)
                h = x[input_nodes].to(device)
                h = layer(block, (h, h[: block.number_of_dst_nodes()]))
                if not last:
                    h = self.dropout(self.activation(h))
                y[output_nodes] = h.cpu()
            x = y
            g.barrier()
        return x


def compute_acc(pred, labels):
    """Share of rows whose argmax is the label."""
    return (th.argmax(pred, dim=1) == labels.long()).float().sum() / len(pred)


def evaluate(model, g, inputs, labels, val_nid, test_nid, batch_size, device):
    """Validation and test accuracy of this trainer's share of the nodes."""
    model.eval()
    with th.no_grad():
        pred = model.inference(g, inputs, batch_size, device)
    model.train()
    return compute_acc(pred[val_nid], labels[val_nid]), compute_acc(pred[test_nid], labels[test_nid])


def run(args, device, data):
    train_nid, val_nid, test_nid, in_feats, n_classes, g = data
    sampler = dgl.dataloading.NeighborSampler([int(f) for f in args.fan_out.split(",")])
    dataloader = dgl.dataloading.DistNodeDataLoader(
        g, train_nid, sampler, batch_size=args.batch_size, shuffle=True, drop_last=False
    )
    model = DistSAGE(in_feats, args.num_hidden, n_classes, args.num_layers, F.relu, args.dropout).to(device)
    model = th.nn.parallel.DistributedDataParallel(model)
    loss_fcn = nn.CrossEntropyLoss().to(device)
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    epoch_time, test_acc = [], 0.0
    for epoch in range(1, args.num_epochs + 1):
        tic = time.time()
        num_seeds = num_inputs = 0
        with model.join():
            for step, (input_nodes, seeds, blocks) in enumerate(dataloader):
                batch_inputs = g.ndata["features"][input_nodes]
                batch_labels = g.ndata["labels"][seeds].long()
                num_seeds += len(blocks[-1].dstdata[dgl.NID])
                num_inputs += len(blocks[0].srcdata[dgl.NID])
                blocks = [block.to(device) for block in blocks]
                batch_pred = model(blocks, batch_inputs.to(device))
                loss = loss_fcn(batch_pred, batch_labels.to(device))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if (step + 1) % args.log_every == 0:
                    acc = compute_acc(batch_pred, batch_labels)
                    print(f"Part {g.rank()} | Epoch {epoch:05d} | Step {step:05d} | Loss {loss.item():.4f} | "
                          f"Train Acc {acc.item():.4f}")
        toc = time.time()
        print(f"Part {g.rank()}, Epoch Time(s): {toc - tic:.4f}, #seeds: {num_seeds}, #inputs: {num_inputs}")
        epoch_time.append(toc - tic)
        if epoch % args.eval_every == 0 or epoch == args.num_epochs:
            val_acc, test_acc = evaluate(model.module, g, g.ndata["features"], g.ndata["labels"], val_nid,
                                         test_nid, args.batch_size_eval, device)
            print(f"Part {g.rank()}, Val Acc {val_acc:.4f}, Test Acc {test_acc:.4f}")
    return np.mean(epoch_time), test_acc


def main(args):
    print(f"{socket.gethostname()}: Initializing DistDGL.")
    dgl.distributed.initialize(args.ip_config)
    th.distributed.init_process_group(backend=args.backend)
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    pb = g.get_partition_book()
    train_nid = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True)
    val_nid = dgl.distributed.node_split(g.ndata["val_mask"], pb, force_even=True)
    test_nid = dgl.distributed.node_split(g.ndata["test_mask"], pb, force_even=True)
    print(f"part {g.rank()}, train: {len(train_nid)}, val: {len(val_nid)}, test: {len(test_nid)}")
    device = th.device("cpu")
    n_classes = args.n_classes
    if n_classes == 0:
        labels = g.ndata["labels"][np.arange(g.num_nodes())]
        n_classes = len(th.unique(labels[th.logical_not(th.isnan(labels.float()))]))
    in_feats = g.ndata["features"].shape[1]
    epoch_time, test_acc = run(args, device, (train_nid, val_nid, test_nid, in_feats, n_classes, g))
    print(f"Summary of node classification(GraphSAGE): GraphName {args.graph_name} | "
          f"TrainEpochTime(mean) {epoch_time:.4f} | TestAccuracy {test_acc:.4f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Distributed GraphSAGE.")
    parser.add_argument("--graph_name", type=str, help="graph name")
    parser.add_argument("--ip_config", type=str, help="the file for IP configuration")
    parser.add_argument("--part_config", type=str, help="the path to the partition config file")
    parser.add_argument("--n_classes", type=int, default=0, help="the number of classes (0: counted)")
    parser.add_argument("--backend", type=str, default="gloo", help="pytorch distributed backend")
    parser.add_argument("--num_epochs", type=int, default=20)
    parser.add_argument("--num_hidden", type=int, default=16)
    parser.add_argument("--num_layers", type=int, default=2)
    parser.add_argument("--fan_out", type=str, default="10,25")
    parser.add_argument("--batch_size", type=int, default=1000)
    parser.add_argument("--batch_size_eval", type=int, default=100000)
    parser.add_argument("--log_every", type=int, default=20)
    parser.add_argument("--eval_every", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--local_rank", type=int, help="get rank of the process")
    args = parser.parse_args()
    print(f"Arguments: {args}")
    main(args)
