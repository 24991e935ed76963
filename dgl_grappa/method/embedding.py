"""Learnable node embeddings, the Grappa way: a worker holds and trains the rows of its own nodes.

For a graph without features (``model.embed``), every node's input row is a trainable vector.
DistDGL keeps them in one ``DistEmbedding`` sharded over the KVStore: every step pulls the
rows of the batch's input nodes from their owners and the sparse optimizer sends each row's
gradient back to its owner. Here every row lives with the worker that owns its node:

* **own rows** (the part's inner nodes): a ``torch.nn.Embedding(sparse=True)`` updated by
  PyTorch's ``SparseAdam`` (:meth:`LocalEmbedding.optimizer`), on this worker only. A batch
  is sampled inside the worker's part, so every row it asks for is here: embeddings cost no
  network byte, and the gradient all-reduce carries the dense model weights alone (the
  embedding is not part of the DDP module).
* **halo rows** (``train.halo: keep``): a halo node's row is its owner's *initial* row, a
  frozen copy that is never updated (stale); its owner trains the real one. It costs no byte
  either: the initial row is a pure function of (seed, global id) (:func:`initial_rows`), so
  the worker computes it. With ``train.halo: drop`` the halo is not an input at all. On a
  heterogeneous graph (``model.embed_halo_sync``) a worker trains its halo copies too
  (``train_halo``), and :class:`HaloSync` averages every row over the workers holding it every
  few epochs: the one exchange of rows, counted as embedding bytes.
* **memory**: the own rows and SparseAdam's two moment tables (3 x own rows x dim x 4 bytes)
  plus the halo rows (:meth:`LocalEmbedding.memory`; with ``train_halo`` their two moment tables
  too); no feature table is loaded.
* **evaluation**: the whole graph needs every row once per evaluation: :func:`gather_rows`
  hands every worker's own rows to rank 0 (a collective after the epoch's window, like
  DistDGL's evaluation pulls).
* **checkpoints**: :meth:`LocalEmbedding.shard_state` (this worker's rows and its sparse
  optimizer's state) goes into the run's checkpoint, and :meth:`LocalEmbedding.load_shard`
  restores it bit for bit.

Example:
    >>> emb = LocalEmbedding(torch.tensor([4, 5, 9]), num_inner=2, dim=8, seed=0)   # rows of nodes 4, 5; halo 9
    >>> opt = emb.optimizer(lr=0.01)
    >>> emb(torch.tensor([0, 2])).sum().backward(); opt.step()
    >>> torch.equal(emb(torch.tensor([2])), initial_rows(torch.tensor([9]), 8, 0))   # the halo row stays frozen
    True
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
from torch import Tensor, nn

from ..config import ConfigError
from ..partition.layout import to_original_order

_M32 = (1 << 32) - 1


def _mul32(h: Tensor, c: int) -> Tensor:
    """(h * c) mod 2^32 for h in [0, 2^32), in int64 without overflow (two 16-bit halves of c)."""
    lo = (h * (c & 0xFFFF)) & _M32
    hi = ((h * (c >> 16)) & 0xFFFF) << 16
    return (lo + hi) & _M32


def _mix32(h: Tensor) -> Tensor:
    """MurmurHash3's 32-bit finaliser (a bijection of [0, 2^32) that spreads every input bit)."""
    h = h ^ (h >> 16)
    h = _mul32(h, 0x85EBCA6B)
    h = h ^ (h >> 13)
    h = _mul32(h, 0xC2B2AE35)
    return h ^ (h >> 16)


def initial_rows(global_ids: Tensor, dim: int, seed: int = 0) -> Tensor:
    """The initial embedding rows of nodes ``global_ids``: uniform in [-1, 1), as DGL's example draws them.

    A pure function of (seed, global id, column), so every worker computes any node's initial
    row without asking its owner (a halo row costs no byte), and both systems start alike.

    Args:
        global_ids: the nodes' global ids (the partitioning's).
        dim: row width.
        seed: ``train.seed``.

    Returns:
        float32 [len(global_ids), dim].

    Example:
        >>> torch.equal(initial_rows(torch.tensor([3, 7]), 4)[1], initial_rows(torch.tensor([7]), 4)[0])
        True
    """
    g = global_ids.to(torch.int64).reshape(-1, 1)
    key = _mix32((g & _M32) ^ _mix32(torch.tensor(seed & _M32, dtype=torch.int64)))
    key = _mix32(key ^ ((g >> 32) & _M32))
    col = _mix32(torch.arange(dim, dtype=torch.int64) * 0x9E3779B9 & _M32)
    bits = _mix32(key ^ col) >> 8  # 24 bits: exact in float32
    return (bits.to(torch.float32) * (2.0 / (1 << 24)) - 1.0).contiguous()


class NoOptimizer:
    """The optimizer of learnable rows where there are none: every call does nothing."""

    def zero_grad(self, set_to_none: bool = True) -> None:
        pass

    def step(self) -> None:
        pass


class LearnableRows:
    """What the trainers ask of a worker's learnable input rows, beside the model (a mixin of
    :class:`LocalEmbedding` and the heterogeneous graph's per-type rows; :class:`NoEmbedding` where there are
    none). A subclass has ``take_bytes()``, ``gather_rows(part_config)``, ``memory()``, ``num_inner`` and
    ``num_halo``."""

    learnable = True
    """Whether there are rows at all (:class:`NoEmbedding`: False)."""

    def record_bytes(self) -> dict:
        """An epoch record's fields of the rows served since the last call: ``embed_bytes`` (received over the
        network: a halo's syncs, else 0) and ``local_embed_bytes`` (served from this worker's memory)."""
        remote, local = self.take_bytes()
        return {"embed_bytes": remote, "local_embed_bytes": local}

    def eval_inputs(self, part_config):
        """The evaluation's input rows: a callable every rank calls when an evaluation is due (a collective) that
        returns every worker's own rows on rank 0, in the graph's node order."""
        return lambda: self.gather_rows(part_config)

    def describe(self, part: int) -> list[str]:
        """Log lines about the rows this worker holds."""
        sync = getattr(self, "sync_every", 0)
        halo = (
            f"copies trained here, synced with their owners every {sync} epoch{'s' if sync > 1 else ''} "
            "(model.embed_halo_sync)"
            if sync
            else "their initial rows, not trained here: 0 bytes on the network"
        )
        return [
            f"part {part}: embedding rows of {self.num_inner} own nodes (trained here, sparse Adam) and "
            f"{self.num_halo} halo nodes ({halo}): {self.memory()['embed'] / 1e6:.2f} MB with the optimizer's "
            "moments"
        ]


class NoEmbedding:
    """A worker's learnable input rows where it has none: the input rows pass through as they are, and nothing is
    trained, counted, synced, checkpointed or gathered, so that the trainers call it as any other.

    Example:
        >>> rows = NoEmbedding()
        >>> x = torch.ones(2, 3)
        >>> rows(x) is x, rows.record_bytes(), rows.eval_inputs("part.json"), rows.shard_state(None)
        (True, {}, None, None)
    """

    learnable = False
    num_inner = num_halo = 0

    def __call__(self, x):
        return x

    def optimizer(self, lr: float) -> NoOptimizer:
        return NoOptimizer()

    def sync_halo(self, epoch: int) -> int:
        return 0

    def record_bytes(self) -> dict:
        return {}

    def eval_inputs(self, part_config):
        return None

    def describe(self, part: int) -> list[str]:
        return []

    def shard_state(self, optimizer) -> dict | None:
        return None

    def load_shard(self, state: dict, optimizer) -> None:
        pass


class LocalEmbedding(LearnableRows, nn.Module):
    """One worker's learnable input rows: its own nodes' (trained) and its halo's (frozen initial rows, or with
    ``train_halo`` copies trained here too).

    Called with local ids (own nodes ``0 .. num_inner - 1``, then the halo), it returns their
    rows; only own rows carry a (sparse) gradient, and with ``train_halo`` the halo's copies.
    See the module docstring for the rules.

    Args:
        global_ids: global id of every local row, own nodes first, then the halo.
        num_inner: how many of them are own nodes.
        dim: row width (``model.embed_dim``).
        seed: seed of :func:`initial_rows` (``train.seed``).
        train_halo: the halo's copies are trained too, by this worker's gradients only (:class:`HaloSync`
            averages them with their owners' rows).

    Attributes:
        own: the trainable rows (``nn.Embedding(num_inner, dim, sparse=True)``).
        halo: with ``train_halo``, the halo's trained copies (an ``nn.Embedding`` too), else None.
        halo_rows: the halo's rows (frozen: a buffer, not saved, it is recomputed; else ``halo``'s weight).
        local_bytes: bytes of rows served since the last :meth:`take_bytes` (all local).

    Example:
        >>> emb = LocalEmbedding(lp.global_ids, lp.num_inner, 64, seed=0)      # doctest: +SKIP
        >>> opt = emb.optimizer(lr=0.01)                                       # doctest: +SKIP
        >>> out = model(blocks, emb(input_nodes)); loss.backward(); opt.step() # doctest: +SKIP
    """

    def __init__(self, global_ids: Tensor, num_inner: int, dim: int, seed: int = 0, train_halo: bool = False):
        super().__init__()
        gids = global_ids.to(torch.int64)
        self.num_inner, self.dim = int(num_inner), int(dim)
        self.register_buffer("global_ids", gids.clone(), persistent=False)
        # from_pretrained draws nothing from torch's RNG (nn.Embedding's own init would, and by
        # a different amount on every worker).
        self.own = nn.Embedding.from_pretrained(
            initial_rows(gids[: self.num_inner], self.dim, seed), freeze=False, sparse=True
        )
        halo = initial_rows(gids[self.num_inner :], self.dim, seed)
        # train_halo: the halo's copies are trained here too, by this worker's gradients only (its owner's row is
        # what evaluation reads)
        self.halo = nn.Embedding.from_pretrained(halo, freeze=False, sparse=True) if train_halo else None
        if self.halo is None:
            self.register_buffer("_halo_frozen", halo, persistent=False)
        self.local_bytes = 0

    @property
    def halo_rows(self) -> Tensor:
        """The halo's rows (frozen, or with ``train_halo`` this worker's trained copies)."""
        return self._halo_frozen if self.halo is None else self.halo.weight

    def forward(self, ids: Tensor) -> Tensor:
        """Rows of local ids ``ids`` (own rows differentiable; halo rows constant, or with ``train_halo``
        differentiable too)."""
        ids = ids.to(torch.int64)
        self.local_bytes += ids.numel() * self.dim * 4
        inner = ids < self.num_inner
        if bool(inner.all()):
            return self.own(ids)
        if ids.numel() and int(ids.max()) >= self.num_inner + self.halo_rows.shape[0]:
            raise RuntimeError("a step asked for the row of a node outside this worker's local graph")
        at_own, at_halo = inner.nonzero(as_tuple=True)[0], (~inner).nonzero(as_tuple=True)[0]
        out = torch.zeros((ids.numel(), self.dim), dtype=torch.float32)
        # out of place: the own rows' gradient flows back through index_put, only to the rows asked for
        out = out.index_put((at_own,), self.own(ids[at_own]))
        halo = (
            self.halo(ids[at_halo] - self.num_inner)
            if self.halo is not None
            else self.halo_rows.index_select(0, ids[at_halo] - self.num_inner)
        )
        return out.index_put((at_halo,), halo)

    def optimizer(self, lr: float) -> torch.optim.SparseAdam:
        """The sparse optimizer of the own rows: PyTorch's ``SparseAdam`` (lazy Adam: only rows with a
        gradient move), the local counterpart of ``dgl.distributed.optim.SparseAdam``.

        The one difference: PyTorch's bias correction counts the optimizer's steps, DGL's each
        row's own updates; they agree for a row updated at every step, and differ for rows
        that skip steps. (On one part, where the two systems train the same rows, their
        accuracy curves agree: docs/method.md.)
        """
        return torch.optim.SparseAdam(
            list(self.own.parameters()) + ([] if self.halo is None else list(self.halo.parameters())), lr=lr
        )

    def take_bytes(self) -> tuple[int, int]:
        """(remote, local) bytes of rows served since the last call: remote is 0, there is no remote path."""
        local, self.local_bytes = self.local_bytes, 0
        return 0, local

    def memory(self) -> dict:
        """Bytes held: ``embed_inner`` (own rows), ``embed_optimizer`` (SparseAdam's two moment tables of the
        trained rows, allocated at its first step: the own rows, with ``train_halo`` the halo's too),
        ``embed_halo`` (halo rows) and their ``embed`` total."""
        own = self.num_inner * self.dim * 4
        halo = int(self.halo_rows.numel() * self.halo_rows.element_size())
        moments = 2 * own + (2 * halo if self.halo is not None else 0)
        return {"embed_inner": own, "embed_optimizer": moments, "embed_halo": halo, "embed": own + moments + halo}

    @property
    def num_halo(self) -> int:
        """Halo rows held."""
        return int(self.halo_rows.shape[0])

    def gather_rows(self, part_config) -> Tensor | None:
        """Every worker's own rows on rank 0, in the graph's node order (a collective: the evaluation's input);
        None on the other ranks."""
        table = gather_rows(self.global_ids[: self.num_inner], self.own.weight)
        return to_original_order(table, part_config) if table is not None else None

    def shard_state(self, optimizer: torch.optim.Optimizer) -> dict:
        """This worker's part of a checkpoint: its own rows (with their global ids) and its optimizer's state."""
        # copies: an optimizer's state_dict() holds its live tensors, which its next step changes in place
        return {
            "global_ids": self.global_ids[: self.num_inner].clone(),
            "weight": self.own.weight.detach().clone(),
            "optimizer": copy.deepcopy(optimizer.state_dict()),
        }

    def load_shard(self, state: dict, optimizer: torch.optim.Optimizer) -> None:
        """Restore what :meth:`shard_state` returned, bit for bit.

        Raises:
            ConfigError: the shard belongs to other nodes (another partitioning).
        """
        if not torch.equal(state["global_ids"], self.global_ids[: self.num_inner]):
            raise ConfigError(
                "the checkpoint's embedding rows belong to other nodes than this worker's part (another "
                "partitioning); resume on the partitioning it was written with, or start afresh"
            )
        with torch.no_grad():
            self.own.weight.copy_(state["weight"])
        optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))  # its tensors would be shared, not copied


def gather_rows(global_ids: Tensor, rows: Tensor, dst: int = 0) -> Tensor | None:
    """Every worker's own rows in one table on rank ``dst`` (a collective): the evaluation's input.

    Args:
        global_ids: global ids of this worker's own rows (every node owned by exactly one worker).
        rows: their rows [len(global_ids), dim].
        dst: the rank that gets the table.

    Returns:
        On ``dst``: float32 [num_nodes, dim], row i for global id i; None elsewhere.

    Raises:
        RuntimeError: the workers' ids do not cover every node exactly once.
    """
    mine = (global_ids.to(torch.int64).cpu(), rows.detach().float().cpu())
    if not (dist.is_available() and dist.is_initialized()):
        parts = [mine]
    else:
        parts = [None] * dist.get_world_size() if dist.get_rank() == dst else None
        dist.gather_object(mine, parts, dst=dst)
        if dist.get_rank() != dst:
            return None
    n = sum(int(g.numel()) for g, _ in parts)
    out = torch.zeros((n, mine[1].shape[1]), dtype=torch.float32)
    seen = torch.zeros(n, dtype=torch.bool)
    for g, r in parts:
        if g.numel() and (int(g.min()) < 0 or int(g.max()) >= n):
            raise RuntimeError("the workers' embedding rows do not cover the graph's nodes exactly once")
        out[g] = r
        seen[g] = True
    if not bool(seen.all()):
        raise RuntimeError("the workers' embedding rows do not cover the graph's nodes exactly once")
    return out


class HaloSync:
    """Averages the learnable rows that several workers hold: one exchange each way per sync.

    With ``train_halo`` a :class:`LocalEmbedding` trains its halo's copies too, with this worker's
    own gradients, while each node's owner trains the real row with its own. A sync (a collective
    over the default process group: every worker calls it at the same point, between steps) makes
    them one row again:

    1. every worker sends each halo copy's change since the last sync to the copy's owner;
    2. each owner moves its row, from where it was at the last sync, by the mean change of the
       workers that changed it (its own change included; an unchanged copy does not count);
    3. each owner sends the resulting rows back, and every worker's halo copies become them.

    A row that only its owner trained stays as it is. The first sync also agrees once on who
    owns which part (``all_gather``) and on which rows each worker holds as halo (their global
    ids, 16 bytes a row: :attr:`one_time_bytes`, the ids this worker received). A call returns
    the bytes this worker received: the changes of its own rows that others hold and its halo's
    rows, ``dim x 4`` bytes each (the first call plus the ids); :attr:`bytes` sums them. Rows
    keep their optimizer's state (the moments of the copies and of the own rows).

    Args:
        tables: ``{name: (embedding, owner)}``, the same names on every worker; ``owner`` is the
            owning part of every local row of ``embedding`` (own rows first, then the halo's).
        part: this worker's part (its own rows are that part's nodes).

    Example:
        >>> sync = HaloSync({"author": (emb, lp.owner["author"])}, part=lp.part_id)   # doctest: +SKIP
        >>> sync()            # on every worker, e.g. at the start of an epoch               # doctest: +SKIP
    """

    def __init__(self, tables: dict[str, tuple[LocalEmbedding, Tensor]], part: int):
        self.tables = [tables[k] for k in sorted(tables)]
        self.part = int(part)
        dims = {e.dim for e, _ in self.tables}
        if len(dims) > 1:
            raise ValueError(f"the synced embeddings have rows of different widths {sorted(dims)}; give them one")
        self.dim = dims.pop() if dims else 0
        self.bytes = self.one_time_bytes = 0
        self._plan = None
        self._base = self._rows()  # every row as it was at the last sync (here: the initial rows)

    def _rows(self) -> list[tuple[Tensor, Tensor]]:
        return [(e.own.weight.detach().clone(), e.halo_rows.detach().clone()) for e, _ in self.tables]

    @property
    def nbytes(self) -> int:
        """Bytes held: the rows at the last sync (own and halo), which the changes are taken from."""
        return sum(int(a.numel() + b.numel()) * 4 for a, b in self._base)

    def state_dict(self) -> dict:
        """The rows at the last sync (a checkpoint's; without them a resumed run's first sync would differ)."""
        return {"base": [(a.clone(), b.clone()) for a, b in self._base]}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`'s rows.

        Raises:
            ValueError: they are not of these tables' shapes (another partitioning).
        """
        base = state["base"]
        if [(a.shape, b.shape) for a, b in base] != [(a.shape, b.shape) for a, b in self._base]:
            raise ValueError("the checkpoint's synced rows are of other shapes than this worker's tables")
        self._base = [(a.clone(), b.clone()) for a, b in base]

    def _setup(self, world: int) -> None:
        """Who holds which own rows of this worker as halo, and where each worker's halo rows come from."""
        parts = [None] * world
        dist.all_gather_object(parts, self.part)
        if len(set(parts)) != world:
            raise RuntimeError(f"halo rows can be synced only with one worker per part; the ranks hold parts {parts}")
        rank_of = torch.full((max(parts) + 1,), -1, dtype=torch.int64)
        rank_of[torch.tensor(parts)] = torch.arange(world)
        req = []  # per table: (owner rank, table index, global id, halo row) of every halo row
        for k, (emb, owner) in enumerate(self.tables):
            halo = torch.arange(emb.halo_rows.shape[0])
            who = rank_of[owner.to(torch.int64)[emb.num_inner :]]
            if bool((who < 0).any()):
                raise RuntimeError("a halo row's owner is a part no worker holds")
            req.append(torch.stack([who, torch.full_like(halo, k), emb.global_ids[emb.num_inner :], halo], 1))
        req = torch.cat(req) if req else torch.zeros((0, 4), dtype=torch.int64)
        req = req[torch.argsort(req[:, 0], stable=True)]
        want = torch.bincount(req[:, 0], minlength=world)
        asked = torch.empty_like(want)
        dist.all_to_all_single(asked, want)
        serve = torch.empty((int(asked.sum()), 2), dtype=torch.int64)
        dist.all_to_all_single(
            serve, req[:, 1:3].contiguous(), output_split_sizes=asked.tolist(), input_split_sizes=want.tolist()
        )
        rows = torch.empty(serve.shape[0], dtype=torch.int64)
        for k, (emb, _) in enumerate(self.tables):  # the requested global ids -> this worker's own rows
            at = (serve[:, 0] == k).nonzero(as_tuple=True)[0]
            own = emb.global_ids[: emb.num_inner]
            order = torch.argsort(own)
            pos = torch.searchsorted(own[order], serve[at, 1]).clamp(max=max(own.numel() - 1, 0))
            if at.numel() and (own.numel() == 0 or not torch.equal(own[order][pos], serve[at, 1])):
                raise RuntimeError(
                    "a worker asked for the row of a node this worker does not own; the workers hold "
                    "different partitionings"
                )
            rows[at] = order[pos]
        self._plan = {
            "want": want.tolist(),
            "asked": asked.tolist(),
            "serve_table": serve[:, 0],
            "serve_row": rows,
            "recv_table": req[:, 1],
            "recv_row": req[:, 3],
        }
        self.one_time_bytes = int(asked.numel() * asked.element_size() + serve.numel() * serve.element_size())

    def _per_table(self, key: str):
        """(table index, embedding, positions in the exchange, rows) for ``serve`` (own rows) or ``recv`` (halo)."""
        p = self._plan
        for k, (emb, _) in enumerate(self.tables):
            at = (p[f"{key}_table"] == k).nonzero(as_tuple=True)[0]
            yield k, emb, at, p[f"{key}_row"][at]

    @torch.no_grad()
    def __call__(self) -> int:
        """Average every row held by several workers (a collective); the bytes this worker received."""
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return 0  # one worker: there is no halo
        once = 0
        if self._plan is None:
            self._setup(dist.get_world_size())
            once = self.one_time_bytes
        p = self._plan
        # 1. each halo copy's change since the last sync, to its owner
        change = torch.empty((p["recv_row"].numel(), self.dim), dtype=torch.float32)
        for k, emb, at, rows in self._per_table("recv"):
            change[at] = (emb.halo_rows - self._base[k][1]).index_select(0, rows)
        theirs = torch.empty((p["serve_row"].numel(), self.dim), dtype=torch.float32)
        dist.all_to_all_single(theirs, change, output_split_sizes=p["asked"], input_split_sizes=p["want"])
        # 2. the owner's row moves by the mean change of the workers that changed it
        send = torch.empty_like(theirs)
        for k, emb, at, rows in self._per_table("serve"):
            base = self._base[k][0]
            total = emb.own.weight - base
            count = (total != 0).any(1).to(torch.float32)
            total.index_add_(0, rows, theirs[at])
            count.index_add_(0, rows, (theirs[at] != 0).any(1).to(torch.float32))
            emb.own.weight.copy_(base + total / count.clamp(min=1.0).unsqueeze(1))
            send[at] = emb.own.weight.index_select(0, rows)
        # 3. the rows, back to every worker that holds them as halo
        got = torch.empty_like(change)
        dist.all_to_all_single(got, send, output_split_sizes=p["want"], input_split_sizes=p["asked"])
        for k, emb, at, rows in self._per_table("recv"):
            emb.halo_rows.index_copy_(0, rows, got[at])
        self._base = self._rows()
        n = int(theirs.numel() * theirs.element_size() + got.numel() * got.element_size()) + once
        self.bytes += n
        return n
