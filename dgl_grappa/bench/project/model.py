"""The projection's model: each system's step and epoch at P machines, pure functions of a :class:`Calibration`.

The formulas are in :mod:`dgl_grappa.bench.project` and docs/projection.md; the bytes are the
capacity model's (:mod:`dgl_grappa.bench.capacity`).
"""

from __future__ import annotations

import math

from ..capacity import (
    Workload,
    distdgl_feature_step_bytes,
    distdgl_step_bytes,
    grappa_step_bytes,
    random_remote_fraction,
)
from .calibration import Calibration, GrappaFit, example_calibration  # noqa: F401 (the examples use them)

GBIT = 1e9 / 8
"""Bytes per second of 1 Gbit/s."""
FIRST_BUCKET_BYTES = 1024 * 1024
"""DDP's first gradient bucket (``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``)."""
BUCKET_BYTES = 25 * 1024 * 1024
"""DDP's other buckets (``bucket_cap_mb=25``, the default neither runtime changes)."""


def ddp_buckets(model_bytes: float) -> int:
    """DDP gradient buckets of a model: one up to DDP's 1 MiB first bucket, then one per 25 MiB.

    Each bucket is one ring all-reduce, 2 (P-1) latency terms.

    Example:
        >>> ddp_buckets(616_000), ddp_buckets(30 * 2**20)
        (1, 3)
    """
    if model_bytes <= FIRST_BUCKET_BYTES:
        return 1
    return 1 + math.ceil((model_bytes - FIRST_BUCKET_BYTES) / BUCKET_BYTES)


def link_seconds(
    nbytes: float,
    latency_terms: float,
    bandwidth_Bps: float | None,
    latency_s: float,
    *,
    parts: int = 1,
    link: str = "per_host",
) -> float:
    """Network seconds of one worker's step: its bytes / B + its latency terms x L.

    Args:
        nbytes: bytes the worker sends (and, symmetrically, receives) in the step.
        latency_terms: one-way latencies on the step's critical path (an RPC is 2, a ring
            all-reduce 2 (P-1) per bucket).
        bandwidth_Bps: bytes per second of the link in each direction; None = unlimited.
        latency_s: one-way latency L.
        parts: workers (with ``link="shared"`` all of them send through one link).
        link: ``per_host`` (one NIC per machine) or ``shared`` (one link for the cluster,
            e.g. a single machine's shaped loopback).

    Example:
        >>> round(link_seconds(1.25e6, 4, 1.25e8, 50e-6), 6), link_seconds(1.25e6, 4, None, 0.0)
        (0.0102, 0.0)
    """
    t = latency_terms * latency_s
    if bandwidth_Bps:
        t += nbytes * (parts if link == "shared" else 1) / bandwidth_Bps
    return t


def remote_fraction(cal: Calibration, p: int, partition: str | None = None) -> float:
    """rho(P): the share of a DistDGL step's unique input rows that another machine owns.

    ``q0 x rnd(P) x (P / P0)^a``, capped at ``max(1, q0) x rnd(P)``, where rnd is
    :func:`~dgl_grappa.bench.capacity.random_remote_fraction` (every input row but the step's
    seeds, min(B, T / (P S(P))) of them, is remote with probability (P-1)/P) and q0 = rho / rnd
    measured at P0: a random partition follows rnd (a = 0, q0 ~ 1); a structure-aware one
    keeps the measured share q0 of a random partition's remote rows (a = 0), or grows it as
    fitted.

    Example:
        >>> cal = example_calibration("metis")      # 42,700 input rows, q0 = 0.32, no growth
        >>> round(remote_fraction(cal, 2), 3), round(remote_fraction(cal, 4), 3), remote_fraction(cal, 1)
        (0.156, 0.234, 0.0)
    """
    if p <= 1:
        return 0.0
    _, part = cal.partition(partition)
    rnd = random_remote_fraction(p, part.input_rows, seeds_per_step(cal, p))
    q = part.q0 * (p / part.parts0) ** part.growth
    return min(q, max(1.0, part.q0)) * rnd


def seeds_per_step(cal: Calibration, p: int) -> float:
    """A DistDGL step's seeds at P machines: min(B, T / (P S(P))) (the batch, or a worker's whole share).

    Example:
        >>> cal = example_calibration()             # 60,000 training nodes, batches of 1000
        >>> seeds_per_step(cal, 4), seeds_per_step(cal, 120)
        (1000, 500.0)
    """
    b = cal.batch_size
    return min(b, cal.train_nodes / (p * steps_per_epoch(cal, p, "distdgl")))


def steps_per_epoch(cal: Calibration, p: int, system: str, partition: str | None = None) -> int:
    """S(P): steps per worker per epoch.

    DistDGL splits the T training nodes evenly (``node_split(force_even=True)``):
    ceil(ceil(T / P) / B). Grappa trains each part's own, every worker taking the largest
    part's step count: ceil(k T / (P B)), k the measured max / mean seeds per part (1 at one
    part). Both capped by ``train.steps_per_epoch``.

    Example:
        >>> cal = example_calibration()             # 60,000 training nodes, batches of 1000
        >>> cal.partitions["metis"].seed_imbalance = 1.1
        >>> steps_per_epoch(cal, 4, "distdgl"), steps_per_epoch(cal, 4, "grappa")
        (15, 17)
    """
    t, b = cal.train_nodes, cal.batch_size
    if system == "distdgl":
        full = math.ceil(math.ceil(t / p) / b)
    else:
        k = cal.partition(partition)[1].seed_imbalance if p > 1 else 1.0
        full = math.ceil(k * t / (p * b))
    cap = cal.steps_cap or 0
    return max(1, min(full, cap) if cap > 0 else full)


def _workload(cal: Calibration, p: int, rho: float, partition_rpc: float = 0.0) -> Workload:
    """The capacity model's workload at P parts (its byte functions are the projection's)."""
    return Workload(
        name=cal.name,
        num_nodes=0.0,
        num_edges=0.0,
        feat_dim=cal.row_bytes / 4,
        train_nodes=cal.train_nodes,
        num_parts=p,
        model_bytes=cal.model_bytes,
        input_rows=cal.input_rows,
        remote_fraction=rho,
        batch=cal.batch_size,
        rpc_share=partition_rpc,
        corr_bytes=cal.grappa.corr_bytes,
    )


def grappa_compute(cal: Calibration, p: int) -> float:
    """Grappa's per-step compute at P parts: measured at the calibrated part counts, interpolated in log P.

    A worker samples and computes on its own part, which on a graph not much larger than a
    batch's input rows shrinks with P; the calibration keeps each measured part count's
    compute (:attr:`GrappaFit.compute_by_parts`, [P, seconds] pairs) and this interpolates
    linearly in log P between them, constant beyond the smallest and largest
    (:attr:`GrappaFit.compute_s` where there are none).

    Example:
        >>> cal = example_calibration(grappa=GrappaFit(compute_s=0.03, compute_by_parts=[[2, 0.04], [8, 0.02]]))
        >>> grappa_compute(cal, 1), grappa_compute(cal, 4), grappa_compute(cal, 64)
        (0.04, 0.03, 0.02)
    """
    pts = sorted(cal.grappa.compute_by_parts or [])
    if not pts:
        return cal.grappa.compute_s
    if p <= pts[0][0]:
        return pts[0][1]
    for (p0, c0), (p1, c1) in zip(pts, pts[1:]):
        if p <= p1:
            w = math.log(p / p0) / math.log(p1 / p0)
            return c0 + w * (c1 - c0)
    return pts[-1][1]


def grappa_step(
    cal: Calibration, p: int, bandwidth_Bps: float | None, latency_s: float = 0.0, *, link: str = "per_host"
) -> dict:
    """One Grappa step at P machines: compute, the all-reduce's bytes and network time, the step.

    bytes = o_G x 2 (P-1)/P x (M + c) (:func:`~dgl_grappa.bench.capacity.grappa_step_bytes`),
    network = bytes / B + k x 2 (P-1) x L (k DDP buckets, gloo's ring); step = compute +
    network, or with ``train.prefetch`` ``c - s - b + max(b + network, s)`` (the next batch's
    sampling s runs during the backward b and the all-reduce).

    Returns:
        ``{"compute_s", "bytes", "latency_terms", "network_s", "step_s"}``.

    Example:
        >>> cal = example_calibration()             # 41,280 gradient bytes, 40 ms of compute, no prefetch
        >>> g = grappa_step(cal, 4, GBIT, 50e-6)
        >>> g["bytes"], round(g["step_s"], 6)
        (61920.0, 0.040795)
    """
    g = cal.grappa
    w = _workload(cal, p, 0.0)
    nbytes = g.wire_overhead * grappa_step_bytes(w) if p > 1 else 0.0
    terms = g.buckets * 2 * (p - 1)
    net = link_seconds(nbytes, terms, bandwidth_Bps, latency_s, parts=p, link=link)
    scale = cal.compute_scale
    c, s, b = grappa_compute(cal, p) * scale, g.sample_s * scale, g.backward_s * scale
    step = c - s - b + max(b + net, s) if g.prefetch else c + net
    return {"compute_s": c, "bytes": nbytes, "latency_terms": terms, "network_s": net, "step_s": step}


def distdgl_step(
    cal: Calibration,
    p: int,
    bandwidth_Bps: float | None,
    latency_s: float = 0.0,
    *,
    partition: str | None = None,
    link: str = "per_host",
) -> dict:
    """One DistDGL step at P machines: compute, remote rows, bytes, network time, the step.

    R = rho(P) x I remote rows (:func:`remote_fraction`); compute = c_D + c_row x R (the
    per-row CPU cost of remote sampling and pulls that no network removes); bytes = o_D x
    [R (4F + 8)(1 + r) + 2 (P-1)/P x M] (:func:`~dgl_grappa.bench.capacity.distdgl_step_bytes`);
    network = bytes / B + 2 (l + q) x L (l sampling RPCs, one per layer, and q pulls, each a
    round trip) + k x 2 (P-1) x L (the all-reduce); step = compute + network (no overlap).

    Returns:
        ``{"compute_s", "remote_rows", "remote_fraction", "bytes", "latency_terms", "network_s", "step_s"}``.

    Example:
        >>> cal = example_calibration("metis")      # 50 ms + 5 us per remote row, r = 0.06, 3 round trips
        >>> d = distdgl_step(cal, 2, GBIT, 0.0)
        >>> round(d["remote_rows"]), round(d["bytes"] / 1e6, 2), round(d["step_s"], 3)
        (6672, 1.91, 0.099)
    """
    name, part = cal.partition(partition)
    d = cal.distdgl
    rho = remote_fraction(cal, p, name)
    w = _workload(cal, p, rho, part.rpc_share).with_(input_rows=part.input_rows)
    rows = rho * part.input_rows
    nbytes = d.wire_overhead * distdgl_step_bytes(w) if p > 1 else 0.0
    terms = (2 * d.round_trips + d.buckets * 2 * (p - 1)) if p > 1 else 0
    net = link_seconds(nbytes, terms, bandwidth_Bps, latency_s, parts=p, link=link)
    c = (d.compute_s + d.row_cost_s * rows) * cal.compute_scale
    return {
        "compute_s": c,
        "remote_rows": rows,
        "remote_fraction": rho,
        "bytes": nbytes,
        "feature_bytes": distdgl_feature_step_bytes(w),
        "latency_terms": terms,
        "network_s": net,
        "step_s": c + net,
    }


def project(
    cal: Calibration,
    p: int,
    gbit: float | None,
    latency_us: float = 0.0,
    *,
    partition: str | None = None,
    link: str = "per_host",
) -> dict:
    """Both systems' epoch time at P machines, B = ``gbit`` Gbit/s per machine, one-way latency L.

    Args:
        cal: a calibration (:func:`~dgl_grappa.bench.project.fit.calibrate`).
        p: machines (= workers = parts).
        gbit: link bandwidth per machine in Gbit/s; None = unlimited.
        latency_us: one-way latency in microseconds.
        partition: which calibrated partitioner (default: the first).
        link: ``per_host`` (one NIC per machine) or ``shared``.

    Returns:
        ``parts``, ``gbit``, ``latency_us``, ``partition``, per system ``<sys>_steps``,
        ``<sys>_epoch_s``, ``<sys>_network_s`` (its network seconds per epoch),
        ``<sys>_bytes_per_epoch`` (per worker), DistDGL's ``remote_fraction``, and
        ``speedup`` = DistDGL epoch / Grappa epoch.

    Example:
        >>> r = project(example_calibration("metis"), 4, 1, 50)
        >>> r["distdgl_steps"], round(r["distdgl_epoch_s"], 2), round(r["grappa_epoch_s"], 2), round(r["speedup"], 2)
        (15, 1.85, 0.61, 3.03)
    """
    name, _ = cal.partition(partition)
    bw = gbit * GBIT if gbit else None
    lat = latency_us * 1e-6
    d = distdgl_step(cal, p, bw, lat, partition=name, link=link)
    g = grappa_step(cal, p, bw, lat, link=link)
    out = {
        "parts": p,
        "gbit": gbit,
        "latency_us": latency_us,
        "partition": name,
        "link": link,
        "remote_fraction": d["remote_fraction"],
    }
    for sys_, step in (("distdgl", d), ("grappa", g)):
        s = steps_per_epoch(cal, p, sys_, name)
        out[f"{sys_}_steps"] = s
        out[f"{sys_}_epoch_s"] = s * step["step_s"]
        out[f"{sys_}_network_s"] = s * step["network_s"]
        out[f"{sys_}_bytes_per_epoch"] = s * step["bytes"]
    out["speedup"] = out["distdgl_epoch_s"] / out["grappa_epoch_s"] if out["grappa_epoch_s"] > 0 else math.inf
    return out


def project_grid(
    cal: Calibration, parts: list[int], gbits: list[float], latencies_us: list[float], *, partition: str | None = None
) -> list[dict]:
    """:func:`project` at every (P, B, L) of the grid, P slowest-varying.

    Example:
        >>> cal = example_calibration("random")     # q0 = 1, r = 0.14
        >>> [(r["parts"], r["gbit"], round(r["speedup"], 2)) for r in project_grid(cal, [4, 16], [1, 10], [50])]
        [(4, 1, 6.93), (4, 10, 5.32), (16, 1, 8.13), (16, 10, 6.18)]
    """
    return [project(cal, p, b, lat, partition=partition) for p in parts for b in gbits for lat in latencies_us]
