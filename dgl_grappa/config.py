"""One config tree of dataclasses, loaded from YAML, validated, overridable from the CLI.

Precedence: ``--section.key=value`` on the command line > the YAML file > field defaults.
Unknown keys are rejected by name, and every user error is raised as :class:`ConfigError`
whose message is one line naming the key, the bad value and the fix; the CLI prints it
and exits non-zero without a traceback.

Example:
    >>> cfg = load_config(None, ["--train.epochs=3", "--partition.num_parts=2"])
    >>> cfg.train.epochs, cfg.partition.num_parts
    (3, 2)
"""
from __future__ import annotations

import dataclasses
import os
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml

from .env import ENV_PLANETOID


class ConfigError(ValueError):
    """A user error in the configuration (bad key, bad value, missing file)."""


TC_RATE = re.compile(r"([0-9]+(?:\.[0-9]+)?)(bit|kbit|mbit|gbit)")
"""A ``tc`` rate (``network.bandwidth``): a number and a unit, e.g. 1gbit, 200mbit, 500kbit."""


def _default_planetoid_root() -> str:
    # The shared data folder sits next to the checkout; users point elsewhere with
    # DGL_GRAPPA_PLANETOID or data.root.
    env = os.environ.get(ENV_PLANETOID)
    if env:
        return env
    here = Path(__file__).resolve().parent.parent
    return str(here.parent / "shared" / "datasets" / "planetoid")


@dataclass
class SyntheticConfig:
    """Power-law degree-corrected SBM with noisy class-mean features."""

    preset: Literal["easy", "hard", "custom"] = "hard"
    """easy: feature noise 2 (features alone nearly solve it); hard: noise 8, so that
    features alone are far from what 2-3 hops of aggregation reach; custom: use the
    fields below as given."""
    num_nodes: int = 20_000
    """Number of nodes."""
    avg_degree: float = 10.0
    """Mean in-degree of the final (symmetric) graph."""
    num_communities: int = 64
    """Planted blocks; the label of a block is ``block % num_classes``."""
    num_classes: int = 16
    """Number of label classes."""
    feat_dim: int = 64
    """Feature dimension."""
    homophily: float = 0.9
    """Fraction of edges that stay inside their block, in [0, 1]."""
    noise: float = 8.0
    """Standard deviation of the Gaussian noise around the class mean (custom preset)."""
    degree_exponent: float = 2.0
    """Pareto shape of the degree propensities (smaller = heavier tail), > 1."""
    train_frac: float = 0.6
    """Fraction of nodes in the training split."""
    val_frac: float = 0.2
    """Fraction of nodes in the validation split (the rest is test)."""
    seed: int = 0
    """Generator seed: the same seed gives the same graph."""
    featureless: bool = False
    """Generate no node features (no ``feat``): the same graph, labels and splits as with
    features (the generator draws them all the same), for training on learnable node
    embeddings (``model.embed: true``, which this needs)."""


HETSYNTH_NTYPES = ("author", "field", "paper")
"""The node types of ``hetsynth`` (every one may carry features, ``data.hetsynth.feat_types``)."""
HETSYNTH_ETYPES = (("author", "writes", "paper"), ("paper", "written_by", "author"), ("paper", "cites", "paper"),
                   ("paper", "cited_by", "paper"), ("paper", "has_topic", "field"), ("field", "topic_of", "paper"))
"""The relations of ``hetsynth`` (canonical: source type, name, destination type): three and their reverses,
so that messages flow both ways."""
HETSYNTH_LABELLED = ("paper",)
"""The node types of ``hetsynth`` with labels and train/val/test masks."""
HETERO_DATASETS = ("hetsynth",)
"""The ``data.name`` values whose graph is heterogeneous (several node and edge types)."""


@dataclass
class HetSynthConfig:
    """A generated heterogeneous graph in the shape of ogbn-mag: papers, authors, fields of study.

    Every node has a class: a paper its label, an author a home class, a field the class it
    belongs to. Authors write, papers cite and papers are tagged with fields mostly inside their
    class (``homophily``), so the relations carry the label; papers (and every type in
    ``feat_types``) get noisy class-mean features. Relations: writes / written_by,
    cites / cited_by, has_topic / topic_of (each with its reverse). Labels and splits on papers.
    """

    num_papers: int = 6000
    """Number of paper nodes (the labelled type)."""
    num_authors: int = 3000
    """Number of author nodes."""
    num_fields: int = 200
    """Number of field-of-study nodes."""
    num_classes: int = 8
    """Number of label classes (of papers; authors and fields have a class too, not a label)."""
    feat_dim: int = 32
    """Feature width of every type in ``feat_types``."""
    feat_types: list[str] = field(default_factory=lambda: ["paper"])
    """Node types that get features (of author, field, paper); the others are featureless and need
    ``model.embed: true`` (a learnable row per node, as DGL's RGCN example gives them)."""
    papers_per_author: float = 3.0
    """Mean number of papers an author writes (1 + a Poisson draw)."""
    citations: float = 4.0
    """Mean number of references of a paper (a Poisson draw, towards papers of the same class with
    probability ``homophily``, popular papers more often)."""
    fields_per_paper: int = 2
    """Fields of study each paper is tagged with."""
    homophily: float = 0.5
    """Probability that an edge stays inside its source's class, in [0, 1] (0.5: the relations carry the
    label, but neither they nor the features alone settle it)."""
    noise: float = 6.0
    """Standard deviation of the Gaussian noise around the class mean of the features (the class
    means have norm 8, as the homogeneous generator's): 6 leaves the features alone weak."""
    train_frac: float = 0.5
    """Fraction of papers in the training split."""
    val_frac: float = 0.2
    """Fraction of papers in the validation split (the rest is test)."""
    seed: int = 0
    """Generator seed: the same seed gives the same graph."""


def hetero_schema(data) -> dict | None:
    """The node and edge types of the configured heterogeneous graph, before it is loaded; None for a
    homogeneous one.

    Returns:
        ``ntypes``, ``etypes`` (canonical triples), ``featured`` and ``labelled`` node types.

    Example:
        >>> hetero_schema(DataConfig(name="hetsynth"))["featured"]
        ['paper']
    """
    if data.name == "hetsynth":
        return {"ntypes": list(HETSYNTH_NTYPES), "etypes": [tuple(e) for e in HETSYNTH_ETYPES],
                "featured": [t for t in HETSYNTH_NTYPES if t in data.hetsynth.feat_types],
                "labelled": list(HETSYNTH_LABELLED)}
    return None


def select_etypes(names: list[str], canonical: list[tuple]) -> list[tuple]:
    """The canonical relations ``names`` selects (``data.etypes``: a name like ``cites`` or ``src:rel:dst``);
    every relation when empty.

    Raises:
        ConfigError: a name that is no relation of the graph.

    Example:
        >>> select_etypes(["cites"], [("paper", "cites", "paper"), ("author", "writes", "paper")])
        [('paper', 'cites', 'paper')]
    """
    if not names:
        return list(canonical)
    out = []
    for n in names:
        hit = [c for c in canonical if n in (c[1], ":".join(c))]
        if not hit:
            known = ", ".join(c[1] for c in canonical)
            raise ConfigError(f"data.etypes entry {n!r} is not a relation of the graph ({known}); name relations "
                              "of the graph, e.g. --data.etypes=[cites,cited_by], or leave it empty for all")
        if len(hit) > 1:
            raise ConfigError(f"data.etypes entry {n!r} names {len(hit)} relations; write it as source:name:"
                              f"destination, e.g. {':'.join(hit[0])}")
        if hit[0] not in out:
            out.append(hit[0])
    return out


@dataclass
class DataConfig:
    """Which graph to train on."""

    name: Literal["synthetic", "cora", "citeseer", "dgl", "bigsynth", "hetsynth"] = "synthetic"
    """synthetic (generated, no files), cora / citeseer (Planetoid files under ``root``),
    dgl (a graph saved with dgl.save_graphs at ``path``), bigsynth (a folder written by
    dgl_grappa.data.bigsynth.generate_big at ``path``, read in chunks; with
    ``partition.prebuilt`` only its metadata is read), or hetsynth (a generated heterogeneous
    graph, ``hetsynth`` below: several node and edge types, trained with ``model.name: rgcn``)."""
    root: str = field(default_factory=_default_planetoid_root)
    """Folder that holds the Planetoid ``ind.<name>.*`` files (cora / citeseer)."""
    path: str = ""
    """File written by dgl.save_graphs (name: dgl), or the generate_big folder (name: bigsynth)."""
    feat_key: str = "feat"
    """ndata key of the node features in a user graph."""
    label_key: str = "label"
    """ndata key of the labels in a user graph."""
    train_mask_key: str = "train_mask"
    """ndata key of the training mask in a user graph."""
    val_mask_key: str = "val_mask"
    """ndata key of the validation mask in a user graph."""
    test_mask_key: str = "test_mask"
    """ndata key of the test mask in a user graph."""
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)
    hetsynth: HetSynthConfig = field(default_factory=HetSynthConfig)
    target: str = ""
    """Heterogeneous graphs: the node type trained on and evaluated (it must have labels); empty = the
    graph's labelled type (hetsynth: paper)."""
    etypes: list[str] = field(default_factory=list)
    """Heterogeneous graphs: the relations kept, by name (``cites``) or as ``src:name:dst``; the graph is
    cut, trained and evaluated with these only. Empty = every relation."""


@dataclass
class PartitionConfig:
    """How the graph is cut (dgl.distributed.partition_graph)."""

    num_parts: int = 2
    """Number of partitions = number of workers."""
    method: Literal["metis", "random", "ldg"] = "metis"
    """metis or random: dgl.distributed.partition_graph's own; ldg: restreaming linear
    deterministic greedy (``partition.ldg_assignment``: linear time, ``ldg_passes`` passes,
    caps of ``1 + ldg_slack`` times the mean part on nodes and on train nodes), written by
    partition_graph as well. METIS needs the whole graph in memory and hours at 10^8 nodes;
    at scale use ldg (or random)."""
    balance_edges: bool = False
    """Ask METIS to balance edges as well as nodes."""
    balance_train: bool = False
    """Ask METIS to balance the training nodes across parts."""
    out_dir: str = ""
    """Where ``partition`` writes; empty = ``<run.output_dir>/partitions/0``."""
    ldg_passes: int = 3
    """ldg: streaming passes (1 = one-pass LDG; 3 restreams twice)."""
    ldg_slack: float = 0.05
    """ldg: allowed imbalance; every part holds at most (1 + slack) x N / P nodes and
    (1 + slack) x N_train / P train nodes."""
    seed: int = 0
    """Seed of the partitioner's random draws. ``random`` draws every node's part with DGL's
    own RNG (``dgl.random.choice`` inside ``partition_graph``), which ``dgl.seed(seed)``
    seeds right before the call (ldg: its stream order and tie-breaks): the same seed gives the same parts for a given DGL build
    and thread count (DGL seeds each thread's pcg32 stream by thread order). METIS ignores
    it (DGL's METIS is deterministic: the same input gives the same cut), so it is not part
    of a METIS partitioning's fingerprint and METIS partitionings are shared across seeds."""
    prebuilt: str = ""
    """A partition folder in DGL's layout made beforehand (e.g. by dgl_grappa.partition.bigpart for a
    graph that does not fit one process, or by ``partition``): workers load their parts from
    it (int32 CSC, halo features never loaded with halo=drop) and nothing is partitioned;
    the whole graph is never loaded (evaluation is layer-wise over the parts, see
    ``train.eval_mode``). ``num_parts`` must match it; no repartitioning (schedule.k = 0)."""


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
    keep their features, and the first hop of their relations can still be exact."""
    embed_dim: int = 64
    """Width of the learnable rows (``model.embed``)."""
    embed_lr: float = 0.01
    """Learning rate of the embeddings' sparse Adam (``model.embed``; DGL's example: 0.01). Grappa
    uses PyTorch's ``SparseAdam`` (its bias correction counts the optimizer's steps), DistDGL
    ``dgl.distributed.optim.SparseAdam`` (each row's own updates); the same for a row updated
    at every step."""


@dataclass
class TrainConfig:
    """The training loop."""

    task: Literal["node", "link"] = "node"
    """node: node classification (cross-entropy on the training nodes' labels, accuracy).
    link: link prediction, as DGL's ``train_dist_unsupervised.py``: the model is an encoder
    whose output rows (``model.hidden`` wide) score a pair by their dot product, trained with
    binary cross-entropy on positive edges against sampled negatives, and evaluated by MRR and
    hits@k of held-out edges against sampled negatives (the ``link`` section). The held-out
    edges are removed before partitioning, so every system trains on the same graph. Grappa: a
    worker's positives are the edges it owns (DGL's layout: the destination's part) whose
    source it holds, its negatives are drawn from the nodes it holds. ``train.batch_size``
    counts positive edges. Needs ``grappa.correction: none`` and ``train.mode: minibatch``; not
    with ``model.embed``, ``schedule.k > 0`` or layer-wise evaluation."""
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
    prefetch: bool = False
    """Sample (and gather the features of) the next mini-batch while the current step's
    backward pass and gradient all-reduce run (in a helper thread); the same batches and
    the same arithmetic, so the same results bit for bit."""


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
    full-graph in-degree to the power 0.75. Grappa: over the nodes the worker holds (its own
    and its kept halo: a global draw would need remote nodes); DistDGL: over every node."""
    negative_pool: float = 0.25
    """Grappa: remote nodes per own node a worker holds as a negative pool: ``ceil(negative_pool x
    its own nodes)`` nodes of other parts, drawn uniformly, their rows read once per partitioning
    (one-time bytes, held as halo rows are), so that training negatives follow the global draw
    DistDGL makes (an own node with its share of the graph, else a pool node); 0: negatives from
    the nodes the worker holds only (its own and its kept halo)."""
    pool_fanout: int = 0
    """Grappa: in-neighbours read once per pool node (a uniform sample of its in-edges, held as
    leaves, as the halo is), so that a pool negative's sampled tree is a tree as any other node's;
    0: a pool node has no sampled neighbourhood."""
    eval_negatives: int = 100
    """Negatives per held-out edge in evaluation: destinations drawn uniformly from every node
    (seeded by ``link.seed``; not filtered against true edges)."""
    hits_k: int = 10
    """k of hits@k: the share of held-out edges that rank in the top k among their negatives."""


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


@dataclass
class ScheduleConfig:
    """Periodic repartitioning (see dgl_grappa/partition/schedule.py)."""

    k: int = 0
    """Use partitioning j for epochs [j*k, (j+1)*k); 0 = never repartition."""
    method: Literal["metis-perm", "metis-subsample", "metis-weights", "random", "chunk-rotation", "ldg"] = "metis-perm"
    """How successive partitionings are made to differ (METIS alone would return the same cut
    again, up to rare tie-breaking flips, so its input is perturbed)."""
    keep_last: int = 2
    """Partition folders kept on disk (older ones are removed once no worker uses them)."""
    seed: int = 0
    """Seed of the perturbations."""


@dataclass
class NetworkConfig:
    """Network emulation for side-by-side runs."""

    bandwidth: str = ""
    """Shape loopback in a private network namespace with tc tbf, e.g. "1gbit", "200mbit";
    empty = no shaping."""
    isolate: bool = False
    """Run ``train`` in a private network namespace (root) so that the bytes on the wire
    are measured (summary ``wire_bytes_per_epoch``); implied by ``bandwidth`` and always
    on in ``compare``."""
    link: Literal["per_host", "shared"] = "per_host"
    """With test hosts (``launch.remote=netns``): per_host = every host has its own link of
    ``bandwidth`` in each direction (one NIC per machine); shared = all hosts share one link
    of ``bandwidth`` (one switch port for the whole cluster). Without test hosts all workers
    share the job's one loopback, i.e. one shared link, whatever this says."""
    latency_ms: float = 0.0
    """One-way host-to-host delay with test hosts (needs the kernel's netem qdisc; a clear
    error where it is missing); 0 = none."""
    dilation: str = "auto"
    """Time dilation of test hosts (``launch.remote=netns``), which share this machine's
    cores: auto = give every host a fixed CPU share (cgroups: whole cores where there are
    enough, else an equal quota of a core) and, when a host gets 1/D of a core (D = hosts /
    cores), run every link at ``bandwidth`` / D and ``latency_ms`` x D, so compute and network
    keep the emulated cluster's ratio (D = 1 when every host has a whole core; where cgroups
    are missing a log line says so and D = 1); off = no CPU shares, links as given; a number
    = that D, with CPU shares (an error where cgroups are missing). Times in summary.json
    stay as measured (dilated): divide by its ``network_dilation`` for the emulated
    cluster's."""
    host_cpus: str = ""
    """With test hosts: the cores their CPU shares divide, as a cpu list ("0", "0-3", "0,2");
    empty = every core this process may run on. E.g. "0" puts all hosts on one core (two
    hosts: half a core each, D = 2). Setting it asks for CPU shares (an error where cgroups
    are missing; not with dilation off)."""
    cpu_period_ms: float = 20.0
    """With CPU shares of a fraction of a core: the CFS bandwidth period of each host's quota
    (the host runs ``share`` x this per period, then waits). A shorter period holds a
    throttled host back for less at a time; on the dilation check (docs/cluster.md) 5 ms and
    20 ms measured the same. 1-1000; the kernel needs a quota of at least 1 ms, so the period
    grows where share x period would be shorter."""


@dataclass
class DistDGLConfig:
    """The DistDGL baseline job (real servers + trainers)."""

    num_samplers: int = 0
    """Sampler processes per trainer (DGL_NUM_SAMPLER)."""
    base_port: int = 0
    """First server port; 0 = pick free ports."""
    startup_timeout_s: float = 180.0
    """Bound on server start + trainer connect (DGL retries the connection every 3 s)."""
    shutdown_timeout_s: float = 60.0
    """Bound on the servers' exit after the last trainer finished."""
    shm_size: str = "8g"
    """Size limit of each machine's private /dev/shm tmpfs (the partition lives there)."""


@dataclass
class CompareConfig:
    """``python -m dgl_grappa compare``: DistDGL and Grappa side by side."""

    variants: list[Literal["none", "batch", "node", "shrinkage"]] = field(default_factory=lambda: ["none"])
    """Grappa corrections to run (one Grappa run each, named grappa-<correction>) after the DistDGL
    baseline; none (plain averaging) is the package default."""
    distdgl: bool = True
    """Run the DistDGL baseline (the ratios are relative to it)."""
    dropin: bool = False
    """Also run the drop-in script with --grappa (DistDGL servers, local-only loader)."""
    target_acc: float = 0.0
    """Validation accuracy for time-to-accuracy; 0 = 0.98 x DistDGL's best val accuracy."""
    script: str = ""
    """DistDGL trainer script of your own; empty = the package's trainer (python -m dgl_grappa.distdgl.train)."""


@dataclass
class LaunchConfig:
    """Where and how the workers start, and what happens when one dies.

    One section for every starter: the built-in launcher (this machine, ssh hosts or the
    project's namespace test hosts) and external starters (torchrun, Slurm), which own
    their restarts themselves (workers then resume from the newest checkpoint on start).
    """

    hosts: list[str] = field(default_factory=list)
    """Addresses or names of the machines, host 0 first (it runs rank 0, the rendezvous);
    empty = this machine only. With remote=netns: the test hosts' names h0, h1, ... (or
    empty: one test host per ``workers_per_host`` workers)."""
    ip_config: str = ""
    """DGL's ip_config.txt (one "IP [port]" per line), instead of ``hosts``; a port given
    there is that machine's DGL server port."""
    workers_per_host: int = 0
    """Workers (partitions) per machine, placed in rank order; 0 = num_parts / number of
    hosts, rounded up (with remote=netns and no hosts listed: 1)."""
    remote: Literal["none", "ssh", "netns"] = "none"
    """How a command reaches another host: none (this machine), ssh, or netns (the
    project's test hosts, see dgl_grappa/cluster/testhosts.py)."""
    ssh_user: str = ""
    """ssh user name; empty = ssh's default."""
    ssh_port: int = 22
    """ssh port."""
    ssh_identity: str = ""
    """ssh identity file; empty = ssh's default."""
    ssh_options: list[str] = field(default_factory=list)
    """Extra ssh options, e.g. [StrictHostKeyChecking=no]."""
    env: list[str] = field(default_factory=list)
    """Extra KEY=VALUE environment for remote workers (e.g. GLOO_SOCKET_IFNAME=eth0)."""
    master_port: int = 0
    """Port of the rendezvous on the first host; 0 = a free port."""
    copy_partitions: bool = False
    """Storage is not shared: the launcher copies the resolved config and each host's
    partitions to the same path on that host before the start (and fetches rank 0's
    summary back); each later partitioning (schedule.k > 0) is sent by rank 0 to the
    workers of the other hosts over the process group. False = shared storage (as DistDGL
    assumes): every host sees the same files at the same paths."""
    max_restarts: int = 0
    """Restart the whole worker group from the last checkpoint this many times after a
    worker dies (torchrun's semantics); 0 = a dead worker ends the job."""


@dataclass
class BenchConfig:
    """``python -m dgl_grappa bench``: a matrix of cells, every system of a cell on one partitioning.

    A cell is one point of the product datasets x partitions x parts x models x layers x
    bandwidths x seeds (an empty axis = the base config's value). Axis overrides on the
    command line select what runs now; the report always covers the matrix of the file.
    See dgl_grappa/bench/matrix.py.
    """

    datasets: list[str] = field(default_factory=list)
    """Base config files, one per dataset (e.g. configs/bench/cora.yaml): every setting
    that is not an axis (hyper-parameters, epochs, timeouts) comes from there."""
    partitions: list[str] = field(default_factory=list)
    """partition.method values; empty = the base config's."""
    parts: list[int] = field(default_factory=list)
    """partition.num_parts values; empty = the base config's."""
    models: list[str] = field(default_factory=list)
    """model.name values; empty = the base config's."""
    layers: list[int] = field(default_factory=list)
    """model.num_layers values; empty = the base config's."""
    fanouts: list[str] = field(default_factory=list)
    """Entry i = train.fanouts for i+1 layers, comma-separated, e.g. ["10", "10,25",
    "10,15,25"]; empty (or no entry for a depth) = the base config's when its depth matches."""
    seeds: list[int] = field(default_factory=lambda: [0])
    """Each seed sets train.seed and partition.seed (partition, initialisation, sampling)."""
    bandwidths: list[str] = field(default_factory=lambda: [""])
    """network.bandwidth values ("" or "unshaped" = no shaping, e.g. 1gbit, 200mbit)."""
    systems: list[str] = field(default_factory=lambda: ["distdgl", "grappa"])
    """"NAME" or "NAME: --a.b=v --c.d=w" (quote it in YAML). NAME distdgl = the DistDGL
    baseline (the reference of every ratio), distdgl-grappa = the drop-in script with
    --grappa, any other name = a Grappa train run; the overrides apply to that system only
    and may not touch what the systems of a cell share (data, partition, network, run.output_dir)."""
    overrides: list[str] = field(default_factory=list)
    """--a.b=v overrides applied to every cell (before the axes), e.g. ["--train.epochs=5"];
    non-bench overrides given on the bench command line are appended here."""
    out_dir: str = ""
    """Where cells/<cell>.json, runs/<cell>/<system>/ and partitions/<hash>/ go; empty = run.output_dir."""
    report: str = ""
    """Markdown report regenerated from the cell JSON files (plots in a folder beside it,
    named after it); empty = <out_dir>/report.md."""
    report_kind: Literal["accuracy", "speed"] = "accuracy"
    """accuracy: mean/std over seeds and paired differences to DistDGL with a 95 % interval;
    speed: epoch-time, bytes and floor ratios per cell, accuracy next to speed."""
    pairs: list[str] = field(default_factory=list)
    """Accuracy report: further systems graded against each other, not against DistDGL, one
    entry "A vs B" each (names of bench.systems, e.g. "distdgl-grappa vs grappa"): per row the
    per-seed difference A - B with a 95 % interval, within 0.5 points when its mean is >= -0.5."""
    report_only: bool = False
    """Regenerate the report from the JSON files without running anything."""
    preamble: str = ""
    """Markdown file put at the top of the report (hand-written text kept across regenerations)."""
    baseline_partition: str = ""
    """A partitioner whose DistDGL runs are the reference of every row (e.g. metis: DistDGL at
    its best, against Grappa on LDG and random partitions too): a cell of another partitioner
    without a DistDGL run of its own borrows the one of the cell with this partitioner and
    otherwise the same axes and seed; the report says so. Empty = each cell its own."""
    partial: list[str] = field(default_factory=list)
    """Names of systems that run on part of the matrix only (e.g. an old default kept for
    comparison): the plain command leaves them out (select them with --bench.systems=[name]
    and axis overrides), and a cell counts as done without them."""
    extra: list[str] = field(default_factory=list)
    """Further sub-matrices of the same bench and report, one per entry: axis values over the
    ones above, e.g. "parts=[8] layers=[2] bandwidths=[1gbit]" (keys: datasets, partitions,
    parts, models, layers, bandwidths, seeds). The matrix is the union; a command-line
    selection applies to these too."""
    archive: str = ""
    """Folder kept in the repository (e.g. benchmarks/accuracy/cells) that holds a gzip'd copy of
    every cell file, so that results outlive the machine and its out_dir: a cell found there
    counts as done (resuming on a fresh clone runs only what is missing) and is reported like
    those in out_dir, which win where both have a cell; out_dir's cells that it lacks are
    copied in when the bench starts. Empty = out_dir only."""


@dataclass
class CheckpointConfig:
    """Checkpoints (see dgl_grappa/runtime/checkpoint.py): what resume and recovery start from."""

    every: int = 1
    """Write a checkpoint every this many epochs; 0 = only at repartition boundaries and at
    the end (both are always written)."""
    keep_last: int = 2
    """Complete checkpoints kept (the newest ones); older ones are removed once a newer one
    is complete."""
    dir: str = ""
    """Where checkpoints go; empty = ``<run.output_dir>/checkpoints``."""
    resume: str = ""
    """Start from a checkpoint: "" (no), "auto" (the newest valid one in ``dir``; a fresh
    start when there is none) or the path of a checkpoint file. ``train --resume [PATH]``
    sets it."""


@dataclass
class RunConfig:
    """Processes, files and limits."""

    output_dir: str = "runs/default"
    """Where metrics.jsonl, summary.json and partitions go."""
    timeout_s: float = 1800.0
    """Limit of one attempt of the job (its workers are killed past it); with
    launch.max_restarts = R the whole job is bounded by (R + 1) x timeout_s."""
    collective_timeout_s: float = 300.0
    """Bound on every collective (gloo timeout)."""
    eval_timeout_s: float = 1800.0
    """Bound on the other workers' wait for rank 0's own work between epochs (the global
    evaluation on the whole graph, writing a checkpoint): a barrier on a group of its own."""
    num_threads: int = 0
    """Torch threads per worker; 0 = cores / workers (at least 1)."""
    progress: bool = True
    """Show a tqdm progress bar on rank 0."""
    device: Literal["cpu", "cuda"] = "cpu"
    """Where a worker trains: cpu (gloo), or cuda (the GPU of its LOCAL_RANK; NCCL all-reduces
    the gradients, gloo carries the small control collectives; needs a CUDA build of DGL)."""
    tensorboard: bool = False
    """Also log every epoch's scalars (those of metrics.jsonl) to TensorBoard event files in
    ``<output_dir>/tensorboard`` (rank 0; view with ``tensorboard --logdir <output_dir>``)."""
    floor: bool = False
    """Also measure the floor of every epoch in the same run (Grappa): the same steps with a
    no-op reducer (local compute only; model, optimizer and RNG restored afterwards, so
    training is unchanged) and the all-reduce of the same buckets alone. Roughly doubles
    the time per epoch; summary.json gets floor_epoch_s, allreduce_only_s, floor_s and
    epoch_over_floor."""


@dataclass
class Config:
    """The whole configuration tree."""

    name: str = "default"
    """A name for the run (used in logs and the default output folder)."""
    data: DataConfig = field(default_factory=DataConfig)
    partition: PartitionConfig = field(default_factory=PartitionConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    link: LinkConfig = field(default_factory=LinkConfig)
    grappa: GrappaConfig = field(default_factory=GrappaConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    distdgl: DistDGLConfig = field(default_factory=DistDGLConfig)
    compare: CompareConfig = field(default_factory=CompareConfig)
    launch: LaunchConfig = field(default_factory=LaunchConfig)
    bench: BenchConfig = field(default_factory=BenchConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    run: RunConfig = field(default_factory=RunConfig)

    @property
    def hops(self) -> int:
        return self.grappa.hops or self.model.num_layers

    @property
    def hetero(self) -> bool:
        """Whether the graph is heterogeneous (``data.name`` in :data:`HETERO_DATASETS`)."""
        return self.data.name in HETERO_DATASETS

    @property
    def first_hop(self) -> str:
        """The first-hop mode a Grappa run uses: ``train.first_hop``, except sampled for GAT and for
        learnable embeddings (``model.embed``: aggregates of trainable rows would go stale). On a
        heterogeneous graph ``exact`` completes the relations from featured types (per-relation
        aggregates) and samples those from featureless ones."""
        if self.hetero:
            return self.train.first_hop
        return "sampled" if self.model.name == "gat" or self.model.embed else self.train.first_hop


# ---------------------------------------------------------------------------------------
# Loading and coercion
# ---------------------------------------------------------------------------------------

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


_SIZE = re.compile(r"([0-9]+(?:\.[0-9]*)?(?:e[0-9]+)?)\s*(b|kb|mb|gb|tb|kib|mib|gib|tib)")
_UNITS = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30,
          "tib": 2 ** 40}


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
        raise ConfigError(f"train.memory_budget={text!r} is neither a multiple of the own feature rows (e.g. 1.5) "
                          "nor a size (e.g. 8GB, 512MiB); 0 means no limit")
    return mult, 0


PAIR = re.compile(r"\s*(\S+)\s+vs\s+(\S+)\s*")
"""An entry of ``bench.pairs``: two system names and "vs" between them."""


def parse_pairs(entries: list[str], names: list[str]) -> list[tuple[str, str]]:
    """The ``bench.pairs`` entries as (A, B) system names.

    Args:
        entries: "A vs B" strings.
        names: the names of ``bench.systems`` (before any ':').

    Raises:
        ConfigError: an entry not of that form, naming a system not in ``names``, or one system twice.
    """
    out = []
    for entry in entries:
        m = PAIR.fullmatch(str(entry))
        if m is None:
            raise ConfigError(f"bench.pairs entry {entry!r} is not \"A vs B\"; write e.g. \"distdgl-grappa vs grappa\" "
                              "with two names of bench.systems")
        for n in m.groups():
            if n not in names:
                raise ConfigError(f"bench.pairs entry {entry!r} names {n!r}, which is not in bench.systems "
                                  f"({', '.join(names)}); pair only names of bench.systems")
        if m.group(1) == m.group(2):
            raise ConfigError(f"bench.pairs entry {entry!r} pairs {m.group(1)!r} with itself; name two different "
                              "systems of bench.systems")
        out.append((m.group(1), m.group(2)))
    return out


# String settings one of whose words is "off", which YAML 1.1 reads as false when unquoted.
_OFF_WORDS = {"network.dilation"}


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """Turn a YAML or CLI value into ``tp``; raise ConfigError naming the key otherwise."""
    origin = get_origin(tp)
    if origin is Literal:
        choices = get_args(tp)
        if isinstance(value, str) and value in choices:
            return value
        raise ConfigError(f"{key}={value!r} is not allowed; use one of {', '.join(map(str, choices))}")
    if origin is list:
        (item_tp,) = get_args(tp)
        if isinstance(value, str):
            text = value.strip().strip("[]")
            value = [v for v in (t.strip() for t in text.split(",")) if v]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}={value!r} is not a list; write e.g. {key}=[10,25]")
        return [_coerce(f"{key}[{i}]", v, item_tp) for i, v in enumerate(value)]
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise ConfigError(f"{key}={value!r} is not a boolean; use true or false")
    if tp is int:
        if isinstance(value, bool):
            raise ConfigError(f"{key}={value!r} is not an integer; give a whole number")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value.replace("_", ""))
            except ValueError:
                pass
        raise ConfigError(f"{key}={value!r} is not an integer; give a whole number")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{key}={value!r} is not a number; give e.g. {key}=0.5")
    if tp is str:
        if value is False and key in _OFF_WORDS:  # YAML reads a bare off as false
            return "off"
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, dict):  # YAML reads an unquoted "name: value" list entry as a mapping
            raise ConfigError(f"{key}={value!r} is not a string; quote it, e.g. \"name: --a.b=v\"")
        raise ConfigError(f"{key}={value!r} is not a string")
    raise TypeError(f"unsupported config type {tp} for {key}")  # programming error


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _apply(obj: Any, mapping: dict, prefix: str) -> None:
    if not isinstance(mapping, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'} must be a mapping of keys, got {mapping!r}")
    hints = _hints(type(obj))
    names = {f.name for f in dataclasses.fields(obj)}
    for key, value in mapping.items():
        full = f"{prefix}{key}"
        if key not in names:
            raise ConfigError(
                f"unknown config key '{full}'; known keys here: {', '.join(sorted(names))}")
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            _apply(getattr(obj, key), value, f"{full}.")
        else:
            setattr(obj, key, _coerce(full, value, tp))


def _set_dotted(cfg: Config, dotted: str, raw: str) -> None:
    parts = dotted.split(".")
    obj: Any = cfg
    for i, part in enumerate(parts):
        names = {f.name for f in dataclasses.fields(obj)}
        full = ".".join(parts[: i + 1])
        if part not in names:
            raise ConfigError(f"unknown config key '{full}'; known keys here: {', '.join(sorted(names))}")
        tp = _hints(type(obj))[part]
        if i == len(parts) - 1:
            if dataclasses.is_dataclass(tp):
                raise ConfigError(f"'{full}' is a section; set one of its keys, e.g. --{full}.<key>=value")
            try:
                value = yaml.safe_load(raw) if raw.strip() else raw
            except yaml.YAMLError:
                raise ConfigError(f"--{full}={raw} cannot be read as a YAML value; write e.g. a list as "
                                  f"[a, b] and quote empty strings: [\"\", b]") from None
            if tp is str and not isinstance(value, str):
                value = raw  # keep strings verbatim ("001" stays "001")
            setattr(obj, part, _coerce(full, value, tp))
        else:
            if not dataclasses.is_dataclass(tp):
                raise ConfigError(f"'{full}' is not a section; write --{full}=value")
            obj = getattr(obj, part)


def parse_overrides(args: list[str]) -> list[tuple[str, str]]:
    """Parse ``--a.b=v`` (or ``--a.b v``) arguments into (key, raw value) pairs."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            raise ConfigError(f"unexpected argument {arg!r}; overrides look like --section.key=value")
        body = arg[2:]
        if "=" in body:
            key, raw = body.split("=", 1)
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            key, raw = body, args[i + 1]
            i += 1
        else:
            raise ConfigError(f"override {arg!r} has no value; write {arg}=value")
        out.append((key, raw))
        i += 1
    return out


def config_changes(old: dict, new: dict, default: dict, prefix: str = "") -> list[str]:
    """Dotted keys where ``new`` differs from ``old``, as "key: old -> new".

    A key that ``old`` lacks (added to the code since) counts only when ``new`` holds a
    value other than its default; a key that ``new`` lacks (removed since) does not count.
    So a record written before a setting existed (a cached partitioning, a checkpoint, a
    benchmark run) still matches a config that leaves the setting at its default, which is
    what the code did before it existed.

    Example:
        >>> config_changes({"a": 1}, {"a": 1, "new": False}, {"a": 0, "new": False})
        []
    """
    out = []
    for k, v in new.items():
        d = default.get(k) if isinstance(default, dict) else None
        if isinstance(v, dict):
            o = old.get(k) if isinstance(old.get(k), dict) else {}
            if k not in old:
                o = d if isinstance(d, dict) else {}
            out += config_changes(o, v, d if isinstance(d, dict) else {}, f"{prefix}{k}.")
        elif k in old:
            if old[k] != v:
                out.append(f"{prefix}{k}: {old[k]!r} -> {v!r}")
        elif v != d:
            out.append(f"{prefix}{k}: (absent) -> {v!r}")
    return out


def load_config(path: str | os.PathLike | None, overrides: list[str] | None = None) -> Config:
    """Build a validated Config from defaults, an optional YAML file and CLI overrides.

    Args:
        path: YAML file, or None for the built-in defaults.
        overrides: ``--section.key=value`` strings, applied last.

    Returns:
        The validated :class:`Config`.

    Raises:
        ConfigError: unknown key, bad value, or unreadable file (one-line message).
    """
    cfg = Config()
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file '{p}' does not exist; pass an existing YAML file, e.g. configs/default.yaml")
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as exc:
            line = getattr(getattr(exc, "problem_mark", None), "line", None)
            where = f" at line {line + 1}" if line is not None else ""
            raise ConfigError(f"config file '{p}' is not valid YAML{where}; fix the syntax") from None
        _apply(cfg, data, "")
        if "name" not in data:
            cfg.name = p.stem
        if "run" not in data or "output_dir" not in (data.get("run") or {}):
            cfg.run.output_dir = f"runs/{cfg.name}"
    for key, raw in parse_overrides(overrides or []):
        _set_dotted(cfg, key, raw)
    validate(cfg)
    return cfg


def _check(ok: bool, msg: str) -> None:
    if not ok:
        raise ConfigError(msg)


def validate(cfg: Config) -> None:
    """Check ranges and cross-field rules; raise ConfigError on the first problem."""
    s, d, p, m, t, g, r = (cfg.data.synthetic, cfg.data, cfg.partition, cfg.model, cfg.train,
                           cfg.grappa, cfg.run)
    _check(s.num_nodes >= 10, f"data.synthetic.num_nodes={s.num_nodes} is too small; use at least 10")
    _check(s.avg_degree > 0, f"data.synthetic.avg_degree={s.avg_degree} must be > 0")
    _check(s.num_classes >= 2, f"data.synthetic.num_classes={s.num_classes} must be >= 2")
    _check(s.num_communities >= s.num_classes,
           f"data.synthetic.num_communities={s.num_communities} must be >= num_classes ({s.num_classes})")
    _check(s.feat_dim >= 1, f"data.synthetic.feat_dim={s.feat_dim} must be >= 1")
    _check(0.0 <= s.homophily <= 1.0, f"data.synthetic.homophily={s.homophily} must be in [0, 1]")
    _check(s.noise >= 0, f"data.synthetic.noise={s.noise} must be >= 0")
    _check(s.degree_exponent > 1.0, f"data.synthetic.degree_exponent={s.degree_exponent} must be > 1")
    _check(0 < s.train_frac < 1 and 0 <= s.val_frac < 1 and s.train_frac + s.val_frac < 1,
           f"data.synthetic.train_frac={s.train_frac} / val_frac={s.val_frac} must be fractions that leave a test split")
    _check(d.name != "dgl" or bool(d.path),
           "data.path is empty but data.name=dgl; set --data.path=<file saved with dgl.save_graphs>")
    _check(d.name != "bigsynth" or bool(d.path),
           "data.path is empty but data.name=bigsynth; set --data.path=<folder written by generate_big>")
    _check(not p.prebuilt or cfg.schedule.k == 0,
           f"partition.prebuilt is set and schedule.k={cfg.schedule.k}; a prebuilt partitioning cannot be "
           "repartitioned here: use --schedule.k=0")
    _check(t.steps_per_epoch >= 0, f"train.steps_per_epoch={t.steps_per_epoch} must be >= 0 (0 = no cap)")
    _check(t.eval_chunk_nodes >= 1, f"train.eval_chunk_nodes={t.eval_chunk_nodes} must be >= 1")
    _check(t.eval_concurrency >= 0, f"train.eval_concurrency={t.eval_concurrency} must be >= 0 (0 = all workers)")
    _check(t.eval_mode != "layerwise" or cfg.schedule.k == 0,
           f"train.eval_mode=layerwise with schedule.k={cfg.schedule.k}: layer-wise evaluation reads the first "
           "partitioning's files, which repartitioning removes; use --train.eval_mode=whole")
    _check(p.num_parts >= 1, f"partition.num_parts={p.num_parts} must be >= 1")
    _check(p.num_parts <= 64, f"partition.num_parts={p.num_parts} is more than 64 local workers; use <= 64")
    _check(p.ldg_passes >= 1, f"partition.ldg_passes={p.ldg_passes} must be >= 1")
    _check(0.0 <= p.ldg_slack <= 1.0, f"partition.ldg_slack={p.ldg_slack} must be in [0, 1]")
    _check(1 <= m.num_layers <= 6, f"model.num_layers={m.num_layers} must be in 1..6")
    _check(m.hidden >= 1, f"model.hidden={m.hidden} must be >= 1")
    _check(0.0 <= m.dropout < 1.0, f"model.dropout={m.dropout} must be in [0, 1)")
    _check(m.heads >= 1, f"model.heads={m.heads} must be >= 1")
    _check(m.name != "gat" or m.hidden % m.heads == 0,
           f"model.hidden={m.hidden} is not divisible by model.heads={m.heads}; pick a multiple of heads")
    _validate_hetero(cfg)  # first: on a heterogeneous graph its own rules say what it cannot run with
    _validate_embed(cfg)
    _validate_link(cfg)
    _check(t.epochs >= 1, f"train.epochs={t.epochs} must be >= 1")
    _check(t.batch_size >= 1, f"train.batch_size={t.batch_size} must be >= 1")
    _check(len(t.fanouts) == m.num_layers,
           f"train.fanouts has {len(t.fanouts)} entries but model.num_layers={m.num_layers}; "
           f"give one fan-out per layer, e.g. --train.fanouts=[{','.join(['10'] * m.num_layers)}]")
    _check(all(f == -1 or f >= 1 for f in t.fanouts),
           f"train.fanouts={t.fanouts} has an entry that is neither -1 (all) nor >= 1")
    _check(t.lr > 0, f"train.lr={t.lr} must be > 0")
    _check(t.weight_decay >= 0, f"train.weight_decay={t.weight_decay} must be >= 0")
    _check(t.eval_every >= 0, f"train.eval_every={t.eval_every} must be >= 0 (0 = only at the end)")
    parse_budget(t.memory_budget)  # a one-line ConfigError when it is neither a multiple nor a size
    _check(0 <= g.hops <= 6, f"grappa.hops={g.hops} must be in 0..6 (0 = model.num_layers)")
    _check(0.0 <= g.lam <= 1.0, f"grappa.lam={g.lam} must be in [0, 1]")
    _check(0.0 < g.w_min <= 1.0, f"grappa.w_min={g.w_min} must be in (0, 1]")
    _check(cfg.schedule.k >= 0, f"schedule.k={cfg.schedule.k} must be >= 0 (0 = fixed partitions)")
    _check(cfg.schedule.keep_last >= 1, f"schedule.keep_last={cfg.schedule.keep_last} must be >= 1")
    bw = cfg.network.bandwidth
    _check(bw == "" or TC_RATE.fullmatch(bw.lower()) is not None,
           f"network.bandwidth={bw!r} is not a tc rate; write e.g. 1gbit, 200mbit or 500kbit")
    _check(cfg.distdgl.num_samplers >= 0, f"distdgl.num_samplers={cfg.distdgl.num_samplers} must be >= 0")
    # A capped DistDGL epoch stops its loader early; sampler processes would still hold the
    # batches it had requested ahead, and the next epoch would receive them.
    _check(not (cfg.train.steps_per_epoch and cfg.distdgl.num_samplers),
           f"train.steps_per_epoch={cfg.train.steps_per_epoch} cannot be combined with distdgl.num_samplers="
           f"{cfg.distdgl.num_samplers} (a capped DistDGL epoch would leave prefetched batches behind); "
           "set --distdgl.num_samplers=0 or --train.steps_per_epoch=0")
    _check(0 <= cfg.distdgl.base_port <= 65000, f"distdgl.base_port={cfg.distdgl.base_port} must be in 0..65000")
    _check(cfg.distdgl.startup_timeout_s > 0 and cfg.distdgl.shutdown_timeout_s > 0,
           "distdgl.startup_timeout_s and distdgl.shutdown_timeout_s must be > 0")
    _check(re.fullmatch(r"[0-9]+[kmg]?", cfg.distdgl.shm_size.lower()) is not None,
           f"distdgl.shm_size={cfg.distdgl.shm_size!r} is not a size; write e.g. 8g or 512m")
    _check(cfg.compare.distdgl or bool(cfg.compare.variants) or cfg.compare.dropin,
           "compare has nothing to run; list at least one variant, e.g. --compare.variants=[batch]")
    _check(not cfg.bench.pairs or cfg.bench.report_kind == "accuracy",
           f"bench.pairs={cfg.bench.pairs} is set but bench.report_kind={cfg.bench.report_kind}: pairs grade test "
           "accuracy; set --bench.report_kind=accuracy or leave bench.pairs empty")
    _check(0.0 <= cfg.compare.target_acc <= 1.0,
           f"compare.target_acc={cfg.compare.target_acc} must be in [0, 1] (0 = automatic)")
    _validate_launch(cfg)
    _check(r.timeout_s > 0, f"run.timeout_s={r.timeout_s} must be > 0")
    _check(r.collective_timeout_s > 0, f"run.collective_timeout_s={r.collective_timeout_s} must be > 0")
    _check(r.eval_timeout_s > 0, f"run.eval_timeout_s={r.eval_timeout_s} must be > 0")
    ck = cfg.checkpoint
    _check(ck.every >= 0, f"checkpoint.every={ck.every} must be >= 0 (0 = only at repartition boundaries and the end)")
    _check(ck.keep_last >= 1, f"checkpoint.keep_last={ck.keep_last} must be >= 1")
    _check(cfg.launch.max_restarts >= 0, f"launch.max_restarts={cfg.launch.max_restarts} must be >= 0")
    _check(r.num_threads >= 0, f"run.num_threads={r.num_threads} must be >= 0")
    _check(bool(r.output_dir), "run.output_dir is empty; set --run.output_dir=<folder>")


def _validate_embed(cfg: Config) -> None:
    """``model.embed`` and the featureless graph: what they need and what they cannot run with."""
    m = cfg.model
    _check(not (cfg.data.name == "synthetic" and cfg.data.synthetic.featureless and not m.embed),
           "data.synthetic.featureless=true gives the nodes no features, so model.embed=false leaves the model "
           "without input; set --model.embed=true (a learnable row per node)")
    if not m.embed:
        return
    _check(m.embed_dim >= 1, f"model.embed_dim={m.embed_dim} must be >= 1")
    _check(m.embed_lr > 0, f"model.embed_lr={m.embed_lr} must be > 0")
    # A worker owns the rows of its part's nodes: a new partitioning would have to move them.
    _check(cfg.schedule.k == 0, f"model.embed=true with schedule.k={cfg.schedule.k}: the embedding rows live with "
                                "their part's worker and do not move to a new partitioning; use --schedule.k=0")
    _check(not cfg.partition.prebuilt and cfg.train.eval_mode != "layerwise",
           "model.embed=true evaluates on the whole graph with every worker's rows gathered; layer-wise evaluation "
           "(train.eval_mode=layerwise, partition.prebuilt) is not available with it: use --train.eval_mode=whole "
           "without partition.prebuilt")
    _check(not cfg.run.floor, "model.embed=true with run.floor=true: the floor's replayed epoch would update the "
                              "embedding rows; set --run.floor=false")


def _validate_hetero(cfg: Config) -> None:
    """A heterogeneous graph (``data.name: hetsynth``): its generator, the type and relation names, the model,
    the featureless types, and the settings the heterogeneous runtime does not serve."""
    d, m, t = cfg.data, cfg.model, cfg.train
    schema = hetero_schema(d)
    if schema is None:
        _check(not d.target and not d.etypes,
               f"data.target / data.etypes name node and edge types, but data.name={d.name} is a homogeneous graph; "
               "leave them empty (or use --data.name=hetsynth)")
        _check(m.name != "rgcn", f"model.name=rgcn needs a heterogeneous graph, but data.name={d.name} is homogeneous; "
                                 "use --data.name=hetsynth, or --model.name=sage")
        return
    h = d.hetsynth
    for key in ("num_papers", "num_authors", "num_fields", "feat_dim", "fields_per_paper"):
        _check(getattr(h, key) >= 1, f"data.hetsynth.{key}={getattr(h, key)} must be >= 1")
    _check(h.num_papers >= 10, f"data.hetsynth.num_papers={h.num_papers} is too small; use at least 10")
    _check(h.num_classes >= 2, f"data.hetsynth.num_classes={h.num_classes} must be >= 2")
    _check(h.fields_per_paper <= h.num_fields, f"data.hetsynth.fields_per_paper={h.fields_per_paper} is more than "
                                               f"data.hetsynth.num_fields={h.num_fields}")
    _check(h.papers_per_author > 0 and h.citations >= 0,
           f"data.hetsynth.papers_per_author={h.papers_per_author} must be > 0 and citations={h.citations} >= 0")
    _check(0.0 <= h.homophily <= 1.0, f"data.hetsynth.homophily={h.homophily} must be in [0, 1]")
    _check(h.noise >= 0, f"data.hetsynth.noise={h.noise} must be >= 0")
    _check(0 < h.train_frac < 1 and 0 <= h.val_frac < 1 and h.train_frac + h.val_frac < 1,
           f"data.hetsynth.train_frac={h.train_frac} / val_frac={h.val_frac} must be fractions that leave a test split")
    for ft in h.feat_types:
        _check(ft in schema["ntypes"], f"data.hetsynth.feat_types entry {ft!r} is not a node type of hetsynth "
                                       f"({', '.join(schema['ntypes'])}); list node types, e.g. [paper]")
    target = d.target or schema["labelled"][0]
    _check(target in schema["ntypes"], f"data.target={target!r} is not a node type of data.name={d.name} "
                                       f"({', '.join(schema['ntypes'])}); use --data.target={schema['labelled'][0]}")
    _check(target in schema["labelled"],
           f"data.target={target} has no labels (the labelled node type of data.name={d.name} is "
           f"{', '.join(schema['labelled'])}); use --data.target={schema['labelled'][0]}")
    kept = select_etypes(d.etypes, schema["etypes"])  # a name that is no relation is a one-line error
    used = {target} | {e[0] for e in kept} | {e[2] for e in kept}  # the node types the kept relations touch
    _check(m.name == "rgcn", f"data.name={d.name} is a heterogeneous graph, which model.name={m.name} cannot train; "
                             "use --model.name=rgcn (a GraphConv per relation, summed)")
    bare = [n for n in schema["ntypes"] if n in used and n not in schema["featured"]]
    _check(not bare or m.embed,
           f"node types {', '.join(bare)} of data.name={d.name} have no features, so model.embed=false leaves them "
           "without input; set --model.embed=true (a learnable row per node of those types)")
    refused = [
        (t.task == "node", f"train.task={t.task}", "--train.task=node"),
        (t.mode == "minibatch", f"train.mode={t.mode}", "--train.mode=minibatch"),
        (cfg.grappa.correction == "none", f"grappa.correction={cfg.grappa.correction}", "--grappa.correction=none"),
        (set(cfg.compare.variants) <= {"none"}, f"compare.variants=[{','.join(cfg.compare.variants)}]",
         "--compare.variants=[none]"),
        (cfg.schedule.k == 0, f"schedule.k={cfg.schedule.k}", "--schedule.k=0"),
        (not cfg.partition.prebuilt and t.eval_mode != "layerwise", "layer-wise evaluation (train.eval_mode=layerwise, "
         "partition.prebuilt)", "--train.eval_mode=whole without partition.prebuilt"),
        (not cfg.run.floor, "run.floor=true", "--run.floor=false"),
    ]
    for ok, what, fix in refused:
        _check(ok, f"data.name={d.name} (a heterogeneous graph) is not trained with {what}: the heterogeneous runtime "
                   f"trains node classification on minibatches with plain gradient averaging; use {fix}")


def _validate_link(cfg: Config) -> None:
    """``train.task: link``: the held-out fractions, the negatives, and the settings link prediction cannot serve."""
    if cfg.train.task != "link":
        return
    lk, t = cfg.link, cfg.train
    _check(0.0 < lk.val_frac < 1.0, f"link.val_frac={lk.val_frac} must be in (0, 1): validation scores held-out edges")
    _check(0.0 < lk.test_frac < 1.0, f"link.test_frac={lk.test_frac} must be in (0, 1): the test scores held-out edges")
    _check(lk.val_frac + lk.test_frac < 1.0,
           f"link.val_frac={lk.val_frac} and link.test_frac={lk.test_frac} hold out {lk.val_frac + lk.test_frac:g} of "
           "the edges, leaving none to train on; make their sum < 1, e.g. --link.val_frac=0.05 --link.test_frac=0.1")
    _check(lk.negatives >= 1, f"link.negatives={lk.negatives} must be >= 1 (negative pairs per positive edge)")
    _check(lk.negative_pool >= 0, f"link.negative_pool={lk.negative_pool} must be >= 0 (remote nodes per own node "
                                  "held as negatives; 0: none)")
    _check(lk.pool_fanout >= 0, f"link.pool_fanout={lk.pool_fanout} must be >= 0 (in-neighbours per pool node)")
    _check(lk.eval_negatives >= 1, f"link.eval_negatives={lk.eval_negatives} must be >= 1")
    _check(1 <= lk.hits_k <= lk.eval_negatives,
           f"link.hits_k={lk.hits_k} must be in 1..link.eval_negatives={lk.eval_negatives} (with more, every "
           f"held-out edge ranks in the top k); e.g. --link.hits_k={min(10, lk.eval_negatives)}")
    _check(cfg.grappa.correction == "none",
           f"train.task=link with grappa.correction={cfg.grappa.correction}: the corrections weight nodes by their "
           "coverage, and the link loss is a mean over edges; use --grappa.correction=none")
    _check(t.mode == "minibatch", "train.task=link with train.mode=fullgraph: link prediction trains on minibatches of "
                                  "edges and their sampled negatives; use --train.mode=minibatch")
    _check(not cfg.model.embed, "train.task=link with model.embed=true: learnable rows are not wired into link "
                                "prediction; train on the features (--model.embed=false)")
    _check(cfg.schedule.k == 0,
           f"train.task=link with schedule.k={cfg.schedule.k}: a new partitioning would have to be cut from the same "
           "training graph (held-out edges removed), which repartitioning does not do; use --schedule.k=0")
    _check(not cfg.partition.prebuilt and t.eval_mode != "layerwise",
           "train.task=link scores held-out edges on the whole graph in rank 0's memory; layer-wise evaluation "
           "(train.eval_mode=layerwise, partition.prebuilt) is not available with it: use --train.eval_mode=whole "
           "without partition.prebuilt")


def check_output_dir(path: str | os.PathLike, key: str) -> None:
    """Raise a one-line ConfigError unless folder ``path`` exists or can be created, and is writable.

    Nothing is left behind: folders created for the test (and a probe file) are removed.

    Args:
        path: the folder.
        key: the setting that names it (for the message), e.g. ``run.output_dir``.
    """
    import errno
    import tempfile

    target = Path(path).absolute()
    missing = []
    p = target
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    if not p.is_dir():
        raise ConfigError(f"{key}={path} cannot be created: {p} is a file, not a folder; choose another folder")
    try:
        for d in reversed(missing):
            d.mkdir()
        with tempfile.NamedTemporaryFile(dir=target, prefix=".probe-"):
            pass
    except OSError as exc:
        why = "no space left" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc)).lower()
        raise ConfigError(f"{key}={path} cannot be created or written ({why}); choose a writable folder, "
                          f"e.g. --{key}=runs/<name>") from None
    finally:
        for d in missing:  # deepest first
            try:
                d.rmdir()
            except OSError:
                pass


_ENV_ITEM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.S)


def uses_hosts(cfg: Config) -> bool:
    """Whether the job runs across hosts (ssh machines or the project's test hosts).

    True when ``launch.remote`` is ssh or netns; the workers then start on their hosts
    through :func:`dgl_grappa.cluster.hosts.remote_argv`, and each host's own network interface
    carries (and counts) its traffic, instead of one private loopback for the whole job.
    """
    return cfg.launch.remote != "none"


def _validate_launch(cfg: Config) -> None:
    """The ``launch`` section's host fields, and the network settings that depend on them."""
    la, net = cfg.launch, cfg.network
    _check(not (la.hosts and la.ip_config),
           "launch.hosts and launch.ip_config are both set; list the machines in one of them")
    _check(la.workers_per_host >= 0, f"launch.workers_per_host={la.workers_per_host} must be >= 0 (0 = automatic)")
    _check(1 <= la.ssh_port <= 65535, f"launch.ssh_port={la.ssh_port} must be between 1 and 65535")
    _check(0 <= la.master_port <= 65535, f"launch.master_port={la.master_port} must be in 0..65535 (0 = free port)")
    _check(la.max_restarts >= 0, f"launch.max_restarts={la.max_restarts} must be >= 0")
    for item in la.env:
        _check(_ENV_ITEM.fullmatch(item) is not None,
               f"launch.env entry {item!r} is not KEY=VALUE; write e.g. GLOO_SOCKET_IFNAME=eth0")
    for opt in la.ssh_options:
        _check(bool(opt.strip()), "launch.ssh_options has an empty entry; write options like StrictHostKeyChecking=no")
    seen: set[str] = set()
    for h in la.hosts:
        _check(bool(re.fullmatch(r"[A-Za-z0-9:][A-Za-z0-9.:-]*", h)),
               f"launch.hosts entry {h!r} is not an address or host name; write e.g. 10.0.0.1 or node01")
        _check(h not in seen, f"launch.hosts lists {h} twice; give each machine once (use workers_per_host "
                              "for several workers on one machine)")
        seen.add(h)
    if la.remote == "none":
        _check(not la.hosts and not la.ip_config,
               "launch.hosts/launch.ip_config list machines but launch.remote=none runs on this machine only; "
               "set --launch.remote=ssh (or netns for test hosts)")
    if la.remote == "ssh":
        _check(bool(la.hosts or la.ip_config),
               "launch.remote=ssh needs the machines: set launch.hosts=[...] or launch.ip_config=<ip_config.txt>")
        _check(not net.bandwidth and net.latency_ms == 0,
               "network.bandwidth/latency_ms emulate links with test hosts; with launch.remote=ssh the machines' "
               "real network is used: leave them empty")
    if la.remote == "netns":
        bad = [h for i, h in enumerate(la.hosts) if h != f"h{i}"]
        _check(not bad, f"launch.hosts={la.hosts}: with launch.remote=netns list the test hosts by name in "
                        f"order, h0, h1, ... (or leave it empty: one host per workers_per_host workers)")
    _check(net.latency_ms >= 0, f"network.latency_ms={net.latency_ms} must be >= 0")
    _check(net.latency_ms == 0 or la.remote == "netns",
           f"network.latency_ms={net.latency_ms} needs test hosts (launch.remote=netns); the job's loopback "
           "cannot delay traffic")
    d = str(net.dilation).strip().lower()
    try:
        factor = float(d) if d not in ("auto", "off") else 1.0
    except ValueError:
        factor = float("nan")
    _check(factor > 0 and factor != float("inf"),  # also false for nan
           f"network.dilation={net.dilation!r} is not auto, off or a factor > 0; write e.g. --network.dilation=2")
    ranges = [r.partition("-") for r in net.host_cpus.split(",")]
    _check(not net.host_cpus or (re.fullmatch(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*", net.host_cpus) is not None
                                 and all(int(a) <= int(b) for a, _, b in ranges if b)),
           f"network.host_cpus={net.host_cpus!r} is not a cpu list; write e.g. 0, 0-3 or 0,2")
    _check(1.0 <= float(net.cpu_period_ms) <= 1000.0,
           f"network.cpu_period_ms={net.cpu_period_ms} is out of range; write a period from 1 to 1000 ms, e.g. 20")
    _check(not net.host_cpus or d != "off",
           f"network.host_cpus={net.host_cpus} shares the cores out among test hosts, but network.dilation=off turns "
           "CPU shares off; set --network.dilation=auto or leave host_cpus empty")
    _check(la.remote == "netns" or (d in ("auto", "off") and not net.host_cpus),
           (f"network.host_cpus={net.host_cpus}" if net.host_cpus else f"network.dilation={net.dilation}")
           + f" shares out the CPUs of test hosts (launch.remote=netns); with launch.remote={la.remote} leave "
           "network.dilation at auto and network.host_cpus empty")
    if la.hosts:
        n_hosts = len(la.hosts)
        wph = la.workers_per_host or -(-cfg.partition.num_parts // n_hosts)
        _check(cfg.partition.num_parts <= n_hosts * wph,
               f"partition.num_parts={cfg.partition.num_parts} workers do not fit on {n_hosts} hosts x "
               f"launch.workers_per_host={wph}; add hosts or raise workers_per_host")
        used = -(-cfg.partition.num_parts // wph)
        _check(used == n_hosts, f"launch.hosts lists {n_hosts} machines but {cfg.partition.num_parts} workers at "
                                f"{wph} per host use only {used}; drop the idle hosts or change "
                                "partition.num_parts / launch.workers_per_host")


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
        return ("grappa.correction=node weights the loss itself, so it is not a drop-in; use "
                "--grappa.correction=batch, shrinkage or none with the drop-in loader")
    return None


def to_dict(cfg: Config) -> dict:
    """Plain-dict view of a config (for logs and summary files)."""
    return dataclasses.asdict(cfg)


def write_resolved_config(cfg: Config, path: Path) -> Path:
    """Write the whole (validated) config to YAML so that child processes see exactly it.

    Args:
        cfg: the config to hand on.
        path: the YAML file to write (its folder is created).

    Returns:
        ``path``.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    return path
