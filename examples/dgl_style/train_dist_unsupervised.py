"""Distributed unsupervised GraphSAGE (link prediction), in the shape of DGL's
``examples/pytorch/graphsage/dist/train_dist_unsupervised.py`` (DGL 2.1): ``DistEdgeDataLoader`` over every
edge with a uniform negative sampler, its ``DistSAGE`` encoder, ``load_subtensor`` pulling
``g.ndata["features"]``, the dot-product ``CrossEntropyLoss``, and at the end the embeddings of every node
scored by a linear classifier on the node labels (DGL fits scikit-learn's logistic regression; this one fits
the same model with PyTorch, to need nothing beyond PyTorch and DGL).

Plain DistDGL as it is; ``train_dist_unsupervised.diff`` beside it is the drop-in (docs/dropin.md).
"""
import argparse
import time

import dgl
import dgl.function as fn
import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

from node_classification import DistSAGE


def load_subtensor(g, input_nodes, device):
    """The input rows of a batch's nodes."""
    return g.ndata["features"][input_nodes].to(device)


class CrossEntropyLoss(nn.Module):
    """Binary cross-entropy of the dot products of positive (label 1) and negative (label 0) pairs."""

    def forward(self, block_outputs, pos_graph, neg_graph):
        scores = []
        for pair_graph in (pos_graph, neg_graph):
            with pair_graph.local_scope():
                pair_graph.ndata["h"] = block_outputs
                pair_graph.apply_edges(fn.u_dot_v("h", "h", "score"))
                scores.append(pair_graph.edata["score"])
        score = th.cat(scores)
        label = th.cat([th.ones_like(scores[0]), th.zeros_like(scores[1])])
        return F.binary_cross_entropy_with_logits(score, label)


def generate_emb(model, g, inputs, batch_size, device):
    """Every node's embedding (layer-wise inference)."""
    model.eval()
    with th.no_grad():
        return model.inference(g, inputs, batch_size, device)


def compute_acc(emb, labels, train_nids, val_nids, test_nids, epochs=300):
    """Accuracy of a multinomial logistic regression fit on the training nodes' standardised embeddings."""
    emb = emb[np.arange(labels.shape[0])].float()
    emb = (emb - emb.mean(0, keepdim=True)) / emb.std(0, keepdim=True).clamp(min=1e-6)
    labels = labels.long()
    clf = nn.Linear(emb.shape[1], int(labels.max()) + 1)
    # the line search keeps a step from overshooting to NaN, which plain LBFGS does from some initialisations
    opt = optim.LBFGS(clf.parameters(), max_iter=epochs, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(clf(emb[train_nids]), labels[train_nids])
        loss.backward()
        return loss

    opt.step(closure)
    pred = clf(emb).argmax(1)
    return [float((pred[n] == labels[n]).float().mean()) for n in (val_nids, test_nids)]


def run(args, device, data):
    train_eids, train_nids, in_feats, g, global_train_nid, global_valid_nid, global_test_nid, labels = data
    neg_sampler = dgl.dataloading.negative_sampler.Uniform(args.num_negs)
    sampler = dgl.dataloading.NeighborSampler([int(f) for f in args.fan_out.split(",")])
    exclude = "reverse_id" if args.remove_edge else None
    reverse_eids = th.arange(g.num_edges()) if args.remove_edge else None
    dataloader = dgl.dataloading.DistEdgeDataLoader(
        g, train_eids, sampler, negative_sampler=neg_sampler, exclude=exclude, reverse_eids=reverse_eids,
        batch_size=args.batch_size, shuffle=True, drop_last=False
    )
    model = DistSAGE(in_feats, args.num_hidden, args.num_hidden, args.num_layers, F.relu, args.dropout)
    model = th.nn.parallel.DistributedDataParallel(model.to(device))
    loss_fcn = CrossEntropyLoss().to(device)
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    for epoch in range(args.num_epochs):
        tic = time.time()
        num_seeds = 0
        with model.join():
            for step, (input_nodes, pos_graph, neg_graph, blocks) in enumerate(dataloader):
                pos_graph = pos_graph.to(device)
                neg_graph = neg_graph.to(device)
                blocks = [block.to(device) for block in blocks]
                batch_inputs = load_subtensor(g, input_nodes, device)
                batch_pred = model(blocks, batch_inputs)
                loss = loss_fcn(batch_pred, pos_graph, neg_graph)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                num_seeds += pos_graph.num_edges()
                if step % args.log_every == 0:
                    print(f"[{g.rank()}] Epoch {epoch:05d} | Step {step:05d} | Loss {loss.item():.4f}")
        print(f"[{g.rank()}]Epoch Time(s): {time.time() - tic:.4f}, #seeds: {num_seeds}")

    pred = generate_emb(model.module, g, g.ndata["features"], args.batch_size_eval, device)
    if g.rank() == 0:
        eval_acc, test_acc = compute_acc(pred, labels, global_train_nid, global_valid_nid, global_test_nid)
        print(f"eval acc {eval_acc:.4f}; test acc {test_acc:.4f}")
    th.distributed.barrier()


def main(args):
    dgl.distributed.initialize(args.ip_config)
    th.distributed.init_process_group(backend="gloo")
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    print("rank:", g.rank(), "number of edges", g.num_edges())
    train_eids = dgl.distributed.edge_split(th.ones((g.num_edges(),), dtype=th.bool), g.get_partition_book(),
                                            force_even=True)
    train_nids = dgl.distributed.node_split(th.ones((g.num_nodes(),), dtype=th.bool), g.get_partition_book())
    every = np.arange(g.num_nodes())
    global_train_nid = th.nonzero(g.ndata["train_mask"][every]).squeeze(1)
    global_valid_nid = th.nonzero(g.ndata["val_mask"][every]).squeeze(1)
    global_test_nid = th.nonzero(g.ndata["test_mask"][every]).squeeze(1)
    labels = g.ndata["labels"][every]
    device = th.device("cpu")
    in_feats = g.ndata["features"].shape[1]
    run(args, device, (train_eids, train_nids, in_feats, g, global_train_nid, global_valid_nid, global_test_nid,
                       labels))
    print("parent ends")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Distributed unsupervised GraphSAGE")
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
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--local_rank", type=int, help="get rank of the process")
    parser.add_argument("--num_negs", type=int, default=1)
    parser.add_argument("--remove_edge", default=False, action="store_true",
                        help="whether to remove edges during sampling")
    args = parser.parse_args()
    print(args)
    main(args)
