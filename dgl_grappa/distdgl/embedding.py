"""The DistDGL side of learnable node embeddings (``model.embed``): DGL's ``DistEmbedding`` around the trainer.

The trainer (:mod:`.train`) uses them the way DGL's ``train_dist_transductive.py`` does: one
``dgl.distributed.DistEmbedding`` over every node, sharded in the KVStore like the node data,
``emb(input_nodes)`` in every step (a KVStore pull: the rows of other machines' nodes cross the
network) and ``dgl.distributed.optim.SparseAdam`` after the backward pass (every pulled row's
gradient goes back to its owner over the trainers' process group, and the owner updates the
row and its optimizer state in its own shard). What is here is around that flow:

* :func:`dist_embedding`: the ``DistEmbedding``, its rows set to the same initial rows as
  Grappa's (:func:`dgl_grappa.method.embedding.initial_rows`), each machine writing its own;
* :func:`shard_state` / :func:`load_shard`: a trainer's shard of a checkpoint (its machine's
  rows and its sparse optimizer's local state, ``local_state_dict``);
* :func:`eval_rows`: every row, on rank 0, in the graph's node order, for the evaluation;
* :func:`held_bytes`: what a machine's KVStore shard holds for them.

:class:`~.metering.TrafficCounter` counts the pulls (``embed_pull_bytes``: remote rows x (row +
8-byte id)) and, for pulls with autograd on, the gradients the optimizer sends back
(``embed_grad_bytes``: the same rows, each a gradient row and its id).
"""
from __future__ import annotations

import torch

EMBED_NAME = "grappa_embed"
"""Name of the DistEmbedding (its KVStore tensors, and its optimizer's, start with it)."""


def own_nodes(g) -> torch.Tensor:
    """Global ids of the nodes this trainer's machine owns (its shard's rows)."""
    pb = g.get_partition_book()
    return pb.partid2nids(pb.partid).to(torch.int64)


def dist_embedding(g, dim: int, seed: int = 0):
    """A ``DistEmbedding`` of every node of ``g``, each row its initial row (a collective: every trainer calls it).

    Every machine writes its own nodes' rows (local writes into its server's shard), then a
    barrier, so that no trainer pulls a row before its owner wrote it.
    """
    import dgl

    from ..method.embedding import initial_rows

    emb = dgl.distributed.DistEmbedding(g.num_nodes(), dim, name=EMBED_NAME)  # zeros, then the initial rows
    own = own_nodes(g)
    for a in range(0, own.numel(), 1 << 16):
        chunk = own[a:a + (1 << 16)]
        emb.weight[chunk] = initial_rows(chunk, dim, seed)
    g.barrier()
    return emb


def shard_state(g, emb, optimizer) -> dict:
    """This trainer's part of a checkpoint: its machine's rows (with their ids) and its sparse optimizer's local state."""
    own = own_nodes(g)
    return {"global_ids": own, "weight": emb.weight[own], "optimizer": optimizer.local_state_dict()}


def load_shard(g, emb, optimizer, state: dict) -> None:
    """Restore what :func:`shard_state` returned (a collective: a barrier after the writes).

    Raises:
        CheckpointError: the shard holds other nodes than this machine's.
    """
    from ..runtime.checkpoint import CheckpointError

    own = own_nodes(g)
    if not torch.equal(state["global_ids"], own):
        raise CheckpointError("the checkpoint's embedding rows belong to other nodes than this machine's partition; "
                              "resume on the partitioning it was written with, or start afresh")
    emb.weight[own] = state["weight"]
    opt_state = dict(state["optimizer"])
    # as DGL's own load() does before load_local_state_dict: the world size is not a hyper-parameter
    opt_state["params"] = {k: v for k, v in opt_state["params"].items() if k != "world_size"}
    optimizer.load_local_state_dict(opt_state)
    g.barrier()


def eval_rows(g, emb, part_config, chunk: int = 1 << 16) -> torch.Tensor | None:
    """On rank 0: every node's row, in the graph's node order (pulled through the KVStore, outside the
    epochs' byte window); None on the other ranks."""
    import torch.distributed as dist

    from ..partition.layout import to_original_order

    if dist.get_rank() != 0:
        return None
    n = g.num_nodes()
    with torch.no_grad():  # untraced: a traced pull would wait for the sparse optimizer's next step
        rows = torch.cat([emb(torch.arange(a, min(a + chunk, n))) for a in range(0, n, chunk)])
    return to_original_order(rows, part_config)


def held_bytes(num_own: int, dim: int) -> int:
    """Bytes a machine's KVStore shard holds for the embedding: its rows and DGL's SparseAdam state
    (a step count and two moment rows per node, all float32)."""
    return num_own * (3 * dim * 4 + 4)
