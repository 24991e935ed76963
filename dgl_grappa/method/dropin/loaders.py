"""The drop-in loaders of a DistDGL script on a homogeneous graph: :class:`GrappaLoader` and :class:`GrappaEdgeLoader`.

Each is composed of the machine's tables (:class:`~.machine.MachineTables`: what is kept and read once,
and every row served from memory) and a core loader over the same part (:mod:`.core`: node batches, or
edge batches with local negatives); they differ only in that core and in what they keep.
"""

from __future__ import annotations

import logging

from torch import Tensor

from ...partition.layout import HOMOGENEOUS
from ..reducers.correction import Correction
from .core import PartitionEdgeLoader, PartitionLoader, _refuse, _refuse_link
from .machine import GlobalIdEmbedding, MachineTables
from .options import LoaderOptions
from .serve import refresh_halo, serve

log = logging.getLogger("dgl_grappa")


class _OnMachine:
    """What both loaders of a DistGraph share: the machine's :attr:`tables` and the :attr:`core` loader."""

    options: LoaderOptions
    """The settings it was made with (``options`` and the keywords)."""
    tables: MachineTables
    core: PartitionLoader
    in_epoch = False
    """True while an epoch's batches are being iterated (:meth:`serve`'s reads are then local only)."""
    _served: tuple = ()  # the served embeddings' rows (note_served)
    _served_once = 0
    _served_held = 0
    halo_refresh = 1
    refresh_bytes = 0

    def _core_args(self) -> tuple:
        t = self.tables
        return t.local_partition, t.inner, t.global_ids, t.train_mask, t.in_degree

    def _report_budget(self) -> None:
        costly, line = self.tables.budget_report(self.core.edges)
        # a warning, so that a script without logging set-up sees it (Python's last-resort handler)
        (log.warning if costly else log.info)("%s", line)

    def __len__(self) -> int:
        return self.core.steps

    def __iter__(self):
        # a served DistEmbedding's halo rows: what their owners trained until now (a barrier, when due)
        self.refresh_bytes += refresh_halo(self._served, self.core._epoch, self.halo_refresh)
        self.in_epoch = True
        try:
            yield from self.core
        finally:
            self.in_epoch = False

    def serve(self, obj, halo_refresh: int = 1):
        """Serve the reads a module of the script's makes (its ``g.ndata[key][ids]``, its ``DistEmbedding``) from
        this machine's memory during the loader's epochs; the module stays the script's.

        Call it once, before training, on the module that reads its inputs (or on the ``DistGraph``, to get a
        served view of it). The rule and what it changes: :mod:`~dgl_grappa.method.dropin.serve`. A served
        ``DistEmbedding`` trains this machine's own rows where its server keeps them (DGL's ``SparseAdam``,
        unchanged) and reads the kept halo's rows when served (``one_time_bytes``) and again at the start of
        every ``halo_refresh``-th epoch (``refresh_bytes``; 0: never), frozen in between.

        Example:
            >>> emb_layer = DistEmb(g.num_nodes(), args.num_hidden, dgl_sparse_emb=True)   # doctest: +SKIP
            >>> loader.serve(emb_layer)   # its DistEmbedding reads: this machine memory  # doctest: +SKIP
        """
        self.halo_refresh = int(halo_refresh)
        return serve(obj, self)

    # -- what serve() reads (the row source): one node type, "_N"
    def serves(self, ntype: str, key: str) -> bool:
        return ntype == HOMOGENEOUS and key is not None and key == self.tables.feat_key

    def rows(self, ntype: str, ids: Tensor) -> Tensor:
        return self.tables.features(ids)

    def own_range(self, ntype: str) -> tuple[int, int]:
        return self.tables._first, self.tables._n_inner

    def halo_ids(self, ntype: str) -> Tensor:
        return self.tables._halo_gids

    def note_served(self, rows) -> None:
        self._served = (*self._served, rows)
        self._served_once += rows.nbytes
        self._served_held += rows.nbytes

    def set_epoch(self, epoch: int) -> None:
        """Draw the next iteration's batches as epoch ``epoch`` (e.g. when resuming at that epoch)."""
        self.core.set_epoch(epoch)

    @property
    def steps(self) -> int:
        """Batches per epoch (the same on every machine)."""
        return self.core.steps

    @property
    def halo(self) -> str:
        return self.core.halo

    @property
    def first_hop(self) -> str:
        return self.core.first_hop

    @property
    def edges(self) -> dict | None:
        """The edge loader's usable-edge counts (None for node batches)."""
        return self.core.edges

    @property
    def one_time_bytes(self) -> int:
        """Bytes read once (the kept halo's rows and, with a first-hop mode, aggregates; a served
        ``DistEmbedding``'s frozen halo rows)."""
        return self.tables.one_time_bytes + self._served_once

    @property
    def nbytes(self) -> int:
        """Bytes of the tables this loader holds besides the server's features (and of its learnable rows)."""
        return self.tables.nbytes + self._served_held

    @property
    def feat_key(self) -> str | None:
        """The features' node-data key (``feat_key="auto"`` resolved), or None."""
        return self.tables.feat_key

    @property
    def precision(self) -> str:
        """The precision the memory budget left for the tables (fp32 ... int4)."""
        return self.tables.precision

    def features(self, input_nodes: Tensor) -> Tensor:
        """fp32 input rows of a batch's ``input_nodes``, all from this machine's memory
        (:meth:`MachineTables.features <.machine.MachineTables.features>`)."""
        return self.tables.features(input_nodes)

    def degrees(self, input_nodes: Tensor) -> Tensor:
        """Full-graph in-degrees of ``input_nodes``, from local memory."""
        return self.tables.degrees(input_nodes)

    def aggregates(self, input_nodes: Tensor) -> Tensor:
        """fp32 first-hop aggregates of ``input_nodes``, from local memory."""
        return self.tables.aggregates(input_nodes)

    def embedding(self, dim: int, seed: int = 0) -> GlobalIdEmbedding:
        """Learnable input rows for this machine's nodes: the drop-in for the script's ``DistEmbedding``
        (:meth:`MachineTables.embedding <.machine.MachineTables.embedding>`)."""
        return self.tables.embedding(dim, seed)


class GrappaLoader(_OnMachine):
    """Local-only, coverage-weighted replacement for ``DistNodeDataLoader``: a :class:`~.core.PartitionLoader`
    over a DistGraph.

    What the loader keeps follows the native runtime's rules (:func:`~.local_part.choose_kept`):
    the nodes the training seeds' sampled trees reach, the tables in the most exact precision
    that ``memory_budget`` leaves room for next to the server's fp32 features, and a uniform
    sample of the halo when even int4 does not fit. With ``halo="keep"`` the kept halo rows
    (features, in-degrees and, with a first-hop mode, aggregates) are read once here through
    the KVStore (``one_time_bytes``) and served from memory afterwards: read every row a batch
    needs with :meth:`features` (``g.ndata["feat"][input_nodes]`` would pull halo rows from
    their owners every step).

    Iterating yields ``(input_nodes, seeds, blocks)`` as ``DistNodeDataLoader`` does (global ids in every
    field of every block, :class:`~.core.PartitionLoader`).

    Args:
        g: the DistGraph (its machine must hold a partition: ``g.local_partition``).
        sampler, batch_size, correction: as for :class:`~.core.PartitionLoader`.
        options: a :class:`~.options.LoaderOptions`, each of its fields documented there: ``hops``, ``w_min``,
            ``self_loops``, ``seed``, ``halo`` ("keep" by default), ``first_hop`` ("exact" or "block" read the
            aggregates), ``aggregate``, ``part_config`` (needed with a first-hop mode), ``memory_budget``,
            ``storage``, ``train_key``, ``degree_key``, ``feat_key`` (``None``: the script trains learnable rows,
            its ``DistEmbedding``, :meth:`serve`). Without it, the fields' defaults.
        keywords: those fields as a DistDGL script writes them (``first_hop="block"``, ``part_config=...``), put
            over ``options``; any other keyword is a ``TypeError`` that names the fields.

    What the memory budget costs (tables below fp32, reachable halo nodes left out) is logged as a
    warning when the loader is made; ``precision``, ``tables.halo_kept`` and ``tables.halo_reach`` say it too.

    Example:
        >>> loader = GrappaLoader(g, sampler, 1000, first_hop="block", part_config=part_config)  # doctest: +SKIP
        >>> for input_nodes, seeds, blocks in loader:                                             # doctest: +SKIP
        ...     out = model(blocks, loader.features(input_nodes))    # the script's own model, unchanged
    """

    def __init__(
        self,
        g,
        sampler,
        batch_size: int,
        correction: Correction | None = None,
        *,
        options: LoaderOptions | None = None,
        **keywords,
    ):
        o = self.options = LoaderOptions.of(type(self).__name__, options, keywords)
        _refuse(correction, o.halo)  # before anything is asked from the servers
        self.tables = MachineTables(g, sampler, o, every_node=False)
        self.core = PartitionLoader(
            *self._core_args(),
            sampler,
            batch_size,
            correction,
            options=o,
            kept=self.tables.kept,
            num_nodes=self.tables.num_nodes_total,
        )
        self._report_budget()


class GrappaEdgeLoader(_OnMachine):
    """Local-only replacement for ``DistEdgeDataLoader`` (link prediction): a :class:`~.core.PartitionEdgeLoader`
    over a DistGraph.

    What it keeps and reads once is :class:`GrappaLoader`'s, with every node of the partition
    kept (any node it holds may be the end of a positive or negative pair); read every input
    row with :meth:`features` (and :meth:`aggregates`, :meth:`degrees`). The batches are
    :class:`~.core.PartitionEdgeLoader`'s: this machine's positive edges and negatives drawn from the
    nodes it holds, so no row, no sampling request and no edge lookup leaves the machine.

    Args:
        g, sampler, batch_size, correction: as for :class:`GrappaLoader` (``batch_size``: positive
            edges per batch; ``correction``: None or ``make_correction("none")``).
        negative_sampler: the script's negative sampler: ``dgl.dataloading.negative_sampler.Uniform(k)`` draws
            as DGL's does, uniformly over every node of the graph: an own node with the share of the graph this
            machine owns, else a node of the negative pool; :class:`~dgl_grappa.method.link.LocalNegativeSampler`
            ``(k, "degree")`` in proportion to the full-graph in-degree^0.75.
        negative_pool: other machines' nodes per own node held as negatives (the native runtime's
            ``link.negative_pool``): ``ceil(negative_pool x own nodes)`` of them, drawn uniformly, their rows read
            once with the halo's (halo nodes among them cost nothing more); each stands for its share of the nodes
            this machine does not own, so the negatives follow the global draw without a byte during a step. The
            default, 3, is every other machine's node at 4 parts: a small pool concentrates the negatives on a
            few nodes, and trained long the encoder learns those nodes rather than the graph (docs/dropin.md,
            measured). 0: negatives from the nodes this machine holds (its own and its kept halo).
        pool_fanout: in-edges held per pool node outside the halo (asked once from the servers, a seeded uniform
            draw of them kept; their sources held as leaves, as the halo is): without them such a node has no
            neighbourhood, unlike the positive pairs' own destinations, and the encoder can tell a negative by
            that alone (the native runtime's ``link.pool_fanout``). 0: pool nodes outside the halo have no edges.
        halo_fanout: in-edges from other machines' nodes held per halo node, drawn and held the same way (the part
            holds a halo node's in-edges from this machine's nodes only: for a positive pair's source, its partner
            among few, and the encoder can tell the halo's trees from every own node's). The default, 10, trained
            DGL's link script closer to DistDGL on random parts at DGL's 3 epochs and at 20 (docs/dropin.md,
            measured). 0: none.
        options, keywords: as for :class:`GrappaLoader` (a :class:`~.options.LoaderOptions`, or its fields as
            keywords: ``halo``, ``first_hop``, ``part_config``, ``memory_budget``, ...).

    Example:
        >>> loader = GrappaEdgeLoader(g, sampler, 1000, negative_sampler=Uniform(1),   # doctest: +SKIP
        ...                           first_hop="block", part_config=part_config)
        >>> for input_nodes, pair_graph, neg_pair_graph, blocks in loader:                          # doctest: +SKIP
        ...     loss = loss_fcn(model(blocks, loader.features(input_nodes)), pair_graph, neg_pair_graph)
    """

    def __init__(
        self,
        g,
        sampler,
        batch_size: int,
        correction: Correction | None = None,
        *,
        negative_sampler,
        negative_pool: float = 3.0,
        pool_fanout: int = 10,
        halo_fanout: int = 10,
        options: LoaderOptions | None = None,
        **keywords,
    ):
        o = self.options = LoaderOptions.of(type(self).__name__, options, keywords)
        _refuse_link(correction)  # before anything is asked from the servers
        _refuse(correction, o.halo)
        if negative_pool < 0:
            raise ValueError(
                f"negative_pool={negative_pool} must be >= 0 (other machines' nodes per own node held as "
                "negatives; 0: negatives from the nodes this machine holds)"
            )
        for name, value in (("pool_fanout", pool_fanout), ("halo_fanout", halo_fanout)):
            if value < 0:
                raise ValueError(f"{name}={value} must be >= 0 (in-edges held per node of another machine)")
        self.tables = MachineTables(
            g,
            sampler,
            o,
            every_node=True,
            negative_pool=negative_pool,
            pool_fanout=pool_fanout,
            halo_fanout=halo_fanout,
        )
        t = self.tables
        self.core = PartitionEdgeLoader(
            *self._core_args(),
            sampler,
            batch_size,
            correction,
            options=o,
            kept=t.kept,
            num_nodes=t.num_nodes_total,
            negative_sampler=negative_sampler,
            extra=(t.extra_gids, t.extra_deg),
            extra_edges=t.pool_edges,
            pool=t.pool_gids,
            remote=t.num_nodes_total - t._n_inner,
        )
        self._report_budget()
