"""The DistDGL side of a heterogeneous graph: DGL's RGCN example flow around the trainer.

The trainer (:mod:`.train`) follows ``examples/pytorch/rgcn/experimental/entity_classify_dist.py``:
``node_split`` of the target type's ``train_mask``, ``DistNodeDataLoader(g, {target: train_nid},
NeighborSampler(fanouts))`` (DGL samples every relation of the distributed heterograph, on the
machines that own the nodes), a batch's inputs per node type pulled through the KVStore
(``g.nodes[t].data["feat"][ids]`` for a type with features, a ``DistEmbedding`` per featureless
type, :func:`dist_embeddings`), the package's :class:`~dgl_grappa.method.rgcn.RGCN` under DDP and
DGL's distributed ``SparseAdam`` for the embeddings (every pulled row's gradient goes back to its
owner). What is here:

* :func:`target_of`, :func:`num_classes`, :func:`input_dims`: the schema as a DistGraph shows it;
* :func:`dist_embeddings`: a ``DistEmbedding`` per featureless type, each row its initial row
  (:func:`dgl_grappa.method.embedding.initial_rows` with the type's seed,
  :func:`dgl_grappa.method.hetero.type_seed`: the rows Grappa's workers start from);
* :func:`batch_inputs`: a batch's input rows per type (pulls);
* :func:`eval_rows`: every featureless type's rows on rank 0, in the graph's node order;
* :func:`shard_state` / :func:`load_shard`: a trainer's shard of a checkpoint;
* :func:`machine_holding`: what a machine's KVStore shard holds (every type's tables).
"""
from __future__ import annotations

import torch

from .embedding import EMBED_NAME, held_bytes


def target_of(g, cfg) -> str:
    """The node type trained on: ``data.target``, else the one type whose node data has ``label``."""
    if cfg.data.target:
        return cfg.data.target
    return next(t for t in g.ntypes if "label" in g.nodes[t].data)


def num_classes(g, target: str) -> int:
    """Classes of the target type: max label over all machines + 1 (one all-reduce)."""
    import torch.distributed as dist

    local = g.nodes[target].data["label"].local_partition
    m = torch.tensor([int(local.max()) if local.numel() else -1], dtype=torch.int64)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    return int(m[0]) + 1


def featured(g) -> list[str]:
    """The node types with features."""
    return [t for t in g.ntypes if "feat" in g.nodes[t].data]


def input_dims(g, embed_dim: int) -> dict[str, int]:
    """The input width of every node type: its features', or ``embed_dim`` (a learnable row)."""
    return {t: int(g.nodes[t].data["feat"].shape[1]) if "feat" in g.nodes[t].data else int(embed_dim) for t in g.ntypes}


def own_nodes(g, ntype: str) -> torch.Tensor:
    """Per-type ids of the nodes of ``ntype`` this trainer's machine owns."""
    pb = g.get_partition_book()
    return pb.partid2nids(pb.partid, ntype).to(torch.int64)


def dist_embeddings(g, dim: int, seed: int = 0) -> dict:
    """A ``DistEmbedding`` per featureless node type, each row its initial row (a collective: every trainer calls it).

    Every machine writes its own nodes' rows, then a barrier, so that no trainer pulls a row before its owner
    wrote it. The names contain :data:`~.embedding.EMBED_NAME`, so the traffic counter counts their pulls.
    """
    import dgl

    from ..method.embedding import initial_rows
    from ..method.hetero import type_seed

    out = {}
    for t in g.ntypes:
        if "feat" in g.nodes[t].data:
            continue
        emb = dgl.distributed.DistEmbedding(g.num_nodes(t), dim, name=f"{EMBED_NAME}_{t}",
                                            part_policy=g.get_node_partition_policy(t))
        own = own_nodes(g, t)
        for a in range(0, own.numel(), 1 << 16):
            chunk = own[a:a + (1 << 16)]
            emb.weight[chunk] = initial_rows(chunk, dim, type_seed(seed, t))
        out[t] = emb
    g.barrier()
    return out


def batch_inputs(g, input_nodes: dict, embs: dict) -> dict:
    """A batch's input rows per node type: features pulled through the KVStore, or the type's DistEmbedding rows."""
    return {t: embs[t](ids) if t in embs else g.nodes[t].data["feat"][ids] for t, ids in input_nodes.items()}


def eval_rows(g, embs: dict, part_config, chunk: int = 1 << 16) -> dict | None:
    """On rank 0: every featureless type's rows in the graph's node order (pulled, outside the epochs' window);
    None on the other ranks."""
    import torch.distributed as dist

    from ..partition.hetero import to_original_order_typed

    if dist.get_rank() != 0:
        return None
    out = {}
    with torch.no_grad():  # untraced: a traced pull would wait for the sparse optimizer's next step
        for t, emb in embs.items():
            n = g.num_nodes(t)
            rows = torch.cat([emb(torch.arange(a, min(a + chunk, n))) for a in range(0, n, chunk)])
            out[t] = to_original_order_typed(rows, part_config, t)
    return out


def shard_state(g, embs: dict, optimizer) -> dict:
    """This trainer's part of a checkpoint: its machine's rows of every featureless type and the optimizer's
    local state."""
    types = {}
    for t, emb in embs.items():
        own = own_nodes(g, t)
        types[t] = {"global_ids": own, "weight": emb.weight[own]}
    return {"types": types, "optimizer": optimizer.local_state_dict()}


def load_shard(g, embs: dict, optimizer, state: dict) -> None:
    """Restore what :func:`shard_state` returned (a collective: a barrier after the writes).

    Raises:
        CheckpointError: the shard holds other nodes or types than this machine's.
    """
    from ..runtime.checkpoint import CheckpointError

    types = state.get("types") or {}
    if set(types) != set(embs):
        raise CheckpointError("the checkpoint's embedding rows are of other node types than this graph's featureless "
                              "ones; resume with the graph it was written with, or start afresh")
    for t, emb in embs.items():
        own = own_nodes(g, t)
        if not torch.equal(types[t]["global_ids"], own):
            raise CheckpointError("the checkpoint's embedding rows belong to other nodes than this machine's partition; "
                                  "resume on the partitioning it was written with, or start afresh")
        emb.weight[own] = types[t]["weight"]
    opt_state = dict(state["optimizer"])
    opt_state["params"] = {k: v for k, v in opt_state["params"].items() if k != "world_size"}
    optimizer.load_local_state_dict(opt_state)
    g.barrier()


def machine_holding(g, held=None, embed_dim: int = 0, embed_in_kvstore: bool = False) -> dict:
    """What a DistDGL machine holds of a heterogeneous graph (as :func:`.metering.machine_holding`): every type's
    feature rows in its KVStore shard (``resident_bytes``), the other node tensors and the partition's structure
    (``resident_other_bytes``), ``held`` (the drop-in's own tables) and, with ``embed_in_kvstore``, its shard of every
    featureless type's DistEmbedding and of DGL's SparseAdam state. The unit ``own_fp32_bytes`` is the own input rows
    of every type (features' width, or ``embed_dim``) in fp32."""
    resident = other = own = 0
    for t in g.ntypes:
        n_own = int(own_nodes(g, t).numel())
        for name in g.nodes[t].data.keys():
            local = g.nodes[t].data[name].local_partition
            nbytes = local.numel() * local.element_size()
            if name == "feat":
                resident += nbytes
            else:
                other += nbytes
        if "feat" in g.nodes[t].data:
            own += n_own * int(g.nodes[t].data["feat"].shape[1]) * 4
        else:
            own += n_own * embed_dim * 4
            if embed_in_kvstore:
                resident += held_bytes(n_own, embed_dim)
    part = g.local_partition
    if part is not None:
        other += part.num_nodes() * 8 * 4 + part.num_edges() * 8 * 4  # ids, types, flags; src, dst, ids, types
    if held is not None:
        resident += int(held.nbytes)
    return {"resident_bytes": resident, "resident_other_bytes": other, "own_fp32_bytes": own}
