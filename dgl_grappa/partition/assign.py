"""Node assignments: which part each node goes to, and what a cut costs.

DGL's ``partition_graph`` writes every partitioning. The assignment it writes is DGL's METIS, a seeded uniform
draw (``random``, :func:`random_assignment`) or the restreaming LDG of :func:`ldg_assignment` (the package's one
LDG, used by ``partition``, ``bigpart`` and the repartition schedule), the last two written through DGL's own code
by :func:`forced_assignment`, so that the same graph, method and seed give the same parts in every process. DGL's
METIS does not: measured on one 5000-node graph, 3 different partitionings in 4 processes, also when METIS is
given a canonically ordered symmetric graph directly.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import time

import dgl
import dgl.distributed.partition as dgl_part
import numpy as np
import torch

from ..config import ConfigError, PartitionConfig
from .layout import GRAPH_NAME

log = logging.getLogger("dgl_grappa")

METHODS = ("metis", "random", "ldg")
"""partition.method values: DGL's METIS and random, and the restreaming LDG of :func:`ldg_assignment`."""


def edge_cut_stats(src: np.ndarray, dst: np.ndarray, assignment: np.ndarray, num_parts: int) -> dict:
    """Edge-cut fraction and per-part halo share of a node assignment.

    Args:
        src, dst: edges of the full graph (dst aggregates from src).
        assignment: part id of every node.
        num_parts: number of parts.

    Returns:
        ``{"edge_cut": float, "inner_nodes": [...], "halo_nodes": [...], "halo_share": [...]}``
        where the halo of part p are the distinct sources outside p of edges into p, and
        halo_share = halo / inner.
    """
    ps, pd = assignment[src], assignment[dst]
    cut = ps != pd
    n = assignment.shape[0]
    inner = np.bincount(assignment, minlength=num_parts)
    # Distinct (destination part, source node) pairs of cut edges = halo nodes of each part.
    keys = np.unique(pd[cut].astype(np.int64) * n + src[cut])
    halo = np.bincount(keys // n, minlength=num_parts)
    return {
        "edge_cut": float(cut.mean()) if cut.size else 0.0,
        "inner_nodes": inner.tolist(),
        "halo_nodes": halo.tolist(),
        "halo_share": [float(h) / max(int(i), 1) for h, i in zip(halo, inner)],
    }


def balance_stats(assignment: np.ndarray, num_parts: int, train_mask: np.ndarray | None = None) -> dict:
    """Node balance (largest part / mean part) and, with ``train_mask``, train-node balance."""
    sizes = np.bincount(assignment, minlength=num_parts)
    out = {"node_balance": float(sizes.max() / max(sizes.mean(), 1e-12))}
    if train_mask is not None:
        t = np.bincount(assignment[train_mask], minlength=num_parts)
        out["train_balance"] = float(t.max() / max(t.mean(), 1e-12))
        out["train_nodes"] = t.tolist()
    return out


def undirected_csr(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the neighbourhoods of a directed edge list taken both ways (in- and out-neighbours).

    Returns:
        ``(indptr int64 [N+1], indices [2E])``, int32 indices when N < 2**31.
    """
    a = np.concatenate((dst, src)).astype(np.int64, copy=False)
    b = np.concatenate((src, dst))
    order = np.argsort(a, kind="stable")
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(a, minlength=num_nodes), out=indptr[1:])
    return indptr, b[order].astype(np.int32 if num_nodes < 2**31 else np.int64)


LDG_STREAM = 0x1D6
"""RNG stream of :func:`ldg_assignment` (``default_rng([seed, LDG_STREAM])``): a bare
``default_rng(seed)`` would repeat the synthetic generator's own permutation for the same seed."""


def ldg_assignment(
    indptr: np.ndarray,
    indices: np.ndarray,
    num_parts: int,
    *,
    passes: int = 3,
    slack: float = 0.05,
    seed: int = 0,
    train_mask: np.ndarray | None = None,
    block: int | None = None,
) -> np.ndarray:
    """Restreaming linear deterministic greedy (LDG), vectorised over blocks of nodes: the one LDG of the package.

    LDG (Stanton & Kliot, KDD 2012) streams the nodes in a seeded random order and puts node
    v into ``argmax_p |N(v) in P_p| * (1 - |P_p| / C)`` with the hard capacity
    ``C = (1 + slack) N / P`` (full parts are closed). Restreaming (Nishimura & Ugander, KDD
    2013): ``passes`` passes, each in a new order; a node's neighbours count with their latest
    part (this pass or the previous one), and its own previous placement is taken out of the
    part sizes while it is re-placed. With ``train_mask``, a train node's score is also
    multiplied by ``1 - |train in P_p| / C_train`` under a hard cap ``C_train = (1 + slack)
    N_train / P``, so every worker gets its share of seeds.

    Vectorised: the nodes of a block of ``block`` nodes decide together on the sizes at the
    block's start; parts a block would overfill keep their best-scoring candidates and the
    others choose again among the parts still open, so both caps hold exactly (except in
    pathological cases where no part has room for a node under both caps: it then goes one
    over). Ties (no placed
    neighbour) break at random, weighted towards emptier parts. O(passes x (N + E)).

    Args:
        indptr, indices: CSR of each node's neighbours (for a directed graph, in- and
            out-neighbours: :func:`undirected_csr`).
        num_parts: P.
        passes: streaming passes (>= 1); 3 by default (the research's setting).
        slack: allowed imbalance of nodes and train nodes (0.05 = cap 1.05 x the mean).
        seed: seed of the stream orders and tie-breaks (stream :data:`LDG_STREAM`).
        train_mask: bool [N]; balance train nodes too.
        block: nodes decided together; default ``clamp(slack * N / P / 4, 16, 8192)``, so a
            block is small against the slack of a part.

    Returns:
        int64 [N] part ids in [0, P).

    Example:
        >>> indptr, indices = undirected_csr(np.array([0, 1, 2]), np.array([1, 2, 3]), 4)
        >>> ldg_assignment(indptr, indices, 2, seed=0).shape
        (4,)
    """
    if passes < 1:
        raise ConfigError(f"ldg passes={passes} must be >= 1")
    if slack < 0:
        raise ConfigError(f"ldg slack={slack} must be >= 0")
    n, k = indptr.shape[0] - 1, int(num_parts)
    if k <= 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    rng = np.random.default_rng([int(seed), LDG_STREAM])
    cap = max(math.ceil(n / k), math.floor((1.0 + slack) * n / k))
    tm = None if train_mask is None else np.asarray(train_mask, dtype=bool)
    tcap = 0
    if tm is not None:
        nt = int(tm.sum())
        tcap = max(math.ceil(nt / k), math.floor((1.0 + slack) * nt / k))
    bs = int(block) if block else int(min(8192, max(16, slack * n / k / 4)))
    part = np.full(n, -1, dtype=np.int64)
    size = np.zeros(k, dtype=np.float64)
    tsize = np.zeros(k, dtype=np.float64)
    for _ in range(passes):
        order = rng.permutation(n)
        for i in range(0, n, bs):
            nodes = order[i : i + bs]
            b = nodes.shape[0]
            old = part[nodes]
            placed = old >= 0
            size -= np.bincount(old[placed], minlength=k)
            is_t = tm[nodes] if tm is not None else np.zeros(b, dtype=bool)
            if tm is not None:
                tsize -= np.bincount(old[placed & is_t], minlength=k)
            starts, ends = indptr[nodes], indptr[nodes + 1]
            lens = ends - starts
            row = np.repeat(np.arange(b), lens)
            pos = (
                np.arange(int(lens.sum()), dtype=np.int64)
                - np.repeat(np.cumsum(lens) - lens, lens)
                + np.repeat(starts, lens)
            )
            npart = part[indices[pos]]
            ok = npart >= 0
            counts = np.bincount(row[ok] * k + npart[ok], minlength=b * k).reshape(b, k).astype(np.float64)
            pen = np.clip(1.0 - size / cap, 0.0, None)
            score = (counts + rng.random((b, k)) * 1e-3) * pen
            score[:, size >= cap] = -np.inf
            if tm is not None and is_t.any():
                tpen = np.clip(1.0 - tsize / tcap, 0.0, None)
                st = score[is_t] * tpen
                st[:, tsize >= tcap] = -np.inf
                score[is_t] = st
            choice = _capped_choice(score, size, cap, is_t, tsize, tcap)
            part[nodes] = choice
            size += np.bincount(choice, minlength=k)
            if tm is not None:
                tsize += np.bincount(choice[is_t], minlength=k)
    return part


def _over_cap(choice: np.ndarray, score: np.ndarray, members: np.ndarray, base: np.ndarray, cap: int) -> np.ndarray:
    """Positions (into ``choice``) of the members that overfill their chosen part: the lowest scores beyond the room."""
    idx = np.flatnonzero(members)
    if idx.size == 0:
        return idx
    ch = choice[idx]
    sc = score[idx, ch]
    order = np.lexsort((-sc, ch))
    ch_sorted = ch[order]
    first = np.flatnonzero(np.concatenate(([True], ch_sorted[1:] != ch_sorted[:-1])))
    lengths = np.diff(np.concatenate((first, [ch_sorted.shape[0]])))
    rank = np.arange(ch_sorted.shape[0]) - np.repeat(first, lengths)
    room = np.maximum(cap - base[ch_sorted], 0)
    return idx[order[rank >= room]]


def _capped_choice(
    score: np.ndarray, size: np.ndarray, cap: int, is_t: np.ndarray, tsize: np.ndarray, tcap: int
) -> np.ndarray:
    """Each row's best part such that no part exceeds ``cap`` nodes (``tcap`` train nodes) after the block.

    Every row takes its best part; where a part would overflow, it keeps its best-scoring
    rows and the others (few: a block is small against a part's slack) choose one by one,
    train rows first, the best part that still has room for them.
    """
    n_rows, k = score.shape
    choice = score.argmax(1)
    bad = np.zeros(n_rows, dtype=bool)
    bad[_over_cap(choice, score, np.ones(n_rows, dtype=bool), size, cap)] = True
    if is_t.any():
        bad[_over_cap(choice, score, is_t, tsize, tcap)] = True
    if not bad.any():
        return choice
    ok = ~bad
    room = cap - size - np.bincount(choice[ok], minlength=k)
    troom = tcap - tsize - np.bincount(choice[ok & is_t], minlength=k)
    rows = np.flatnonzero(bad)
    for r in rows[np.argsort(~is_t[rows], kind="stable")]:
        s = score[r].copy()
        full = room <= 0
        if is_t[r]:
            full |= troom <= 0
        s[full] = -np.inf
        if np.isfinite(s).any():
            p = int(s.argmax())
        else:  # no part has room for it (pathological): the emptiest, one over its cap
            p = int(np.argmax(room + (troom if is_t[r] else 0)))
        choice[r] = p
        room[p] -= 1
        if is_t[r]:
            troom[p] -= 1
    return choice


@contextlib.contextmanager
def forced_assignment(assignment: np.ndarray, num_parts: int, slot: str = "metis"):
    """Make ``dgl.distributed.partition_graph(part_method=slot)`` use ``assignment``.

    partition_graph takes only ``metis`` or ``random`` and has no argument for a ready
    assignment; re-implementing its halo construction, id reshuffling and file writing
    would copy DGL. Relabelling nodes cannot make METIS (or DGL's seeded random draw, whose
    part sizes are random) yield an arbitrary assignment either. So, for the duration of
    the call, the module-level name partition_graph calls for ``slot`` (METIS, or the random
    draw: then its json says ``random``, as the partitioning is) is bound to a function that
    returns ``assignment``; everything else is DGL's own code. The function checks its
    arguments, and callers check the written ``assignment.npy`` against ``assignment``
    (:func:`partition` for ``ldg``, ``scheduler.write_layout``), so a DGL version that
    partitions differently fails loudly instead of silently.
    """
    name = {"metis": "metis_partition_assignment", "random": "random_choice"}[slot]
    original = getattr(dgl_part, name)
    calls = []

    def fixed(first, second, *args, **kwargs):
        # METIS is called with (graph, parts, ...), the random draw with (parts, nodes)
        k, n = (second, first.num_nodes()) if slot == "metis" else (first, int(second))
        if k != num_parts or n != assignment.shape[0]:
            raise RuntimeError(
                f"partition_graph asked for {k} parts of {n} nodes; "
                f"the forced assignment has {num_parts} parts of {assignment.shape[0]}"
            )
        calls.append(k)
        return torch.from_numpy(np.ascontiguousarray(assignment, dtype=np.int64))

    setattr(dgl_part, name, fixed)
    try:
        yield calls
    finally:
        setattr(dgl_part, name, original)


def random_assignment(num_nodes: int, num_parts: int, seed: int) -> np.ndarray:
    """Every node's part, drawn uniformly with ``np.random.default_rng([seed, 0x7A2D])``.

    DGL's ``part_method="random"`` draws the same distribution from its own generator, which ``dgl.seed``
    does not fix from process to process (measured: 2 different draws in 4 processes after ``dgl.seed(0)``).

    Example:
        >>> np.array_equal(random_assignment(10, 3, seed=0), random_assignment(10, 3, seed=0))
        True
    """
    return np.random.default_rng([seed, 0x7A2D]).integers(0, num_parts, num_nodes).astype(np.int64)


def partition_graph(
    g,
    num_parts: int,
    out_dir: str,
    *,
    method: str,
    balance_ntypes=None,
    balance_edges: bool = False,
    forced=None,
    quiet: bool = False,
):
    """``dgl.distributed.partition_graph`` of ``g`` into ``num_parts`` parts in ``out_dir`` (the 1-hop halo kept),
    under ``forced`` (:func:`forced_assignment`, or none), its prints swallowed when ``quiet``; its mapping of
    new ids to original ones (a tensor, or a dict per node type).

    Raises:
        ConfigError: DGL could not cut the graph into that many parts (it fails when a part comes out empty).
        dgl.DGLError: a write failed (disk full): the caller's to report, with where it writes.
    """
    try:
        with (
            forced or contextlib.nullcontext(),
            contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext(),
        ):
            orig_nids, _ = dgl.distributed.partition_graph(
                g,
                GRAPH_NAME,
                num_parts,
                str(out_dir),
                num_hops=1,
                part_method=method,
                balance_ntypes=balance_ntypes,
                balance_edges=balance_edges,
                return_mapping=True,
            )
    except dgl.DGLError as exc:
        if "Write incomplete" in str(exc):  # a failed write (disk full): the caller's to report
            raise
        log.debug("partition_graph failed: %s", exc)
        raise ConfigError(
            f"partition.num_parts={num_parts}: DGL could not cut this {g.num_nodes()}-node graph "
            f"into {num_parts} parts (it fails when a part comes out empty); use fewer parts, "
            f"e.g. --partition.num_parts={max(1, num_parts // 2)}"
        ) from None
    return orig_nids


def cut(
    g,
    cfg: PartitionConfig,
    out_dir: str,
    *,
    src: np.ndarray,
    dst: np.ndarray,
    train_mask: np.ndarray,
    balance_ntypes=None,
    quiet: bool = False,
):
    """``g`` cut by ``partition.method`` into DGL's layout in ``out_dir``, by :func:`partition_graph`: LDG's
    assignment (of the graph's homogeneous ids, edges ``src`` -> ``dst``) forced through DGL's METIS slot, a
    uniform draw seeded by ``partition.seed`` (:func:`random_assignment`) through its random slot, or DGL's
    METIS.

    Returns:
        (DGL's mapping of new ids to original ones, LDG's assignment or None, the seconds LDG took).
    """
    t0 = time.perf_counter()
    forced, method, parts, assign_s = contextlib.nullcontext(), cfg.method, None, 0.0
    if cfg.method == "ldg" and cfg.num_parts > 1:
        indptr, indices = undirected_csr(src, dst, train_mask.shape[0])
        parts = ldg_assignment(
            indptr,
            indices,
            cfg.num_parts,
            passes=cfg.ldg_passes,
            slack=cfg.ldg_slack,
            seed=cfg.seed,
            train_mask=train_mask,
        )
        assign_s = time.perf_counter() - t0
        forced, method = forced_assignment(parts, cfg.num_parts), "metis"
    elif cfg.method == "ldg":
        method = "random"  # one part: nothing to assign
    elif cfg.method == "random" and cfg.num_parts > 1:
        parts = random_assignment(train_mask.shape[0], cfg.num_parts, cfg.seed)
        forced = forced_assignment(parts, cfg.num_parts, slot="random")
    dgl.seed(cfg.seed)  # what DGL draws besides the assignment
    orig_nids = partition_graph(
        g,
        cfg.num_parts,
        out_dir,
        method=method,
        balance_ntypes=balance_ntypes,
        balance_edges=cfg.balance_edges,
        forced=forced,
        quiet=quiet,
    )
    return orig_nids, parts, assign_s
