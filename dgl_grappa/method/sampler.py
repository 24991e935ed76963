"""Local-only sampling: seeds are the worker's own train nodes, neighbours come from its part.

Sampling itself is DGL's ``NeighborSampler`` on the local graph, or the same draw in PyTorch operations on
the trainer's device (:class:`~.kernels.sample.TorchNeighborSampler`, ``train.sampler``). What DGL's DataLoader
cannot do is give every worker the *same number* of batches when parts hold different
numbers of train nodes; collectives would then wait on a worker that has finished. So
``LocalBatches`` splits each epoch's shuffled seeds into exactly ``steps`` near-equal
chunks (``steps`` agreed by all workers once, see :func:`equal_steps`).

Feature reads go through :class:`LocalFeatures`, which serves resident rows from local
memory and counts every row that would have to come from another worker.
"""

from __future__ import annotations

import math
from typing import Callable, Iterator

import dgl
import torch
import torch.distributed as dist
from torch import Tensor

from ..config import ConfigError
from .kernels.sample import TorchNeighborSampler
from .storage import NodeTable

SAMPLERS = ("auto", "dgl", "torch")
"""``train.sampler``'s values."""

AUTO_CPU_SAMPLER = "dgl"
"""``train.sampler: auto`` on the CPU: the sampler whose draws were faster in benchmarks/samplers/."""


class SeedsOnly:
    """The "sampler" of a model whose only layer is exact (first-hop completion, one layer):
    no blocks; the seeds are the input rows."""

    fanouts: list = []
    output_device = None  # what dgl.dataloading.as_edge_prediction_sampler reads of a node-wise sampler

    def sample(self, graph: dgl.DGLGraph, seeds: Tensor, exclude_eids=None) -> tuple[Tensor, Tensor, list]:
        return seeds, seeds, []


def resolve_sampler(sampler: str, device: str, heterogeneous: bool = False, kernels: str = "torch") -> str:
    """The sampler a run uses: ``dgl`` or ``torch``.

    Args:
        sampler: ``train.sampler`` (auto, dgl or torch).
        device: ``run.device`` (cpu or cuda).
        heterogeneous: the graph has several node or edge types (DGL's sampler draws those).
        kernels: the layers' kernels (resolved ``train.kernels``): DGL's layers on a GPU read DGL blocks, which
            DGL's sampler makes on the CPU (auto takes it there).

    Raises:
        ConfigError: an unknown value, torch on a heterogeneous graph, or torch for DGL's layers on a GPU.

    Example:
        >>> resolve_sampler("auto", "cuda"), resolve_sampler("auto", "cuda", heterogeneous=True)
        ('torch', 'dgl')
    """
    if sampler not in SAMPLERS:
        raise ConfigError(f"train.sampler={sampler!r} is not allowed; use one of {', '.join(SAMPLERS)}")
    if heterogeneous:
        if sampler == "torch":
            raise ConfigError(
                "train.sampler=torch samples homogeneous graphs only; use --train.sampler=dgl (or "
                "auto) on a heterogeneous graph"
            )
        return "dgl"
    gpu = device == "cuda"
    if sampler == "torch" and gpu and kernels == "dgl":
        raise ConfigError(
            "train.sampler=torch on a GPU builds the torch kernels' blocks, not DGL's; use "
            "--train.kernels=torch (or auto), or --train.sampler=dgl for DGL's layers"
        )
    if sampler == "auto":
        return "torch" if gpu and kernels == "torch" else AUTO_CPU_SAMPLER
    return sampler


def layer_sampler(
    fanouts: list[int], first_hop: str = "sampled", sampler: str = "dgl", device="cpu", layout: str = "dgl"
):
    """The sampler of the layers that are sampled: DGL's ``NeighborSampler`` or the same draw in PyTorch operations.

    Args:
        fanouts: ``train.fanouts`` (input layer first).
        first_hop: "sampled" (every layer) or "exact" (first-hop completion: layer 0 comes
            from precomputed aggregates, so only layers 1..L-1 are sampled and ``fanouts[0]``
            is not used).
        sampler: ``dgl`` or ``torch`` (:func:`resolve_sampler`).
        device: where the torch sampler holds the graph's structure and draws (the trainer's device).
        layout: the torch sampler's blocks: ``dgl`` (DGL blocks, DGL's layers) or ``plain`` (the torch kernels).

    Returns:
        ``NeighborSampler(fanouts)``, ``NeighborSampler(fanouts[1:])`` (or a
        :class:`~.kernels.sample.TorchNeighborSampler` of them), or :class:`SeedsOnly`
        for a 1-layer model with ``exact``.

    Example:
        >>> type(layer_sampler([10, 25], "exact", "torch", layout="plain")).__name__
        'TorchNeighborSampler'
    """
    fan = list(fanouts[1:]) if first_hop == "exact" else list(fanouts)
    if not fan:
        return SeedsOnly()
    if sampler == "torch":
        return TorchNeighborSampler(fan, device=device, layout=layout)
    return dgl.dataloading.NeighborSampler(fan)


def seed_sampling(sampler, seed: int) -> None:
    """Seed the draws of ``sampler`` (at every epoch): its own generator where it has one
    (:class:`~.kernels.sample.TorchNeighborSampler`), else DGL's global RNG, which DGL's samplers draw from."""
    reseed = getattr(sampler, "reseed", None)
    if reseed is not None:
        reseed(seed)
    else:
        dgl.seed(seed)


def skip_first_layer(sampler):
    """The script's sampler without its input layer (first-hop completion in the drop-in loader).

    Works for ``dgl.dataloading.NeighborSampler`` (its fan-outs, ``replace`` and ``edge_dir``
    carry over); anything else must be given already without its first layer.
    """
    fanouts = getattr(sampler, "fanouts", None)
    if not isinstance(sampler, dgl.dataloading.NeighborSampler) or fanouts is None:
        raise TypeError(
            "first_hop='exact' needs a dgl.dataloading.NeighborSampler (its first layer is dropped); "
            f"got {type(sampler).__name__}: pass a sampler of layers 1..L-1 with first_hop='sampled'"
        )
    fan = list(fanouts[1:])
    if not fan:
        return SeedsOnly()
    return dgl.dataloading.NeighborSampler(
        fan, replace=getattr(sampler, "replace", False), edge_dir=getattr(sampler, "edge_dir", "in")
    )


def equal_steps(num_local_seeds: int, batch_size: int, group=None) -> int:
    """Steps per epoch that every worker takes: the max over workers of ceil(n_i / batch_size).

    One integer all-reduce, done once per partitioning (not per step).
    """
    steps = torch.tensor([max(1, math.ceil(num_local_seeds / batch_size))], dtype=torch.int64)
    if dist.is_initialized():
        dist.all_reduce(steps, op=dist.ReduceOp.MAX, group=group)
    return int(steps[0])


def seeded_workers(num_local_seeds: int, group=None) -> int:
    """How many workers have at least one training seed (one integer all-reduce, once per partitioning).

    A worker without seeds still takes every agreed step (so no collective waits on it),
    with weight 0; plain averaging then divides by this count instead of the world size.
    """
    n = torch.tensor([1 if num_local_seeds > 0 else 0], dtype=torch.int64)
    if dist.is_initialized():
        dist.all_reduce(n, group=group)
    return int(n[0])


class LocalBatches:
    """Exactly ``steps`` neighbour-sampled batches per epoch over the local graph.

    Args:
        graph: the worker's local graph (CSC format preferred).
        seeds: local ids of the worker's train nodes (must be non-empty).
        sampler: a DGL block sampler (``dgl.dataloading.NeighborSampler(fanouts)``, or the
            user's own: anything with ``sample(graph, seeds)``), applied to ``graph``.
        steps: batches per epoch (the same on every worker).
        seed: RNG seed of shuffling and sampling (make it differ per worker).
        limit: yield only the first ``limit`` of the ``steps`` batches of an epoch (a cap on
            the steps per epoch; the batches keep their uncapped size). None = all.

    A worker whose part has no training nodes (``seeds`` empty) still yields ``steps``
    batches, so that its collectives stay matched: blocks sampled around one placeholder
    node (local node 0) with an empty ``output_nodes``; the trainer takes the step with
    weight 0 (the blocks' output rows beyond ``len(output_nodes)`` are not trained on).

    Example:
        >>> sampler = dgl.dataloading.NeighborSampler([10, 25])                          # doctest: +SKIP
        >>> batches = LocalBatches(lp.graph, lp.train_ids, sampler, steps=30, seed=1)    # doctest: +SKIP
        >>> for input_nodes, output_nodes, blocks in batches.epoch(0): ...               # doctest: +SKIP
    """

    def __init__(
        self, graph: dgl.DGLGraph, seeds: Tensor, sampler, steps: int, seed: int = 0, limit: int | None = None
    ):
        if seeds.numel() == 0 and graph.num_nodes() == 0:
            raise ValueError("this worker's part has no nodes; use fewer parts")
        self.graph = graph
        self.seeds = seeds
        self.steps = steps
        self.seed = seed
        self.sampler = sampler
        self.limit = steps if limit is None else max(1, min(limit, steps))

    def epoch(self, epoch: int) -> Iterator[tuple[Tensor, Tensor, list]]:
        """Yield (input_nodes, output_nodes, blocks) ``steps`` times (every seed at least once),
        or ``limit`` times."""
        if self.seeds.numel() == 0:
            yield from self._placeholder_epoch(epoch)
            return
        gen = torch.Generator().manual_seed(self.seeds_rng_seed(epoch))
        perm = self.seeds[torch.randperm(self.seeds.numel(), generator=gen)]
        if perm.numel() < self.steps:
            # Fewer seeds than steps: repeat them so that no batch is empty.
            perm = perm.repeat(math.ceil(self.steps / perm.numel()))[: self.steps]
        # seeded by (seed, epoch) only, so a run (and a resumed one) is reproducible
        seed_sampling(self.sampler, self.seed * 7919 + epoch)
        for chunk in torch.tensor_split(perm, self.steps)[: self.limit]:
            input_nodes, output_nodes, blocks = self.sampler.sample(self.graph, chunk)
            yield input_nodes, output_nodes, blocks

    def seeds_rng_seed(self, epoch: int) -> int:
        """Seed of epoch ``epoch``'s shuffle: a function of (seed, epoch) only, so a resumed run redraws it."""
        return self.seed * 1_000_003 + epoch

    def _placeholder_epoch(self, epoch: int) -> Iterator[tuple[Tensor, Tensor, list]]:
        seed_sampling(self.sampler, self.seed * 7919 + epoch)
        chunk = torch.zeros(1, dtype=self.graph.idtype)
        for _ in range(self.limit):  # as many steps as the other workers take
            input_nodes, output_nodes, blocks = self.sampler.sample(self.graph, chunk)
            yield input_nodes, output_nodes[:0], blocks


class LocalFeatures:
    """Feature rows of the local nodes, with a count of the bytes fetched from elsewhere.

    Rows of nodes that are resident (inner nodes, and halo nodes whose rows were read at
    load time) come from local memory. Any other row would have to be pulled from its
    owner through ``fetch_remote`` (DistDGL's path); in Grappa there is none, so asking
    for one is an error: it would mean the sampler left the partition.

    Args:
        table: [num_local, F] rows of the local nodes: a :class:`~.storage.NodeTable` (any
            storage precision; rows come back in fp32) or a tensor.
        fetch_remote: optional callable(local_ids) -> rows for non-resident nodes.
        resident: bool mask of rows in ``table`` that hold data (default: all).
    """

    def __init__(self, table, fetch_remote: Callable[[Tensor], Tensor] | None = None, resident: Tensor | None = None):
        # A plain tensor is a table stored as it is (fp32 keeps it without a copy).
        self.table = table if isinstance(table, NodeTable) else NodeTable(table, "fp32")
        self.fetch_remote = fetch_remote
        # None = every row is resident (Grappa's case): the per-step residency check is skipped.
        self.resident = None if resident is None or bool(resident.all()) else resident
        # Bytes served per row: what the table holds for it (an int8 row includes its scale).
        self.row_bytes = self.table.nbytes // max(self.table.shape[0], 1)
        self.remote_bytes = 0
        self.local_bytes = 0

    def gather(self, ids: Tensor) -> Tensor:
        """Rows for local ids ``ids``; remote rows are fetched and counted.

        ``index_select`` rather than ``table[ids]``: the same rows, bit for bit, about 5x
        faster on CPU (advanced indexing goes element by element, index_select copies rows).
        """
        ids = ids.to(self.table.device)
        # on the CPU a clear error; a GPU's index_select checks the bounds itself, without a host sync
        if ids.device.type == "cpu" and ids.numel() and int(ids.max()) >= self.table.shape[0]:
            raise RuntimeError("a step asked for a node outside this worker's local graph")
        if self.resident is None:
            self.local_bytes += ids.numel() * self.row_bytes
            return self.table.gather(ids)
        here = self.resident[ids]
        n_remote = int((~here).sum())
        if n_remote == 0:
            self.local_bytes += ids.numel() * self.row_bytes
            return self.table.gather(ids)
        if self.fetch_remote is None:
            raise RuntimeError(
                f"a step asked for {n_remote} remote feature rows, but this runtime has no remote "
                "path (local-only sampling must not leave the partition)"
            )
        out = self.table.gather(ids)
        out[~here] = self.fetch_remote(ids[~here])
        self.remote_bytes += n_remote * self.row_bytes
        self.local_bytes += (ids.numel() - n_remote) * self.row_bytes
        return out

    def take_bytes(self) -> tuple[int, int]:
        """(remote, local) bytes served since the last call; resets both."""
        out = self.remote_bytes, self.local_bytes
        self.remote_bytes = self.local_bytes = 0
        return out
