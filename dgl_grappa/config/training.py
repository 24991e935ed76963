"""The ``model``, ``train``, ``link`` and ``grappa`` sections: what is trained, how, and how gradients meet."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from .errors import ConfigError, require

_SIZE = re.compile(r"([0-9]+(?:\.[0-9]*)?(?:e[0-9]+)?)\s*(b|kb|mb|gb|tb|kib|mib|gib|tib)")
_UNITS = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_budget(text: str) -> tuple[float, int]:
    """``train.memory_budget`` as (multiple of the own fp32 feature rows, bytes); (0, 0) = no limit.

    Example:
        >>> parse_budget("1.5"), parse_budget("2x"), parse_budget("8GB"), parse_budget("0")
        ((1.5, 0), (2.0, 0), (0.0, 8000000000), (0.0, 0))
    """
    s = str(text).strip().lower()
    if s in ("", "0", "none", "off"):
        return 0.0, 0
    m = _SIZE.fullmatch(s)
    if m:
        return 0.0, int(float(m.group(1)) * _UNITS[m.group(2)])
    try:
        mult = float(s[:-1] if s.endswith("x") else s)
    except ValueError:
        mult = -1.0
    if mult < 0 or mult != mult:
        raise ConfigError(
            f"train.memory_budget={text!r} is neither a multiple of the own feature rows (e.g. 1.5) "
            "nor a size (e.g. 8GB, 512MiB); 0 means no limit"
        )
    return mult, 0


@dataclass
class ModelConfig:
    """The GNN."""

    name: Literal["sage", "gcn", "gat", "gin", "rgcn"] = "sage"
    """GraphSAGE (mean), GCN, GAT or GIN; rgcn for a heterogeneous graph (``data.name: hetsynth``):
    per relation a ``GraphConv`` (the mean of the relation's in-neighbours, its own weight), summed
    by DGL's ``HeteroGraphConv``, plus a self-loop weight per node type, as DGL's RGCN example."""
    num_layers: int = 2
    """Number of message-passing layers, 1..6."""
    hidden: int = 128
    """Hidden width (for GAT: the total over heads)."""
    dropout: float = 0.5
    """Dropout probability in [0, 1)."""
    heads: int = 4
    """Attention heads (GAT only); hidden must be divisible by it."""
    gcn_norm: Literal["right", "both"] = "right"
    """GCN only. right: ``A + I`` with in-degree normalisation (the self-loop is implicit, so
    sampling never loses it; a block with full fan-out gives the whole graph's output). both:
    DGL's ``GraphConv(norm='both')`` as DGL's examples use it (``1 / sqrt(d_out(u) d_in(v))``,
    no self-loop), for comparing with a script that builds that layer; its first-hop
    aggregate is the partition folder's ``gcn`` table."""
    empty: Literal["self", "zero"] = "self"
    """GraphSAGE only: what the neighbour mean of a node is when its *sampled* neighbourhood is
    empty although its full one is not (local-only sampling without the halo; halo nodes kept
    as leaves). self: the node's own input to that layer; zero: 0, as DGL's SAGEConv.
    Needs the full-graph in-degrees (Grappa's runtimes pass them); without them, and on a
    whole graph, both give the same output."""
    embed: bool = False
    """Learnable node embeddings: every node's input row is a trainable vector of ``embed_dim``
    values instead of its features (not loaded), as in DGL's ``train_dist_transductive.py``;
    for graphs without features (``data.synthetic.featureless``). Every row starts as a pure
    function of ``train.seed`` and the node's global id (uniform in [-1, 1)). Grappa: a worker
    holds and updates the rows of its own nodes only (``torch.nn.Embedding(sparse=True)``,
    ``torch.optim.SparseAdam``), so embeddings move no byte; with ``train.halo: keep`` a halo
    node's row is its owner's initial row, computed locally and never updated (stale).
    DistDGL: one ``DistEmbedding`` in the KVStore and ``dgl.distributed.optim.SparseAdam``.
    The first hop is sampled (``train.first_hop: exact`` switches to sampled with a log line:
    aggregates of learnable rows would go stale). Not with ``schedule.k > 0``, layer-wise
    evaluation or ``run.floor``. On a heterogeneous graph only the node types without features
    get learnable rows (DGL's RGCN example: a ``DistEmbedding`` per featureless type); the others
    keep their features, and the first hop of their relations can still be exact; Grappa trains
    the halo's copies of those rows too and syncs them (``embed_halo_sync``)."""
    embed_dim: int = 64
    """Width of the learnable rows (``model.embed``)."""
    embed_lr: float = 0.01
    """Learning rate of the embeddings' sparse Adam (``model.embed``; DGL's example: 0.01). Grappa
    uses PyTorch's ``SparseAdam`` (its bias correction counts the optimizer's steps), DistDGL
    ``dgl.distributed.optim.SparseAdam`` (each row's own updates); the same for a row updated
    at every step."""
    embed_halo_sync: int = 1
    """Heterogeneous graphs, Grappa: every this many epochs (at the start of the epoch) the learnable
    rows that several workers hold are averaged. Between syncs each worker trains its halo's copies
    with its own gradients, as it trains its own rows; at a sync every worker sends each copy's
    change since the last sync to the node's owner, the owner moves its row by the mean change of
    the workers that changed it (its own included) and sends the row back to every worker holding
    it. Bytes per sync: twice the halo rows x ``embed_dim`` x 4, counted as ``embed_bytes``;
    memory: the halo copies' Adam moments and the rows at the last sync (``embed_sync``). 0 =
    never: a halo row is its owner's initial row, frozen, and no byte moves."""

    def check(self) -> None:
        """Depth, widths, dropout, GAT's heads, and the learnable rows' settings when ``embed`` is on."""
        require(1 <= self.num_layers <= 6, f"model.num_layers={self.num_layers} must be in 1..6")
        require(self.hidden >= 1, f"model.hidden={self.hidden} must be >= 1")
        require(0.0 <= self.dropout < 1.0, f"model.dropout={self.dropout} must be in [0, 1)")
        require(self.heads >= 1, f"model.heads={self.heads} must be >= 1")
        require(
            self.name != "gat" or self.hidden % self.heads == 0,
            f"model.hidden={self.hidden} is not divisible by model.heads={self.heads}; pick a multiple of heads",
        )
        if self.embed:
            require(self.embed_dim >= 1, f"model.embed_dim={self.embed_dim} must be >= 1")
            require(self.embed_lr > 0, f"model.embed_lr={self.embed_lr} must be > 0")
            require(
                self.embed_halo_sync >= 0, f"model.embed_halo_sync={self.embed_halo_sync} must be >= 0 (0: never sync)"
            )


@dataclass
class TrainConfig:
    """The training loop."""

    task: str = "node"
    """The kind of job (``dgl_grappa.kinds``): node, link, or the task of a kind registered of one's own.
    node: node classification (cross-entropy on the training nodes' labels, accuracy).
    link: link prediction, as DGL's ``train_dist_unsupervised.py``: the model is an encoder
    whose output rows (``model.hidden`` wide) score a pair by their dot product, trained with
    binary cross-entropy on positive edges against sampled negatives, and evaluated by MRR and
    hits@k of held-out edges against sampled negatives (the ``link`` section). The held-out
    edges are removed before partitioning, so every system trains on the same graph. Grappa: a
    worker's positives are the edges it owns (DGL's layout: the destination's part) whose
    source it holds, its negatives follow the global draw over its own nodes and a pool of other
    parts' nodes read once (``link.negative_pool``). ``train.batch_size``
    counts positive edges. Needs ``grappa.correction: none`` and ``train.mode: minibatch``; not
    with ``model.embed``, ``schedule.k > 0`` or layer-wise evaluation."""
    kind_module: str = ""
    """Where a kind of job of one's own is defined, when ``task`` names one the package does not have: a module
    name (``my_project.edge_regression``) or a ``.py`` file's path (absolute for jobs across hosts) that registers
    it (``dgl_grappa.kinds.register``) when imported; every process of the job imports it before it asks for its
    kind. Empty: the package's kinds only."""
    mode: Literal["minibatch", "fullgraph"] = "minibatch"
    """minibatch: neighbour-sampled batches; fullgraph: one step over the whole local part."""
    epochs: int = 10
    """Number of training epochs."""
    batch_size: int = 1000
    """Seeds per batch (the largest part's; smaller parts use smaller batches so every
    worker takes the same number of steps)."""
    fanouts: list[int] = field(default_factory=lambda: [10, 25])
    """Neighbours sampled per layer, input layer first; one entry per model layer; -1 = all."""
    lr: float = 0.003
    """Learning rate."""
    weight_decay: float = 0.0
    """L2 penalty."""
    optimizer: Literal["adam", "sgd"] = "adam"
    """Optimizer."""
    halo: Literal["drop", "keep"] = "keep"
    """drop: train on the inner nodes only; keep: halo nodes stay as leaves whose features
    (and, with first_hop=exact, first-hop aggregates) are read once per partitioning, at load
    time, from their owners' partition files (counted in summary ``one_time_bytes_total``)."""
    halo_in_edges: Literal["part", "featureless"] = "featureless"
    """Heterogeneous graphs with halo=keep: part = the kept halo's in-edges the partition stores
    (those from this part's inner nodes); featureless = also every kept halo node's in-edges over the
    relations from featureless types, read once per partitioning from their owners' parts (16
    one-time bytes an edge), their new source nodes joining the halo with learnable rows only, so
    that the first block samples a halo node's whole neighbourhood over those relations. The DistDGL
    job's drop-in (``--grappa``), which samples every relation's first hop, reads every relation's
    halo in-edges unless this is part."""
    first_hop: Literal["exact", "sampled"] = "exact"
    """exact (first-hop completion): the model's first layer reads, for every node of a
    computation tree, its features and the full-graph mean of its in-neighbours' features,
    precomputed once per partitioning (``python -m dgl_grappa prepare``; ``partition`` does it
    itself), so layer 0 is exact and
    only layers 1..L-1 are sampled (``fanouts[0]`` is unused). sampled: every layer is
    sampled from the local graph. GAT always samples its first layer (its attention depends
    on learned projections, so nothing can be precomputed): exact falls back to sampled with
    a log line. On a heterogeneous graph exact completes the first hop per relation from a
    featured type (the whole graph's mean over that relation's in-neighbours) and samples the
    relations from featureless types."""
    memory_budget: str = "1.5"
    """The most bytes of feature-width node tables (features, first-hop aggregates, halo rows)
    a worker holds: a multiple of its own feature rows in fp32 (``1.5``), or bytes (``8GB``,
    ``512MiB``); ``0`` = no limit. Under it the loader keeps only the nodes the training seeds'
    sampled trees reach, stores the tables in the most exact precision that fits
    (``train.storage``), and when even int4 does not fit keeps a uniform sample of the halo.
    A budget below the own reachable rows and aggregates in int4 is an error naming the
    smallest that fits."""
    storage: Literal["auto", "fp32", "fp16", "bf16", "int8", "int4"] = "auto"
    """Precision of the feature-width tables a worker holds. auto: the most exact of fp32,
    fp16 (bf16 for features beyond fp16's range), int8 and int4 (one fp32 scale per row) that
    holds every reachable node within ``train.memory_budget``. Rows reach the model in fp32."""
    eval_every: int = 5
    """Global evaluation every this many epochs (and always after the last); 0 = end only."""
    eval_mode: Literal["auto", "whole", "layerwise"] = "auto"
    """whole: rank 0 evaluates on the whole graph in memory; layerwise: every worker computes
    its part's nodes layer by layer with full neighbourhoods (its part's in-edges), through
    memory-mapped per-layer embedding files, so no process ever holds the whole graph
    (same result up to float rounding); auto: layerwise with ``partition.prebuilt``, else whole."""
    eval_chunk_nodes: int = 65536
    """Layer-wise evaluation: destination nodes per chunk (bounds its memory)."""
    eval_concurrency: int = 0
    """Layer-wise evaluation: how many workers compute (and read their part's files) at the
    same time; 0 = all. 1 or 2 bound the memory of a big graph's evaluation."""
    steps_per_epoch: int = 0
    """Cap on the steps of an epoch (0 = one pass over every worker's train seeds). With a
    cap an epoch takes the first ``cap`` batches of that epoch's shuffled seeds (batches of the
    uncapped size), so successive epochs see different seeds."""
    seed: int = 0
    """Seed of model initialisation and sampling."""
    kernels: Literal["auto", "dgl", "torch"] = "auto"
    """The layers' message passing: dgl (DGL's layers; on a GPU they need DGL's CUDA build, which the
    package registry does not have), torch (the same layers in PyTorch operations over each block's
    edges as plain tensors: any device torch runs on, same parameters, so checkpoints move between the
    two) or auto: torch on a GPU (``run.device: cuda``), and on the CPU the faster of the two in
    ``benchmarks/kernels/``."""
    sampler: Literal["auto", "dgl", "torch"] = "auto"
    """Grappa's neighbour sampling on the local graph. dgl: DGL's ``NeighborSampler`` (on the CPU);
    torch: the same draw (uniform without replacement, up to each layer's fan-out, seeded per
    epoch) in PyTorch operations on the trainer's device, its blocks built for the layers
    (``train.kernels``) without a pass through the host; auto: torch on a GPU (``run.device:
    cuda``), and on the CPU the faster of the two in ``benchmarks/samplers/``. A heterogeneous
    graph is always sampled by DGL (torch is refused there). DistDGL and the drop-in loader
    sample with DGL as the script says."""
    resident: Literal["auto", "host", "device"] = "auto"
    """Where a worker's tables are held (the local graph's structure, features, first-hop
    aggregates, the kept halo, labels, degrees): auto: on the trainer's device when they fit in
    its free memory (shared by the workers on it), else in the host's pinned memory; device:
    on the device or an error naming the bytes; host: in host memory, each batch's rows gathered
    there into pinned memory and copied to the device at its step without holding the host up
    (the CPU: the same either way)."""
    prefetch: bool = False
    """Sample (and gather the features of) the next mini-batch while the current step's
    backward pass and gradient all-reduce run (in a helper thread); the same batches and
    the same arithmetic, so the same results bit for bit."""

    def check(self) -> None:
        """Ranges of the loop's settings, the fan-outs' values and the memory budget's form."""
        require(self.epochs >= 1, f"train.epochs={self.epochs} must be >= 1")
        require(self.batch_size >= 1, f"train.batch_size={self.batch_size} must be >= 1")
        require(
            all(f == -1 or f >= 1 for f in self.fanouts),
            f"train.fanouts={self.fanouts} has an entry that is neither -1 (all) nor >= 1",
        )
        require(self.lr > 0, f"train.lr={self.lr} must be > 0")
        require(self.weight_decay >= 0, f"train.weight_decay={self.weight_decay} must be >= 0")
        require(self.eval_every >= 0, f"train.eval_every={self.eval_every} must be >= 0 (0 = only at the end)")
        require(self.steps_per_epoch >= 0, f"train.steps_per_epoch={self.steps_per_epoch} must be >= 0 (0 = no cap)")
        require(self.eval_chunk_nodes >= 1, f"train.eval_chunk_nodes={self.eval_chunk_nodes} must be >= 1")
        require(
            self.eval_concurrency >= 0, f"train.eval_concurrency={self.eval_concurrency} must be >= 0 (0 = all workers)"
        )
        parse_budget(self.memory_budget)  # a one-line ConfigError when it is neither a multiple nor a size


@dataclass
class LinkConfig:
    """Link prediction (``train.task: link``): held-out edges, negatives, evaluation."""

    val_frac: float = 0.05
    """Share of the graph's edges held out for validation, as undirected pairs (u-v and v-u
    go together; self-loops are never held out), removed before partitioning; > 0."""
    test_frac: float = 0.1
    """Share of the graph's edges held out for the test, as for ``val_frac``; > 0."""
    seed: int = 0
    """Seed of the held-out split and of the evaluation's negatives: the same edges and the
    same negatives for every system and run with this seed."""
    negatives: int = 1
    """Negative pairs per positive edge in training (DGL's example: ``--num_negs``): the
    positive edge's source with a drawn destination."""
    negative_dist: Literal["uniform", "degree"] = "uniform"
    """How training negatives' destinations are drawn: uniform, or in proportion to the
    full-graph in-degree to the power 0.75. DistDGL: over every node. Grappa: as that global
    draw over its own nodes and its negative pool (``negative_pool``); with ``negative_pool: 0``
    over the nodes the worker holds (its own and its kept halo)."""
    negative_pool: float = 0.25
    """Grappa: remote nodes per own node a worker holds as a negative pool: ``ceil(negative_pool x
    its own nodes)`` nodes of other parts, drawn uniformly, their rows read once per partitioning
    (one-time bytes, held as halo rows are), so that training negatives follow the global draw
    DistDGL makes (an own node with its share of the graph, else a pool node); 0: negatives from
    the nodes the worker holds only (its own and its kept halo); >= 0."""
    pool_fanout: int = 0
    """Grappa: in-neighbours read once per pool node (a uniform sample of its in-edges, held as
    leaves, as the halo is), so that a pool negative's sampled tree is a tree as any other node's;
    0: a pool node has no sampled neighbourhood; >= 0."""
    eval_negatives: int = 100
    """Negatives per held-out edge in evaluation: destinations drawn uniformly from every node
    (seeded by ``link.seed``; not filtered against true edges)."""
    hits_k: int = 10
    """k of hits@k: the share of held-out edges that rank in the top k among their negatives."""

    # Its ranges are checked with the rest of link prediction's rules (kinds/link.py: LinkKind.check),
    # only when train.task is link.


@dataclass
class GrappaConfig:
    """Coverage-corrected gradient aggregation (the reducer)."""

    correction: Literal["none", "batch", "node", "shrinkage"] = "none"
    """none: plain averaging; batch: sum a_i g_i / sum a_i with a_i the batch mean weight;
    node: self-normalised node-level importance weights in the loss; shrinkage: batch
    weights pulled towards a target by ``lam``."""
    hops: int = 0
    """Hops of the coverage recurrence; 0 = the model's num_layers; 1 = one-hop ratio."""
    lam: float = 0.5
    """Shrinkage strength in [0, 1] (1 = plain averaging, 0 = batch-level)."""
    shrink_target: Literal["mean", "one"] = "mean"
    """Shrinkage target: the mean batch weight over workers, or 1."""
    w_min: float = 0.05
    """Lower clamp of node weights, in (0, 1] (keeps the estimator bounded)."""
    self_loops: bool = True
    """Count a self-loop in both local and global degree (r = (d_loc+1)/(d+1))."""
    grad_dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    """Precision of the gradient all-reduce: float16 or bfloat16 halve its bytes (PyTorch's
    compression wrappers around the correction's hook cast each bucket down for the collective
    and back after); float32 = the exact arithmetic of plain DDP."""

    def check(self) -> None:
        """The coverage recurrence's depth, the shrinkage and the weights' clamp."""
        require(0 <= self.hops <= 6, f"grappa.hops={self.hops} must be in 0..6 (0 = model.num_layers)")
        require(0.0 <= self.lam <= 1.0, f"grappa.lam={self.lam} must be in [0, 1]")
        require(0.0 < self.w_min <= 1.0, f"grappa.w_min={self.w_min} must be in (0, 1]")


def dropin_problem(correction: str, halo: str) -> str | None:
    """Why the drop-in loader (DistDGL ``--grappa``) cannot run these settings, or None.

    Args:
        correction: ``grappa.correction``.
        halo: ``train.halo`` (both are served: the drop-in reads the kept halo's rows once
            through the KVStore and serves them from memory).

    Returns:
        A one-line message naming the setting and the fix, or None when the drop-in can run.
    """
    if correction == "node":
        return (
            "grappa.correction=node weights the loss itself, so it is not a drop-in; use "
            "--grappa.correction=batch, shrinkage or none with the drop-in loader"
        )
    return None
