"""Learnable input rows in a DistDGL job: DGL's ``DistEmbedding``, the way DGL's examples keep them.

The input provider of ``model.embed`` on the DistDGL side, for every kind: a homogeneous graph has
one ``DistEmbedding`` over every node (DGL's ``train_dist_transductive.py``), a heterogeneous graph
one per featureless node type (DGL's RGCN example). Rows live sharded in the KVStore like node data;
``emb(input_nodes)`` pulls the rows of other machines' nodes every step, and
``dgl.distributed.optim.SparseAdam`` sends every pulled row's gradient back to its owner, which
updates the row and its optimizer state in its own shard. (Grappa's side, rows kept and trained by
the worker that owns them, is :mod:`dgl_grappa.method.embedding`.) What is here, around that flow:

* :func:`dist_embeddings`: the ``DistEmbedding`` of every node type given, each row set to the same
  initial row as Grappa's (:func:`~dgl_grappa.method.embedding.initial_rows`, per type with
  :func:`~dgl_grappa.method.hetero.type_seed`), each machine writing its own;
* :func:`shard_state` / :func:`load_shard`: a trainer's shard of a checkpoint (its machine's rows and
  its sparse optimizer's local state, ``local_state_dict``);
* :func:`eval_rows`: every row, on rank 0, in the graph's node order, for the evaluation;
* :func:`held_bytes`: what a machine's KVStore shard holds for them;
* :func:`common_steps`: the steps per epoch every trainer can take together (DGL's sparse optimizer
  steps with every trainer).

The package's traffic counter counts their pulls by name (:data:`EMBED_NAME`): ``embed_pull_bytes``
(remote rows x (row + 8-byte id)) and ``embed_grad_bytes`` (the same rows' gradients sent back).

Example:
    >>> embs = dist_embeddings(g, {"_N": g.num_nodes()}, dim=64, seed=0)      # doctest: +SKIP
    >>> opt = dgl.distributed.optim.SparseAdam(list(embs.values()), lr=0.01)  # doctest: +SKIP
"""

from __future__ import annotations

import dgl
import torch
import torch.distributed as dist

from ..config import ConfigError
from ..method.embedding import initial_rows
from ..method.hetero import type_seed
from ..partition.hetero import to_original_order_typed
from ..partition.layout import HOMOGENEOUS, to_original_order
from ..runtime.checkpoint import CheckpointError

EMBED_NAME = "grappa_embed"
"""Prefix of the DistEmbeddings' names (their KVStore tensors, and their optimizer's, start with it)."""

# HOMOGENEOUS: the node type of a homogeneous graph (DGL's name); its embedding keeps the untyped seed and name


def own_nodes(g, ntype: str = HOMOGENEOUS) -> torch.Tensor:
    """(Per-type) ids of the nodes of ``ntype`` this trainer's machine owns (its shard's rows)."""
    pb = g.get_partition_book()
    if ntype == HOMOGENEOUS and len(g.ntypes) == 1:
        return pb.partid2nids(pb.partid).to(torch.int64)
    return pb.partid2nids(pb.partid, ntype).to(torch.int64)


def _name(ntype: str) -> str:
    return EMBED_NAME if ntype == HOMOGENEOUS else f"{EMBED_NAME}_{ntype}"


def _seed(seed: int, ntype: str) -> int:
    return seed if ntype == HOMOGENEOUS else type_seed(seed, ntype)


def dist_embeddings(g, ntypes: list[str], dim: int, seed: int = 0) -> dict:
    """A ``DistEmbedding`` per node type in ``ntypes``, each row its initial row (a collective: every trainer calls it).

    Every machine writes its own nodes' rows (local writes into its server's shard), then a barrier, so that no
    trainer pulls a row before its owner wrote it.

    Args:
        g: the DistGraph.
        ntypes: the node types that get learnable rows (``["_N"]`` on a homogeneous graph).
        dim: row width.
        seed: ``train.seed`` (mixed with each type's name on a heterogeneous graph).

    Returns:
        ``{ntype: DistEmbedding}``.
    """
    out = {}
    for t in ntypes:
        homo = t == HOMOGENEOUS and len(g.ntypes) == 1
        policy = None if homo else g.get_node_partition_policy(t)
        emb = dgl.distributed.DistEmbedding(
            g.num_nodes() if homo else g.num_nodes(t), dim, name=_name(t), part_policy=policy
        )
        own = own_nodes(g, t)
        for a in range(0, own.numel(), 1 << 16):
            chunk = own[a : a + (1 << 16)]
            emb.weight[chunk] = initial_rows(chunk, dim, _seed(seed, t))
        out[t] = emb
    g.barrier()
    return out


def shard_state(g, embs: dict, optimizer) -> dict:
    """This trainer's part of a checkpoint: its machine's rows of every type and the optimizer's local state."""
    types = {t: {"global_ids": own_nodes(g, t), "weight": emb.weight[own_nodes(g, t)]} for t, emb in embs.items()}
    return {"types": types, "optimizer": optimizer.local_state_dict()}


def load_shard(g, embs: dict, optimizer, state: dict) -> None:
    """Restore what :func:`shard_state` returned (a collective: a barrier after the writes).

    Raises:
        CheckpointError: the shard holds other nodes or types than this machine's.
    """
    types = state.get("types") or {}
    if set(types) != set(embs):
        raise CheckpointError(
            "the checkpoint's embedding rows are of other node types than this graph's featureless "
            "ones; resume with the graph it was written with, or start afresh"
        )
    for t, emb in embs.items():
        own = own_nodes(g, t)
        if not torch.equal(types[t]["global_ids"], own):
            raise CheckpointError(
                "the checkpoint's embedding rows belong to other nodes than this machine's "
                "partition; resume on the partitioning it was written with, or start afresh"
            )
        emb.weight[own] = types[t]["weight"]
    opt_state = dict(state["optimizer"])
    # as DGL's own load() does before load_local_state_dict: the world size is not a hyper-parameter
    opt_state["params"] = {k: v for k, v in opt_state["params"].items() if k != "world_size"}
    optimizer.load_local_state_dict(opt_state)
    g.barrier()


def eval_rows(g, embs: dict, part_config, chunk: int = 1 << 16) -> dict | None:
    """On rank 0: every type's rows in the graph's node order (pulled through the KVStore, outside the epochs'
    byte window); None on the other ranks. A homogeneous graph's rows are under ``"_N"``."""
    if dist.get_rank() != 0:
        return None
    out = {}
    with torch.no_grad():  # untraced: a traced pull would wait for the sparse optimizer's next step
        for t, emb in embs.items():
            homo = t == HOMOGENEOUS and len(g.ntypes) == 1
            n = g.num_nodes() if homo else g.num_nodes(t)
            rows = torch.cat([emb(torch.arange(a, min(a + chunk, n))) for a in range(0, n, chunk)])
            out[t] = to_original_order(rows, part_config) if homo else to_original_order_typed(rows, part_config, t)
    return out


def held_bytes(num_own: int, dim: int) -> int:
    """Bytes a machine's KVStore shard holds for one embedding: its rows and DGL's SparseAdam state
    (a step count and two moment rows per node, all float32)."""
    return num_own * (3 * dim * 4 + 4)


def common_steps(mine: int, cfg) -> int:
    """The steps every trainer takes per epoch with a DistEmbedding: the fewest of any trainer (one all-reduce).

    DGL's sparse optimizer exchanges gradients with every trainer at every step, and
    ``model.join()`` cannot stand in for a finished trainer there: a trainer with one batch
    more (``node_split`` evens the seeds, not always the batches) would wait for ever, so it
    leaves that last batch out.
    """
    n = torch.tensor([-mine, mine], dtype=torch.int64)
    dist.all_reduce(n, op=dist.ReduceOp.MAX)
    common, most = -int(n[0]), int(n[1])
    if common < most and cfg.distdgl.num_samplers:  # on every trainer: they stop on the same error
        raise ConfigError(
            f"model.embed=true: the trainers' loaders have {common} to {most} batches per epoch and "
            "DGL's sparse optimizer needs every trainer at every step, so some would stop early, which "
            "sampler processes do not allow; set --distdgl.num_samplers=0"
        )
    if common < mine:
        print(
            f"trainer {dist.get_rank()}: {mine} batches per epoch, the fewest of any trainer "
            f"is {common}: DGL's sparse optimizer steps with every trainer, so it takes {common}",
            flush=True,
        )
    return common


def dist_num_classes(g, ntype: str | None = None) -> int:
    """Number of label classes of a DistGraph (of node type ``ntype``): max label over all machines + 1
    (one all-reduce)."""
    data = g.ndata if ntype is None else g.nodes[ntype].data
    local = data["label"].local_partition
    m = torch.tensor([int(local.max()) if local.numel() else -1], dtype=torch.int64)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    return int(m[0]) + 1
