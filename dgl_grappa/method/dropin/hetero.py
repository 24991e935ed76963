"""The drop-in on a heterogeneous graph: :class:`GrappaHeteroLoader`, DGL's RGCN example's loader made local."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import dgl
import torch
from torch import Tensor

from ...config import ConfigError, parse_budget
from ...partition.aggregates import AUTO_KEY, feature_key
from ...partition.layout import part_edges
from ..hetero import HeteroEmbedding, TargetSeeds, local_heterograph
from ..hetero_halo import InEdges, halo_ending, merge_halo_in_edges
from ..local_part import Keep, budget_error, precision_ladder
from ..reducers.correction import Correction
from ..sampler import LocalBatches, equal_steps, seeded_workers
from ..storage import NodeTable, row_bytes
from .core import _world, part_edge_order
from .options import LoaderOptions
from .serve import refresh_halo, serve

log = logging.getLogger("dgl_grappa")

HETERO_OPTIONS = ("halo", "seed", "feat_key", "train_key", "memory_budget", "storage")
"""The :class:`~.options.LoaderOptions` fields the heterogeneous loader reads (and takes as keywords)."""


class GrappaHeteroLoader:
    """Local-only replacement for ``DistNodeDataLoader`` on a heterogeneous DistGraph (DGL's RGCN example's
    loader).

    Seeds are this machine's own training nodes of the ``target`` type; the script's ``NeighborSampler`` samples
    inside the machine's local heterograph (:func:`~dgl_grappa.method.hetero.local_heterograph` of
    ``g.local_partition``: every type's inner nodes and, with ``halo="keep"``, its 1-hop halo), per relation, as in
    the native runtime (:class:`~dgl_grappa.kinds.hetero.HeteroRuntime`). It yields ``(input_nodes, seeds, blocks)``
    as ``DistNodeDataLoader`` does for a heterograph: ``input_nodes`` and ``seeds`` are dicts of per-type global ids.
    Every input row comes from this machine's memory: :meth:`features` (own rows from the server, the kept halo's
    read once through the KVStore, ``one_time_bytes``), or the script's own layers' reads through :meth:`serve` (its
    ``g.nodes[t].data[key][ids]`` and its ``DistEmbedding`` per featureless type), or the package's learnable rows
    :meth:`embedding`. Every machine takes the same number of steps.

    The blocks are DistDGL's: ``srcdata``/``dstdata[dgl.NID]`` per-type global ids, ``edata[dgl.EID]`` per-relation
    global edge ids, and each block holds the relations it sampled an edge of (DistDGL's sampler builds its
    frontier so), so a ``HeteroGraphConv`` over the last block outputs the target type alone.

    Args:
        g: the DistGraph (its machine must hold a partition).
        sampler: the script's ``dgl.dataloading.NeighborSampler`` (fan-outs per layer, for every relation).
        batch_size: seeds per batch on the machine with the most training nodes.
        correction: None or ``make_correction("none")`` (the heterogeneous runtime averages plainly).
        target: the labelled node type (empty: the one type with ``train_key``).
        halo_in_edges: "all" (every halo node's in-edges over every relation, asked once from the servers, their
            sources outside the part joining the halo: DGL's part holds a halo node's in-edges from this machine's
            nodes only, so without them a sampled first block sees part of a halo node's neighbourhood, unlike
            DistDGL's) or "part" (the part's edges only). The added sources' feature rows are inside
            ``memory_budget``; a served ``DistEmbedding`` reads their rows with the halo's at every epoch.
        options: a :class:`~.options.LoaderOptions`, of which this loader reads ``halo`` ("keep" or "drop"), ``seed``,
            ``feat_key`` ("auto": the one 2-D float node tensor name the types have, e.g. DGL's ``feat``),
            ``train_key``, ``memory_budget`` and ``storage``; it samples every layer (``first_hop`` "sampled") and
            averages plainly. ``memory_budget`` bounds the featured rows the machine holds, the server's own rows
            included: the kept halo's rows take what is left, in the most exact precision of ``storage`` that holds
            every halo node the seeds' trees can reach, else a uniform sample of those nodes in the last one (a
            warning says so). The featureless types' learnable rows are outside it, as in the native runtime.
        keywords: those six fields as keywords (``halo="drop"``, ``memory_budget="2"``, ...), put over ``options``.

    Example:
        >>> loader = GrappaHeteroLoader(g, sampler, 1000, target="paper", halo="keep")    # doctest: +SKIP
        >>> emb = loader.embedding(64); emb_opt = emb.optimizer(lr=0.01)                   # doctest: +SKIP
        >>> for input_nodes, seeds, blocks in loader:                                      # doctest: +SKIP
        ...     x = {**loader.features(input_nodes), **emb(input_nodes)}
        ...     loss = F.cross_entropy(model(blocks, x), g.nodes["paper"].data["label"][seeds["paper"]])
    """

    def __init__(
        self,
        g,
        sampler,
        batch_size: int,
        correction: Correction | None = None,
        *,
        target: str = "",
        halo_in_edges: str = "all",
        options: LoaderOptions | None = None,
        **keywords,
    ):
        o = self.options = LoaderOptions.of(type(self).__name__, options, keywords, names=HETERO_OPTIONS)
        if halo_in_edges not in ("all", "part"):
            raise ValueError(f"halo_in_edges={halo_in_edges!r} is not allowed; use 'all' or 'part'")
        halo, seed, train_key, memory_budget = o.halo, o.seed, o.train_key, o.memory_budget
        if correction is not None and correction.name != "none":
            raise ValueError(
                f"the heterogeneous loader averages gradients plainly; correction={correction.name!r} "
                "weights nodes by a homogeneous coverage: pass None or make_correction('none')"
            )
        if o.first_hop != "sampled":
            raise ValueError(
                f"first_hop={o.first_hop!r} is the homogeneous loaders'; the heterogeneous loader samples the "
                "first hop of every relation: use first_hop='sampled'"
            )
        part_graph = g.local_partition
        if part_graph is None:
            raise RuntimeError(
                "this trainer's machine holds no partition (g.local_partition is None); the "
                "drop-in loader needs co-located servers and trainers"
            )
        gpb = g.get_partition_book()
        self._gpb = gpb
        self.halo, self.correction = halo, correction
        labelled = [t for t in g.ntypes if train_key in g.nodes[t].data]
        if not target and not labelled:
            raise ConfigError(
                f"no node type of the DistGraph has node data {train_key!r}; pass train_key=<the "
                "training mask's key> and target=<the labelled type>"
            )
        self.target = target or labelled[0]
        ntypes, etypes = list(g.ntypes), [tuple(e) for e in g.canonical_etypes]
        asked = g if halo_in_edges == "all" else None
        graph, n_inner, global_ids, edge_ids, self.halo_in_edges = local_hetero_part(
            part_graph, gpb, ntypes, etypes, halo, asked
        )
        self.num_inner_by_type = n_inner
        for t in g.ntypes:
            first = int(global_ids[t][0]) if n_inner[t] else 0
            # the server's rows of a type (``.local_partition``) are its own nodes in per-type id order
            if n_inner[t] and not torch.equal(global_ids[t][: n_inner[t]], torch.arange(first, first + n_inner[t])):
                raise RuntimeError(
                    f"the own nodes of type {t} are not one contiguous range of per-type ids; partition "
                    "with dgl.distributed.partition_graph"
                )
        self.feat_key = _hetero_feature_key(g, o.feat_key)
        self.featured = [t for t in g.ntypes if self.feat_key is not None and self.feat_key in g.nodes[t].data]
        self.bare_types = [t for t in g.ntypes if t not in self.featured]
        feat_key = self.feat_key
        # own rows: the server's shared memory (fp32, outside what the loader chooses but inside the budget)
        self._own = {t: g.nodes[t].data[feat_key].local_partition for t in self.featured}
        t = self.target
        train = g.nodes[t].data[train_key].local_partition[: n_inner[t]].bool()
        self.train_ids = train.nonzero(as_tuple=True)[0]
        if seeded_workers(self.train_ids.numel()) < _world():
            raise ValueError(
                f"a machine's partition has no training nodes of type {t}, and the drop-in loader needs "
                "some on every machine; use fewer parts or --partition.balance_train=true"
            )
        # What to keep: the halo the seeds' trees can reach, in the precision the budget leaves room for
        layers = len(getattr(sampler, "fanouts", []) or []) or None
        self.part_id, self.memory_budget = int(gpb.partid), memory_budget
        self.precision, kept, self.halo_reach = _choose_halo(
            graph, n_inner, {t: self.train_ids}, layers, self._own, memory_budget, o.storage, seed, self.part_id
        )
        self.graph, self.global_ids, self.edge_ids = _keep_halo(graph, n_inner, kept, global_ids, edge_ids)
        self._first, self._halo_sorted, self._halo_local, self._halo_row = {}, {}, {}, {}
        for t in g.ntypes:
            gids = self.global_ids[t]
            order = torch.argsort(gids[n_inner[t] :])
            self._first[t] = int(gids[0]) if n_inner[t] else 0
            self._halo_sorted[t] = gids[n_inner[t] :][order]
            self._halo_local[t] = order + n_inner[t]
            # local id of a halo node -> its row of the halo table (sorted by global id), made once
            self._halo_row[t] = torch.empty(gids.numel(), dtype=torch.int64)
            self._halo_row[t][self._halo_local[t]] = torch.arange(order.numel())
        self.halo_kept = {t: int(self._halo_sorted[t].numel()) for t in g.ntypes}
        # the kept halo's rows: pulled once through the KVStore in the chosen precision, held here
        self._halo_feat = {
            t: NodeTable.store(
                g.nodes[t].data[feat_key][self._halo_sorted[t]]
                if self._halo_sorted[t].numel()
                else self._own[t][:0].float(),
                self.precision,
            )
            for t in self.featured
        }
        self.one_time_bytes = sum(x.nbytes for x in self._halo_feat.values()) + self.halo_in_edges["one_time_bytes"]
        self.steps = equal_steps(self.train_ids.numel(), batch_size)
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        self.batches = LocalBatches(
            self.graph, self.train_ids, TargetSeeds(sampler, t), self.steps, seed=seed * 1000 + rank
        )
        self._weights = torch.ones(n_inner[t])
        self._epoch = 0
        self._embedding = None
        self.in_epoch = False  # True while an epoch's batches are iterated (serve's reads are local only then)
        self._served, self._served_held, self.halo_refresh, self.refresh_bytes = (), 0, 1, 0
        costly, line = self.budget_report()
        # a warning, so that a script without logging set-up sees it (Python's last-resort handler)
        (log.warning if costly else log.info)("%s", line)

    def __len__(self) -> int:
        return self.steps

    def set_epoch(self, epoch: int) -> None:
        """Draw the next iteration's batches as epoch ``epoch`` (e.g. when resuming at that epoch)."""
        self._epoch = epoch

    def __iter__(self):
        epoch, self._epoch = self._epoch, self._epoch + 1
        if self._embedding is not None:
            # the learnable rows several machines hold, averaged when a sync is due (a collective, before any step)
            self._embedding.sync_halo(epoch)
        # a served DistEmbedding's halo rows: what their owners trained until now (a barrier, when due)
        self.refresh_bytes += refresh_halo(self._served, epoch, self.halo_refresh)
        self.in_epoch = True
        try:
            for input_nodes, seeds, blocks in self.batches.epoch(epoch):
                if self.correction is not None:
                    self.correction.prime(self._weights[seeds])
                blocks = [sampled_relations(to_global_hetero(b, self.global_ids, self.edge_ids)) for b in blocks]
                yield (
                    {t: self.global_ids[t][ids] for t, ids in input_nodes.items()},
                    {self.target: self.global_ids[self.target][seeds]},
                    blocks,
                )
        finally:
            self.in_epoch = False

    def serve(self, obj, halo_refresh: int = 1):
        """Serve the reads a module of the script's makes from this machine's memory during the loader's epochs: its
        ``g.nodes[t].data[key][ids]`` (the featured types' rows) and its ``DistEmbedding`` per featureless type (own
        rows trained where the machine's server keeps them, by the script's own DGL ``SparseAdam``; the kept halo's
        rows read when served and again at the start of every ``halo_refresh``-th epoch, frozen in between).
        Outside the epochs (the script's evaluation) its reads are DGL's own. Call it once, before training, on
        the module that reads the inputs (DGL's RGCN example: its ``DistEmbedLayer``); see
        :mod:`~dgl_grappa.method.dropin.serve`.

        Example:
            >>> embed_layer = DistEmbedLayer(device, g, args.n_hidden,  # doctest: +SKIP
            ...                              sparse_emb=True, dgl_sparse_emb=True)
            >>> loader.serve(embed_layer)  # doctest: +SKIP
        """
        self.halo_refresh = int(halo_refresh)
        return serve(obj, self)

    # -- what serve() reads (the row source)
    def serves(self, ntype: str, key: str) -> bool:
        return key is not None and key == self.feat_key and ntype in self._own

    def rows(self, ntype: str, ids: Tensor) -> Tensor:
        return self.features({ntype: ids})[ntype]

    def own_range(self, ntype: str) -> tuple[int, int]:
        return self._first[ntype], self.num_inner_by_type[ntype]

    def halo_ids(self, ntype: str) -> Tensor:
        return self._halo_sorted[ntype]

    def note_served(self, rows) -> None:
        self._served = (*self._served, rows)
        self._served_held += rows.nbytes
        self.one_time_bytes += rows.nbytes

    def local_ids(self, ntype: str, ids: Tensor) -> Tensor:
        """This machine's local ids (of its local heterograph) of nodes of ``ntype`` given by per-type global ids."""
        ids = ids.to(torch.int64)
        first, n = self._first[ntype], self.num_inner_by_type[ntype]
        own = (ids >= first) & (ids < first + n)
        out = torch.empty_like(ids)
        out[own] = ids[own] - first
        other = ids[~own]
        if other.numel():
            halo = self._halo_sorted[ntype]
            pos = torch.searchsorted(halo, other).clamp(max=max(halo.numel() - 1, 0))
            if not halo.numel() or not torch.equal(halo[pos], other):
                raise RuntimeError("a batch asked for a node this machine does not hold (the loader left its part)")
            out[~own] = self._halo_local[ntype][pos]
        return out

    def features(self, input_nodes: dict) -> dict:
        """fp32 rows of the featured types among ``input_nodes`` (per-type global ids), all from this machine's
        memory."""
        out = {}
        for t, ids in input_nodes.items():
            if t not in self._own:
                continue
            local = self.local_ids(t, ids)
            n = self.num_inner_by_type[t]
            rows = torch.empty((local.numel(), int(self._own[t].shape[1])), dtype=torch.float32)
            own = local < n
            rows[own] = self._own[t][local[own]].float()
            rows[~own] = self._halo_feat[t].gather(self._halo_row[t][local[~own]])
            out[t] = rows
        return out

    def embedding(self, dim: int, seed: int = 0, halo_sync: int = 1):
        """The featureless types' learnable rows on this machine: the drop-in for a ``DistEmbedding`` per type.

        Own rows are trained here by the module's ``optimizer(lr)`` (PyTorch's ``SparseAdam``). With ``halo_sync``
        k > 0 (the native runtime's ``model.embed_halo_sync``) the kept halo's copies are trained here too, and at
        the start of every k-th epoch each row is averaged over the machines that hold it (a collective over the
        default process group: one exchange each way, ``sync_bytes``); with 0 the halo's rows are their owners'
        initial rows, frozen (:class:`~dgl_grappa.method.hetero.HeteroEmbedding`). Called with a batch's
        ``input_nodes`` (per-type global ids), it returns ``{featureless type: rows}``.

        Example:
            >>> emb = loader.embedding(64, seed=0); emb_opt = emb.optimizer(lr=0.01)  # doctest: +SKIP
        """
        if self._embedding is None:
            self._embedding = GlobalIdHeteroEmbedding(self, dim, seed, halo_sync)
        return self._embedding

    def take_bytes(self) -> int:
        """Bytes of learnable rows this machine received since the last call: :meth:`embedding`'s syncs (a served
        ``DistEmbedding``'s refreshes are KVStore pulls, counted where DistDGL's pulls are)."""
        return self._embedding.take_bytes()[0] if self._embedding is not None else 0

    @property
    def nbytes(self) -> int:
        """Bytes this loader holds besides the server's tables: the kept halo's feature rows and the learnable rows
        of :meth:`embedding` with their optimizer's moments."""
        held = sum(x.nbytes for x in self._halo_feat.values()) + self._served_held
        return held + (self._embedding.memory()["embed"] if self._embedding is not None else 0)

    def budget_report(self) -> tuple[bool, str]:
        """What ``memory_budget`` did to this loader: (whether it cost anything, one line saying what it kept).

        It costs something when the halo's rows are stored below fp32, or when not every halo node the seeds'
        trees reach was kept (the learnable rows of the featureless types are outside the budget)."""
        featured_reach = sum(self.halo_reach[t] for t in self.featured)
        featured_kept = sum(self.halo_kept[t] for t in self.featured)
        lossy = featured_kept > 0 and self.precision != "fp32"
        cut = featured_kept < featured_reach
        share = featured_kept / featured_reach if featured_reach else 1.0
        what = (
            f"the halo's feature rows in {self.precision}, {featured_kept} of {featured_reach} reachable halo "
            f"nodes of the featured types kept ({share:.1%}), every training node kept"
        )
        return lossy or cut, (
            f"drop-in loader (heterogeneous), part {self.part_id}, memory_budget="
            f"{self.memory_budget}: {what} ({self.nbytes} bytes held besides the server's "
            f"features; {self.one_time_bytes} read once)"
        )


def local_hetero_part(part_graph: dgl.DGLGraph, gpb, ntypes: list, etypes: list, halo: str, g=None):
    """A machine's local heterograph and its ids, from its part in DGL's layout (a DistGraph's ``local_partition``,
    or ``load_partition``'s graph) and the partition book.

    DGL's part stores a halo node's in-edges from the part's own nodes only; with ``g`` (the DistGraph) and
    ``halo="keep"`` every halo node's in-edges over every relation are asked once from the servers instead, and
    their sources outside the part join the halo (:func:`~dgl_grappa.method.hetero_halo.merge_halo_in_edges`), so
    that a sampled first block sees a halo node's whole neighbourhood, as DistDGL's sampler does.

    Returns:
        ``(graph, inner count per type, per-type global node ids per type, per-relation global edge ids, stats)``:
        the graph of :func:`~dgl_grappa.method.hetero.local_heterograph` (every type's own nodes, with
        ``halo="keep"`` its 1-hop halo), the ids in its node and edge orders, and what was asked from the servers
        (``merge_halo_in_edges``' stats; zeros without ``g``).
    """
    inner = part_graph.ndata["inner_node"].bool()
    n_local = part_graph.num_nodes() if halo == "keep" else int(inner.sum())
    homo = part_graph.ndata[dgl.NID][:n_local].to(torch.int64)
    # the server's shared graph has no node types or owners: the partition book gives them
    ntype_id, type_gid = gpb.map_to_per_ntype(homo)
    src, dst = part_edges(part_graph)
    # per-edge data is in edge-id order, part_edges' edges in CSC order on a server's graph: line them up
    order = part_edge_order(part_graph)
    e = (src.long() < n_local) & (dst.long() < n_local)  # halo="drop": the edges among inner nodes
    a = {
        "src": src.long()[e],
        "dst": dst.long()[e],
        "etype_id": part_graph.edata[dgl.ETYPE][order].to(torch.int64)[e],
        "eid": part_graph.edata[dgl.EID][order].to(torch.int64)[e],
        "ntype_id": ntype_id.to(torch.int64),
        "gid": homo,
        "type_gid": type_gid.to(torch.int64),
        "owner": gpb.nid2partid(homo).to(torch.int64),
        "inner": inner[:n_local],
    }
    every = torch.ones(len(etypes), dtype=torch.bool)
    got = _servers_in_edges(g, gpb, a, ntypes, etypes, every) if g is not None and halo == "keep" else None
    a, stats = merge_halo_in_edges(a, got, every, ntypes)
    graph, _, n_inner, global_ids, _ = local_heterograph(
        a["src"], a["dst"], a["etype_id"], a["inner"], a["ntype_id"], a["type_gid"], a["owner"], ntypes, etypes, halo
    )
    edge_ids = _relation_edge_ids(gpb, a["eid"], a["etype_id"], etypes, graph)
    return graph, n_inner, global_ids, edge_ids, stats


def _servers_in_edges(g, gpb, a: dict, ntypes: list, etypes: list, every: Tensor) -> InEdges | None:
    """Every in-edge of the halo nodes of ``a`` (the local part's arrays) over every relation (``every``, the
    all-true mask), asked once from the servers (the halo's owners), in the order of their global edge ids (the
    servers' order may vary)."""
    halo = halo_ending(a, ntypes, etypes, every)
    nodes = {t: a["type_gid"][halo[a["ntype_id"][halo] == i]] for i, t in enumerate(ntypes)}
    nodes = {t: ids for t, ids in nodes.items() if ids.numel()}
    if not nodes:
        return None
    sg = dgl.distributed.sample_neighbors(g, nodes, -1)
    src_type_gid, src_type, src_gid, dst_gid, rel_id, eid = [], [], [], [], [], []
    for j, rel in enumerate(etypes):
        s, d = (x.to(torch.int64) for x in sg.edges(etype=rel))
        if s.numel():
            src_type_gid.append(s)
            src_type.append(torch.full_like(s, ntypes.index(rel[0])))
            src_gid.append(gpb.map_to_homo_nid(s, rel[0]).to(torch.int64))
            dst_gid.append(gpb.map_to_homo_nid(d, rel[2]).to(torch.int64))
            rel_id.append(torch.full_like(s, j))
            eid.append(gpb.map_to_homo_eid(sg.edges[rel].data[dgl.EID], rel).to(torch.int64))
    if not eid:
        return None
    o = torch.argsort(torch.cat(eid))
    src_type_gid, src_type, src_gid, dst_gid, rel_id, eid = (
        torch.cat(x)[o] for x in (src_type_gid, src_type, src_gid, dst_gid, rel_id, eid)
    )
    by_gid = torch.argsort(a["gid"])
    dst_local = by_gid[torch.searchsorted(a["gid"][by_gid], dst_gid)]
    return InEdges(src_gid, src_type, src_type_gid, gpb.nid2partid(src_gid).to(torch.int64), dst_local, rel_id, eid)


def reached_by_type(graph: dgl.DGLGraph, seeds: dict, hops: int | None) -> dict:
    """Per node type, the bool mask of the nodes within ``hops`` in-edge steps of ``seeds`` (per-type local ids)
    over every relation: the only nodes a ``hops``-layer sampled tree from the seeds can contain (every node with
    ``hops`` None).

    Example:
        >>> g = dgl.heterograph({("a", "r", "b"): ([0, 1], [0, 0]), ("b", "s", "a"): ([0], [2])})
        >>> {t: m.nonzero().flatten().tolist() for t, m in reached_by_type(g, {"b": torch.tensor([0])}, 1).items()}
        {'a': [0, 1], 'b': [0]}
    """
    if hops is None:
        return {t: torch.ones(graph.num_nodes(t), dtype=torch.bool) for t in graph.ntypes}
    need = {t: torch.zeros(graph.num_nodes(t), dtype=torch.bool) for t in graph.ntypes}
    frontier = {t: ids.long() for t, ids in seeds.items()}
    for t, ids in frontier.items():
        need[t][ids] = True
    for _ in range(hops):
        step = {t: torch.zeros(graph.num_nodes(t), dtype=torch.bool) for t in graph.ntypes}
        for rel in graph.canonical_etypes:
            ids = frontier.get(rel[2])
            if ids is not None and ids.numel():
                step[rel[0]][graph.in_edges(ids, etype=rel)[0].long()] = True
        frontier = {t: (step[t] & ~need[t]).nonzero(as_tuple=True)[0] for t in graph.ntypes}
        if not any(ids.numel() for ids in frontier.values()):
            break
        for t, ids in frontier.items():
            need[t][ids] = True
    return need


def _choose_halo(
    graph: dgl.DGLGraph,
    n_inner: dict,
    seeds: dict,
    hops: int | None,
    own: dict,
    memory_budget: str,
    storage: str,
    seed: int,
    part_id: int,
) -> tuple[str, dict, dict]:
    """(precision, per type the halo's local ids kept, per type the count of halo nodes reached) under the budget:
    the native runtime's rule with the server's own fp32 rows already held. A halo node of a featureless type costs
    the budget nothing (its learnable row is outside it): every reached one stays."""
    reached = reached_by_type(graph, seeds, hops)
    halo = {t: reached[t][n_inner[t] :].nonzero(as_tuple=True)[0] + n_inner[t] for t in graph.ntypes}
    reach = {t: int(ids.numel()) for t, ids in halo.items()}
    mult, size = parse_budget(memory_budget)
    keep = Keep(storage=storage, budget=mult, budget_bytes=size, seed=seed)
    own_fp32 = sum(int(x.shape[0]) * int(x.shape[1]) * 4 for x in own.values())
    room = keep.limit(own_fp32) - own_fp32
    top = max((float(x.abs().max()) for x in own.values() if x.numel()), default=0.0)
    ladder = precision_ladder(storage, top)
    featured = [t for t in graph.ntypes if t in own]

    def cost(precision: str) -> float:
        return sum(reach[t] * row_bytes(int(own[t].shape[1]), precision) for t in featured)

    for precision in ladder:
        if cost(precision) <= room:
            return precision, halo, reach
    precision = ladder[-1]
    if room < 0:
        raise budget_error(part_id, precision, own_fp32, own_fp32, "memory_budget")
    # a uniform sample of the featured types' reached halo, as many as fit (seeded by the run and the part)
    order = torch.cat([torch.stack([torch.full_like(halo[t], i), halo[t]], 1) for i, t in enumerate(featured)])
    gen = torch.Generator().manual_seed(seed * 1_000_003 + part_id)
    order = order[torch.randperm(order.shape[0], generator=gen)]
    per = torch.tensor([row_bytes(int(own[t].shape[1]), precision) for t in featured], dtype=torch.float64)
    fits = torch.cumsum(per[order[:, 0]], 0) <= room
    kept = dict(halo)
    for i, t in enumerate(featured):
        kept[t] = torch.sort(order[fits & (order[:, 0] == i), 1]).values
    return precision, kept, reach


def _keep_halo(graph: dgl.DGLGraph, n_inner: dict, kept: dict, global_ids: dict, edge_ids: dict):
    """The local heterograph with every own node and the ``kept`` halo nodes only (their order kept), and the ids
    of its nodes and edges."""
    if all(kept[t].numel() == graph.num_nodes(t) - n_inner[t] for t in graph.ntypes):
        return graph, global_ids, edge_ids
    nodes = {t: torch.cat([torch.arange(n_inner[t]), kept[t]]) for t in graph.ntypes}
    sub = dgl.node_subgraph(graph, nodes)
    # the sampler's blocks name local ids by NID / EID: the subgraph's own, not the parent's
    nids, eids = sub.ndata.pop(dgl.NID), sub.edata.pop(dgl.EID)
    nids = nids if isinstance(nids, dict) else {graph.ntypes[0]: nids}
    eids = eids if isinstance(eids, dict) else {graph.canonical_etypes[0]: eids}
    return (
        sub,
        {t: global_ids[t][nids[t].long()] for t in graph.ntypes},
        {rel: edge_ids[rel][eids[rel].long()] for rel in graph.canonical_etypes},
    )


def _hetero_feature_key(g, feat_key: str | None) -> str | None:
    """The features' key on a heterogeneous DistGraph: ``feat_key``, or with "auto" the one name that the 2-D
    float node tensors of its types have (DGL's RGCN example: ``feat`` on ``paper``)."""
    if feat_key is None:
        return None
    data = {t: {k: g.nodes[t].data[k] for k in g.nodes[t].data} for t in g.ntypes}
    if feat_key != AUTO_KEY:
        if any(feat_key in d for d in data.values()):
            return feat_key
        raise ConfigError(
            f"no node type of the DistGraph has node data {feat_key!r} (their node data: "
            f"{ {t: sorted(d) for t, d in data.items()} }); pass feat_key=<the features' key>"
        )
    found = {feature_key(d, AUTO_KEY, f"node type {t!r}") for t, d in data.items()} - {None}
    if len(found) > 1:
        raise ConfigError(
            f"the DistGraph's node types name their features differently {sorted(found)}; pass feat_key=<one of them>"
        )
    return found.pop() if found else None


def _relation_edge_ids(gpb, homo_eids: Tensor, etype_id: Tensor, etypes: list, graph: dgl.DGLGraph) -> dict:
    """Per relation, the per-type global id of every edge of the local heterograph (in its edge order: the edges
    relation by relation, as :func:`~dgl_grappa.method.hetero.local_heterograph` lists them)."""
    out = {}
    for j, rel in enumerate(etypes):
        ids = homo_eids[etype_id == j]
        out[rel] = gpb.map_to_per_etype(ids)[1].to(torch.int64) if ids.numel() else ids
        if out[rel].numel() != graph.num_edges(rel):
            raise RuntimeError(
                "the local heterograph's edges and their global ids disagree (a change to local_heterograph?)"
            )
    return out


def to_global_hetero(block: dgl.DGLGraph, node_ids: dict, edge_ids: dict) -> dgl.DGLGraph:
    """A block sampled on the local heterograph, with per-type global ids in ``srcdata``/``dstdata[dgl.NID]`` and
    per-relation global edge ids in ``edata[dgl.EID]`` (as DistDGL's sampler gives them); changed and returned."""
    for t in block.srctypes:
        block.srcnodes[t].data[dgl.NID] = node_ids[t][block.srcnodes[t].data[dgl.NID].long()]
    for t in block.dsttypes:
        block.dstnodes[t].data[dgl.NID] = node_ids[t][block.dstnodes[t].data[dgl.NID].long()]
    for rel in block.canonical_etypes:
        data = block.edges[rel].data
        data[dgl.EID] = edge_ids[rel][data[dgl.EID].long()]
    return block


def sampled_relations(block: dgl.DGLGraph) -> dgl.DGLGraph:
    """The block with only the relations it sampled an edge of, as DistDGL's frontiers are built (every relation
    when it sampled none): a layer over it then outputs the types those relations point into (the last block:
    the target type alone), as in DistDGL. Nodes, their order and every id stay."""
    rels = [r for r in block.canonical_etypes if block.num_edges(r) > 0]
    if not rels or len(rels) == len(block.canonical_etypes):
        return block
    out = dgl.create_block(
        {r: block.edges(etype=r) for r in rels},
        num_src_nodes={t: block.num_src_nodes(t) for t in block.srctypes},
        num_dst_nodes={t: block.num_dst_nodes(t) for t in block.dsttypes},
        idtype=block.idtype,
    )
    for t in block.srctypes:
        out.srcnodes[t].data[dgl.NID] = block.srcnodes[t].data[dgl.NID]
    for t in block.dsttypes:
        out.dstnodes[t].data[dgl.NID] = block.dstnodes[t].data[dgl.NID]
    for r in rels:
        out.edges[r].data[dgl.EID] = block.edges[r].data[dgl.EID]
    return out


class GlobalIdHeteroEmbedding(HeteroEmbedding):
    """:class:`~dgl_grappa.method.hetero.HeteroEmbedding` over one :class:`GrappaHeteroLoader`'s machine, called
    with per-type global ids."""

    def __init__(self, loader: GrappaHeteroLoader, dim: int, seed: int = 0, sync_every: int = 0):
        gpb = loader._gpb
        owner = {t: gpb.nid2partid(loader.global_ids[t], t).to(torch.int64) for t in loader.bare_types}
        part = SimpleNamespace(
            global_ids=loader.global_ids,
            num_inner_by_type=loader.num_inner_by_type,
            bare_types=loader.bare_types,
            owner=owner,
            part_id=int(gpb.partid),
        )
        super().__init__(part, dim, seed, sync_every)
        self._loader = loader

    def forward(self, input_nodes: dict) -> dict:
        """``{featureless type: rows}`` of a batch's ``input_nodes`` (own rows differentiable; halo rows too when
        they are synced, else frozen)."""
        return {t: self.types[t](self._loader.local_ids(t, ids)) for t, ids in input_nodes.items() if t in self.types}
