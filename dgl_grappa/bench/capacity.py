"""Capacity model: bytes on the wire, memory and time per worker, Grappa vs DistDGL.

Pure arithmetic, no DGL; docs/scaling.md derives every formula and checks it against the
measured runs (``experiments/scale/capacity_model.py`` prints those checks and the predictions).

Symbols (all per epoch unless said otherwise): N nodes, E directed edges, F feature
width (float32, so a row is 4F bytes), P workers = parts = machines, T training nodes,
B seeds per worker per step, M gradient bytes (``dgl_grappa.method.models.gradient_bytes``),
I unique input rows of one sampled mini-batch, rho the share of them that another
machine owns (DistDGL pulls those), S = ceil(T / (P B)) steps per worker.

* Grappa: one ring all-reduce per step, each worker sends ``2 (P-1)/P x (M + c)`` bytes
  (c = the correction scalars, 4-8 bytes), so ``S x 2 (P-1)/P x (M + c)``; plus the part
  itself once (from storage: features and structure of N/P nodes), and again on every
  repartitioning.
* DistDGL: the same all-reduce plus ``rho x I x (4F + 8)`` bytes of remote feature rows
  (4F per row back, an 8-byte id per row out) and the remote-sampling RPCs per step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

GB = 1e9


def ring_factor(p: int) -> float:
    """Bytes each worker sends per byte of payload in a ring all-reduce: 2 (P-1) / P.

    Example:
        >>> ring_factor(2), ring_factor(4)
        (1.0, 1.5)
    """
    return 2.0 * (p - 1) / p if p > 1 else 0.0


def random_remote_fraction(p: int, input_rows: float, batch: int) -> float:
    """rho for a random partition: every input row but the (local) seeds is remote with
    probability (P-1)/P.

    Example:
        >>> round(random_remote_fraction(4, 146447, 1000), 3)
        0.745
    """
    return (p - 1) / p * max(input_rows - batch, 0.0) / input_rows


@dataclass(frozen=True)
class Workload:
    """One training job: graph, partitioning, model and mini-batch shape.

    Attributes:
        name: label for tables.
        num_nodes, num_edges, feat_dim: N, E (directed), F.
        train_nodes: T.
        num_parts: P (one worker per machine).
        model_bytes: M.
        input_rows: I, unique input rows per mini-batch of B seeds (measured or estimated).
        remote_fraction: rho, share of those rows DistDGL pulls from other machines.
        batch: B.
        halo_share: halo nodes / inner nodes of a part (for halo "keep").
        rpc_share: DistDGL's sampling RPC bytes as a share of its feature bytes
            (measured 0.06 with METIS and 0.14 with random partitions on the 100k graph).
        corr_bytes: scalars the Grappa correction adds to each all-reduce.
    """

    name: str
    num_nodes: float
    num_edges: float
    feat_dim: int
    train_nodes: float
    num_parts: int
    model_bytes: float
    input_rows: float
    remote_fraction: float
    batch: int = 1000
    halo_share: float = 1.0
    rpc_share: float = 0.06
    corr_bytes: int = 4

    @property
    def steps(self) -> int:
        """S: steps per worker per epoch."""
        return math.ceil(self.train_nodes / (self.num_parts * self.batch))

    def with_(self, **kw) -> "Workload":
        """A copy with some fields replaced."""
        return replace(self, **kw)


def grappa_step_bytes(w: Workload) -> float:
    """Bytes one Grappa worker sends per step: the gradient all-reduce."""
    return ring_factor(w.num_parts) * (w.model_bytes + w.corr_bytes)


def distdgl_feature_step_bytes(w: Workload) -> float:
    """Remote feature bytes one DistDGL trainer moves per step: rho I (4F + 8)."""
    return w.remote_fraction * w.input_rows * (4 * w.feat_dim + 8)


def distdgl_step_bytes(w: Workload) -> float:
    """All bytes of one DistDGL trainer per step: features, sampling RPC, all-reduce."""
    return distdgl_feature_step_bytes(w) * (1 + w.rpc_share) + ring_factor(w.num_parts) * w.model_bytes


def epoch_bytes(w: Workload) -> dict:
    """Bytes per worker per epoch, both systems, and their ratio.

    Returns:
        ``{"steps", "grappa", "distdgl", "distdgl_features", "ratio"}``.

    Example:
        >>> w = Workload("x", 1e5, 1e6, 64, 6e4, 2, 41_280, 42_700, 0.155)
        >>> round(epoch_bytes(w)["distdgl_features"] / 1e6, 1)   # measured 50-52 MB
        52.4
    """
    s = w.steps
    g, d = s * grappa_step_bytes(w), s * distdgl_step_bytes(w)
    return {
        "steps": s,
        "grappa": g,
        "distdgl": d,
        "distdgl_features": s * distdgl_feature_step_bytes(w),
        "ratio": d / g if g else math.inf,
    }


def part_bytes(w: Workload, edge_bytes: float = 4.0, halo: str = "drop", cut: float = 0.0) -> dict:
    """What one worker holds: its features (plus halo rows with ``keep``) and structure.

    Args:
        w: the workload.
        edge_bytes: bytes per local edge of the in-memory structure (4 for an int32 CSC;
            measured 54 at load time for today's ``load_local`` with int64 COO + CSC).
        halo: "drop" or "keep".
        cut: edge-cut fraction (a kept halo brings the cut edges into the part).

    Returns:
        ``{"features", "structure", "total"}`` in bytes.
    """
    keep = halo == "keep"
    n_local = w.num_nodes / w.num_parts * (1 + (w.halo_share if keep else 0.0))
    # keep: all in-edges of the part plus the out-edges to its halo (DGL's 1-hop part);
    # drop: only the edges between inner nodes.
    e_local = w.num_edges / w.num_parts * ((1 + cut) if keep else (1 - cut))
    feats = n_local * 4 * w.feat_dim
    struct = e_local * edge_bytes + 8 * n_local
    return {"features": feats, "structure": struct, "total": feats + struct}


ROW_BYTES = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0}


def stored_row_bytes(width: int, precision: str) -> float:
    """Bytes of one stored feature-width row, as ``dgl_grappa.method.storage`` stores it.

    fp32: 4 bytes a value; fp16, bf16: 2; int8: one byte a value plus a 4-byte fp32 scale per
    row; int4: two values a byte (an odd width padded by one value) plus the 4-byte scale.

    Example:
        >>> stored_row_bytes(128, "fp32"), stored_row_bytes(128, "int8"), stored_row_bytes(127, "int4")
        (512.0, 132.0, 68.0)
    """
    if precision == "int8":
        return width + 4.0
    if precision == "int4":
        return (width + 1) // 2 + 4.0
    if precision not in ROW_BYTES:
        raise ValueError(f"storage precision {precision!r} is not one of fp32, fp16, bf16, int8, int4")
    return ROW_BYTES[precision] * width


def random_halo_share(p: int, degrees) -> float:
    """Halo / inner nodes of a part of a random P-way partition, from the graph's (out-)degrees.

    A node outside part p is in p's halo when one of its d edges lands in p: probability
    1 - (1 - 1/P)^d; (P - 1) N / P such nodes over N / P inner ones.

    Example:
        >>> round(random_halo_share(4, [10] * 100), 2)
        2.83
    """
    d = np.asarray(degrees, dtype=np.float64)
    return (p - 1) * float(np.mean(1.0 - (1.0 - 1.0 / p) ** d)) if p > 1 else 0.0


def part_cut(cut: float, halo_shares, inner_nodes, part: int) -> float:
    """Share of one part's in-edges that cross the cut, from the partitioning's cut and halo shares.

    A partitioning reports its edge cut as a whole; a part's own cut is taken to be in
    proportion to its halo share (every part's halo nodes have as many edges into it on
    average): ``cut x h_part / h_mean``, h_mean the halo share over all parts (halo nodes /
    inner nodes), capped at 1.

    Example:
        >>> round(part_cut(0.1, [0.2, 0.6], [100, 100], 0), 3)
        0.05
    """
    total = sum(inner_nodes)
    mean = sum(h * n for h, n in zip(halo_shares, inner_nodes)) / total if total else 0.0
    return min(cut * halo_shares[part] / mean, 1.0) if mean > 0 else cut


def zero_truncated_poisson_rate(mean: float) -> float:
    """lambda of the zero-truncated Poisson with this mean: lambda / (1 - e^-lambda) = mean (0 for mean <= 1).

    Example:
        >>> round(zero_truncated_poisson_rate(1.5), 3), zero_truncated_poisson_rate(1.0)
        (0.874, 0.0)
    """
    if mean <= 1.0:
        return 0.0
    lo, hi = mean - 1.0, mean  # lambda <= lambda / (1 - e^-lambda) <= lambda + 1
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if mid / -math.expm1(-mid) < mean:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def reach_fractions(train_frac: float, degree: float, cut: float, halo_share: float, hops: int) -> tuple[float, float]:
    """Shares of a part's inner nodes, and of its halo, that its seeds' ``hops``-hop sampled trees reach.

    What the loader keeps: every node of the part's local graph (inner nodes and kept halo)
    within ``hops`` in-edge steps of a training seed (any neighbour can be sampled, so the
    fan-outs do not enter). A tree-like random-graph estimate for a symmetric graph, from the
    label share t of the part, the mean degree d, the part's cut share and its halo share h:

    * an inner node has Poisson(a) inner and Poisson(b) halo neighbours, a = d (1 - cut),
      b = d cut; a halo node's only local edges are its m = b / h edges into the part (on
      average; at least one, or it would not be in the halo): a zero-truncated Poisson of
      rate lambda, lambda / (1 - e^-lambda) = m;
    * a node reached along an edge has the size-biased number of further edges: Poisson(a)
      and Poisson(b) again for an inner node, Poisson(lambda) for a halo node (lambda > m - 1:
      halo nodes reached along an edge have more edges into the part than the average one), so
      trees also run inner -> halo -> inner;
    * q_j, the chance that the far end of an edge is within j hops of a seed (not counting
      that edge), q_0 = t for an inner end and 0 for a halo end:
      q^I_j = 1 - (1 - t) exp(-a q^I_{j-1} - b q^H_{j-1}), q^H_j = 1 - exp(-lambda q^I_{j-1});
    * inner share = q^I_hops (a node's neighbours have the same law as an edge end's);
      halo share = 1 - E[(1 - q)^X] over the halo node's X edges into the part,
      q = q^I_{hops-1}: 1 - e^-(lambda q) (1 - e^-(lambda (1-q))) / (1 - e^-lambda).

    The seeds are t of the inner nodes (hops = 0 gives exactly t); overlapping trees are
    counted once (a node is reached unless none of its neighbours is); many hops saturate at
    the share of the part joined to a seed (1 for mean degrees well above 1). Not modelled: a
    label set whose nodes have more (cut) edges than the average node, heavy-tailed degrees,
    and clustered parts where trees close on themselves (docs/scaling.md measures each).

    Example:
        >>> [round(x, 2) for x in reach_fractions(0.6, 10, 0.75, 2.8, 1)]
        [0.91, 0.84]
    """
    t = min(max(train_frac, 0.0), 1.0)
    if hops <= 0:
        return t, 0.0
    keep_halo = halo_share > 0 and cut > 0
    a = degree * (1.0 - cut)
    b = degree * cut if keep_halo else 0.0
    lam = zero_truncated_poisson_rate(b / halo_share) if keep_halo else 0.0
    q_inner, q_halo, before = t, 0.0, t
    for _ in range(hops):
        before = q_inner
        q_inner, q_halo = (1.0 - (1.0 - t) * math.exp(-a * q_inner - b * q_halo), -math.expm1(-lam * q_inner))
    if not keep_halo:
        return q_inner, 0.0
    if lam < 1e-9:  # every halo node has one edge into the part
        return q_inner, before
    halo = 1.0 - math.exp(-lam * before) * math.expm1(-lam * (1.0 - before)) / math.expm1(-lam)
    return q_inner, halo


def resident_bytes(
    w: Workload,
    *,
    halo: str = "keep",
    exact: bool = True,
    precision: str = "fp32",
    inner_frac: float = 1.0,
    halo_frac: float = 1.0,
    budget: float | None = None,
) -> dict:
    """Feature-width bytes one worker holds (features, first-hop aggregates, halo rows), and what a budget leaves.

    Args:
        w: the workload (``halo_share``: the partitioner's measured halo / inner).
        halo: "keep" or "drop".
        exact: first-hop aggregates held too (one more row per held node).
        precision: the tables' storage precision.
        inner_frac, halo_frac: shares of the inner nodes and of the halo the seeds reach
            (1.0: everything held, as without pruning; :func:`reach_fractions` estimates them).
        budget: the loader's budget in multiples of the own fp32 rows (None: no limit); a
            halo that does not fit is sampled down to what does.

    Returns:
        ``{"resident", "own_fp32", "ratio", "halo_kept_frac"}`` (ratio = resident / own_fp32).

    Example:
        >>> w = Workload("x", 1e6, 1e7, 128, 6e5, 4, 1e5, 1e5, 0.75, halo_share=2.0)
        >>> round(resident_bytes(w)["ratio"], 2), round(resident_bytes(w, precision="int8", budget=1.5)["ratio"], 2)
        (6.0, 1.5)
    """
    inner = w.num_nodes / w.num_parts
    own = inner * 4 * w.feat_dim
    per_node = stored_row_bytes(w.feat_dim, precision) * (2 if exact else 1)
    held_inner = inner * inner_frac
    halo_nodes = inner * w.halo_share * halo_frac if halo == "keep" else 0.0
    kept = 1.0
    if budget is not None and (held_inner + halo_nodes) * per_node > budget * own:
        room = max(budget * own / per_node - held_inner, 0.0)
        kept = room / halo_nodes if halo_nodes else 0.0
        halo_nodes = room
    total = (held_inner + halo_nodes) * per_node
    return {"resident": total, "own_fp32": own, "ratio": total / own, "halo_kept_frac": kept}


def epoch_seconds(
    w: Workload, step_compute_s: float, bandwidth_Bps: float, latency_s: float = 0.0, remote_row_s: float = 0.0
) -> dict:
    """Epoch time per worker: compute, plus bytes / bandwidth (per-machine links).

    DistDGL's remote fetch sits on the critical path of a step unless prefetched, so its
    time is given as a range: from full overlap (max of compute and transfer) to none
    (their sum); the measured runs fall inside it (docs/scaling.md). ``remote_row_s`` is
    DistDGL's CPU cost per remote row that no network removes (RPC, serialisation, remote
    sampling; calibrated from loopback runs). Grappa's all-reduce adds ring latency
    2 (P-1) x ``latency_s`` per step.

    Args:
        w: the workload.
        step_compute_s: local sampling + gather + forward/backward per step.
        bandwidth_Bps: bytes per second of each worker's link.
        latency_s: per-message latency.
        remote_row_s: DistDGL CPU seconds per remote input row.

    Returns:
        ``{"grappa", "distdgl_low", "distdgl_high"}`` in seconds.

    Example:
        >>> w = Workload("x", 1e5, 1e6, 64, 6e4, 2, 41_280, 42_700, 0.155)
        >>> t = epoch_seconds(w, 0.037, 1.25e8)
        >>> t["distdgl_low"] <= t["distdgl_high"] and t["grappa"] < t["distdgl_high"]
        True
    """
    s = w.steps
    ar = grappa_step_bytes(w) / bandwidth_Bps + 2 * (w.num_parts - 1) * latency_s
    fetch = distdgl_step_bytes(w) / bandwidth_Bps
    cpu = step_compute_s + w.remote_fraction * w.input_rows * remote_row_s
    ring_latency = 2 * (w.num_parts - 1) * latency_s  # fetch already holds the all-reduce's bytes
    return {
        "grappa": s * (step_compute_s + ar),
        "distdgl_low": s * max(cpu, fetch),
        "distdgl_high": s * (cpu + fetch + ring_latency),
    }


def scale_step_time(
    measured_s: float,
    measured_rows: float,
    measured_width: float,
    measured_cores: float,
    rows: float,
    width: float,
    cores: float,
    efficiency: float = 0.5,
) -> float:
    """Per-step compute time moved to another workload and machine: proportional to
    input rows x (F + hidden), inversely to cores x parallel efficiency.

    Example:
        >>> scale_step_time(1.0, 100, 256, 2, 200, 256, 4, efficiency=1.0)
        1.0
    """
    return measured_s * (rows / measured_rows) * (width / measured_width) * (measured_cores / (cores * efficiency))


__all__ = [
    "GB",
    "Workload",
    "distdgl_feature_step_bytes",
    "distdgl_step_bytes",
    "epoch_bytes",
    "epoch_seconds",
    "grappa_step_bytes",
    "part_bytes",
    "part_cut",
    "random_halo_share",
    "random_remote_fraction",
    "reach_fractions",
    "resident_bytes",
    "ring_factor",
    "scale_step_time",
    "stored_row_bytes",
    "zero_truncated_poisson_rate",
]
