"""The ``data`` section: which graph, the generators' settings, and the heterogeneous graph's schema.

The schema (node types, relations, labelled types) of ``hetsynth`` lives here, below the data layer,
because the config's own rules check ``data.target``, ``data.etypes`` and ``data.hetsynth.feat_types``
against it before anything is loaded; the generator (:mod:`dgl_grappa.data.hetsynth`) builds exactly it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..env import ENV_CACHE, ENV_DATA
from .errors import ConfigError, require


def cache_root() -> Path:
    """Base cache folder of dgl_grappa (outside the repository).

    Returns:
        ``$DGL_GRAPPA_CACHE`` if set, else ``$XDG_CACHE_HOME/dgl_grappa``, else ``~/.cache/dgl_grappa``.
    """
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "dgl_grappa"


def default_data_root() -> str:
    """The default of ``data.root``: ``$DGL_GRAPPA_DATA``, else :func:`cache_root` (``~/.cache/dgl_grappa``).

    Example:
        >>> default_data_root() == os.environ.get("DGL_GRAPPA_DATA", str(cache_root()))
        True
    """
    env = os.environ.get(ENV_DATA)
    return str(Path(env).expanduser()) if env else str(cache_root())


OGB_DATASETS = ("ogbn-arxiv", "ogbn-products", "ogbn-mag", "ogbn-papers100M")
"""The OGB node-property graphs ``data.name`` loads by name (downloaded once into ``data.root``)."""


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

    def check(self) -> None:
        """The generator's ranges (checked whatever ``data.name`` is: the defaults are valid)."""
        require(self.num_nodes >= 10, f"data.synthetic.num_nodes={self.num_nodes} is too small; use at least 10")
        require(self.avg_degree > 0, f"data.synthetic.avg_degree={self.avg_degree} must be > 0")
        require(self.num_classes >= 2, f"data.synthetic.num_classes={self.num_classes} must be >= 2")
        require(
            self.num_communities >= self.num_classes,
            f"data.synthetic.num_communities={self.num_communities} must be >= num_classes ({self.num_classes})",
        )
        require(self.feat_dim >= 1, f"data.synthetic.feat_dim={self.feat_dim} must be >= 1")
        require(0.0 <= self.homophily <= 1.0, f"data.synthetic.homophily={self.homophily} must be in [0, 1]")
        require(self.noise >= 0, f"data.synthetic.noise={self.noise} must be >= 0")
        require(self.degree_exponent > 1.0, f"data.synthetic.degree_exponent={self.degree_exponent} must be > 1")
        require(
            0 < self.train_frac < 1 and 0 <= self.val_frac < 1 and self.train_frac + self.val_frac < 1,
            f"data.synthetic.train_frac={self.train_frac} / val_frac={self.val_frac} must be fractions that "
            "leave a test split",
        )


HETSYNTH_NTYPES = ("author", "field", "paper")
"""The node types of ``hetsynth`` (every one may carry features, ``data.hetsynth.feat_types``)."""
HETSYNTH_ETYPES = (
    ("author", "writes", "paper"),
    ("paper", "written_by", "author"),
    ("paper", "cites", "paper"),
    ("paper", "cited_by", "paper"),
    ("paper", "has_topic", "field"),
    ("field", "topic_of", "paper"),
)
"""The relations of ``hetsynth`` (canonical: source type, name, destination type): three and their reverses,
so that messages flow both ways."""
HETSYNTH_LABELLED = ("paper",)
"""The node types of ``hetsynth`` with labels and train/val/test masks."""
OGBN_MAG_NTYPES = ("author", "field_of_study", "institution", "paper")
"""The node types of ogbn-mag (only papers have features, labels and splits)."""
OGBN_MAG_ETYPES = (
    ("author", "affiliated_with", "institution"),
    ("author", "writes", "paper"),
    ("paper", "cites", "paper"),
    ("paper", "has_topic", "field_of_study"),
    ("institution", "rev_affiliated_with", "author"),
    ("paper", "rev_writes", "author"),
    ("paper", "rev_cites", "paper"),
    ("field_of_study", "rev_has_topic", "paper"),
)
"""The relations of ogbn-mag: OGB's four and their reverses (``rev_<name>``, as DGL's RGCN example adds them),
so that messages reach papers from every type."""
HETERO_DATASETS = ("hetsynth", "ogbn-mag")
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

    def check(self) -> None:
        """The generator's ranges (checked only when ``data.name`` is hetsynth)."""
        for key in ("num_papers", "num_authors", "num_fields", "feat_dim", "fields_per_paper"):
            require(getattr(self, key) >= 1, f"data.hetsynth.{key}={getattr(self, key)} must be >= 1")
        require(self.num_papers >= 10, f"data.hetsynth.num_papers={self.num_papers} is too small; use at least 10")
        require(self.num_classes >= 2, f"data.hetsynth.num_classes={self.num_classes} must be >= 2")
        require(
            self.fields_per_paper <= self.num_fields,
            f"data.hetsynth.fields_per_paper={self.fields_per_paper} is "
            f"more than data.hetsynth.num_fields={self.num_fields}",
        )
        require(
            self.papers_per_author > 0 and self.citations >= 0,
            f"data.hetsynth.papers_per_author={self.papers_per_author} must be > 0 and citations={self.citations} >= 0",
        )
        require(0.0 <= self.homophily <= 1.0, f"data.hetsynth.homophily={self.homophily} must be in [0, 1]")
        require(self.noise >= 0, f"data.hetsynth.noise={self.noise} must be >= 0")
        require(
            0 < self.train_frac < 1 and 0 <= self.val_frac < 1 and self.train_frac + self.val_frac < 1,
            f"data.hetsynth.train_frac={self.train_frac} / val_frac={self.val_frac} must be fractions that leave "
            "a test split",
        )
        for ft in self.feat_types:
            require(
                ft in HETSYNTH_NTYPES,
                f"data.hetsynth.feat_types entry {ft!r} is not a node type of hetsynth "
                f"({', '.join(HETSYNTH_NTYPES)}); list node types, e.g. [paper]",
            )


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
        return {
            "ntypes": list(HETSYNTH_NTYPES),
            "etypes": [tuple(e) for e in HETSYNTH_ETYPES],
            "featured": [t for t in HETSYNTH_NTYPES if t in data.hetsynth.feat_types],
            "labelled": list(HETSYNTH_LABELLED),
        }
    if data.name == "ogbn-mag":
        return {
            "ntypes": list(OGBN_MAG_NTYPES),
            "etypes": [tuple(e) for e in OGBN_MAG_ETYPES],
            "featured": ["paper"],
            "labelled": ["paper"],
        }
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
            raise ConfigError(
                f"data.etypes entry {n!r} is not a relation of the graph ({known}); name relations "
                "of the graph, e.g. --data.etypes=[cites,cited_by], or leave it empty for all"
            )
        if len(hit) > 1:
            raise ConfigError(
                f"data.etypes entry {n!r} names {len(hit)} relations; write it as source:name:"
                f"destination, e.g. {':'.join(hit[0])}"
            )
        if hit[0] not in out:
            out.append(hit[0])
    return out


@dataclass
class DataConfig:
    """Which graph to train on."""

    name: Literal[
        "synthetic",
        "cora",
        "citeseer",
        "ogbn-arxiv",
        "ogbn-products",
        "ogbn-mag",
        "ogbn-papers100M",
        "dgl",
        "bigsynth",
        "hetsynth",
    ] = "synthetic"
    """synthetic (generated, no files), cora / citeseer (the Planetoid files, downloaded once into ``root``),
    ogbn-arxiv / ogbn-products / ogbn-mag / ogbn-papers100M (the OGB node-property graphs in OGB's own
    layout, downloaded once into ``root``; ogbn-mag is heterogeneous: ``model.name: rgcn``; ogbn-papers100M
    is converted once into the memory-mapped big-graph folder), dgl (your own graph, saved with
    dgl.save_graphs at ``path``), bigsynth (a folder written by dgl_grappa.data.bigsynth.generate_big at
    ``path``, read in chunks; with ``partition.prebuilt`` only its metadata is read), or hetsynth (a
    generated heterogeneous graph, ``hetsynth`` below: several node and edge types, trained with
    ``model.name: rgcn``)."""
    root: str = field(default_factory=default_data_root)
    """Folder of the datasets loaded by name: ``$DGL_GRAPPA_DATA``, else the user's cache
    (``~/.cache/dgl_grappa``). Cora / CiteSeer: the ``ind.<name>.*`` files in it or in its
    ``planetoid/raw`` (downloaded there when neither, nor ``$DGL_GRAPPA_PLANETOID``, has them); OGB:
    ``<root>/ogbn_<name>/`` in OGB's layout (what ``ogb``'s ``NodePropPredDataset(root=...)`` writes)."""
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

    def check(self) -> None:
        """The generator's ranges, the file a user graph needs, and the node and edge types a heterogeneous
        graph is trained on (they must be the graph's)."""
        self.synthetic.check()
        require(
            self.name != "dgl" or bool(self.path),
            "data.path is empty but data.name=dgl; set --data.path=<file saved with dgl.save_graphs>",
        )
        require(
            self.name != "bigsynth" or bool(self.path),
            "data.path is empty but data.name=bigsynth; set --data.path=<folder written by generate_big>",
        )
        schema = hetero_schema(self)
        if schema is None:
            require(
                not self.target and not self.etypes,
                f"data.target / data.etypes name node and edge types, but data.name={self.name} is a homogeneous "
                "graph; leave them empty (or use --data.name=hetsynth)",
            )
            return
        self.hetsynth.check()
        target = self.target or schema["labelled"][0]
        require(
            target in schema["ntypes"],
            f"data.target={target!r} is not a node type of data.name={self.name} "
            f"({', '.join(schema['ntypes'])}); use --data.target={schema['labelled'][0]}",
        )
        require(
            target in schema["labelled"],
            f"data.target={target} has no labels (the labelled node type of data.name={self.name} is "
            f"{', '.join(schema['labelled'])}); use --data.target={schema['labelled'][0]}",
        )
        select_etypes(self.etypes, schema["etypes"])  # a name that is no relation is a one-line error
