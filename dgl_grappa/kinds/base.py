"""The interface every kind of job implements: :class:`JobKind` and the data side it steps, :class:`LocalRuntime`.

A kind of job (node classification, link prediction, node classification on a heterogeneous graph)
says once, for every runtime, what it is:

* what a worker loads from its part (:meth:`JobKind.load_part`) and the batches it trains on
  (:meth:`JobKind.make_runtime`, a :class:`LocalRuntime`), its learnable input rows if any
  (:meth:`JobKind.make_embedding`), its model (:meth:`JobKind.build_model`) and loss
  (:meth:`LocalRuntime.losses`);
* what a worker holds in memory (:meth:`JobKind.holding`) and what summary.json says of it
  (:meth:`JobKind.worker_summary`, :meth:`JobKind.run_summary`);
* its config rules (:meth:`JobKind.check`), checked before anything runs;
* its evaluation: what it is scored on and the held-out data that needs (:meth:`JobKind.scorer`, a
  :class:`~dgl_grappa.runtime.evaluation.Scorer`), what it keeps out of the graph it trains on
  (:meth:`JobKind.hold_out`), and how it is graded (:attr:`JobKind.metric`, a
  :class:`~dgl_grappa.runtime.grading.Metric`: the summary's figures, which way is better, their names in the
  terminal lines, compare's tables and the reports);
* its DistDGL job, the baseline and the drop-in (:meth:`JobKind.dist_job`, a :class:`DistJob`).

The contracts between them are typed here: the part a kind loads (:class:`LoadedPart`), a training step's
inputs (:class:`Batch`), the drop-in loader's rows a DistDGL job reads (:class:`RowSource`), and the learnable
rows (a :class:`~dgl_grappa.method.embedding.LearnableRows`, or a no-op
:class:`~dgl_grappa.method.embedding.NoEmbedding` where there are none).

The native trainer, the DistDGL trainer, compare and the bench ask the kind; none of them branches on it.
Adding a kind is one module that subclasses :class:`JobKind` (and :class:`LocalRuntime`,
:class:`DistJob`) and one :func:`~dgl_grappa.kinds.register` call (``CONTRIBUTING.md``).

Example:
    >>> from dgl_grappa.kinds import kind_of
    >>> from dgl_grappa.config import load_config
    >>> kind_of(load_config(None, ["--train.task=link", "--grappa.correction=none"])).name
    'link'
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from typing import Any, Iterator, NamedTuple, Protocol, runtime_checkable

import dgl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config import Config, ConfigError
from ..data.common import HoldOut
from ..method import coverage as cov
from ..method.embedding import LearnableRows, NoEmbedding, NoOptimizer
from ..method.kernels import resolve_kernels
from ..method.sampler import equal_steps, seeded_workers
from ..runtime.checkpoint import CheckpointError
from ..runtime.evaluation import AccuracyScorer, Scorer
from ..runtime.grading import ACCURACY, Metric

log = logging.getLogger("dgl_grappa")


@runtime_checkable
class LoadedPart(Protocol):
    """What :meth:`JobKind.load_part` returns and the runtimes read of it: one worker's part as a run keeps it.

    The package's parts are :class:`~dgl_grappa.method.local_part.LocalPartition` (a homogeneous graph) and
    :class:`~dgl_grappa.method.hetero.HeteroLocalPartition`; a kind's own part needs these fields (and whatever its
    own runtime reads besides).

    Attributes:
        part_id: which part of the partitioning.
        graph: the local graph (inner nodes first, then the kept halo): a ``DGLGraph`` (or heterograph).
        num_inner, part_inner: its inner nodes kept, and the part's inner nodes in all.
        train_ids: local ids of the training seeds.
        label: the inner nodes' labels (of the target type on a heterogeneous graph).
        global_ids: every local node's id in the partitioning.
        keep: what the memory budget kept (``halo_kept``, ``halo_reach``, ``precision``, ...).
        memory, resident_bytes, resident_other_bytes, own_fp32_bytes, rows_held: what it holds
            (summary.json's memory figures).
        one_time_bytes, halo_bytes_loaded, load_seconds: what loading it read and took.
    """

    part_id: int
    graph: Any
    num_inner: int
    part_inner: int
    train_ids: Tensor
    label: Tensor
    global_ids: Any
    keep: dict
    memory: dict
    resident_bytes: int
    resident_other_bytes: int
    own_fp32_bytes: int
    rows_held: int
    one_time_bytes: int
    halo_bytes_loaded: int
    load_seconds: float


@runtime_checkable
class RowSource(Protocol):
    """The drop-in loader's rows as a DistDGL job's inputs read them (:class:`~dgl_grappa.method.dropin.GrappaLoader`,
    :class:`~dgl_grappa.method.dropin.GrappaEdgeLoader`): every row from this machine's memory, by the ids of a
    batch's input nodes."""

    def features(self, ids: Tensor) -> Tensor:
        """The input nodes' feature rows."""

    def degrees(self, ids: Tensor) -> Tensor:
        """Their full-graph in-degrees (the model's ``deg``)."""

    def aggregates(self, ids: Tensor) -> Tensor:
        """Their precomputed first-hop aggregates (the model's ``agg``, ``train.first_hop: exact``)."""

    def embedding(self, dim: int, seed: int = 0):
        """This machine's learnable rows (``model.embed``), made once."""


class Batch(NamedTuple):
    """One training step's inputs, whatever the kind.

    Attributes:
        graph: the sampled blocks (or the whole local graph, full-graph mode).
        target: what the loss reads besides the model's output: the seeds' local ids (node
            classification), or ``(pair_graph, neg_pair_graph)`` (link prediction).
        inputs: the input rows (a tensor, or a dict per node type); with learnable rows the input
            nodes' local ids instead, looked up at the step (after the previous step's update).
        rows: the seeds' output rows in the whole-graph output (full-graph mode), else None.
        extra: more keyword inputs of the model (``deg``, ``agg``).
    """

    graph: list[dgl.DGLGraph] | dgl.DGLGraph
    target: Tensor | tuple[dgl.DGLGraph, dgl.DGLGraph]
    inputs: Tensor | dict[str, Tensor]
    rows: Tensor | None
    extra: dict[str, Tensor | dict]


def node_losses(
    out: Tensor, seeds: Tensor, rows: Tensor | None, label: Tensor, weights: Tensor, device: torch.device
) -> tuple[Tensor, Tensor]:
    """Cross-entropy per seed and the seeds' weights: the loss of node classification, every kind that has it.

    Blocks end at the seeds; with no seeds (a part without training nodes) they end at a
    placeholder whose row is not trained on, so the step counts with weight 0.
    """
    out = out[rows] if rows is not None else out[: seeds.numel()]
    return F.cross_entropy(out, label[seeds].to(device), reduction="none"), weights[seeds].to(device)


class LocalRuntime(ABC):
    """The data side of one partitioning on one worker: batches, their input rows, the loss.

    Rebuilt at every repartitioning boundary while the trainer's model, DDP wrapper, reducer and
    optimizer carry over. A subclass sets ``batches`` (an object whose ``epoch(e)`` yields what
    the kind's sampler draws) and implements :meth:`assemble` and :meth:`losses`.

    Attributes:
        lp: the loaded part.
        steps: steps per epoch, the same on every worker (:meth:`agree_steps`).
        contributors: workers that have something to train on (the reducer averages over them).
        prefetch: ``train.prefetch``: the trainer samples the next batch during the backward pass.
        features: the input rows' source (``take_bytes()``: remote and local bytes served).
        weights: per node of the local graph, the weight the corrections read.
    """

    lp: LoadedPart
    steps: int
    contributors: int
    features: Any
    weights: Tensor
    batches: Any = None

    def __init__(self, cfg: Config, lp: LoadedPart):
        self.lp = lp
        self.prefetch = cfg.train.prefetch

    def agree_steps(self, cfg: Config, num_local: int, nothing: str) -> int:
        """Agree with every worker on the steps per epoch (two integer all-reduces, once per partitioning).

        Sets :attr:`contributors` and :attr:`steps` (capped by ``train.steps_per_epoch``).

        Args:
            cfg: the run's config (batch size, cap).
            num_local: what this worker trains on (seeds or positive edges).
            nothing: the one-line error when no worker has anything to train on.

        Returns:
            The uncapped steps (the batch size every worker's batches keep).
        """
        self.contributors = seeded_workers(num_local)
        if self.contributors == 0:
            raise ConfigError(nothing)
        full = equal_steps(num_local, cfg.train.batch_size)
        cap = cfg.train.steps_per_epoch
        self.steps = min(full, cap) if cap > 0 else full
        return full

    def warn_idle(self, num_local: int, world_size: int, lacks: str, have: str) -> None:
        """A log line for a worker that takes its steps with weight 0 (``lacks``: what it has none of, e.g.
        "has no training nodes"; ``have``: what the others have, e.g. "seeds")."""
        if num_local == 0:
            log.warning(
                "part %d %s: it takes the %d agreed steps per epoch with weight 0 (the average is over the "
                "%d of %d workers that have %s)",
                self.lp.part_id,
                lacks,
                self.steps,
                self.contributors,
                world_size,
                have,
            )

    def epoch_inputs(self, epoch: int, times=None, start: int = 0) -> Iterator[Batch]:
        """Yield one :class:`Batch` per step of epoch ``epoch``.

        Args:
            epoch: which epoch's batches.
            times: if given, the seconds of sampling and of the input gather are added to it.
            start: the steps already taken: their batches are drawn (the epoch's order stays the same) and
                passed over, unassembled.
        """
        clock = time.perf_counter
        drawn = self.batches.epoch(epoch)
        for _ in range(start):
            next(drawn, None)
        while True:
            t0 = clock()
            try:
                sample = next(drawn)
            except StopIteration:
                return
            t1 = clock()
            batch = self.assemble(sample)
            if times is not None:
                times.add("sample", t1 - t0)
                times.add("gather", clock() - t1)
            yield batch

    def epoch_start(self, epoch: int, embedding) -> None:
        """What the kind does on every worker at the start of epoch ``epoch``, inside the epoch's measured window and
        before its first batch is drawn (every worker calls it at the same point, so it may be a collective);
        ``embedding`` is the trainer's learnable rows (:meth:`JobKind.make_embedding`). Nothing by default."""

    @abstractmethod
    def assemble(self, sample) -> Batch:
        """The :class:`Batch` of one drawn sample (its input rows gathered from local memory)."""

    def losses(self, out: Tensor, batch: Batch, device: torch.device) -> tuple[Tensor, Tensor]:
        """One loss per trained item and their weights, for the reducer: by default the seeds' cross-entropy
        (node classification: ``batch.target`` are the seeds, ``lp.label`` their labels, :attr:`weights` the
        corrections'); a kind that scores something else overrides it."""
        return node_losses(out, batch.target, batch.rows, self.lp.label, self.weights, device)

    @abstractmethod
    def train_coverage(self) -> Tensor:
        """The coverage of what this worker trains on (its seeds; link prediction: its inner nodes), one value each."""

    def coverage_stats(self) -> dict[str, float]:
        """Coverage summary of what this worker trains on (summary.json's ``coverage_train``)."""
        return cov.summarize(self.train_coverage())

    def summary(self) -> dict:
        """This worker's own summary.json fields of the kind (none by default)."""
        return {}

    def describe(self) -> list[str]:
        """Log lines about what this worker trains on, beyond the common one (none by default)."""
        return []


class DistJob(ABC):
    """A kind inside a DistDGL trainer (DGL's example flow): the baseline, or with ``grappa`` the drop-in.

    Built once per trainer by :meth:`JobKind.dist_job` after the DistGraph exists. The trainer
    (:mod:`dgl_grappa.distdgl.train`) iterates :attr:`loader`, turns each batch into the model's
    inputs with :meth:`step_inputs`, and computes the loss with :meth:`loss`; everything that
    differs between the kinds (loaders, input pulls, labels, embeddings, checkpoints of learnable
    rows, what a machine holds) is here.

    Attributes:
        loader: the batches (``DistNodeDataLoader``/``DistEdgeDataLoader``, or the drop-in loader).
        model: the model before DDP.
        embedding, emb_optimizer: learnable input rows and their sparse optimizer (None and a no-op optimizer where
            there are none).
        correction: the drop-in's reducer (None for the baseline).
        read_once: bytes the baseline reads before training (the drop-in: its loader's one-time bytes).
        common_steps: a cap on the steps per epoch every trainer must share (0: none).
    """

    loader: Any
    model: nn.Module
    embedding: Any = None
    emb_optimizer: Any = NoOptimizer()
    correction: Any = None
    read_once: int = 0
    common_steps: int = 0

    def __init__(self, cfg: Config, g, grappa: bool, device: torch.device, part_config: str):
        self.cfg, self.g, self.grappa, self.device, self.part_config = cfg, g, grappa, device, part_config
        self.kernels = resolve_kernels(cfg.train.kernels, cfg.run.device)  # the model's layers: dgl or torch

    @abstractmethod
    def step_inputs(self, batch) -> tuple[list, Any, dict, Any]:
        """``(blocks, x, model keyword inputs, loss target)`` of one batch, on the trainer's device."""

    @abstractmethod
    def loss(self, out: Tensor, target) -> Tensor:
        """The batch's mean loss."""

    def eval_inputs(self):
        """The evaluation's input rows when they are learnable (a callable, every rank calls it), else None."""
        return None

    def shard_state(self) -> dict | None:
        """This trainer's learnable rows and their optimizer's state, for its checkpoint shard (None: nothing)."""
        return None

    def load_shard(self, shard: dict) -> None:
        """Restore what :meth:`shard_state` returned (a collective for DGL's embeddings)."""

    def restore(self, shard: dict | None, checkpoint: str) -> None:
        """Restore this trainer's learnable rows from its shard of ``checkpoint`` (:meth:`shard_state`'s; nothing
        to do without learnable rows).

        Raises:
            CheckpointError: the job has learnable rows and the shard none.
        """
        if self.embedding is None:
            return
        if shard is None:
            raise CheckpointError(
                f"checkpoint {checkpoint} holds no embedding rows for this trainer; resume from a "
                "checkpoint of this run, or start afresh"
            )
        self.load_shard(shard)

    def take_bytes(self) -> int:
        """Bytes this trainer received since the last call in exchanges of the job's own, besides DistDGL's pulls
        and the gradients' all-reduce (the heterogeneous drop-in's sync of learnable rows): ``embed_bytes``."""
        return 0


class JobKind(ABC):
    """One kind of job: the builders the runtimes ask (see the module docstring).

    Attributes:
        name: the registry key (``node``, ``link``, ``hetero``).
        task: ``train.task``: what the kind trains (``node`` classification, ``link`` prediction).
        heterogeneous: whether the kind trains on a graph of several node and edge types.
        metric: how it is graded (:data:`~dgl_grappa.runtime.grading.ACCURACY` or
            :data:`~dgl_grappa.runtime.grading.RANKING`, or a :class:`Metric` of its own); its ``name`` is the
            kind's ``task``.
    """

    name: str = ""
    task: str = "node"
    heterogeneous: bool = False
    metric: Metric = ACCURACY

    def matches(self, cfg: Config) -> bool:
        """Whether ``cfg`` asks for this kind (its ``train.task`` and whether its graph is heterogeneous)."""
        return cfg.train.task == self.task and cfg.hetero == self.heterogeneous

    def check(self, cfg: Config) -> None:
        """The kind's config rules (a one-line ConfigError on the first problem); none by default."""

    def scorer(self, cfg: Config) -> Scorer:
        """What rank 0's evaluation scores, on the whole graph (and the held-out data it reads): by default the
        accuracy of the val and test nodes (of ``data.target`` on a heterogeneous graph). Its figures are keyed as
        :attr:`metric` names them."""
        return AccuracyScorer(cfg.data.target)

    def hold_out(self, cfg: Config) -> HoldOut | None:
        """What a run keeps out of the graph it partitions and trains on (link prediction: its held-out edges), or
        None (by default: nothing)."""
        return None

    @abstractmethod
    def load_part(self, cfg: Config, part_config: str, part: int) -> LoadedPart:
        """Worker ``part``'s part as a run of ``cfg`` keeps it (halo, first hop, memory budget)."""

    @abstractmethod
    def make_runtime(self, cfg: Config, ident, lp: LoadedPart) -> LocalRuntime:
        """The data side of the loaded part."""

    def make_embedding(self, cfg: Config, lp: LoadedPart) -> LearnableRows | NoEmbedding:
        """The worker's learnable input rows (own rows trained here; the halo's as the kind keeps them); a
        :class:`~dgl_grappa.method.embedding.NoEmbedding` (by default) where it has none."""
        return NoEmbedding()

    @abstractmethod
    def build_model(self, cfg: Config, lp: LoadedPart, num_classes: int) -> nn.Module:
        """The model of ``cfg`` for the loaded part's inputs."""

    @abstractmethod
    def holding(self, cfg: Config, lp: LoadedPart, embedding: LearnableRows | NoEmbedding) -> dict:
        """Keyword arguments of :meth:`EpochMeter.holding <dgl_grappa.runtime.meter.EpochMeter.holding>`:
        what the worker holds of its part (and of its learnable rows)."""

    @abstractmethod
    def machine_holding(self, cfg: Config, g, held=None) -> dict:
        """What a DistDGL machine holds of trainer's DistGraph ``g`` (``resident_bytes``, ``resident_other_bytes``,
        ``own_fp32_bytes``), with ``held`` the drop-in loader's own tables (None: the baseline)."""

    def worker_summary(self, lp: LoadedPart) -> dict:
        """This worker's own summary.json fields (beyond the runtime's); none by default."""
        return {}

    def run_summary(self, cfg: Config, per_worker: list[dict] | None) -> dict:
        """The run's own summary.json fields from every worker's (None: the DistDGL baseline's); none by default."""
        return {}

    def summary_lines(self, summary: dict) -> list[str]:
        """Lines the ``train`` command prints of the run's summary.json beyond the common ones (none by default)."""
        return []

    @abstractmethod
    def dist_job(self, cfg: Config, g, grappa: bool, device: torch.device, part_config: str) -> DistJob:
        """The kind's DistDGL job on trainer's DistGraph ``g``: the baseline, or the drop-in with ``grappa``."""
