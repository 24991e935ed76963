"""The drop-in on a heterogeneous graph: :class:`GrappaHeteroLoader`, DGL's RGCN example's loader made local."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import dgl
import torch
from torch import Tensor

from ...partition.layout import part_edges
from ..hetero import HeteroEmbedding, TargetSeeds, local_heterograph
from ..reducers.correction import Correction
from ..sampler import LocalBatches, equal_steps, seeded_workers
from .core import _world

log = logging.getLogger("dgl_grappa")


class GrappaHeteroLoader:
    """Local-only replacement for ``DistNodeDataLoader`` on a heterogeneous DistGraph (DGL's RGCN example's loader).

    Seeds are this machine's own training nodes of the ``target`` type; the script's ``NeighborSampler`` samples
    inside the machine's local heterograph (:func:`~dgl_grappa.method.hetero.local_heterograph` of ``g.local_partition``: every
    type's inner nodes and, with ``halo="keep"``, its 1-hop halo), per relation, as in the native runtime
    (:class:`~dgl_grappa.kinds.hetero.HeteroRuntime`). It yields ``(input_nodes, seeds, blocks)`` as ``DistNodeDataLoader``
    does for a heterograph: ``input_nodes`` and ``seeds`` are dicts of per-type global ids. Every input row comes
    from this machine's memory: :meth:`features` (own rows from the server, the kept halo's read once through the
    KVStore, ``one_time_bytes``) and :meth:`embedding` (the featureless types' own rows, trained here, and the
    halo's frozen initial rows; the drop-in for the script's ``DistEmbedding`` per type). Every machine takes the
    same number of steps.

    Args:
        g: the DistGraph (its machine must hold a partition).
        sampler: the script's ``dgl.dataloading.NeighborSampler`` (fan-outs per layer, for every relation).
        batch_size: seeds per batch on the machine with the most training nodes.
        correction: None or ``make_correction("none")`` (the heterogeneous runtime averages plainly).
        target: the labelled node type (empty: the one type with ``train_key``).
        halo: "keep" or "drop".
        seed: seed of shuffling and sampling (the rank is added).
        feat_key, train_key: node-data keys of the features and of the training mask.

    Example:
        >>> loader = GrappaHeteroLoader(g, sampler, 1000, target="paper", halo="keep")    # doctest: +SKIP
        >>> emb = loader.embedding(64); emb_opt = emb.optimizer(lr=0.01)                   # doctest: +SKIP
        >>> for input_nodes, seeds, blocks in loader:                                      # doctest: +SKIP
        ...     x = {**loader.features(input_nodes), **emb(input_nodes)}
        ...     loss = F.cross_entropy(model(blocks, x), g.nodes["paper"].data["label"][seeds["paper"]])
    """

    def __init__(self, g, sampler, batch_size: int, correction: Correction | None = None, *, target: str = "",
                 halo: str = "keep", seed: int = 0, feat_key: str = "feat", train_key: str = "train_mask"):
        if correction is not None and correction.name != "none":
            raise ValueError(f"the heterogeneous loader averages gradients plainly; correction={correction.name!r} "
                             "weights nodes by a homogeneous coverage: pass None or make_correction('none')")
        if halo not in ("drop", "keep"):
            raise ValueError(f"halo={halo!r} is not allowed; use drop or keep")
        lp = g.local_partition
        if lp is None:
            raise RuntimeError("this trainer's machine holds no partition (g.local_partition is None); the "
                               "drop-in loader needs co-located servers and trainers")
        gpb = g.get_partition_book()
        self.halo, self.correction = halo, correction
        self.target = target or next(t for t in g.ntypes if train_key in g.nodes[t].data)
        inner = lp.ndata["inner_node"].bool()
        n_local = lp.num_nodes() if halo == "keep" else int(inner.sum())
        homo = lp.ndata[dgl.NID][:n_local].to(torch.int64)
        # the server's shared graph has no node types or owners: the partition book gives them
        ntype_id, type_gid = gpb.map_to_per_ntype(homo)
        owner = gpb.nid2partid(homo)
        src, dst = part_edges(lp)
        self.graph, _, n_inner, self.global_ids, _ = local_heterograph(
            src, dst, lp.edata[dgl.ETYPE], inner, ntype_id, type_gid, owner, list(g.ntypes),
            [tuple(e) for e in g.canonical_etypes], halo)
        self.num_inner_by_type = n_inner
        self._first, self._halo_sorted, self._halo_local, self._halo_row = {}, {}, {}, {}
        for t in g.ntypes:
            gids = self.global_ids[t]
            first = int(gids[0]) if n_inner[t] else 0
            # the server's rows of a type (``.local_partition``) are its own nodes in per-type id order
            if n_inner[t] and not torch.equal(gids[: n_inner[t]], torch.arange(first, first + n_inner[t])):
                raise RuntimeError(f"the own nodes of type {t} are not one contiguous range of per-type ids; partition "
                                   "with dgl.distributed.partition_graph")
            order = torch.argsort(gids[n_inner[t]:])
            self._first[t] = first
            self._halo_sorted[t] = gids[n_inner[t]:][order]
            self._halo_local[t] = order + n_inner[t]
            # local id of a halo node -> its row of the halo table (sorted by global id), made once
            self._halo_row[t] = torch.empty(gids.numel(), dtype=torch.int64)
            self._halo_row[t][self._halo_local[t]] = torch.arange(order.numel())
        self.featured = [t for t in g.ntypes if feat_key in g.nodes[t].data]
        self.bare_types = [t for t in g.ntypes if t not in self.featured]
        # own rows: the server's shared memory; the kept halo's: pulled once through the KVStore, held here
        self._own = {t: g.nodes[t].data[feat_key].local_partition for t in self.featured}
        self._halo_feat = {t: g.nodes[t].data[feat_key][self._halo_sorted[t]] if self._halo_sorted[t].numel()
                           else self._own[t][:0].float() for t in self.featured}
        self.one_time_bytes = sum(int(x.numel()) * 4 for x in self._halo_feat.values())
        t = self.target
        train = g.nodes[t].data[train_key].local_partition[: n_inner[t]].bool()
        self.train_ids = train.nonzero(as_tuple=True)[0]
        if seeded_workers(self.train_ids.numel()) < _world():
            raise ValueError(f"a machine's partition has no training nodes of type {t}, and the drop-in loader needs "
                             "some on every machine; use fewer parts or --partition.balance_train=true")
        self.steps = equal_steps(self.train_ids.numel(), batch_size)
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        self.batches = LocalBatches(self.graph, self.train_ids, TargetSeeds(sampler, t), self.steps,
                                    seed=seed * 1000 + rank)
        self._weights = torch.ones(n_inner[t])
        self._epoch = 0
        self._embedding = None
        log.info("drop-in (heterogeneous): part %d holds %s own and %s halo nodes; %d bytes read once",
                 int(gpb.partid), dict(n_inner), {k: int(v.numel()) for k, v in self._halo_sorted.items()},
                 self.one_time_bytes)

    def __len__(self) -> int:
        return self.steps

    def set_epoch(self, epoch: int) -> None:
        """Draw the next iteration's batches as epoch ``epoch`` (e.g. when resuming at that epoch)."""
        self._epoch = epoch

    def __iter__(self):
        epoch, self._epoch = self._epoch, self._epoch + 1
        for input_nodes, seeds, blocks in self.batches.epoch(epoch):
            if self.correction is not None:
                self.correction.prime(self._weights[seeds])
            yield ({t: self.global_ids[t][ids] for t, ids in input_nodes.items()},
                   {self.target: self.global_ids[self.target][seeds]}, blocks)

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
        """fp32 rows of the featured types among ``input_nodes`` (per-type global ids), all from this machine's memory."""
        out = {}
        for t, ids in input_nodes.items():
            if t not in self._own:
                continue
            local = self.local_ids(t, ids)
            n = self.num_inner_by_type[t]
            rows = torch.empty((local.numel(), int(self._own[t].shape[1])), dtype=torch.float32)
            own = local < n
            rows[own] = self._own[t][local[own]].float()
            rows[~own] = self._halo_feat[t][self._halo_row[t][local[~own]]]
            out[t] = rows
        return out

    def embedding(self, dim: int, seed: int = 0):
        """The featureless types' learnable rows on this machine: the drop-in for a ``DistEmbedding`` per type.

        Own rows are trained here by the module's ``optimizer(lr)`` (PyTorch's ``SparseAdam``); the kept halo's
        rows are their owners' initial rows, frozen (:class:`~.hetero.HeteroEmbedding`). Called with a batch's
        ``input_nodes`` (per-type global ids), it returns ``{featureless type: rows}``.
        """
        if self._embedding is None:
            self._embedding = GlobalIdHeteroEmbedding(self, dim, seed)
        return self._embedding

    @property
    def nbytes(self) -> int:
        """Bytes this loader holds besides the server's tables: the kept halo's feature rows and the learnable rows
        of :meth:`embedding` with their optimizer's moments."""
        held = sum(int(x.numel()) * 4 for x in self._halo_feat.values())
        return held + (self._embedding.memory()["embed"] if self._embedding is not None else 0)


class GlobalIdHeteroEmbedding(HeteroEmbedding):
    """:class:`~dgl_grappa.method.hetero.HeteroEmbedding` over one :class:`GrappaHeteroLoader`'s machine, called with per-type global ids."""

    def __init__(self, loader: GrappaHeteroLoader, dim: int, seed: int = 0):
        part = SimpleNamespace(global_ids=loader.global_ids, num_inner_by_type=loader.num_inner_by_type,
                               bare_types=loader.bare_types)
        super().__init__(part, dim, seed)
        self._loader = loader

    def forward(self, input_nodes: dict) -> dict:
        """``{featureless type: rows}`` of a batch's ``input_nodes`` (own rows differentiable, halo rows frozen)."""
        return {t: self.types[t](self._loader.local_ids(t, ids)) for t, ids in input_nodes.items() if t in self.types}
