"""Distributed transductive GraphSAGE (learnable node embeddings), in the shape of DGL's
``examples/pytorch/graphsage/dist/train_dist_transductive.py`` (DGL 2.1), run with ``--dgl_sparse``: its
``DistEmb`` module holding a ``DistEmbedding`` (with its ``initializer``) in the KVStore, DGL's distributed
``SparseAdam`` over it, the ``DistSAGE`` of ``node_classification.py`` on top, and its evaluation
(``load_embs`` writes this trainer's ``node_split`` share of every row into a DistTensor, reading
``emb_layer.emb_size``).

Plain DistDGL as it is; ``train_dist_transductive.diff`` beside it is the drop-in (docs/dropin.md).
"""
import argparse
import time

import dgl
import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from dgl.distributed import DistEmbedding

from node_classification import DistSAGE, compute_acc


def initializer(shape, dtype):
    """Rows uniform in [-1, 1): the servers that hold the rows call it (unpickled by name from this script)."""
    arr = th.zeros(shape, dtype=dtype)
    arr.uniform_(-1, 1)
    return arr


class DistEmb(nn.Module):
    """A learnable row per node: a ``DistEmbedding`` (``dgl_sparse_emb``) or PyTorch's sparse ``Embedding``."""

    def __init__(self, num_nodes, emb_size, dgl_sparse_emb=False, dev_id="cpu"):
        super().__init__()
        self.dev_id = dev_id
        self.emb_size = emb_size
        self.dgl_sparse_emb = dgl_sparse_emb
        if dgl_sparse_emb:
            self.sparse_emb = DistEmbedding(num_nodes, emb_size, name="sage", init_func=initializer)
        else:
            self.sparse_emb = th.nn.Embedding(num_nodes, emb_size, sparse=True)
            nn.init.uniform_(self.sparse_emb.weight, -1.0, 1.0)

    def forward(self, idx):
        idx = idx.cpu()  # the rows live on the CPU
        if self.dgl_sparse_emb:
            return self.sparse_emb(idx, device=self.dev_id)
        return self.sparse_emb(idx).to(self.dev_id)


def load_embs(emb_layer, g):
    """This trainer's share of every node's row, written into a DistTensor (then a barrier)."""
    nodes = dgl.distributed.node_split(np.arange(g.num_nodes()), g.get_partition_book(), force_even=True)
    x = dgl.distributed.DistTensor((g.num_nodes(), emb_layer.emb_size), th.float32, "eval_embs", persistent=True)
    for start in range(0, nodes.shape[0], 1024):
        idx = nodes[start:start + 1024]
        x[idx] = emb_layer(idx).cpu()
    g.barrier()
    return x


def evaluate(model, emb_layer, g, labels, val_nid, test_nid, batch_size, device):
    """Validation and test accuracy of this trainer's share of the nodes."""
    model = model.module
    model.eval()
    emb_layer.eval()
    with th.no_grad():
        inputs = load_embs(emb_layer, g)
        pred = model.inference(g, inputs, batch_size, device)
    model.train()
    emb_layer.train()
    return compute_acc(pred[val_nid], labels[val_nid]), compute_acc(pred[test_nid], labels[test_nid])


def run(args, device, data):
    train_nid, val_nid, test_nid, n_classes, g = data
    sampler = dgl.dataloading.NeighborSampler([int(f) for f in args.fan_out.split(",")])
    dataloader = dgl.dataloading.DistNodeDataLoader(
        g, train_nid, sampler, batch_size=args.batch_size, shuffle=True, drop_last=False
    )
    emb_layer = DistEmb(g.num_nodes(), args.num_hidden, dgl_sparse_emb=args.dgl_sparse, dev_id=device)
    model = DistSAGE(args.num_hidden, args.num_hidden, n_classes, args.num_layers, F.relu, args.dropout)
    model = th.nn.parallel.DistributedDataParallel(model.to(device))
    loss_fcn = nn.CrossEntropyLoss().to(device)
    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    if args.dgl_sparse:
        emb_optimizer = dgl.distributed.optim.SparseAdam([emb_layer.sparse_emb], lr=args.sparse_lr)
    else:
        emb_optimizer = th.optim.SparseAdam(list(emb_layer.sparse_emb.parameters()), lr=args.sparse_lr)

    for epoch in range(args.num_epochs):
        tic = time.time()
        num_seeds = num_inputs = 0
        with model.join():
            for step, (input_nodes, seeds, blocks) in enumerate(dataloader):
                num_seeds += len(blocks[-1].dstdata[dgl.NID])
                num_inputs += len(blocks[0].srcdata[dgl.NID])
                blocks = [block.to(device) for block in blocks]
                batch_labels = g.ndata["labels"][seeds].long().to(device)
                batch_inputs = emb_layer(input_nodes)
                batch_pred = model(blocks, batch_inputs)
                loss = loss_fcn(batch_pred, batch_labels)
                emb_optimizer.zero_grad()
                optimizer.zero_grad()
                loss.backward()
                emb_optimizer.step()
                optimizer.step()
                if step % args.log_every == 0:
                    acc = compute_acc(batch_pred, batch_labels)
                    print(f"Part {g.rank()} | Epoch {epoch:05d} | Step {step:05d} | Loss {loss.item():.4f} | "
                          f"Train Acc {acc.item():.4f}")
        print(f"Part {g.rank()}, Epoch Time(s): {time.time() - tic:.4f}, #seeds: {num_seeds}, #inputs: {num_inputs}")
        epoch += 1
        if epoch % args.eval_every == 0:
            val_acc, test_acc = evaluate(model, emb_layer, g, g.ndata["labels"], val_nid, test_nid,
                                         args.batch_size_eval, device)
            print(f"Part {g.rank()}, Val Acc {val_acc:.4f}, Test Acc {test_acc:.4f}")


def main(args):
    dgl.distributed.initialize(args.ip_config)
    th.distributed.init_process_group(backend="gloo")
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    pb = g.get_partition_book()
    train_nid = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True)
    val_nid = dgl.distributed.node_split(g.ndata["val_mask"], pb, force_even=True)
    test_nid = dgl.distributed.node_split(g.ndata["test_mask"], pb, force_even=True)
    print(f"part {g.rank()}, train: {len(train_nid)}, val: {len(val_nid)}, test: {len(test_nid)}")
    device = th.device("cpu")
    labels = g.ndata["labels"][np.arange(g.num_nodes())]
    n_classes = len(th.unique(labels[th.logical_not(th.isnan(labels.float()))]))
    run(args, device, (train_nid, val_nid, test_nid, n_classes, g))
    print("parent ends")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Distributed transductive GraphSAGE")
    parser.add_argument("--graph_name", type=str, help="graph name")
    parser.add_argument("--ip_config", type=str, help="the file for IP configuration")
    parser.add_argument("--part_config", type=str, help="the path to the partition config file")
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
    parser.add_argument("--dgl_sparse", action="store_true", help="use DGL's distributed sparse embedding")
    parser.add_argument("--sparse_lr", type=float, default=1e-2, help="sparse lr rate")
    args = parser.parse_args()
    print(args)
    main(args)
