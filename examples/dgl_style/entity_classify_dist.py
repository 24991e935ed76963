"""Distributed RGCN entity classification on a heterogeneous graph, in the shape of DGL's
``examples/pytorch/rgcn/experimental/entity_classify_dist.py`` (DGL 2.1), run with ``--sparse-embedding
--dgl-sparse``: ``DistNodeDataLoader`` over the ``paper`` type's training nodes; its ``DistEmbedLayer`` that
projects each featured type's ``g.nodes[t].data["feat"][ids]`` with ``node_projs`` and makes a
``DistEmbedding`` (with ``init_emb``) per featureless type, DDP-wrapped itself; its ``EntityClassify`` of
``RelGraphConvLayer``s (a ``HeteroGraphConv`` of ``GraphConv(norm="right")`` per relation with a weight per
relation, a bias, an optional self-loop); DGL's distributed ``SparseAdam``; ``assert len(logits) == 1``; and
its evaluation over DistNodeDataLoaders of the validation and test nodes.

Plain DistDGL as it is; ``entity_classify_dist.diff`` beside it is the drop-in (docs/dropin.md).
"""
import argparse
import time

import dgl
import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F
from dgl import nn as dglnn
from torch.nn.parallel import DistributedDataParallel


class RelGraphConvLayer(nn.Module):
    """One relational graph convolution: per relation the right-normalised neighbour sum times the relation's
    weight, summed into each node type; a bias, an optional self-loop weight, an activation and dropout."""

    def __init__(self, in_feat, out_feat, rel_names, num_bases, *, weight=True, bias=True, activation=None,
                 self_loop=False, dropout=0.0):
        super().__init__()
        self.in_feat, self.out_feat, self.rel_names = in_feat, out_feat, rel_names
        self.bias, self.activation, self.self_loop = bias, activation, self_loop
        self.conv = dglnn.HeteroGraphConv({rel: dglnn.GraphConv(in_feat, out_feat, norm="right", weight=False,
                                                                 bias=False) for rel in rel_names})
        self.use_weight = weight
        self.use_basis = num_bases < len(rel_names) and weight
        if weight:
            if self.use_basis:
                self.basis = dglnn.WeightBasis((in_feat, out_feat), num_bases, len(rel_names))
            else:
                self.weight = nn.Parameter(th.Tensor(len(rel_names), in_feat, out_feat))
                nn.init.xavier_uniform_(self.weight, gain=nn.init.calculate_gain("relu"))
        if bias:
            self.h_bias = nn.Parameter(th.zeros(out_feat))
        if self_loop:
            self.loop_weight = nn.Parameter(th.Tensor(in_feat, out_feat))
            nn.init.xavier_uniform_(self.loop_weight, gain=nn.init.calculate_gain("relu"))
        self.dropout = nn.Dropout(dropout)

    def forward(self, g, inputs):
        g = g.local_var()
        wdict = {}
        if self.use_weight:
            weight = self.basis() if self.use_basis else self.weight
            wdict = {self.rel_names[i]: {"weight": w.squeeze(0)} for i, w in enumerate(th.split(weight, 1, dim=0))}
        inputs_dst = {k: v[: g.number_of_dst_nodes(k)] for k, v in inputs.items()} if g.is_block else inputs
        hs = self.conv(g, inputs, mod_kwargs=wdict)

        def _apply(ntype, h):
            if self.self_loop:
                h = h + th.matmul(inputs_dst[ntype], self.loop_weight)
            if self.bias:
                h = h + self.h_bias
            if self.activation:
                h = self.activation(h)
            return self.dropout(h)

        return {ntype: _apply(ntype, h) for ntype, h in hs.items()}


class EntityClassify(nn.Module):
    """RGCN: an input-to-hidden layer, ``num_hidden_layers`` hidden layers and a hidden-to-output layer."""

    def __init__(self, device, h_dim, out_dim, rel_names, num_bases=None, num_hidden_layers=1, dropout=0,
                 use_self_loop=False):
        super().__init__()
        self.device = device
        num_bases = len(rel_names) if num_bases is None or num_bases < 0 else num_bases
        self.layers = nn.ModuleList()
        for _ in range(num_hidden_layers + 1):
            self.layers.append(RelGraphConvLayer(h_dim, h_dim, rel_names, num_bases, activation=F.relu,
                                                 self_loop=use_self_loop, dropout=dropout))
        self.layers.append(RelGraphConvLayer(h_dim, out_dim, rel_names, num_bases, activation=None,
                                             self_loop=use_self_loop))

    def forward(self, blocks, feats):
        h = feats
        for layer, block in zip(self.layers, blocks):
            h = layer(block.to(self.device), h)
        return h


def init_emb(shape, dtype):
    """Rows uniform in [-1, 1): the servers that hold the rows call it (unpickled by name from this script)."""
    arr = th.zeros(shape, dtype=dtype)
    nn.init.uniform_(arr, -1.0, 1.0)
    return arr


class DistEmbedLayer(nn.Module):
    """Input rows per node type: featured types' features projected by ``node_projs``; featureless types' rows
    from a ``DistEmbedding`` each (``dgl_sparse_emb``) or from PyTorch embeddings."""

    def __init__(self, dev_id, g, embed_size, sparse_emb=False, dgl_sparse_emb=False, feat_name="feat",
                 embed_name="node_emb"):
        super().__init__()
        self.dev_id, self.embed_size, self.embed_name, self.feat_name = dev_id, embed_size, embed_name, feat_name
        self.sparse_emb = sparse_emb
        self.g = g
        self.node_projs = nn.ModuleDict()
        for ntype in g.ntypes:
            if feat_name in g.nodes[ntype].data:
                self.node_projs[ntype] = nn.Linear(g.nodes[ntype].data[feat_name].shape[1], embed_size)
                nn.init.xavier_uniform_(self.node_projs[ntype].weight)
        featureless = [t for t in g.ntypes if feat_name not in g.nodes[t].data]
        if sparse_emb and dgl_sparse_emb:
            self.node_embeds = {t: dgl.distributed.DistEmbedding(g.num_nodes(t), embed_size, embed_name + "_" + t,
                                                                 init_emb, g.get_node_partition_policy(t))
                                for t in featureless}
        else:
            self.node_embeds = nn.ModuleDict({t: th.nn.Embedding(g.num_nodes(t), embed_size, sparse=sparse_emb)
                                              for t in featureless})
            for emb in self.node_embeds.values():
                nn.init.uniform_(emb.weight, -1.0, 1.0)

    def forward(self, node_ids):
        embeds = {}
        for ntype in node_ids:
            if self.feat_name in self.g.nodes[ntype].data:
                feat = self.g.nodes[ntype].data[self.feat_name][node_ids[ntype]]
                embeds[ntype] = self.node_projs[ntype](feat.to(self.dev_id))
            else:
                embeds[ntype] = self.node_embeds[ntype](node_ids[ntype]).to(self.dev_id)
        return embeds


def compute_acc(results, labels):
    return (results == labels.long()).float().sum() / len(results)


def evaluate(g, model, embed_layer, labels, eval_loader, test_loader, all_val_nid, all_test_nid):
    """Predictions of this trainer's share of the validation and test nodes into a DistTensor; rank 0 scores
    every node's."""
    model.eval()
    embed_layer.eval()
    global_results = dgl.distributed.DistTensor(labels.shape, th.long, "results", persistent=True)
    with th.no_grad():
        for loader in (eval_loader, test_loader):
            logits_all, seeds_all = [], []
            for input_nodes, seeds, blocks in loader:
                seeds = seeds["paper"]
                feats = embed_layer(input_nodes)
                logits = model(blocks, feats)
                assert len(logits) == 1
                logits_all.append(logits["paper"].cpu())
                seeds_all.append(seeds.cpu())
            global_results[th.cat(seeds_all)] = th.cat(logits_all).argmax(dim=1)
    g.barrier()
    model.train()
    embed_layer.train()
    if g.rank() == 0:
        return (compute_acc(global_results[all_val_nid], labels[all_val_nid]),
                compute_acc(global_results[all_test_nid], labels[all_test_nid]))
    return -1, -1


def run(args, device, data):
    g, num_classes, train_nid, val_nid, test_nid, labels, all_val_nid, all_test_nid = data
    fanouts = [int(f) for f in args.fanout.split(",")]
    val_fanouts = [int(f) for f in args.validation_fanout.split(",")]
    sampler = dgl.dataloading.MultiLayerNeighborSampler(fanouts)
    dataloader = dgl.dataloading.DistNodeDataLoader(
        g, {"paper": train_nid}, sampler, batch_size=args.batch_size, shuffle=True, drop_last=False
    )
    valid_dataloader = dgl.dataloading.DistNodeDataLoader(
        g, {"paper": val_nid}, dgl.dataloading.MultiLayerNeighborSampler(val_fanouts),
        batch_size=args.batch_size, shuffle=False, drop_last=False)
    test_dataloader = dgl.dataloading.DistNodeDataLoader(
        g, {"paper": test_nid}, dgl.dataloading.MultiLayerNeighborSampler(val_fanouts),
        batch_size=args.eval_batch_size, shuffle=False, drop_last=False)
    embed_layer = DistEmbedLayer(device, g, args.n_hidden, sparse_emb=args.sparse_embedding,
                                 dgl_sparse_emb=args.dgl_sparse, feat_name="feat")
    model = EntityClassify(device, args.n_hidden, num_classes, g.etypes, num_bases=args.n_bases,
                           num_hidden_layers=args.n_layers - 2, dropout=args.dropout,
                           use_self_loop=args.use_self_loop).to(device)
    model = DistributedDataParallel(model)
    # the embedding layer's dense parameters (node_projs), or PyTorch's embeddings, need their own DDP
    if len(embed_layer.node_projs) > 0 or not args.dgl_sparse:
        embed_layer = DistributedDataParallel(embed_layer)
    if args.sparse_embedding and args.dgl_sparse:
        emb_optimizer = dgl.distributed.optim.SparseAdam(list(embed_layer.module.node_embeds.values()),
                                                         lr=args.sparse_lr)
    elif args.sparse_embedding:
        emb_optimizer = th.optim.SparseAdam(list(embed_layer.module.node_embeds.parameters()), lr=args.sparse_lr)
    if args.sparse_embedding:
        dense_params = list(model.parameters()) + list(embed_layer.module.node_projs.parameters())
    else:
        dense_params = list(model.parameters()) + list(embed_layer.parameters())
    optimizer = th.optim.Adam(dense_params, lr=args.lr, weight_decay=args.l2norm)

    print("start training...")
    for epoch in range(args.n_epochs):
        tic = time.time()
        number_train = number_input = 0
        for step, (input_nodes, seeds, blocks) in enumerate(dataloader):
            seeds = seeds["paper"]
            number_train += seeds.shape[0]
            number_input += np.sum([blocks[0].num_src_nodes(ntype) for ntype in blocks[0].ntypes])
            feats = embed_layer(input_nodes)
            label = labels[seeds].to(device)
            logits = model(blocks, feats)
            assert len(logits) == 1
            logits = logits["paper"]
            loss = F.cross_entropy(logits, label)
            optimizer.zero_grad()
            if args.sparse_embedding:
                emb_optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if args.sparse_embedding:
                emb_optimizer.step()
            if step % args.log_every == 0:
                train_acc = th.sum(logits.argmax(dim=1) == label).item() / len(seeds)
                print(f"[{g.rank()}] Epoch {epoch:05d} | Step {step:05d} | Train acc {train_acc:.4f} | "
                      f"Loss {loss.item():.4f}")
        print(f"[{g.rank()}]Epoch Time(s): {time.time() - tic:.4f}, #train: {number_train}, #input: {number_input}")
        g.barrier()
        val_acc, test_acc = evaluate(g, model, embed_layer, labels, valid_dataloader, test_dataloader, all_val_nid,
                                     all_test_nid)
        if val_acc >= 0:
            print(f"Val Acc {val_acc:.4f}, Test Acc {test_acc:.4f}")


def main(args):
    dgl.distributed.initialize(args.ip_config)
    th.distributed.init_process_group(backend="gloo")
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.conf_path)
    print("rank:", g.rank())
    pb = g.get_partition_book()
    paper = g.nodes["paper"].data
    train_nid = dgl.distributed.node_split(paper["train_mask"], pb, ntype="paper", force_even=True)
    val_nid = dgl.distributed.node_split(paper["val_mask"], pb, ntype="paper", force_even=True)
    test_nid = dgl.distributed.node_split(paper["test_mask"], pb, ntype="paper", force_even=True)
    print(f"part {g.rank()}, train: {len(train_nid)}, val: {len(val_nid)}, test: {len(test_nid)}")
    device = th.device("cpu")
    every = np.arange(g.num_nodes("paper"))
    labels = paper["labels"][every]
    all_val_nid = th.nonzero(paper["val_mask"][every]).squeeze(1)
    all_test_nid = th.nonzero(paper["test_mask"][every]).squeeze(1)
    n_classes = len(th.unique(labels[labels >= 0]))
    print("#classes:", n_classes)
    run(args, device, (g, n_classes, train_nid, val_nid, test_nid, labels, all_val_nid, all_test_nid))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="RGCN")
    parser.add_argument("--graph-name", type=str, help="graph name")
    parser.add_argument("--ip-config", type=str, help="the file for IP configuration")
    parser.add_argument("--conf-path", type=str, help="the path to the partition config file")
    parser.add_argument("--dropout", type=float, default=0, help="dropout probability")
    parser.add_argument("--n-hidden", type=int, default=16, help="number of hidden units")
    parser.add_argument("--lr", type=float, default=1e-2, help="learning rate")
    parser.add_argument("--sparse-lr", type=float, default=1e-2, help="sparse lr rate")
    parser.add_argument("--n-bases", type=int, default=-1, help="number of filter weight matrices (-1: all)")
    parser.add_argument("--n-layers", type=int, default=2, help="number of propagation rounds")
    parser.add_argument("-e", "--n-epochs", type=int, default=50, help="number of training epochs")
    parser.add_argument("--l2norm", type=float, default=0, help="l2 norm coef")
    parser.add_argument("--fanout", type=str, default="4, 4", help="fan-out of neighbour sampling")
    parser.add_argument("--validation-fanout", type=str, default=None, help="fan-out during validation")
    parser.add_argument("--use-self-loop", default=False, action="store_true", help="self-loop weight")
    parser.add_argument("--batch-size", type=int, default=100, help="mini-batch size")
    parser.add_argument("--eval-batch-size", type=int, default=128, help="mini-batch size of the test nodes")
    parser.add_argument("--log-every", type=int, default=20)
    parser.add_argument("--sparse-embedding", action="store_true", help="sparse embeddings for featureless types")
    parser.add_argument("--dgl-sparse", action="store_true", help="DGL's distributed sparse embeddings")
    parser.add_argument("--local_rank", type=int, help="get rank of the process")
    args = parser.parse_args()
    if args.validation_fanout is None:
        args.validation_fanout = args.fanout
    print(args)
    main(args)
