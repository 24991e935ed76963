"""Projection: each system's epoch time on clusters this machine cannot emulate, calibrated on runs made here.

``python -m dgl_grappa project --runs RUN_DIR`` reads the summaries of ``compare`` runs
(both systems), takes from them what a step costs each system in compute and what it puts
on the wire, and projects the epoch time of DistDGL and Grappa at P machines (one worker
and one NIC each) with a link of B bytes per second per machine and a one-way latency L.
docs/projection.md is the user's page; the formulas, per worker and step:

* Grappa:  ``t_G = c_G + o_G x 2 (P-1)/P x (M + c) / B + k x 2 (P-1) x L``
  (one ring all-reduce of the M gradient bytes and the c correction bytes in k DDP
  buckets; with ``train.prefetch`` the next batch's sampling s_G runs during the backward
  pass b_G and the all-reduce: ``t_G = c_G - s_G - b_G + max(b_G + net, s_G)``).
* DistDGL: ``t_D = c_D + c_row x R + o_D x [R (4F + 8)(1 + r) + 2 (P-1)/P x M] / B
  + 2 (l + q) x L + k x 2 (P-1) x L``, R = rho(P) x I remote input rows (I unique
  input rows a step, rho the share another machine owns), r the sampling RPC bytes per
  feature byte, l sampling round trips (one per layer) and q feature and label pulls; no
  overlap (the trainer samples, pulls, computes and all-reduces one after the other).
* epoch = S(P) x t, S(P) = ceil(T / (P B_s)) steps (T training nodes, B_s the batch; Grappa
  times its measured seed imbalance), capped by ``train.steps_per_epoch``.

The bytes are :mod:`dgl_grappa.bench.capacity`'s (:func:`~dgl_grappa.bench.capacity.grappa_step_bytes`,
:func:`~dgl_grappa.bench.capacity.distdgl_step_bytes`), o_G and o_D the measured wire bytes
per application byte (TCP/IP framing). rho(P) for a random partition follows
:func:`~dgl_grappa.bench.capacity.random_remote_fraction` through the measured point; for a
structure-aware one (METIS, LDG) it keeps the measured share of a random partition's remote
rows, times (P / P0)^a (a = 0 unless runs at two part counts fit it, or ``--remote-growth``).

Calibration (:func:`calibrate`): c_G and c_D + c_row R are each run's measured step time
(divided by its ``network_dilation``) minus the model's network time at that run's own P,
link and latency, so a projection at a calibration run's point gives its measured time
back. c_G is kept per calibrated part count and interpolated in log P (a worker's part, and
with it its step, shrinks with P on graphs not much larger than a batch's input rows); with
DistDGL runs at different remote rows per step (a 1-part run, two part counts, or two
partitioners) c_D and c_row are fitted by least squares, else c_row = 0.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from ..config import ConfigError
from .capacity import Workload, distdgl_feature_step_bytes, distdgl_step_bytes, grappa_step_bytes, \
    random_remote_fraction, ring_factor

GBIT = 1e9 / 8
"""Bytes per second of 1 Gbit/s."""
TARGET = 0.15
"""The check's target: projected epoch within 15 % of the measured one."""
FIRST_BUCKET_BYTES = 1024 * 1024
"""DDP's first gradient bucket (``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``)."""
BUCKET_BYTES = 25 * 1024 * 1024
"""DDP's other buckets (``bucket_cap_mb=25``, the default neither runtime changes)."""
SYSTEMS = ("distdgl", "grappa")


class ProjectError(ConfigError):
    """Bad input of ``project`` (one line: the problem and the fix; exit status 2)."""


# ---------------------------------------------------------------------------------------
# The model: pure functions of a calibration dict
# ---------------------------------------------------------------------------------------

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


def link_seconds(nbytes: float, latency_terms: float, bandwidth_Bps: float | None, latency_s: float, *,
                 parts: int = 1, link: str = "per_host") -> float:
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


def _partition(cal: dict, partition: str | None) -> tuple[str, dict]:
    parts = cal["partitions"]
    if partition is None:
        partition = next(iter(parts))
    if partition not in parts:
        raise ProjectError(f"project: the calibration runs have no {partition!r} partitioning (they have "
                           f"{', '.join(parts)}); add a compare run with --partition.method={partition} to --runs")
    return partition, parts[partition]


def remote_fraction(cal: dict, p: int, partition: str | None = None) -> float:
    """rho(P): the share of a DistDGL step's unique input rows that another machine owns.

    ``q0 x rnd(P) x (P / P0)^a``, capped at ``max(1, q0) x rnd(P)``, where rnd is
    :func:`~dgl_grappa.bench.capacity.random_remote_fraction` (every input row but the step's
    seeds, min(B, T / (P S(P))) of them, is remote with probability (P-1)/P) and q0 = rho / rnd
    measured at P0: a random partition follows rnd (a = 0, q0 ~ 1); a structure-aware one
    keeps the measured share q0 of a random partition's remote rows (a = 0), or grows it as
    fitted.

    Example:
        >>> cal = {"batch_size": 1000, "train_nodes": 6e4, "partitions": {"metis": {"input_rows": 42_700,
        ...        "parts0": 2, "q0": 0.32, "growth": 0.0}}}
        >>> round(remote_fraction(cal, 2), 3), round(remote_fraction(cal, 4), 3), remote_fraction(cal, 1)
        (0.156, 0.234, 0.0)
    """
    if p <= 1:
        return 0.0
    _, part = _partition(cal, partition)
    rnd = random_remote_fraction(p, part["input_rows"], seeds_per_step(cal, p))
    q = part["q0"] * (p / part["parts0"]) ** part["growth"]
    return min(q, max(1.0, part["q0"])) * rnd


def seeds_per_step(cal: dict, p: int) -> float:
    """A DistDGL step's seeds at P machines: min(B, T / (P S(P))) (the batch, or a worker's whole share).

    Example:
        >>> seeds_per_step({"train_nodes": 6e4, "batch_size": 1000}, 4), seeds_per_step({"train_nodes": 6e4,
        ...                 "batch_size": 1000}, 120)
        (1000, 500.0)
    """
    b = cal["batch_size"]
    return min(b, cal["train_nodes"] / (p * steps_per_epoch(cal, p, "distdgl")))


def steps_per_epoch(cal: dict, p: int, system: str, partition: str | None = None) -> int:
    """S(P): steps per worker per epoch.

    DistDGL splits the T training nodes evenly (``node_split(force_even=True)``):
    ceil(ceil(T / P) / B). Grappa trains each part's own, every worker taking the largest
    part's step count: ceil(k T / (P B)), k the measured max / mean seeds per part (1 at one
    part). Both capped by ``train.steps_per_epoch``.

    Example:
        >>> cal = {"train_nodes": 60_000, "batch_size": 1000, "steps_cap": 0,
        ...        "partitions": {"metis": {"seed_imbalance": 1.1}}}
        >>> steps_per_epoch(cal, 4, "distdgl"), steps_per_epoch(cal, 4, "grappa")
        (15, 17)
    """
    t, b = cal["train_nodes"], cal["batch_size"]
    if system == "distdgl":
        full = math.ceil(math.ceil(t / p) / b)
    else:
        k = _partition(cal, partition)[1].get("seed_imbalance", 1.0) if p > 1 else 1.0
        full = math.ceil(k * t / (p * b))
    cap = cal.get("steps_cap") or 0
    return max(1, min(full, cap) if cap > 0 else full)


def _workload(cal: dict, p: int, rho: float, partition_rpc: float = 0.0) -> Workload:
    """The capacity model's workload at P parts (its byte functions are the projection's)."""
    return Workload(name=cal.get("name", ""), num_nodes=0.0, num_edges=0.0, feat_dim=cal["row_bytes"] / 4,
                    train_nodes=cal["train_nodes"], num_parts=p, model_bytes=cal["model_bytes"],
                    input_rows=cal.get("input_rows", 0.0), remote_fraction=rho, batch=cal["batch_size"],
                    rpc_share=partition_rpc, corr_bytes=cal["grappa"]["corr_bytes"])


def grappa_compute(cal: dict, p: int) -> float:
    """Grappa's per-step compute at P parts: measured at the calibrated part counts, interpolated in log P.

    A worker samples and computes on its own part, which on a graph not much larger than a
    batch's input rows shrinks with P; the calibration keeps each measured part count's
    compute (``grappa.compute_by_parts``, [P, seconds] pairs) and this interpolates linearly
    in log P between them, constant beyond the smallest and largest (``grappa.compute_s``
    where there are none).

    Example:
        >>> cal = {"grappa": {"compute_s": 0.03, "compute_by_parts": [[2, 0.04], [8, 0.02]]}}
        >>> grappa_compute(cal, 1), grappa_compute(cal, 4), grappa_compute(cal, 64)
        (0.04, 0.03, 0.02)
    """
    pts = sorted(cal["grappa"].get("compute_by_parts") or [])
    if not pts:
        return cal["grappa"]["compute_s"]
    if p <= pts[0][0]:
        return pts[0][1]
    for (p0, c0), (p1, c1) in zip(pts, pts[1:]):
        if p <= p1:
            w = math.log(p / p0) / math.log(p1 / p0)
            return c0 + w * (c1 - c0)
    return pts[-1][1]


def grappa_step(cal: dict, p: int, bandwidth_Bps: float | None, latency_s: float = 0.0, *,
                link: str = "per_host") -> dict:
    """One Grappa step at P machines: compute, the all-reduce's bytes and network time, the step.

    bytes = o_G x 2 (P-1)/P x (M + c) (:func:`~dgl_grappa.bench.capacity.grappa_step_bytes`),
    network = bytes / B + k x 2 (P-1) x L (k DDP buckets, gloo's ring); step = compute +
    network, or with ``train.prefetch`` ``c - s - b + max(b + network, s)`` (the next batch's
    sampling s runs during the backward b and the all-reduce).

    Returns:
        ``{"compute_s", "bytes", "latency_terms", "network_s", "step_s"}``.

    Example:
        >>> cal = {"row_bytes": 256, "train_nodes": 6e4, "model_bytes": 41_280, "batch_size": 1000,
        ...        "compute_scale": 1.0, "grappa": {"compute_s": 0.04, "corr_bytes": 0, "wire_overhead": 1.0,
        ...        "buckets": 1, "prefetch": False, "sample_s": 0.004, "backward_s": 0.02}}
        >>> g = grappa_step(cal, 4, GBIT, 50e-6)
        >>> g["bytes"], round(g["step_s"], 6)
        (61920.0, 0.040795)
    """
    g = cal["grappa"]
    w = _workload(cal, p, 0.0)
    nbytes = g["wire_overhead"] * grappa_step_bytes(w) if p > 1 else 0.0
    terms = g["buckets"] * 2 * (p - 1)
    net = link_seconds(nbytes, terms, bandwidth_Bps, latency_s, parts=p, link=link)
    scale = cal.get("compute_scale", 1.0)
    c, s, b = grappa_compute(cal, p) * scale, g["sample_s"] * scale, g["backward_s"] * scale
    step = c - s - b + max(b + net, s) if g["prefetch"] else c + net
    return {"compute_s": c, "bytes": nbytes, "latency_terms": terms, "network_s": net, "step_s": step}


def distdgl_step(cal: dict, p: int, bandwidth_Bps: float | None, latency_s: float = 0.0, *,
                 partition: str | None = None, link: str = "per_host") -> dict:
    """One DistDGL step at P machines: compute, remote rows, bytes, network time, the step.

    R = rho(P) x I remote rows (:func:`remote_fraction`); compute = c_D + c_row x R (the
    per-row CPU cost of remote sampling and pulls that no network removes); bytes = o_D x
    [R (4F + 8)(1 + r) + 2 (P-1)/P x M] (:func:`~dgl_grappa.bench.capacity.distdgl_step_bytes`);
    network = bytes / B + 2 (l + q) x L (l sampling RPCs, one per layer, and q pulls, each a
    round trip) + k x 2 (P-1) x L (the all-reduce); step = compute + network (no overlap).

    Returns:
        ``{"compute_s", "remote_rows", "remote_fraction", "bytes", "latency_terms", "network_s", "step_s"}``.

    Example:
        >>> cal = {"row_bytes": 256, "train_nodes": 6e4, "model_bytes": 41_280, "batch_size": 1000,
        ...        "input_rows": 42_700, "compute_scale": 1.0, "grappa": {"corr_bytes": 0},
        ...        "distdgl": {"compute_s": 0.05, "row_cost_s": 5e-6, "wire_overhead": 1.0, "buckets": 1,
        ...                    "round_trips": 3},
        ...        "partitions": {"metis": {"input_rows": 42_700, "parts0": 2, "q0": 0.32, "growth": 0.0,
        ...                                  "rpc_share": 0.06}}}
        >>> d = distdgl_step(cal, 2, GBIT, 0.0)
        >>> round(d["remote_rows"]), round(d["bytes"] / 1e6, 2), round(d["step_s"], 3)
        (6672, 1.91, 0.099)
    """
    name, part = _partition(cal, partition)
    d = cal["distdgl"]
    rho = remote_fraction(cal, p, name)
    w = _workload(cal, p, rho, part.get("rpc_share", 0.0)).with_(input_rows=part["input_rows"])
    rows = rho * part["input_rows"]
    nbytes = d["wire_overhead"] * distdgl_step_bytes(w) if p > 1 else 0.0
    terms = (2 * d["round_trips"] + d["buckets"] * 2 * (p - 1)) if p > 1 else 0
    net = link_seconds(nbytes, terms, bandwidth_Bps, latency_s, parts=p, link=link)
    c = (d["compute_s"] + d["row_cost_s"] * rows) * cal.get("compute_scale", 1.0)
    return {"compute_s": c, "remote_rows": rows, "remote_fraction": rho, "bytes": nbytes,
            "feature_bytes": distdgl_feature_step_bytes(w), "latency_terms": terms, "network_s": net,
            "step_s": c + net}


def project(cal: dict, p: int, gbit: float | None, latency_us: float = 0.0, *, partition: str | None = None,
            link: str = "per_host") -> dict:
    """Both systems' epoch time at P machines, B = ``gbit`` Gbit/s per machine, one-way latency L.

    Args:
        cal: a calibration (:func:`calibrate`).
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
        >>> cal = {"row_bytes": 256, "train_nodes": 6e4, "model_bytes": 41_280, "batch_size": 1000,
        ...        "steps_cap": 0, "compute_scale": 1.0,
        ...        "grappa": {"compute_s": 0.04, "corr_bytes": 0, "wire_overhead": 1.0, "buckets": 1,
        ...                   "prefetch": False, "sample_s": 0.004, "backward_s": 0.02},
        ...        "distdgl": {"compute_s": 0.05, "row_cost_s": 5e-6, "wire_overhead": 1.0, "buckets": 1,
        ...                    "round_trips": 3},
        ...        "partitions": {"metis": {"input_rows": 42_700, "parts0": 2, "q0": 0.32, "growth": 0.0,
        ...                                  "rpc_share": 0.06, "seed_imbalance": 1.0}}}
        >>> r = project(cal, 4, 1, 50)
        >>> r["distdgl_steps"], round(r["distdgl_epoch_s"], 2), round(r["grappa_epoch_s"], 2), round(r["speedup"], 2)
        (15, 1.85, 0.61, 3.03)
    """
    name, _ = _partition(cal, partition)
    bw = gbit * GBIT if gbit else None
    lat = latency_us * 1e-6
    d = distdgl_step(cal, p, bw, lat, partition=name, link=link)
    g = grappa_step(cal, p, bw, lat, link=link)
    out = {"parts": p, "gbit": gbit, "latency_us": latency_us, "partition": name, "link": link,
           "remote_fraction": d["remote_fraction"]}
    for sys_, step in (("distdgl", d), ("grappa", g)):
        s = steps_per_epoch(cal, p, sys_, name)
        out[f"{sys_}_steps"] = s
        out[f"{sys_}_epoch_s"] = s * step["step_s"]
        out[f"{sys_}_network_s"] = s * step["network_s"]
        out[f"{sys_}_bytes_per_epoch"] = s * step["bytes"]
    out["speedup"] = out["distdgl_epoch_s"] / out["grappa_epoch_s"] if out["grappa_epoch_s"] > 0 else math.inf
    return out


def project_grid(cal: dict, parts: list[int], gbits: list[float], latencies_us: list[float], *,
                 partition: str | None = None) -> list[dict]:
    """:func:`project` at every (P, B, L) of the grid, P slowest-varying.

    Example:
        >>> cal = {"row_bytes": 256, "train_nodes": 6e4, "model_bytes": 41_280, "batch_size": 1000,
        ...        "steps_cap": 0, "compute_scale": 1.0,
        ...        "grappa": {"compute_s": 0.04, "corr_bytes": 0, "wire_overhead": 1.0, "buckets": 1,
        ...                   "prefetch": False, "sample_s": 0.004, "backward_s": 0.02},
        ...        "distdgl": {"compute_s": 0.05, "row_cost_s": 5e-6, "wire_overhead": 1.0, "buckets": 1,
        ...                    "round_trips": 3},
        ...        "partitions": {"random": {"input_rows": 42_700, "parts0": 2, "q0": 1.0, "growth": 0.0,
        ...                                   "rpc_share": 0.14, "seed_imbalance": 1.0}}}
        >>> [(r["parts"], r["gbit"], round(r["speedup"], 2)) for r in project_grid(cal, [4, 16], [1, 10], [50])]
        [(4, 1, 6.93), (4, 10, 5.32), (16, 1, 8.13), (16, 10, 6.18)]
    """
    return [project(cal, p, b, lat, partition=partition) for p in parts for b in gbits for lat in latencies_us]


# ---------------------------------------------------------------------------------------
# Calibration: what one run measured, then the model's constants from all of them
# ---------------------------------------------------------------------------------------

def _bandwidth_Bps(rate: str | None) -> float | None:
    from ..cluster.netns import rate_bits

    if not rate:
        return None
    try:
        return rate_bits(str(rate)) / 8
    except ValueError:
        return None


def _link(s: dict) -> dict:
    """A summary's link: per-host links of test hosts, else the job's (shared) loopback."""
    c = s.get("cluster") or {}
    cfg_net = (s.get("config") or {}).get("network") or {}
    if c.get("link"):
        rate, lat, mode = c["link"].get("bandwidth"), c["link"].get("latency_ms") or 0.0, c["link"].get("mode")
    else:
        rate = s.get("network_bandwidth") or cfg_net.get("bandwidth") or None
        lat, mode = cfg_net.get("latency_ms") or 0.0, "shared"
    return {"bandwidth": rate or None, "bandwidth_Bps": _bandwidth_Bps(rate), "latency_s": float(lat) / 1e3,
            "mode": mode or "per_host"}


def _dilation(s: dict) -> float:
    d = s.get("network_dilation") or (s.get("cluster") or {}).get("network_dilation") or 1.0
    return float(d)


def run_facts(summary: dict, records: list[dict] | None = None, where: str = "") -> dict | None:
    """What one run measured, per worker and step, its times divided by its ``network_dilation``.

    Args:
        summary: a summary.json (Grappa's or the DistDGL baseline's; other systems give None).
        records: its metrics.jsonl (optional: whether DistDGL pulled labels from other machines).
        where: its folder, for messages.

    Returns:
        ``system``, ``where``, ``parts``, ``partition``, ``steps``, ``epochs``, ``dilation``,
        ``epoch_s`` and ``step_s`` (undilated), ``link`` (``mode``, ``bandwidth_Bps``,
        ``latency_s``), ``cores_per_host``, ``workload`` (what must match across runs),
        ``batch_size``, ``steps_cap``, ``prefetch``, ``model_bytes``, ``grad_step_bytes``,
        ``sample_s`` / ``backward_s`` per step, ``wire_overhead`` (wire / application bytes,
        None unmeasured); Grappa: ``train_seeds`` (per worker), ``row_bytes``; DistDGL:
        ``feature_step_bytes``, ``rpc_step_bytes`` (the largest worker's), ``pull_rows_step``
        (mean per worker), ``label_pull``; ``cpu_step_s``: rank 0's CPU seconds a step (None
        where the run did not record them).

    Example:
        >>> s = {"system": "grappa", "num_parts": 2, "partition_method": "metis", "steps_per_epoch": 4,
        ...      "epochs": 2, "epoch_time_s": 0.8, "network_dilation": 2.0, "model_grad_bytes": 1000,
        ...      "grad_bytes_per_epoch": 4000, "phases": {"sample_s": 0.08, "backward_s": 0.16},
        ...      "workers": [{"train_seeds": 300, "inner_nodes": 500, "own_fp32_bytes": 128_000}] * 2}
        >>> f = run_facts(s)
        >>> f["step_s"], f["sample_s"], f["row_bytes"], f["link"]["bandwidth_Bps"]
        (0.1, 0.01, 256.0, None)
    """
    system = summary.get("system")
    if system not in SYSTEMS:
        return None
    s = summary
    cfg = s.get("config") or {}
    tr, mo = cfg.get("train") or {}, cfg.get("model") or {}
    data = {k: v for k, v in (cfg.get("data") or {}).items() if k != "root"}
    dil = _dilation(s)
    steps = float(s["steps_per_epoch"])
    phases = s.get("phases") or {}
    share = s.get("host_cpu_share") or (s.get("cluster") or {}).get("host_cpu_share")
    wire, app = s.get("wire_bytes_per_epoch"), s.get("app_bytes_per_epoch")
    f = {
        "system": system, "where": where, "parts": int(s["num_parts"]), "partition": s.get("partition_method"),
        "correction": s.get("correction"),
        "steps": steps, "epochs": int(s.get("epochs") or 1), "dilation": dil,
        "epoch_s": s["epoch_time_s"] / dil, "step_s": s["epoch_time_s"] / dil / steps, "link": _link(s),
        "cores_per_host": share * dil if share else None,
        "workload": {"dataset": s.get("dataset"), "model": s.get("model"), "num_layers": s.get("num_layers"),
                     "hidden": mo.get("hidden"), "fanouts": tr.get("fanouts"), "batch_size": tr.get("batch_size"),
                     "model_grad_bytes": s.get("model_grad_bytes"), "data": data},
        "num_layers": int(s.get("num_layers") or len(tr.get("fanouts") or []) or 1),
        "batch_size": tr.get("batch_size"), "steps_cap": tr.get("steps_per_epoch") or 0,
        "prefetch": bool(tr.get("prefetch")) and system == "grappa",
        "model_bytes": float(s["model_grad_bytes"]), "grad_step_bytes": float(s["grad_bytes_per_epoch"]) / steps,
        "sample_s": (phases.get("sample_s", 0.0) + phases.get("gather_s", 0.0)) / steps / dil,
        "backward_s": phases.get("backward_s", 0.0) / steps / dil,
        "wire_overhead": wire / app if wire and app else None,
        "wire_bytes_per_epoch": wire,
        # rank 0's CPU seconds a step (not dilated: a 1/D share spends the same seconds, later)
        "cpu_step_s": s["cpu_time_s_rank0"] / steps if s.get("cpu_time_s_rank0") else None,
    }
    workers = s.get("workers") or []
    if system == "grappa":
        f["train_seeds"] = [int(w.get("train_seeds", 0)) for w in workers]
        rows = [w["own_fp32_bytes"] / w["inner_nodes"] for w in workers
                if w.get("own_fp32_bytes") and w.get("inner_nodes")]
        f["row_bytes"] = rows[0] if rows else None
    else:
        f["feature_step_bytes"] = float(s.get("feature_bytes_per_epoch") or 0.0) / steps
        f["rpc_step_bytes"] = float(s.get("rpc_bytes_per_epoch") or 0.0) / steps
        f["pull_rows_step"] = float(s.get("pull_rows_total") or 0.0) / (f["epochs"] * f["parts"] * steps)
        if records:
            f["label_pull"] = any((r.get("other_pull_bytes_all") or 0) > 0 for r in records)
        else:  # node_split(force_even=True) gives a trainer some seeds of other machines
            f["label_pull"] = f["parts"] > 1
    return f


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs)


def _ls_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of y on x."""
    mx, my = _mean(xs), _mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    return my - slope * mx, slope


def _net_at(f: dict, nbytes: float, terms: float) -> float:
    ln = f["link"]
    return link_seconds(nbytes, terms, ln["bandwidth_Bps"], ln["latency_s"], parts=f["parts"], link=ln["mode"])


def calibrate_from(facts: list[dict], *, remote_growth: float | None = None, row_cost_s: float | None = None,
                   compute_scale: float = 1.0) -> dict:
    """The model's constants from the runs' facts (:func:`run_facts`); pure.

    Args:
        facts: one entry per run (Grappa and DistDGL, one workload, any part counts and
            partitioners; runs at 1 part give compute without any network).
        remote_growth: a, for structure-aware partitioners (None: fitted from runs at two
            part counts, else 0: the measured share of a random partition's remote rows).
        row_cost_s: DistDGL's CPU seconds per remote row (None: fitted, else 0).
        compute_scale: multiplies every per-step compute (0.5: machines twice as fast).

    Returns:
        The calibration: ``train_nodes``, ``batch_size``, ``steps_cap``, ``row_bytes``,
        ``model_bytes``, ``input_rows``, ``compute_scale``, ``grappa`` (``compute_s``,
        ``sample_s``, ``backward_s``, ``prefetch``, ``corr_bytes``, ``buckets``,
        ``wire_overhead``), ``distdgl`` (``compute_s``, ``row_cost_s``, ``round_trips``,
        ``buckets``, ``wire_overhead``), ``partitions`` (per partitioner: ``parts0``,
        ``input_rows``, ``remote_fraction0``, ``q0``, ``growth``, ``rpc_share``,
        ``seed_imbalance``), ``runs`` (what each calibration run measured and the
        calibration gives back at its point), ``notes``.

    Raises:
        ProjectError: a system missing, several workloads, no DistDGL run on >= 2 parts.

    Example:
        >>> cal = calibrate_from(facts)          # doctest: +SKIP
    """
    notes: list[str] = []
    g = [f for f in facts if f["system"] == "grappa"]
    d = [f for f in facts if f["system"] == "distdgl"]
    corrections = sorted({f["correction"] for f in g}, key=lambda c: (c != "none", str(c)))
    if len(corrections) > 1:  # compare.variants: one Grappa run per correction
        g = [f for f in g if f["correction"] == corrections[0]]
        facts = g + d
        notes.append(f"Grappa calibrated on its correction={corrections[0]} runs (not "
                     f"{', '.join(map(str, corrections[1:]))})")
    where = ", ".join(sorted({f["where"] for f in facts})) or "the runs"
    for have, miss, name in ((d, g, "Grappa"), (g, d, "DistDGL")):
        if have and not miss:
            other = "DistDGL" if name == "Grappa" else "Grappa"
            raise ProjectError(f"project: {where} has {other} summaries but no {name} one; pass the folder of a "
                               f"compare run, which holds both systems' summary.json")
    loads = {json.dumps(f["workload"], sort_keys=True) for f in facts}
    if len(loads) > 1:
        raise ProjectError(f"project: the runs train {len(loads)} different workloads (dataset, model, fan-outs, "
                           f"batch or width differ); pass runs of one workload to --runs")
    multi = [f for f in d if f["parts"] > 1]
    if not multi:
        raise ProjectError("project: every DistDGL run has 1 part, so none measured remote rows or bytes; add a "
                           "compare run with --partition.num_parts=2 or more to --runs")
    seeds = [sum(f["train_seeds"]) for f in g]
    T = _mean(seeds)
    B = g[0]["batch_size"] or d[0]["batch_size"]
    rows_b = [f["row_bytes"] for f in g if f.get("row_bytes")]
    if not rows_b:
        raise ProjectError("project: the Grappa summaries have no per-worker own_fp32_bytes / inner_nodes (the "
                           "feature width); pass summaries written by this version of dgl_grappa")
    row = rows_b[0]
    M = g[0]["model_bytes"]
    buckets = ddp_buckets(M)

    def overhead(runs):
        xs = [f["wire_overhead"] for f in runs if f["parts"] > 1 and f["wire_overhead"]]
        return _mean(xs) if xs else 1.0

    o_g, o_d = overhead(g), overhead(d)
    if not any(f["wire_overhead"] for f in multi):
        notes.append("no wire bytes measured (runs not in a private network namespace): bytes are application "
                     "bytes, without TCP/IP framing")
    corr = max(0.0, _mean(f["grad_step_bytes"] - M for f in g))

    # Partitions: remote share at the measured part counts, its growth, RPC bytes per feature byte.
    partitions: dict[str, dict] = {}
    by_method: dict[str, list[dict]] = {}
    for f in multi:
        by_method.setdefault(f["partition"], []).append(f)
    for method, runs in by_method.items():
        pts = []
        for f in runs:
            seeds_step = min(B, T / (f["parts"] * f["steps"]))
            inputs = max(f["pull_rows_step"] - seeds_step, 1.0)
            rows = f["feature_step_bytes"] / (row + 8)
            rho = rows / inputs
            q = rho / random_remote_fraction(f["parts"], inputs, seeds_step)
            pts.append((f["parts"], inputs, rho, q))
        p0 = min(p for p, *_ in pts)
        at0 = [x for x in pts if x[0] == p0]
        if method == "random":
            a = 0.0
        elif remote_growth is not None:
            a = float(remote_growth)
        elif len({p for p, *_ in pts}) > 1:
            a = _ls_line([math.log(p / p0) for p, *_ in pts], [math.log(max(q, 1e-9)) for *_, q in pts])[1]
            notes.append(f"{method}: remote share of a random partition's grows as (P/{p0})^{a:.2f}, fitted on "
                         f"{len(pts)} runs")
        else:
            a = 0.0
            notes.append(f"{method}: assumed to keep the measured share ({_mean(x[3] for x in at0):.2f}) of a random "
                         f"partition's remote rows at every P (runs at one part count cannot fit its growth; "
                         f"--remote-growth sets it)")
        q0 = _mean(x[3] for x in at0) if method != "random" else _mean(x[3] for x in pts)
        imb = [max(f["train_seeds"]) / _mean(f["train_seeds"]) for f in g
               if f["partition"] == method and f["parts"] > 1 and sum(f["train_seeds"])]
        partitions[method] = {
            "parts0": p0, "input_rows": _mean(x[1] for x in pts), "remote_fraction0": _mean(x[2] for x in at0),
            "q0": q0, "growth": a, "measured_parts": sorted({p for p, *_ in pts}),
            "rpc_share": _mean(f["rpc_step_bytes"] / f["feature_step_bytes"] for f in runs if f["feature_step_bytes"])
            if any(f["feature_step_bytes"] for f in runs) else 0.0,
            "seed_imbalance": _mean(imb) if imb else 1.0}
    input_rows = _mean(p["input_rows"] for p in partitions.values())
    round_trips = d[0]["num_layers"] + 1 + (1 if any(f["label_pull"] for f in multi) else 0)

    # DistDGL: step time minus the network at its own point = c_D + c_row R.
    xs, ys = [], []
    for f in d:
        nbytes = o_d * (f["feature_step_bytes"] + f["rpc_step_bytes"] + ring_factor(f["parts"]) * M)
        terms = (2 * round_trips + buckets * 2 * (f["parts"] - 1)) if f["parts"] > 1 else 0
        xs.append(f["feature_step_bytes"] / (row + 8))
        ys.append(f["step_s"] - _net_at(f, nbytes if f["parts"] > 1 else 0.0, terms))
    if row_cost_s is not None:
        c_row = float(row_cost_s)
    elif max(xs) - min(xs) > 0.05 * max(xs):
        c_row = max(_ls_line(xs, ys)[1], 0.0)
    else:
        c_row = 0.0
        notes.append("DistDGL's CPU cost per remote row is not separable from runs with one remote-row count: "
                     "set to 0, so its projection grows with P through bytes and round trips only (an "
                     "underestimate of its time where its remote rows grow); a 1-part compare run, or runs at "
                     "two part counts, separate it (or set --row-cost-us)")
    c_d = _mean(y - c_row * x for x, y in zip(xs, ys))

    # Grappa: step time minus the all-reduce at its own point (undoing prefetch's overlap).
    prefetch = any(f["prefetch"] for f in g)
    comp_g: dict[int, list[float]] = {}
    samp, bwd = [], []
    for f in g:
        net = _net_at(f, o_g * ring_factor(f["parts"]) * f["grad_step_bytes"], buckets * 2 * (f["parts"] - 1))
        s, b = f["sample_s"], f["backward_s"]
        comp_g.setdefault(f["parts"], []).append(f["step_s"] + s + b - max(b + net, s) if f["prefetch"]
                                                 else f["step_s"] - net)
        samp.append(s)
        bwd.append(b)
    by_parts = [[p, _mean(cs)] for p, cs in sorted(comp_g.items())]
    cores = sorted({round(f["cores_per_host"], 3) for f in facts if f["cores_per_host"]})
    cal = {
        "name": g[0]["workload"]["dataset"], "workload": g[0]["workload"], "correction": g[0]["correction"],
        "train_nodes": T, "batch_size": B,
        "steps_cap": g[0]["steps_cap"], "row_bytes": row, "model_bytes": M, "input_rows": input_rows,
        "compute_scale": compute_scale, "cores_per_host": cores,
        "grappa": {"compute_s": _mean(c for _, c in by_parts), "compute_by_parts": by_parts, "sample_s": _mean(samp), "backward_s": _mean(bwd),
                   "prefetch": prefetch, "corr_bytes": corr, "buckets": buckets, "wire_overhead": o_g},
        "distdgl": {"compute_s": c_d, "row_cost_s": c_row, "round_trips": round_trips, "buckets": buckets,
                    "wire_overhead": o_d},
        "partitions": partitions, "notes": notes,
    }
    if any(f["batch_size"] and T / (f["parts"] * f["steps"]) < 0.5 * f["batch_size"] for f in g):
        notes.append("some calibration runs train batches smaller than batch_size (few training nodes per "
                     "worker): per-step compute and bytes are those batches'")
    if len(cores) > 1:
        notes.append(f"the calibration runs' hosts had different cores ({', '.join(map(str, cores))}): their "
                     f"per-step compute is averaged")
    cal["runs"] = [{"where": f["where"], "system": f["system"], "parts": f["parts"], "partition": f["partition"],
                    "bandwidth": f["link"]["bandwidth"], "latency_ms": f["link"]["latency_s"] * 1e3,
                    "link": f["link"]["mode"], "dilation": f["dilation"], "measured_epoch_s": f["epoch_s"]}
                   for f in facts]
    return cal


def find_summaries(paths: list[str | Path]) -> list[tuple[Path, dict, list[dict] | None]]:
    """Every summary.json under the paths (a file, a run folder, a compare folder, a bench folder).

    A summary under a folder that has its own summary.json (a restart segment) is left out.

    Raises:
        ProjectError: a path that does not exist, holds no summary.json, or an unreadable one.
    """
    found: list[tuple[Path, dict, list[dict] | None]] = []
    for p in map(Path, paths):
        if not p.exists():
            raise ProjectError(f"project: '{p}' does not exist; pass the folder of a compare run (or a summary.json)")
        files = [p] if p.is_file() else sorted(p.rglob("summary.json"))
        if p.is_dir():  # not a segment's: no folder between p and the file's own has a summary.json
            files = [f for f in files
                     if not any((a / "summary.json").exists() for a in f.parent.parents if a == p or p in a.parents)]
        if not files:
            raise ProjectError(f"project: no summary.json under '{p}'; pass the folder of a finished compare run "
                               f"(python -m dgl_grappa compare --config ... --run.output_dir={p})")
        for f in files:
            try:
                s = json.loads(f.read_text())
                if not isinstance(s, dict) or "system" not in s:
                    raise ValueError("no 'system'")
            except (OSError, ValueError) as exc:
                raise ProjectError(f"project: '{f}' is not a run's summary.json ({exc}); pass folders of finished "
                                   f"compare runs") from None
            m = f.parent / "metrics.jsonl"
            recs = None
            if m.exists():
                try:
                    recs = [json.loads(line) for line in m.read_text().splitlines() if line.strip()]
                except ValueError:
                    recs = None
            found.append((f.parent, s, recs))
    return found


def _facts(paths: list[str | Path]) -> list[dict]:
    out = []
    for folder, s, recs in find_summaries(paths):
        f = run_facts(s, recs, str(folder))
        if f is not None:
            out.append(f)
    if not out:
        raise ProjectError(f"project: no Grappa or DistDGL summary under {', '.join(map(str, paths))} (only "
                           f"drop-in or other systems); pass the folder of a compare run")
    return out


def calibrate(paths: list[str | Path], **kw) -> dict:
    """The calibration from run folders or summary.json files (:func:`calibrate_from` on their facts).

    Example:
        >>> cal = calibrate(["runs/compare-p1", "runs/compare-p4"])     # doctest: +SKIP
        >>> project(cal, 16, 10, 50)["speedup"]                          # doctest: +SKIP
    """
    return calibrate_from(_facts(paths), **kw)


def check(cal: dict, paths: list[str | Path]) -> list[dict]:
    """:func:`check_rows` for every run under ``paths`` (compare folders of emulated runs).

    Example:
        >>> rows = check(cal, ["runs/emulated-p4-1gbit"])             # doctest: +SKIP
        >>> print(format_check(rows))                                 # doctest: +SKIP
    """
    return check_rows(cal, _facts(paths))


def check_rows(cal: dict, facts: list[dict]) -> list[dict]:
    """Projected against measured epoch (and wire bytes) of runs (:func:`run_facts`), each at its own P, link, L.

    Measured times are divided by the run's ``network_dilation`` (as :func:`run_facts` does).

    Returns:
        Per run: ``where``, ``system``, ``parts``, ``partition``, ``bandwidth``, ``latency_ms``,
        ``link``, ``dilation``, ``cores_per_host``, ``measured_epoch_s``, ``projected_epoch_s``,
        ``error`` ((projected - measured) / measured), ``measured_wire``, ``projected_wire``
        (all hosts, per epoch) and ``wire_error``; for Grappa ``cpu_ratio``, the run's CPU
        seconds a step over the calibrated compute a step at its P (above 1: its hosts computed
        the same step slower than the calibration's worker on a core of its own, e.g. hosts
        time-slicing a core), and ``error_at_run_cpu``, the error with the projection's
        compute scaled by it (None without CPU seconds).

    Example:
        >>> cal = {"row_bytes": 256, "train_nodes": 4000, "model_bytes": 1000, "batch_size": 1000,
        ...        "steps_cap": 0, "compute_scale": 1.0,
        ...        "grappa": {"compute_s": 0.02, "corr_bytes": 0, "wire_overhead": 1.0, "buckets": 1,
        ...                   "prefetch": False, "sample_s": 0.0, "backward_s": 0.0},
        ...        "distdgl": {"compute_s": 0.05, "row_cost_s": 0.0, "wire_overhead": 1.0, "buckets": 1,
        ...                    "round_trips": 4},
        ...        "partitions": {"metis": {"input_rows": 9000, "parts0": 2, "q0": 0.5, "growth": 0.0,
        ...                                  "rpc_share": 0.0, "seed_imbalance": 1.0}}}
        >>> f = {"system": "grappa", "where": "emu", "parts": 2, "partition": "metis", "epoch_s": 0.05,
        ...      "dilation": 2.0, "cores_per_host": 1.0, "wire_bytes_per_epoch": None,
        ...      "link": {"bandwidth": None, "bandwidth_Bps": None, "latency_s": 0.0, "mode": "per_host"}}
        >>> round(check_rows(cal, [f])[0]["error"], 3)     # 2 steps x 20 ms against 50 ms measured
        -0.2
    """
    rows = []
    for f in facts:
        if f["system"] == "grappa" and cal.get("correction") and f.get("correction") != cal["correction"]:
            continue  # another Grappa variant of the compare run: not what was calibrated
        if cal.get("workload") is not None and f["workload"] != cal["workload"]:
            raise ProjectError(f"project: '{f['where']}' trains another workload than the calibration runs (data, "
                               f"model, fan-outs, batch or width differ); pass --check runs of the calibrated workload")
        ln = f["link"]
        gbit = ln["bandwidth_Bps"] / GBIT if ln["bandwidth_Bps"] else None
        r = project(cal, f["parts"], gbit, ln["latency_s"] * 1e6, partition=f["partition"], link=ln["mode"])
        proj = r[f"{f['system']}_epoch_s"]
        cpu_ratio = at_run_cpu = None
        if f["system"] == "grappa" and f.get("cpu_step_s"):
            # Only Grappa's compute is one process's CPU (DistDGL's servers do part of its work).
            compute = grappa_compute(cal, f["parts"]) * cal.get("compute_scale", 1.0)
            cpu_ratio = f["cpu_step_s"] / compute
            adjusted = proj + (cpu_ratio - 1.0) * compute * r["grappa_steps"]
            at_run_cpu = (adjusted - f["epoch_s"]) / f["epoch_s"] if f["epoch_s"] else None
        wire = f["wire_bytes_per_epoch"]
        pwire = r[f"{f['system']}_bytes_per_epoch"] * f["parts"]
        rows.append({"where": f["where"], "system": f["system"], "parts": f["parts"], "partition": f["partition"],
                     "bandwidth": ln["bandwidth"], "latency_ms": ln["latency_s"] * 1e3, "link": ln["mode"],
                     "dilation": f["dilation"], "cores_per_host": f["cores_per_host"],
                     "measured_epoch_s": f["epoch_s"], "projected_epoch_s": proj,
                     "error": (proj - f["epoch_s"]) / f["epoch_s"] if f["epoch_s"] else None,
                     "measured_wire": wire, "projected_wire": pwire,
                     "wire_error": (pwire - wire) / wire if wire else None,
                     "cpu_ratio": cpu_ratio, "error_at_run_cpu": at_run_cpu})
    return rows


# ---------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------

def _fmt_s(x: float) -> str:
    return f"{x * 1e3:.1f} ms" if x < 1 else f"{x:.3f} s" if x < 100 else f"{x:.0f} s"


def _fmt_b(x: float | None) -> str:
    from ..runtime.metrics import format_bytes

    return format_bytes(x)


def format_calibration(cal: dict) -> str:
    """What the calibration measured, in a few lines."""
    g, d = cal["grappa"], cal["distdgl"]
    w = cal["workload"]
    lines = [f"calibration: {w['dataset']}, {w['model']} x{w['num_layers']}, fan-outs {w['fanouts']}, batch "
             f"{cal['batch_size']}, {cal['train_nodes']:.0f} training nodes, rows of {cal['row_bytes']:.0f} B, "
             f"gradients {_fmt_b(cal['model_bytes'])} ({g['buckets']} DDP bucket{'s' if g['buckets'] > 1 else ''}); "
             f"{len(cal['runs'])} runs",
             f"  Grappa per step: compute "
             + (", ".join(f"{_fmt_s(c)} at {q} part{'s' if q > 1 else ''}" for q, c in g["compute_by_parts"])
                if g.get("compute_by_parts") else _fmt_s(g["compute_s"]))
             + (f" (prefetch: sampling {_fmt_s(g['sample_s'])} overlaps the backward)" if g["prefetch"] else "")
             + f"; wire / app bytes {g['wire_overhead']:.3f}",
             f"  DistDGL per step: compute {_fmt_s(d['compute_s'])} + {d['row_cost_s'] * 1e6:.2f} us per remote row; "
             f"{d['round_trips']} round trips (sampling per layer, pulls); wire / app bytes {d['wire_overhead']:.3f}"]
    for name, p in cal["partitions"].items():
        lines.append(f"  {name}: {p['input_rows']:.0f} input rows a step, {p['remote_fraction0']:.1%} remote at "
                     f"{p['parts0']} parts ({p['q0']:.2f} x a random partition's, growth (P/{p['parts0']})^"
                     f"{p['growth']:.2f}), sampling RPC {p['rpc_share']:.1%} of feature bytes")
    if cal.get("cores_per_host"):
        lines.append(f"  calibration hosts: {', '.join(map(str, cal['cores_per_host']))} cores each (after dilation)")
    for n in cal["notes"]:
        lines.append(f"  note: {n}")
    return "\n".join(lines)


def format_table(rows: list[dict]) -> str:
    """The projection grid as a text table (one per partitioner and latency)."""
    out = []
    keys = []
    for r in rows:
        k = (r["partition"], r["latency_us"])
        if k not in keys:
            keys.append(k)
    for part, lat in keys:
        out.append(f"\n{part} partitions, one NIC per machine, one-way latency {lat:g} us "
                   f"(epoch: its network share in brackets)")
        head = ("P", "link", "remote", "DistDGL epoch", "Grappa epoch", "speedup", "DistDGL B/worker", "Grappa B/worker")
        table = [head]
        for r in rows:
            if (r["partition"], r["latency_us"]) != (part, lat):
                continue
            link = f"{r['gbit']:g} Gbit/s" if r["gbit"] else "unlimited"

            def ep(sys_):
                e, n = r[f"{sys_}_epoch_s"], r[f"{sys_}_network_s"]
                return f"{_fmt_s(e)} ({n / e:.0%})" if e else "-"

            table.append((str(r["parts"]), link, f"{r['remote_fraction']:.1%}", ep("distdgl"), ep("grappa"),
                          f"{r['speedup']:.2f}x", _fmt_b(r["distdgl_bytes_per_epoch"]),
                          _fmt_b(r["grappa_bytes_per_epoch"])))
        widths = [max(len(row[i]) for row in table) for i in range(len(head))]
        for i, row in enumerate(table):
            out.append("  ".join(c.ljust(wd) for c, wd in zip(row, widths)).rstrip())
            if i == 0:
                out.append("  ".join("-" * wd for wd in widths))
    return "\n".join(out)


def format_check(rows: list[dict], target: float = TARGET, cores: list[float] | None = None) -> str:
    """Projected against measured, one line per run, and how many are within the target.

    ``cores``: the calibration runs' cores per host; a checked run on hosts with other cores
    gets a note (its compute is not the calibration's).
    """
    head = ("run", "system", "P", "link", "latency", "dilation", "measured", "projected", "error", "wire meas.",
            "wire proj.", "wire error", "CPU/step vs cal.", "error at its CPU")
    table = [head]
    for r in rows:
        table.append((Path(r["where"]).name if r["where"] else "-", r["system"], str(r["parts"]),
                      f"{r['link']} {r['bandwidth'] or 'unshaped'}", f"{r['latency_ms']:g} ms", f"{r['dilation']:g}",
                      _fmt_s(r["measured_epoch_s"]), _fmt_s(r["projected_epoch_s"]),
                      f"{r['error']:+.1%}" if r["error"] is not None else "-", _fmt_b(r["measured_wire"]),
                      _fmt_b(r["projected_wire"]), f"{r['wire_error']:+.1%}" if r["wire_error"] is not None else "-",
                      f"{r['cpu_ratio']:.2f}x" if r.get("cpu_ratio") else "-",
                      f"{r['error_at_run_cpu']:+.1%}" if r.get("error_at_run_cpu") is not None else "-"))
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    out = []
    for i, row in enumerate(table):
        out.append("  ".join(c.ljust(wd) for c, wd in zip(row, widths)).rstrip())
        if i == 0:
            out.append("  ".join("-" * wd for wd in widths))
    errs = [abs(r["error"]) for r in rows if r["error"] is not None]
    ok = sum(e <= target for e in errs)
    out.append(f"{ok} of {len(errs)} epochs within {target:.0%} of the measured (largest error "
               f"{max(errs) if errs else 0:.1%})")
    other = sorted({round(r["cores_per_host"], 3) for r in rows if r.get("cores_per_host")} - set(cores or []))
    slow = [r for r in rows if (r.get("cpu_ratio") or 0) > 1 + target]
    if slow:
        lo, hi = min(r["cpu_ratio"] for r in slow), max(r["cpu_ratio"] for r in slow)
        span = f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}x"
        out.append(f"note: {len(slow)} Grappa run(s) spent {span} the calibration's compute in CPU seconds a step: "
                   "the same work done slower on their hosts (time-sliced cores), which the projection does "
                   "not model; 'error at its CPU' is the error with that compute")
    if cores and other:
        out.append(f"note: some checked runs' hosts had {', '.join(map(str, other))} cores, the calibration runs' "
                   f"{', '.join(map(str, cores))}: their compute per step differs from the calibration's")
    return "\n".join(out)


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are the CLI's one-line errors (exit status 2 through :class:`ProjectError`)."""

    def error(self, message: str):
        raise ProjectError(f"project: {message}; usage: python -m dgl_grappa project --runs RUN_DIR [--parts 4,8] "
                           f"[--gbit 1,10] [--latency-us 50] [--check DIR]")


def _numbers(text: str, flag: str, kind=float, low: float = 0.0) -> list:
    try:
        xs = [kind(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        xs = []
    if not xs or any(x < low for x in xs) or any(isinstance(x, float) and not math.isfinite(x) for x in xs):
        what = "whole numbers" if kind is int else "numbers"
        raise ProjectError(f"project: {flag}={text!r} is not a comma-separated list of {what} >= {low:g}; "
                           f"e.g. {flag} {'4,8,16' if kind is int else '1,10,25'}")
    return xs


def cmd_project(argv: list[str]) -> int:
    """``python -m dgl_grappa project``: the projection table (and JSON), or with ``--check`` the check."""
    ap = _Parser(prog="python -m dgl_grappa project", add_help=True,
                 description="project DistDGL's and Grappa's epoch time to P machines and B Gbit/s links")
    ap.add_argument("--runs", nargs="+", action="extend", default=[], required=True,
                    help="compare run folders (or summary.json files) to calibrate on")
    ap.add_argument("--parts", default="4,8,16,32,64", help="machines P (default 4,8,16,32,64)")
    ap.add_argument("--gbit", default="1,10,25", help="link bandwidth per machine, Gbit/s (default 1,10,25)")
    ap.add_argument("--latency-us", default="50", help="one-way latency, microseconds (default 50)")
    ap.add_argument("--partition", default=None, help="project only this calibrated partitioner (default: all)")
    ap.add_argument("--remote-growth", type=float, default=None,
                    help="a: a structure-aware partition's remote share grows as (P/P0)^a x a random one's")
    ap.add_argument("--row-cost-us", type=float, default=None, help="DistDGL CPU microseconds per remote row")
    ap.add_argument("--compute-scale", type=float, default=1.0, help="multiply per-step compute (default 1)")
    ap.add_argument("--check", nargs="+", action="extend", default=[],
                    help="emulated compare runs: print projected against measured epochs instead of the table")
    ap.add_argument("--target", type=float, default=TARGET, help="the check's target relative error")
    ap.add_argument("--out", default=None, help="JSON output (default: <first --runs folder>/projection.json)")
    a = ap.parse_args(argv)
    parts = _numbers(a.parts, "--parts", int, 1)
    gbits = _numbers(a.gbit, "--gbit", float, 0)
    if any(b <= 0 for b in gbits):
        raise ProjectError(f"project: --gbit={a.gbit!r} must be > 0 Gbit/s; e.g. --gbit 1,10,25")
    lats = _numbers(a.latency_us, "--latency-us", float, 0)
    if a.compute_scale <= 0:
        raise ProjectError(f"project: --compute-scale={a.compute_scale:g} must be > 0")
    if a.row_cost_us is not None and a.row_cost_us < 0:
        raise ProjectError(f"project: --row-cost-us={a.row_cost_us:g} must be >= 0")
    cal = calibrate(a.runs, remote_growth=a.remote_growth,
                    row_cost_s=None if a.row_cost_us is None else a.row_cost_us * 1e-6, compute_scale=a.compute_scale)
    if a.partition is not None:
        _partition(cal, a.partition)
    first = Path(a.runs[0])
    out = Path(a.out) if a.out else (first if first.is_dir() else first.parent) / (
        "projection_check.json" if a.check else "projection.json")
    if a.check:
        rows = check(cal, a.check)
        text = format_check(rows, a.target, cal.get("cores_per_host"))
        result = {"calibration": cal, "check": rows, "target": a.target}
    else:
        names = [a.partition] if a.partition else list(cal["partitions"])
        rows = [r for n in names for r in project_grid(cal, parts, gbits, lats, partition=n)]
        text = format_table(rows)
        small = [p for p in parts if cal["train_nodes"] / (p * cal["batch_size"]) < 1]
        if small:
            text += (f"\nnote: at P >= {min(small)} a worker has fewer than batch_size training nodes: per-step "
                     f"compute and bytes stay those of the calibration's batches (an overestimate there)")
        result = {"calibration": cal, "projection": rows}
    print(format_calibration(cal))
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")
    return 0


__all__ = ["GBIT", "ProjectError", "TARGET", "calibrate", "calibrate_from", "check", "check_rows", "cmd_project", "ddp_buckets",
           "distdgl_step", "find_summaries", "format_check", "format_table", "grappa_compute", "grappa_step", "link_seconds", "project",
           "project_grid", "remote_fraction", "run_facts", "seeds_per_step", "steps_per_epoch"]
