"""The drop-in loaders' settings, in one object: :class:`LoaderOptions`.

:class:`~.loaders.GrappaLoader`, :class:`~.loaders.GrappaEdgeLoader` and :class:`~.hetero.GrappaHeteroLoader` take
them as keywords (``first_hop="block"``, as a DistDGL script writes them) or as ``options=LoaderOptions(...)``, and
hand the one object on to what they are made of (:class:`~.machine.MachineTables`, the core loaders of :mod:`.core`);
the values are checked once, when the object is made.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...partition.aggregates import AUTO_KEY

HALOS = ("drop", "keep")
FIRST_HOPS = ("sampled", "exact", "block")
AGGREGATES = ("mean", "gcn")


@dataclass(frozen=True, kw_only=True)
class LoaderOptions:
    """How a drop-in loader samples, weights and keeps its machine's part (the native runtime's settings).

    Every field has the default a DistDGL script gets when it does not name it; a value no loader can run
    (an unknown ``halo``, ``first_hop`` or ``aggregate``) is a ``ValueError`` here, before anything is read.
    The heterogeneous loader reads ``halo``, ``seed``, ``feat_key``, ``train_key``, ``memory_budget`` and
    ``storage`` only (:class:`~.hetero.GrappaHeteroLoader`).

    Example:
        >>> opts = LoaderOptions(first_hop="block", part_config="parts/g.json")
        >>> opts.halo, opts.first_hop, opts.memory_budget
        ('keep', 'block', '1.5')
        >>> loader = GrappaLoader(g, sampler, 1000, options=opts)  # the same as the keywords  # doctest: +SKIP
    """

    hops: int = 2
    """Hops of the coverage recurrence (usually the model's number of layers)."""
    w_min: float = 0.05
    """Lower clamp of the node weights."""
    self_loops: bool = True
    """Count a self-loop in both degrees."""
    seed: int = 0
    """Seed of shuffling and sampling (the rank is added), and of what the memory budget samples."""
    halo: str = "keep"
    """``train.halo``: "keep" (the part's 1-hop halo nodes stay, as in the native runtime: their rows are read once
    through the KVStore and served from memory) or "drop" (inner nodes only). The core loaders of :mod:`.core`,
    which serve no rows, default to "drop" when given no options."""
    first_hop: str = "sampled"
    """The first hop: "sampled" (the script's sampler samples every layer); "exact" (first-hop completion through
    the model: the loader samples only layers 1..L-1, see :func:`~dgl_grappa.method.sampler.skip_first_layer`, and
    the model computes layer 0 from the aggregates, ``model(blocks, x, agg=loader.aggregates(input_nodes),
    deg=...)``); or "block" (first-hop completion for a model of the script's own: layers 1..L-1 are sampled and
    the loader adds block 0, in which every destination has one virtual in-neighbour whose row is its precomputed
    aggregate, so a mean-aggregating layer, e.g. DGL's ``SAGEConv('mean')``, computes the full-graph first hop;
    ``input_nodes`` then holds a virtual neighbour's id as ``num_nodes`` + the node's global id). "exact" and
    "block" read the aggregates (``part_config``)."""
    aggregate: str = "mean"
    """Which precomputed first hop the aggregates are: "mean" (the in-neighbour mean: what ``SAGEConv('mean')``,
    ``GraphConv(norm='right')`` and the package's models take) or "gcn" (``sum_u x_u / sqrt(d_out(u) d_in(v))``,
    what ``GraphConv(norm='both')`` computes; ``python -m dgl_grappa prepare --gcn`` adds it)."""
    part_config: str | None = None
    """The partition json the servers loaded (the aggregates are read from its folder: ``python -m dgl_grappa
    prepare`` adds them to a folder made elsewhere); needed with a first-hop mode."""
    memory_budget: str = "1.5"
    """``train.memory_budget``: a multiple of the own fp32 feature rows, or a size such as ``"8GB"`` ("0": no
    limit). The server holds the own features in fp32, the loader the rest."""
    storage: str = "auto"
    """``train.storage``: precision of the loader's tables, "auto" (fp32, fp16, int8, int4: the most exact that
    fits the budget) or one of them."""
    train_key: str = "train_mask"
    """Node-data key of the training mask."""
    degree_key: str = "in_degree"
    """Node-data key of the full-graph in-degree (without it, the prepared folder's, else asked from the servers
    once, when the loader is made)."""
    feat_key: str | None = AUTO_KEY
    """Node-data key of the features: "auto" is the graph's one 2-D float node tensor (DGL's examples name it
    ``features``; none: no features); None: no features, the script trains learnable rows (its ``DistEmbedding``,
    ``loader.serve``), and nothing feature-wide is read or held."""

    def __post_init__(self):
        if self.halo not in HALOS:
            raise ValueError(f"halo={self.halo!r} is not allowed; use drop or keep")
        if self.first_hop not in FIRST_HOPS:
            raise ValueError(f"first_hop={self.first_hop!r} is not allowed; use sampled, exact or block")
        if self.aggregate not in AGGREGATES:
            raise ValueError(f"aggregate={self.aggregate!r} is not allowed; use mean or gcn")

    @classmethod
    def of(
        cls,
        caller: str,
        options: LoaderOptions | None,
        keywords: dict,
        default: LoaderOptions | None = None,
        names: tuple[str, ...] | None = None,
    ) -> LoaderOptions:
        """The options a loader was called with: ``options`` (else ``default``, else the fields' defaults) with the
        call's ``keywords`` put over it.

        Args:
            caller: the loader's name, for the errors.
            options: the call's ``options=``, or None.
            keywords: the call's other keywords: fields of :class:`LoaderOptions`.
            default: the options without ``options`` (None: the fields' defaults).
            names: the fields the caller takes as keywords (None: every field).

        Raises:
            TypeError: a keyword that is not among ``names`` (named, with them), or ``options`` of another type.

        Example:
            >>> LoaderOptions.of("GrappaLoader", LoaderOptions(seed=3), {"halo": "drop"}).seed
            3
        """
        if options is not None and not isinstance(options, cls):
            raise TypeError(f"{caller}() takes options=LoaderOptions(...), not {type(options).__name__}")
        names = FIELDS if names is None else names
        unknown = sorted(set(keywords) - set(names))
        if unknown:
            raise TypeError(
                f"{caller}() got an unexpected keyword argument {', '.join(map(repr, unknown))}; its options "
                f"(LoaderOptions) are {', '.join(names)}"
            )
        base = options if options is not None else default if default is not None else cls()
        return dataclasses.replace(base, **keywords) if keywords else base


FIELDS = tuple(f.name for f in dataclasses.fields(LoaderOptions))
"""The names of :class:`LoaderOptions`' fields, in their order."""
