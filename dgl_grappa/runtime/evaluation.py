"""Global evaluation, the same for every system: rank 0's model on the whole graph, timed apart.

Evaluation is not training: it reads the whole graph with full neighbourhoods (no
sampling, no partitions), runs on rank 0 only while the other workers wait at a barrier,
and its seconds are reported next to the epoch time, never inside it. That barrier is on a
gloo group of its own, bounded by ``run.eval_timeout_s`` (a whole-graph evaluation may take
longer than ``run.collective_timeout_s``, the bound of the training collectives); the
trainers wait on the same group while rank 0 writes a checkpoint. Grappa's trainer and
the DistDGL trainer use this one module, so their accuracies (and, for link prediction, MRR
and hits@k of the same held-out edges against the same negatives) are measured alike. For a graph
that no process may hold whole (``partition.prebuilt``), :class:`LayerwiseEvaluator`
computes the same full-neighbourhood inference layer by layer over the parts.
"""

from __future__ import annotations

import copy
import datetime
import logging
import time
import warnings
from abc import ABC, abstractmethod
from pathlib import Path

import dgl
import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

from ..config import Config, ConfigError, LinkConfig
from ..data import load_dataset
from ..data.common import target_type
from ..data.links import link_split
from ..partition.layout import node_map, part_paths, read_part_structure
from .metrics import ANON_PEAK

log = logging.getLogger("dgl_grappa")


@torch.no_grad()
def evaluate(model: torch.nn.Module, g, x=None, target: str = "") -> dict[str, float]:
    """Accuracy on the val and test masks of the whole graph, full neighbourhoods.

    Args:
        model: the GNN (called as ``model(g, feat)``); its train/eval mode is restored.
        g: the whole graph with ndata feat, label, val_mask, test_mask; or a heterograph with
            ``feat`` on some node types and the labels and masks on ``target``.
        x: the input rows of every node instead of ``feat`` (learnable embeddings, in the
            graph's node order); None = ``g.ndata["feat"]``. Heterogeneous: a dict of the
            featureless types' rows (the featured types read their ``feat``).
        target: heterogeneous: the node type evaluated (empty: the one type with labels).

    Returns:
        ``{"val": accuracy, "test": accuracy}`` (of the target type's nodes).
    """
    param = next(model.parameters(), None)
    if param is not None and param.device != g.device:
        # A worker training on a GPU: the whole graph stays in host memory, a copy of the model goes there.
        model = copy.deepcopy(model).to(g.device)
    was_training = model.training
    model.eval()
    if g.is_homogeneous:
        pred = model(g, g.ndata["feat"] if x is None else x.to(g.device)).argmax(-1)
        data = g.ndata
    else:
        inputs = {t: g.nodes[t].data["feat"] for t in g.ntypes if "feat" in g.nodes[t].data}
        inputs.update({t: v.to(g.device) for t, v in (x or {}).items()})
        pred = model(g, inputs).argmax(-1)  # the model returns its target type's rows
        data = g.nodes[target_type(g, target)].data
    model.train(was_training)
    correct = pred == data["label"]
    return {k: float(correct[data[f"{k}_mask"]].float().mean()) for k in ("val", "test")}


def ranking_metrics(pos: Tensor, neg: Tensor, k: int) -> dict[str, float]:
    """MRR and hits@k of every positive's score among its own negatives' (link prediction, every system).

    A positive's rank is 1 + the negatives scored above it + half of those scored equal (ties
    count half, as OGB ranks them); MRR is the mean of 1 / rank, hits@k the share of ranks <= k.

    Args:
        pos: ``[P]`` scores of the held-out edges.
        neg: ``[P, K]`` scores of each one's K negatives.
        k: the k of hits@k.

    Returns:
        ``{"mrr": ..., "hits": ...}`` (None each when there is no positive).

    Example:
        >>> m = ranking_metrics(torch.tensor([3.0, 1.0]), torch.tensor([[1.0, 2.0], [2.0, 5.0]]), k=1)
        >>> round(m["mrr"], 4), m["hits"]   # ranks 1 and 3
        (0.6667, 0.5)
    """
    if pos.numel() == 0:
        return {"mrr": None, "hits": None}
    p = pos.reshape(-1, 1)
    rank = 1.0 + (neg > p).sum(1).double() + 0.5 * (neg == p).sum(1).double()
    return {"mrr": float((1.0 / rank).mean()), "hits": float((rank <= k).double().mean())}


def embedding_accuracy(
    h: Tensor, label: Tensor, train_mask: Tensor, val_mask: Tensor, test_mask: Tensor, max_iter: int = 1000
) -> dict[str, float]:
    """Node classification from learned node embeddings, as DGL's ``train_dist_unsupervised.py`` evaluates them.

    Every embedding column is standardised over all nodes, a multinomial logistic regression with
    an L2 penalty of 1/2 |W|^2 on the summed cross-entropy (scikit-learn's ``LogisticRegression``
    defaults, which DGL's example fits, and its stopping rule: the mean objective's gradient below
    1e-4) is fitted by L-BFGS on the training nodes in float64, and its accuracy on the val and test
    nodes is returned. Deterministic: the fit starts from zeros.

    Args:
        h: ``[N, d]`` embeddings (the encoder's rows of every node).
        label: ``[N]`` labels; train_mask, val_mask, test_mask: ``[N]`` bool masks.
        max_iter: L-BFGS iterations at most.

    Returns:
        ``{"val": accuracy, "test": accuracy}`` (None each where the mask is empty).

    Example:
        >>> h = torch.tensor([[0.0], [0.1], [1.0], [1.1]]); y = torch.tensor([0, 0, 1, 1])
        >>> m = torch.tensor([True, False, True, False])
        >>> embedding_accuracy(h, y, m, ~m, ~m)
        {'val': 1.0, 'test': 1.0}
    """
    x = h.detach().to(torch.float64)
    x = (x - x.mean(0, keepdim=True)) / x.std(0, keepdim=True).clamp(min=1e-12)  # a constant column stays 0
    y = label.to(torch.int64)
    classes = int(y.max()) + 1 if y.numel() else 1
    xt, yt = x[train_mask], y[train_mask]
    if xt.shape[0] == 0:
        raise ValueError("embedding_accuracy needs training nodes: train_mask selects none")
    with torch.enable_grad():  # the evaluation runs under no_grad; the classifier's fit needs gradients
        lin = torch.nn.Linear(x.shape[1], classes, dtype=torch.float64)
        torch.nn.init.zeros_(lin.weight)
        torch.nn.init.zeros_(lin.bias)
        opt = torch.optim.LBFGS(
            lin.parameters(),
            max_iter=max_iter,
            tolerance_grad=1e-4,
            tolerance_change=1e-9,
            history_size=10,
            line_search_fn="strong_wolfe",
        )
        n = xt.shape[0]

        def closure():  # the summed objective over n: the same minimum, scikit-learn's scale for the tolerance
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(lin(xt), yt) + 0.5 / n * lin.weight.pow(2).sum()
            loss.backward()
            return loss

        opt.step(closure)
    with torch.no_grad():
        pred = lin(x).argmax(-1)
    return {
        k: (float((pred[m] == y[m]).double().mean()) if bool(m.any()) else None)
        for k, m in (("val", val_mask), ("test", test_mask))
    }


@torch.no_grad()
def evaluate_link(model: torch.nn.Module, split, k: int, chunk: int = 4096) -> dict[str, float]:
    """MRR and hits@k of the held-out edges on the whole training graph, full neighbourhoods, and the
    embeddings' node-classification accuracy.

    The encoder runs once on ``split.graph`` (the graph every system trained on: without the
    held-out edges); a pair (u, v) scores ``h_u . h_v``, against its negatives (u, v') of
    ``split.val_neg`` / ``split.test_neg`` (:mod:`dgl_grappa.data.links`), by :func:`ranking_metrics`.
    Where the graph has labels and a training mask, the same rows are classified as DGL's
    ``train_dist_unsupervised.py`` evaluates its embeddings (:func:`embedding_accuracy`): what the
    embeddings say about the nodes, besides their edges.

    Args:
        model: the encoder (called as ``model(g, feat)``); its train/eval mode is restored.
        split: a :class:`~dgl_grappa.data.links.LinkSplit`.
        k: the k of hits@k (``link.hits_k``).
        chunk: held-out edges scored at a time (bounds the memory of their negatives' rows).

    Returns:
        ``val_mrr``, ``val_hits``, ``test_mrr``, ``test_hits``; with labels ``val_emb_acc`` and ``test_emb_acc``.
    """
    g = split.graph
    param = next(model.parameters(), None)
    if param is not None and param.device != g.device:
        model = copy.deepcopy(model).to(g.device)
    was_training = model.training
    model.eval()
    h = model(g, g.ndata["feat"])
    model.train(was_training)
    out = {}
    for name, (u, v), negs in (("val", split.val, split.val_neg), ("test", split.test, split.test_neg)):
        pos, neg = [], []
        for a in range(0, u.numel(), chunk):
            hu = h[u[a : a + chunk]]
            pos.append((hu * h[v[a : a + chunk]]).sum(-1))
            neg.append(torch.einsum("pd,pkd->pk", hu, h[negs[a : a + chunk]]))
        m = ranking_metrics(torch.cat(pos) if pos else h[:0, 0], torch.cat(neg) if neg else h[:0, :0], k)
        out[f"{name}_mrr"], out[f"{name}_hits"] = m["mrr"], m["hits"]
    nd = g.ndata
    if all(key in nd for key in ("label", "train_mask", "val_mask", "test_mask")) and bool(nd["train_mask"].any()):
        acc = embedding_accuracy(h, nd["label"], nd["train_mask"].bool(), nd["val_mask"].bool(), nd["test_mask"].bool())
        out["val_emb_acc"], out["test_emb_acc"] = acc["val"], acc["test"]
    return out


def eval_due(cfg: Config, epoch: int) -> bool:
    """Whether epoch ``epoch`` ends with a global evaluation (every ``train.eval_every``, and the last)."""
    last = epoch == cfg.train.epochs - 1
    return last or (cfg.train.eval_every > 0 and (epoch + 1) % cfg.train.eval_every == 0)


def rank0_wait_group(cfg: Config):
    """The gloo group on which the workers wait for rank 0's own work (evaluation, checkpoints).

    A collective (every rank creates its evaluator at the same point), bounded by
    ``run.eval_timeout_s``; None outside a process group.
    """
    if dist.is_available() and dist.is_initialized():
        # First every member, on the default group (bounded by run.collective_timeout_s; a member lost since the
        # group formed fails it at once): a new gloo group would wait for a lost member up to run.eval_timeout_s,
        # and a take-over worker waiting there would not move on to the next generation.
        dist.barrier()
        return dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=cfg.run.eval_timeout_s))
    return None


def wait_for_rank0(group, obj=None):
    """Every rank: wait (at most ``run.eval_timeout_s``) until rank 0 is done with work of its own.

    Args:
        group: the evaluator's group (:func:`rank0_wait_group`), or None (no process group).
        obj: rank 0's outcome to hand to everyone (ignored on the other ranks).

    Returns:
        Rank 0's ``obj``.
    """
    if group is None:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0, group=group)
    return box[0]


class Scorer(ABC):
    """What a kind of job is evaluated on: the held-out data it reads from the whole graph, and its figures.

    A kind of job names its scorer (``JobKind.scorer``); :class:`GlobalEvaluator` loads the whole graph on
    rank 0, asks :meth:`held_out` once for what the scorer reads, and calls :meth:`score` when an
    evaluation is due. The figures it returns are keyed as the kind's metric names them
    (:class:`~dgl_grappa.runtime.grading.Metric`: ``val_acc``, ``test_mrr``, ...).

    Attributes:
        layerwise: the figures can also be computed layer by layer over the parts (:class:`LayerwiseEvaluator`:
            accuracy only).
    """

    layerwise: bool = False

    def held_out(self, g):
        """What :meth:`score` reads, from the whole graph ``g`` (rank 0, once): the graph itself by default."""
        return g

    @abstractmethod
    def score(self, model: torch.nn.Module, data, x=None) -> dict[str, float]:
        """The figures of ``model`` on ``data`` (:meth:`held_out`'s); ``x``: the input rows when they are learnable
        (see :func:`evaluate`), else None."""


class AccuracyScorer(Scorer):
    """Node classification: accuracy of the val and test nodes of the whole graph (:func:`evaluate`), as
    ``val_acc`` and ``test_acc``; ``target``: the node type on a heterogeneous graph."""

    layerwise = True

    def __init__(self, target: str = ""):
        self.target = target

    def score(self, model, data, x=None) -> dict[str, float]:
        return {f"{k}_acc": v for k, v in evaluate(model, data, x, self.target).items()}


class RankingScorer(Scorer):
    """Link prediction: MRR and hits@k of the held-out edges (:func:`evaluate_link`), on the graph without them.

    Args:
        cfg: the ``link`` section (the split's fractions and seed, the negatives, ``hits_k``).
    """

    def __init__(self, cfg: LinkConfig):
        self.cfg = cfg

    def held_out(self, g):
        # the same split the partitioning was cut from: a pure function of the graph and link.seed
        return link_split(g, self.cfg)

    def score(self, model, data, x=None) -> dict[str, float]:
        return evaluate_link(model, data, self.cfg.hits_k)


class GlobalEvaluator:
    """Rank 0 evaluates on the whole graph when an evaluation is due; the others wait for it.

    Args:
        cfg: the run's config (``data`` says which graph, ``train.eval_every`` when).
        is_main: this process is rank 0 (the only one that loads the whole graph).
        scorer: what the run's kind of job is evaluated on (:class:`Scorer`).

    Example:
        >>> ev = GlobalEvaluator(cfg, rank == 0, kind.scorer(cfg))    # doctest: +SKIP
        >>> rec.update(ev.after_epoch(model, epoch))                  # doctest: +SKIP
    """

    def __init__(self, cfg: Config, is_main: bool, scorer: Scorer):
        self.cfg = cfg
        self.scorer = scorer
        self.data = None  # rank 0: what the scorer reads (the whole graph, or its held-out split)
        self.group = rank0_wait_group(cfg)
        if is_main:
            self.data = scorer.held_out(load_dataset(cfg.data))

    def wait_for_rank0(self, obj=None):
        """Every rank: wait for rank 0's own work (see :func:`wait_for_rank0`); rank 0's ``obj``."""
        return wait_for_rank0(self.group, obj)

    def regroup(self) -> None:
        """Make the waiting group again in a new process group (a collective, at the point where a new
        member creates its evaluator: ``launch.on_failure: continue``)."""
        self.group = rank0_wait_group(self.cfg)

    def after_epoch(self, model: torch.nn.Module, epoch: int, inputs=None) -> dict:
        """Evaluate after ``epoch`` if due (a collective: every worker must call it).

        Args:
            model: rank 0's model.
            epoch: the epoch just trained.
            inputs: with learnable embeddings, a callable every rank calls when an evaluation is
                due (it may be a collective) that returns, on rank 0, every node's input row in
                the graph's node order (None elsewhere); None = the graph's features.

        Returns:
            ``{}`` when not due; else ``eval_time_s`` (all ranks) and, on rank 0, the scorer's figures
            (``val_acc`` and ``test_acc``; with link prediction ``val_mrr``, ``val_hits``, ``test_mrr`` and
            ``test_hits``: :func:`evaluate_link`).
        """
        if not eval_due(self.cfg, epoch):
            return {}
        t0 = time.perf_counter()
        out = {}
        x = inputs() if inputs is not None else None
        if self.data is not None:
            out = self.scorer.score(model, self.data, x)
        if self.group is not None:
            dist.barrier(group=self.group)  # the others wait (bounded by run.eval_timeout_s) while rank 0 evaluates
        out["eval_time_s"] = time.perf_counter() - t0
        return out


def eval_mode(cfg: Config) -> str:
    """The evaluation ``train.eval_mode`` resolves to: "whole" or "layerwise"."""
    mode = cfg.train.eval_mode
    if mode == "auto":
        return "layerwise" if cfg.partition.prebuilt else "whole"
    return mode


class LayerwiseEvaluator:
    """Evaluation without the whole graph in any process: layer by layer, part by part, in chunks.

    Every worker computes the outputs of its own part's inner nodes with full
    neighbourhoods: a partition in DGL's layout holds every in-edge of a part's inner nodes
    (from inner and 1-hop halo nodes), so layer l of an inner node needs only layer l-1 of
    its in-neighbours. The layer outputs of all nodes live in memory-mapped files
    ``<work_dir>/h<l>.npy`` ([num_nodes, width] float32, rows in the partitioning's global
    ids): h0 = the features (each worker writes its inner rows, once), and for each layer
    every worker, chunk by chunk, reads the rows of the chunk's sources, applies
    :meth:`GNN.layer <dgl_grappa.method.models.GNN.layer>` on a block (the chunk's inner nodes as
    destinations, their in-neighbours as sources) and writes the chunk's rows; a barrier
    separates the layers. The last layer's logits are compared with the labels of the
    part's val/test nodes, and one all-reduce sums the counts. No sampling: the result
    equals whole-graph inference up to float rounding (summation order). The files of
    h1.. are removed after each evaluation, h0 at :meth:`close`.

    Memory per worker: the part's in-CSC (int32, 4 B per in-edge of its inner nodes, read at
    the first evaluation) and one chunk (``train.eval_chunk_nodes`` destinations, their
    in-edges and the rows of their sources). ``train.eval_concurrency`` bounds how many
    workers hold a chunk (and read their part's files) at the same time. The files need a
    folder every worker sees (one host here).

    Args:
        cfg: the run's config (``train.eval_every``, ``eval_chunk_nodes``, ``eval_concurrency``).
        rank, world_size: this worker and the group (one part per worker).
        part_config: the partitioning's json.
        work_dir: folder of the embedding files.
    """

    def __init__(self, cfg: Config, rank: int, world_size: int, part_config: str, work_dir: str | Path):
        self.cfg, self.rank, self.world = cfg, rank, world_size
        self.part_config = part_config
        self.work = Path(work_dir)
        self.chunk = cfg.train.eval_chunk_nodes
        k = cfg.train.eval_concurrency
        self.turns = 1 if k <= 0 else -(-world_size // k)  # ceil: groups of k workers take turns
        self.my_turn = 0 if k <= 0 else rank // k
        meta, _, _ = part_paths(part_config, rank)
        self.node_map = node_map(meta)
        if len(self.node_map) != world_size:
            raise ValueError(
                f"layer-wise evaluation needs one part per worker: {len(self.node_map)} parts, {world_size} workers"
            )
        self.num_nodes = self.node_map[-1][1]
        self.ready = False
        self.last_stats: dict = {}
        self.group = rank0_wait_group(cfg)  # trainers wait here while rank 0 writes a checkpoint

    def wait_for_rank0(self, obj=None):
        """Every rank: wait for rank 0's own work (see :func:`wait_for_rank0`); rank 0's ``obj``."""
        return wait_for_rank0(self.group, obj)

    def regroup(self) -> None:
        """Make the waiting group again in a new process group (a collective, at the point where a new
        member creates its evaluator: ``launch.on_failure: continue``)."""
        self.group = rank0_wait_group(self.cfg)

    # -- set-up, at the first evaluation -------------------------------------------------
    def _in_turns(self, fn) -> None:
        """Run ``fn()`` on every worker, ``eval_concurrency`` at a time (a collective)."""
        for turn in range(self.turns):
            if turn == self.my_turn:
                fn()
            if self.turns > 1:
                dist.barrier()

    def _prepare(self) -> None:
        """Read this part's structure, labels and masks; write its feature rows into h0."""
        self._create(0, None)  # rank 0 makes the folder; h0's width is known after the reads

        def load():
            st = read_part_structure(self.part_config, self.rank, in_edges_of_inner=True)
            self.indptr, self.indices, self.num_inner, self.gids = (
                st["indptr"],
                st["indices"],
                st["num_inner"],
                st["global_ids"],
            )
            lo, hi = self.node_map[self.rank]
            # DGL's layout gives the inner nodes of part p the global ids node_map[p], in order.
            self.contiguous = bool(
                hi - lo == self.num_inner and torch.equal(self.gids[: self.num_inner], torch.arange(lo, hi))
            )
            _, _, feat_file = part_paths(self.part_config, self.rank)
            node = {k.split("/", 1)[-1]: v for k, v in dgl.data.utils.load_tensors(str(feat_file)).items()}
            self.label = node["label"].to(torch.int64)
            self.masks = {k: node[f"{k}_mask"].bool() for k in ("val", "test")}
            self._feat = node["feat"]
            self.feat_dim = int(self._feat.shape[1])
            ANON_PEAK.sample()

        self._in_turns(load)
        self._create(0, self.feat_dim)

        def write():
            h0 = self._open(0, write=True)
            for a in range(0, self.num_inner, self.chunk):
                self._write_rows(h0, a, self._feat[a : a + self.chunk])
            self._feat = None
            del h0

        self._in_turns(write)
        dist.barrier()
        self.ready = True
        if self.rank == 0:
            log.info("layer-wise evaluation: parts read, features written to %s", self._path(0))

    # -- files -------------------------------------------------------------------------
    def _path(self, layer: int) -> Path:
        return self.work / f"h{layer}.npy"

    def _create(self, layer: int, width: int | None) -> None:
        """Rank 0 creates the (sparse) file of layer ``layer``; everyone waits for it."""
        if self.rank == 0:
            self.work.mkdir(parents=True, exist_ok=True)
            if width is not None:
                mm = np.lib.format.open_memmap(
                    self._path(layer), mode="w+", dtype=np.float32, shape=(self.num_nodes, width)
                )
                del mm
        dist.barrier()

    def _open(self, layer: int, write: bool = False) -> Tensor:
        """The layer's file as a [num_nodes, width] tensor over a shared memory map.

        Mapped once per layer and pass: pages come from (and go to) the page cache that every
        worker on the host shares, so rows written by one worker are seen by the others
        without a flush, and a row is faulted in once per layer, not once per chunk. Those
        pages count in this process's resident size as file-backed pages (``file_gb`` of
        :func:`dgl_grappa.runtime.metrics.memory_stats`), not as its own memory.
        """
        mm = np.load(self._path(layer), mmap_mode="r+" if write else "r")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a read-only map gives a non-writable tensor: we only read it
            return torch.from_numpy(mm)

    def _write_rows(self, out: Tensor, first: int, rows: Tensor) -> None:
        """Rows of inner nodes ``first .. first + len(rows)`` (local ids) into a layer's map ``out``."""
        if self.contiguous:
            lo = self.node_map[self.rank][0] + first
            out[lo : lo + rows.shape[0]] = rows
        else:
            out[self.gids[first : first + rows.shape[0]]] = rows

    # -- evaluation ----------------------------------------------------------------------
    def _block(self, a: int, b: int):
        """Block of inner nodes [a, b): destinations first among the sources (DGL's convention)."""
        e0, e1 = int(self.indptr[a]), int(self.indptr[b])
        nbr = self.indices[e0:e1].to(torch.int64)
        inside = (nbr >= a) & (nbr < b)
        others, inv = torch.unique(nbr[~inside], return_inverse=True)
        new = torch.empty_like(nbr)
        new[inside] = nbr[inside] - a
        new[~inside] = (b - a) + inv
        src_local = torch.cat([torch.arange(a, b), others])
        block = dgl.create_block(
            ("csc", (self.indptr[a : b + 1] - e0, new, torch.arange(e1 - e0))),
            num_src_nodes=src_local.numel(),
            num_dst_nodes=b - a,
        )
        return block, self.gids[src_local]

    def _width(self, model, layer: int, width_in: int) -> int:
        tiny = dgl.create_block((torch.tensor([0]), torch.tensor([0])), num_src_nodes=1, num_dst_nodes=1)
        return int(model.layer(layer, tiny, torch.zeros(1, width_in)).shape[1])

    def _layer(self, model, layer: int, last: bool, correct: Tensor, stats: dict) -> None:
        h_in = self._open(layer)
        h_out = None if last else self._open(layer + 1, write=True)
        for a in range(0, self.num_inner, self.chunk):
            b = min(a + self.chunk, self.num_inner)
            block, src_gids = self._block(a, b)
            h = torch.index_select(h_in, 0, src_gids)
            out = model.layer(layer, block, h)
            stats["chunks"] += 1
            stats["read_rows"] += int(src_gids.numel())
            if last:
                hit = out.argmax(-1) == self.label[a:b]
                for j, k in enumerate(("val", "test")):
                    m = self.masks[k][a:b]
                    correct[2 * j] += float(hit[m].sum())
                    correct[2 * j + 1] += float(m.sum())
            else:
                self._write_rows(h_out, a, out)
            ANON_PEAK.sample()
            del block, h, out
        del h_in, h_out

    @torch.no_grad()
    def evaluate(self, model) -> dict[str, float]:
        """Accuracy on the val and test nodes of the whole graph (a collective: every worker calls it)."""
        was_training = model.training
        model.eval()
        stats = {"chunks": 0, "read_rows": 0}
        t0 = time.perf_counter()
        if not self.ready:
            self._prepare()
            stats["prepare_s"] = time.perf_counter() - t0
        correct = torch.zeros(4, dtype=torch.float64)  # val correct, val count, test correct, test count
        width = self.feat_dim
        num_layers = model.num_layers
        for layer in range(num_layers):
            t_layer = time.perf_counter()
            last = layer == num_layers - 1
            out_w = self._width(model, layer, width)
            if not last:
                self._create(layer + 1, out_w)
            self._in_turns(lambda: self._layer(model, layer, last, correct, stats))
            dist.barrier()  # layer l + 1 is complete everywhere before anyone reads it
            if self.rank == 0 and layer > 0:
                self._path(layer).unlink(missing_ok=True)
            stats[f"layer{layer}_s"] = time.perf_counter() - t_layer
            if self.rank == 0:
                log.info(
                    "layer-wise evaluation: layer %d of %d done in %.1f s",
                    layer + 1,
                    num_layers,
                    stats[f"layer{layer}_s"],
                )
            width = out_w
        dist.all_reduce(correct)
        model.train(was_training)
        stats["seconds"] = time.perf_counter() - t0
        self.last_stats = stats
        return {"val": float(correct[0] / max(correct[1], 1)), "test": float(correct[2] / max(correct[3], 1))}

    def after_epoch(self, model, epoch: int, inputs=None) -> dict:
        """Evaluate after ``epoch`` if due (a collective); ``eval_time_s`` and the accuracies (rank 0).

        ``inputs`` (learnable embeddings) is not available here: the config refuses
        ``model.embed`` with layer-wise evaluation.
        """
        if inputs is not None:
            raise ValueError(
                "layer-wise evaluation reads the input rows from the partition files; it cannot take "
                "learnable embeddings (use train.eval_mode=whole)"
            )
        if not eval_due(self.cfg, epoch):
            return {}
        t0 = time.perf_counter()
        acc = self.evaluate(model)
        out = {"val_acc": acc["val"], "test_acc": acc["test"]} if self.rank == 0 else {}
        out["eval_time_s"] = time.perf_counter() - t0
        out["eval_stats"] = dict(self.last_stats)
        return out

    def close(self) -> None:
        """Remove the embedding files (rank 0)."""
        if self.rank == 0 and self.work.is_dir():
            for f in self.work.glob("h*.npy"):
                f.unlink(missing_ok=True)


def make_evaluator(cfg: Config, rank: int, world_size: int, part_config: str, out_dir: str | Path, scorer: Scorer):
    """The evaluator ``train.eval_mode`` asks for (see :func:`eval_mode`); same interface either way.

    Raises:
        ConfigError: layer-wise evaluation of a kind whose figures it cannot compute (``scorer.layerwise``).
    """
    if eval_mode(cfg) == "layerwise":
        if not scorer.layerwise:
            raise ConfigError(
                f"train.eval_mode=layerwise computes accuracies, not the figures train.task="
                f"{cfg.train.task} is evaluated on; use --train.eval_mode=whole without "
                "partition.prebuilt"
            )
        return LayerwiseEvaluator(cfg, rank, world_size, part_config, Path(out_dir) / "eval")
    return GlobalEvaluator(cfg, rank == 0, scorer)
