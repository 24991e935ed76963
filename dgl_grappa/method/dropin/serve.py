"""The reads a script's own layers make, served by a drop-in loader from this machine's memory: ``loader.serve(obj)``.

DGL's examples read their inputs inside their own modules: RGCN's embedding layer projects
``g.nodes[t].data["feat"][ids]`` with its ``node_projs`` and looks featureless types up in the
``DistEmbedding``s it made (with the script's initialiser); ``train_dist_transductive.py`` keeps a
``DistEmbedding`` in a module of its own and reads its ``emb_size`` at evaluation. ``loader.serve(module)``
leaves those modules as they are and changes what they read from:

* a ``DistGraph`` attribute (``self.g``) becomes a :class:`ServedGraph`: the same graph, whose
  ``nodes[t].data[key]`` / ``ndata[key]`` of the loader's feature key is a :class:`ServedRows`;
* a ``DistTensor`` attribute of that key becomes a :class:`ServedRows`;
* every ``DistEmbedding`` (an attribute, or in a dict or list attribute) becomes, in place, a
  :class:`ServedEmbedding`: still the script's ``DistEmbedding`` (its name, sizes, rows in the KVStore,
  DGL's ``SparseAdam`` over it), every reference to it included.

The rule is one: **during the loader's epochs** (while a ``for ... in loader`` runs) every read is served
from this machine's memory, and a read of a row the machine does not hold is an error (the loader never
asks for one); **outside them** (the script's evaluation) every read is DGL's own, through the KVStore, as
in DistDGL. During the epochs a ``ServedEmbedding`` gives the machine's own rows from its server's shard of
the ``DistEmbedding`` (traced, so DGL's ``SparseAdam`` updates them there, on this machine: the optimizer's
exchange carries no row of another machine) and the kept halo's rows: their owners' rows, read when ``serve`` is
called (``loader.one_time_bytes``) and read again at the start of every ``halo_refresh``-th epoch (after a barrier,
so every owner's last step is in them; ``loader.refresh_bytes``), frozen in between (0: never read again). The
evaluation then reads every machine's trained rows where they live. Dense parameters (a projection) stay in the
script's modules, under its own DDP.

What a loader gives this module (the "row source"): ``in_epoch``; ``serves(ntype, key)``; ``rows(ntype, ids)``
(fp32 rows of ids it holds, from memory); ``own_range(ntype)`` (its own nodes: one range of per-type ids);
``halo_ids(ntype)`` (the kept halo's per-type ids, sorted); ``note_served(rows)`` (a served embedding's
rows: their ``nbytes``, and :func:`refresh_halo` at the epochs' starts).

Example:
    >>> embed_layer = DistEmbedLayer(device, g, args.n_hidden, sparse_emb=True, dgl_sparse_emb=True)  # doctest: +SKIP
    >>> loader.serve(embed_layer)   # its feature reads and DistEmbeddings: this machine memory  # doctest: +SKIP
"""

from __future__ import annotations

import torch
from dgl.distributed import DistEmbedding, DistGraph, DistTensor
from torch import Tensor, nn


def refresh_halo(served, epoch: int, every: int) -> int:
    """At the start of epoch ``epoch``, when due (every ``every`` epochs from epoch ``every`` on; 0: never): the
    kept halo's rows of every served embedding read again from their owners, after a barrier over the default
    process group (every machine calls it at the same point: its last step applied everywhere). The bytes read."""
    if not served or every <= 0 or epoch <= 0 or epoch % every:
        return 0
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
    return sum(rows.refresh() for rows in served)


def serve(obj, source):
    """Serve the reads ``obj`` makes from ``source`` (a loader); see the module docstring.

    Args:
        obj: a module of the script's (walked: every submodule's attributes), a ``DistGraph`` (a
            :class:`ServedGraph` of it is returned) or a ``DistEmbedding`` (converted in place).
        source: the loader (the row source).

    Returns:
        ``obj`` (changed in place), or the :class:`ServedGraph` of a ``DistGraph``.

    Raises:
        TypeError: ``obj`` is none of these, or a module holding nothing to serve.
    """
    if isinstance(obj, DistGraph):
        return ServedGraph(obj, source)
    if isinstance(obj, DistEmbedding):
        _serve_embedding(obj, source)
        return obj
    if not isinstance(obj, nn.Module):
        raise TypeError(
            f"loader.serve takes a module of the script's, a DistGraph or a DistEmbedding, not {type(obj).__name__}"
        )
    found = 0
    for m in obj.modules():
        for name, value in list(vars(m).items()):
            if name.startswith("_"):  # nn.Module's own tables (parameters, submodules, hooks)
                continue
            new, n = _served(value, source)
            found += n
            if new is not value:
                setattr(m, name, new)
    if not found:
        raise TypeError(
            f"{type(obj).__name__} holds no DistGraph, DistTensor or DistEmbedding for the loader to "
            "serve; pass the module that reads them (e.g. the embedding layer), or read the rows with "
            "loader.features(input_nodes)"
        )
    return obj


def _served(value, source) -> tuple[object, int]:
    """(what ``value`` becomes, how many things were served in it)."""
    if isinstance(value, (ServedGraph, ServedRows, ServedEmbedding)):
        return value, 1
    if isinstance(value, DistGraph):
        return ServedGraph(value, source), 1
    if isinstance(value, DistEmbedding):
        _serve_embedding(value, source)
        return value, 1
    if isinstance(value, DistTensor):
        ntype = _node_type(value)
        if ntype is not None and source.serves(ntype, value.name):
            return ServedRows(value, source, ntype), 1
        return value, 0
    if isinstance(value, dict):
        n = 0
        for k, v in list(value.items()):
            value[k], m = _served(v, source)
            n += m
        return value, n
    if isinstance(value, list):
        n = 0
        for i, v in enumerate(value):
            value[i], m = _served(v, source)
            n += m
        return value, n
    return value, 0


def _node_type(t: DistTensor) -> str | None:
    policy = t.part_policy
    return policy.type_name if policy is not None and policy.policy_str.startswith("node") else None


class ServedRows:
    """A node tensor read as ``x[ids]``: during the loader's epochs the rows come from this machine's memory
    (fp32; the loader's first-hop virtual ids give their aggregates), outside them from the ``DistTensor``.

    Everything else (``shape``, ``dtype``, ``name``, ``len``, writes) is the ``DistTensor``'s.
    """

    def __init__(self, tensor: DistTensor, source, ntype: str):
        self._tensor, self._source, self._ntype = tensor, source, ntype

    def __getitem__(self, idx):
        if not self._source.in_epoch:
            return self._tensor[idx]
        return self._source.rows(self._ntype, torch.as_tensor(idx))

    def __setitem__(self, idx, value):
        self._tensor[idx] = value

    def __len__(self) -> int:
        return len(self._tensor)

    def __getattr__(self, name):
        return getattr(self._tensor, name)

    def __repr__(self) -> str:
        return f"ServedRows({self._tensor.name!r} of {self._ntype}, served by {type(self._source).__name__})"


class _ServedData:
    """``g.nodes[t].data`` / ``g.ndata``: the loader's feature key served, every other key DGL's own."""

    def __init__(self, view, source, ntype: str):
        self._view, self._source, self._ntype = view, source, ntype

    def __getitem__(self, key):
        value = self._view[key]
        return ServedRows(value, self._source, self._ntype) if self._source.serves(self._ntype, key) else value

    def __setitem__(self, key, value):
        self._view[key] = value

    def __contains__(self, key) -> bool:
        return key in self._view

    def __iter__(self):
        return iter(self._view)

    def __len__(self) -> int:
        return len(self._view)

    def keys(self):
        return self._view.keys()

    def items(self):
        return [(k, self[k]) for k in self._view]

    def values(self):
        return [self[k] for k in self._view]


class _ServedNodeSpace:
    def __init__(self, space, source, ntype: str):
        self._space, self._source, self._ntype = space, source, ntype

    @property
    def data(self) -> _ServedData:
        return _ServedData(self._space.data, self._source, self._ntype)

    def __getattr__(self, name):
        return getattr(self._space, name)


class _ServedNodes:
    def __init__(self, g: DistGraph, source):
        self._g, self._source = g, source

    def __getitem__(self, ntype: str) -> _ServedNodeSpace:
        return _ServedNodeSpace(self._g.nodes[ntype], self._source, ntype)

    def __call__(self, *args, **kwargs):
        return self._g.nodes(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._g.nodes, name)


class ServedGraph:
    """A ``DistGraph`` whose node tensors of the loader's feature key are :class:`ServedRows`
    (``g.ndata[key]``, ``g.nodes[t].data[key]``); everything else is the ``DistGraph``'s own.

    Made by ``loader.serve(g)``, or by ``loader.serve(module)`` for a module that keeps the graph
    (``self.g``). Pass the ``DistGraph`` itself, not this view, to DGL's own functions (loaders,
    ``node_split``).
    """

    def __init__(self, g: DistGraph, source):
        self._g, self._source = g, source

    @property
    def ndata(self):
        if len(self._g.ntypes) != 1:
            return self._g.ndata
        return _ServedData(self._g.ndata, self._source, self._g.ntypes[0])

    @property
    def nodes(self) -> _ServedNodes:
        return _ServedNodes(self._g, self._source)

    @property
    def dist_graph(self) -> DistGraph:
        """The ``DistGraph`` served."""
        return self._g

    def __getattr__(self, name):
        return getattr(self._g, name)


class ServedEmbedding(DistEmbedding):
    """A script's ``DistEmbedding`` whose reads during the loader's epochs come from this machine's memory.

    Own rows come from this machine's shard of it (its server's shared memory) and are traced, so that DGL's
    ``SparseAdam`` updates them there; the kept halo's rows are their owners' initial rows, read once, frozen
    (no gradient). Outside the loader's epochs it is the ``DistEmbedding`` it was. Made in place by
    ``loader.serve``; every attribute (``name``, ``num_embeddings``, ``embedding_dim``, ``weight``, ...) is the
    ``DistEmbedding``'s.
    """

    def __call__(self, idx, device=torch.device("cpu")):
        rows = self._grappa_rows
        if not rows.source.in_epoch:
            return super().__call__(idx, device)
        return rows.read(self, torch.as_tensor(idx), device)


class _EmbeddingRows:
    """What a :class:`ServedEmbedding` reads during the epochs: its shard, its own range, the frozen halo rows."""

    def __init__(self, emb: DistEmbedding, source, ntype: str):
        self.source, self.ntype = source, ntype
        self.first, self.n = source.own_range(ntype)
        self.shard = emb.weight.local_partition  # this machine's rows, in its server's shared memory
        if int(self.shard.shape[0]) != self.n:
            raise RuntimeError(
                f"DistEmbedding {emb.name!r} holds {int(self.shard.shape[0])} rows on this machine, "
                f"and the machine owns {self.n} nodes of type {ntype}: the embedding does not follow "
                "the graph's node partition"
            )
        self.halo_ids = source.halo_ids(ntype)
        self.weight, self.dim = emb.weight, emb.embedding_dim
        # the owners' rows as they are now (initial: serve is called before training)
        self.halo_rows = self._read()

    def _read(self) -> Tensor:
        return self.weight[self.halo_ids].float() if self.halo_ids.numel() else torch.zeros((0, self.dim))

    def refresh(self) -> int:
        """Read the kept halo's rows again where their owners train them (through the KVStore); the bytes read."""
        self.halo_rows = self._read()
        return self.nbytes

    @property
    def nbytes(self) -> int:
        return int(self.halo_rows.numel()) * 4

    def read(self, emb: DistEmbedding, idx: Tensor, device) -> Tensor:
        ids = idx.to(torch.int64).cpu()
        own = (ids >= self.first) & (ids < self.first + self.n)
        at_own = own.nonzero(as_tuple=True)[0]
        out = torch.zeros((ids.numel(), emb.embedding_dim), dtype=torch.float32)
        if at_own.numel() < ids.numel():
            other = ids[~own]
            pos = torch.searchsorted(self.halo_ids, other)
            if not self.halo_ids.numel() or not torch.equal(
                self.halo_ids[pos.clamp(max=self.halo_ids.numel() - 1)], other
            ):
                raise RuntimeError(
                    f"a training batch read DistEmbedding {emb.name!r} rows of nodes this machine does "
                    "not hold; during the loader's epochs read only the rows of its batches"
                )
            out[~own] = self.halo_rows[pos]
        mine = self.shard.index_select(0, ids[at_own] - self.first).to(device)
        if torch.is_grad_enabled():
            # DGL's own trace: its SparseAdam reads the rows' gradients from here at step()
            mine.requires_grad_()
            emb._trace.append((ids[at_own].to(device), mine))
        return out.to(device).index_put((at_own.to(device),), mine)


def _serve_embedding(emb: DistEmbedding, source) -> None:
    if isinstance(emb, ServedEmbedding):
        return
    ntype = _node_type(emb.weight)
    if ntype is None:
        raise TypeError(
            f"DistEmbedding {emb.name!r} is not partitioned like the graph's nodes; the drop-in serves "
            "node embeddings (num_embeddings = the number of nodes of a type)"
        )
    rows = _EmbeddingRows(emb, source, ntype)
    source.note_served(rows)
    emb.__class__ = ServedEmbedding  # in place: the script's optimizer and every reference see it
    emb._grappa_rows = rows
