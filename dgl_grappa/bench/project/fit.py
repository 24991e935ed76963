"""Calibration: what each run measured (:func:`run_facts`), then the model's constants from all of them.

Each run's times are divided by its ``network_dilation``. Per-step compute is a run's step
time minus the model's network time at that run's own P, link and latency, so a projection
at a calibration run's point gives its measured time back. Grappa's compute is kept per
calibrated part count (:func:`fit_grappa`); DistDGL's is c_D + c_row x R, fitted by least
squares where its runs differ in remote rows (:func:`fit_distdgl`); each partitioner's remote
share and its growth with P come from DistDGL's runs on it (:func:`fit_partitions`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ...cluster.netns import rate_bits
from ..capacity import random_remote_fraction, ring_factor
from .calibration import Calibration, CalibrationRun, DistDGLFit, GrappaFit, PartitionFit, ProjectError
from .model import ddp_buckets, link_seconds

SYSTEMS = ("distdgl", "grappa")
"""The systems a calibration reads (the drop-in's summaries are left out)."""


def _bandwidth_Bps(rate: str | None) -> float | None:
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
    return {
        "bandwidth": rate or None,
        "bandwidth_Bps": _bandwidth_Bps(rate),
        "latency_s": float(lat) / 1e3,
        "mode": mode or "per_host",
    }


def _dilation(s: dict) -> float:
    """A summary's time dilation (test hosts; 1 without)."""
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
        "system": system,
        "where": where,
        "parts": int(s["num_parts"]),
        "partition": s.get("partition_method"),
        "correction": s.get("correction"),
        "steps": steps,
        "epochs": int(s.get("epochs") or 1),
        "dilation": dil,
        "epoch_s": s["epoch_time_s"] / dil,
        "step_s": s["epoch_time_s"] / dil / steps,
        "link": _link(s),
        "cores_per_host": share * dil if share else None,
        "workload": {
            "dataset": s.get("dataset"),
            "model": s.get("model"),
            "num_layers": s.get("num_layers"),
            "hidden": mo.get("hidden"),
            "fanouts": tr.get("fanouts"),
            "batch_size": tr.get("batch_size"),
            "model_grad_bytes": s.get("model_grad_bytes"),
            "data": data,
        },
        "num_layers": int(s.get("num_layers") or len(tr.get("fanouts") or []) or 1),
        "batch_size": tr.get("batch_size"),
        "steps_cap": tr.get("steps_per_epoch") or 0,
        "prefetch": bool(tr.get("prefetch")) and system == "grappa",
        "model_bytes": float(s["model_grad_bytes"]),
        "grad_step_bytes": float(s["grad_bytes_per_epoch"]) / steps,
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
        rows = [
            w["own_fp32_bytes"] / w["inner_nodes"] for w in workers if w.get("own_fp32_bytes") and w.get("inner_nodes")
        ]
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
    """The mean of an iterable."""
    xs = list(xs)
    return sum(xs) / len(xs)


def _ls_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of y on x."""
    mx, my = _mean(xs), _mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    return my - slope * mx, slope


def _net_at(f: dict, nbytes: float, terms: float) -> float:
    """The model's network seconds of a step at a run's own point (its P, link and latency)."""
    ln = f["link"]
    return link_seconds(nbytes, terms, ln["bandwidth_Bps"], ln["latency_s"], parts=f["parts"], link=ln["mode"])


def calibrate_from(
    facts: list[dict],
    *,
    remote_growth: float | None = None,
    row_cost_s: float | None = None,
    compute_scale: float = 1.0,
) -> Calibration:
    """The model's constants from the runs' facts (:func:`run_facts`); pure.

    Args:
        facts: one entry per run (Grappa and DistDGL, one workload, any part counts and
            partitioners; runs at 1 part give compute without any network).
        remote_growth: a, for structure-aware partitioners (None: fitted from runs at two
            part counts, else 0: the measured share of a random partition's remote rows).
        row_cost_s: DistDGL's CPU seconds per remote row (None: fitted, else 0).
        compute_scale: multiplies every per-step compute (0.5: machines twice as fast).

    Returns:
        The :class:`Calibration`: the workload, Grappa's fit (:func:`fit_grappa`), DistDGL's
        (:func:`fit_distdgl`), each partitioner's (:func:`fit_partitions`), what each calibration
        run measured, and the notes on what had to be assumed.

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
        notes.append(
            f"Grappa calibrated on its correction={corrections[0]} runs (not {', '.join(map(str, corrections[1:]))})"
        )
    where = ", ".join(sorted({f["where"] for f in facts})) or "the runs"
    for have, miss, name in ((d, g, "Grappa"), (g, d, "DistDGL")):
        if have and not miss:
            other = "DistDGL" if name == "Grappa" else "Grappa"
            raise ProjectError(
                f"project: {where} has {other} summaries but no {name} one; pass the folder of a "
                f"compare run, which holds both systems' summary.json"
            )
    loads = {json.dumps(f["workload"], sort_keys=True) for f in facts}
    if len(loads) > 1:
        raise ProjectError(
            f"project: the runs train {len(loads)} different workloads (dataset, model, fan-outs, "
            f"batch or width differ); pass runs of one workload to --runs"
        )
    multi = [f for f in d if f["parts"] > 1]
    if not multi:
        raise ProjectError(
            "project: every DistDGL run has 1 part, so none measured remote rows or bytes; add a "
            "compare run with --partition.num_parts=2 or more to --runs"
        )
    T = _mean(sum(f["train_seeds"]) for f in g)
    B = g[0]["batch_size"] or d[0]["batch_size"]
    rows_b = [f["row_bytes"] for f in g if f.get("row_bytes")]
    if not rows_b:
        raise ProjectError(
            "project: the Grappa summaries have no per-worker own_fp32_bytes / inner_nodes (the "
            "feature width); pass summaries written by this version of dgl_grappa"
        )
    row = rows_b[0]
    M = g[0]["model_bytes"]
    buckets = ddp_buckets(M)
    o_g, o_d = _overhead(g), _overhead(d)
    if not any(f["wire_overhead"] for f in multi):
        notes.append(
            "no wire bytes measured (runs not in a private network namespace): bytes are application "
            "bytes, without TCP/IP framing"
        )
    partitions = fit_partitions(multi, g, T, B, row, remote_growth=remote_growth, notes=notes)
    distdgl = fit_distdgl(d, multi, row, M, buckets, o_d, row_cost_s=row_cost_s, notes=notes)
    grappa = fit_grappa(g, M, buckets, o_g)
    cores = sorted({round(f["cores_per_host"], 3) for f in facts if f["cores_per_host"]})
    cal = Calibration(
        name=g[0]["workload"]["dataset"],
        workload=g[0]["workload"],
        correction=g[0]["correction"],
        train_nodes=T,
        batch_size=B,
        steps_cap=g[0]["steps_cap"],
        row_bytes=row,
        model_bytes=M,
        input_rows=_mean(p.input_rows for p in partitions.values()),
        compute_scale=compute_scale,
        cores_per_host=cores,
        grappa=grappa,
        distdgl=distdgl,
        partitions=partitions,
        notes=notes,
    )
    if any(f["batch_size"] and T / (f["parts"] * f["steps"]) < 0.5 * f["batch_size"] for f in g):
        notes.append(
            "some calibration runs train batches smaller than batch_size (few training nodes per "
            "worker): per-step compute and bytes are those batches'"
        )
    if len(cores) > 1:
        notes.append(
            f"the calibration runs' hosts had different cores ({', '.join(map(str, cores))}): their "
            f"per-step compute is averaged"
        )
    cal.runs = [
        CalibrationRun(
            where=f["where"],
            system=f["system"],
            parts=f["parts"],
            partition=f["partition"],
            bandwidth=f["link"]["bandwidth"],
            latency_ms=f["link"]["latency_s"] * 1e3,
            link=f["link"]["mode"],
            dilation=f["dilation"],
            measured_epoch_s=f["epoch_s"],
        )
        for f in facts
    ]
    return cal


def _overhead(runs: list[dict]) -> float:
    """Wire bytes per application byte, the mean over the multi-part runs that measured both (1 without)."""
    xs = [f["wire_overhead"] for f in runs if f["parts"] > 1 and f["wire_overhead"]]
    return _mean(xs) if xs else 1.0


def fit_partitions(
    multi: list[dict],
    grappa: list[dict],
    T: float,
    B: int,
    row: float,
    *,
    remote_growth: float | None,
    notes: list[str],
) -> dict[str, PartitionFit]:
    """Each partitioner's remote rows, from the DistDGL runs on >= 2 parts (``multi``).

    Per partitioner: the unique input rows of a step, the share another machine owns at the
    smallest measured part count and its ratio q0 to a random partition's, the growth a of
    that ratio with P (0 for random partitions; ``remote_growth`` where given, else fitted
    from runs at two part counts, else 0 with a note), the sampling RPC bytes per feature
    byte, and Grappa's seed imbalance on it (from its ``grappa`` runs). ``T``: training nodes,
    ``B``: the batch, ``row``: feature-row bytes. Notes go to ``notes``.
    """
    partitions: dict[str, PartitionFit] = {}
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
            notes.append(
                f"{method}: remote share of a random partition's grows as (P/{p0})^{a:.2f}, fitted on {len(pts)} runs"
            )
        else:
            a = 0.0
            notes.append(
                f"{method}: assumed to keep the measured share ({_mean(x[3] for x in at0):.2f}) of a random "
                f"partition's remote rows at every P (runs at one part count cannot fit its growth; "
                f"--remote-growth sets it)"
            )
        q0 = _mean(x[3] for x in at0) if method != "random" else _mean(x[3] for x in pts)
        imb = [
            max(f["train_seeds"]) / _mean(f["train_seeds"])
            for f in grappa
            if f["partition"] == method and f["parts"] > 1 and sum(f["train_seeds"])
        ]
        partitions[method] = PartitionFit(
            parts0=p0,
            input_rows=_mean(x[1] for x in pts),
            remote_fraction0=_mean(x[2] for x in at0),
            q0=q0,
            growth=a,
            measured_parts=sorted({p for p, *_ in pts}),
            rpc_share=_mean(f["rpc_step_bytes"] / f["feature_step_bytes"] for f in runs if f["feature_step_bytes"])
            if any(f["feature_step_bytes"] for f in runs)
            else 0.0,
            seed_imbalance=_mean(imb) if imb else 1.0,
        )
    return partitions


def fit_distdgl(
    runs: list[dict],
    multi: list[dict],
    row: float,
    M: float,
    buckets: int,
    overhead: float,
    *,
    row_cost_s: float | None,
    notes: list[str],
) -> DistDGLFit:
    """DistDGL's step from its runs: each run's step time minus the model's network at its own point
    is c_D + c_row R (R its remote rows), fitted by least squares where the runs' R differ
    (``row_cost_s`` where given; else c_row = 0 with a note). ``multi``: its runs on >= 2 parts
    (whether a trainer pulled labels), ``row``: feature-row bytes, ``M``: gradient bytes."""
    round_trips = runs[0]["num_layers"] + 1 + (1 if any(f["label_pull"] for f in multi) else 0)
    xs, ys = [], []
    for f in runs:
        nbytes = overhead * (f["feature_step_bytes"] + f["rpc_step_bytes"] + ring_factor(f["parts"]) * M)
        terms = (2 * round_trips + buckets * 2 * (f["parts"] - 1)) if f["parts"] > 1 else 0
        xs.append(f["feature_step_bytes"] / (row + 8))
        ys.append(f["step_s"] - _net_at(f, nbytes if f["parts"] > 1 else 0.0, terms))
    if row_cost_s is not None:
        c_row = float(row_cost_s)
    elif max(xs) - min(xs) > 0.05 * max(xs):
        c_row = max(_ls_line(xs, ys)[1], 0.0)
    else:
        c_row = 0.0
        notes.append(
            "DistDGL's CPU cost per remote row is not separable from runs with one remote-row count: "
            "set to 0, so its projection grows with P through bytes and round trips only (an "
            "underestimate of its time where its remote rows grow); a 1-part compare run, or runs at "
            "two part counts, separate it (or set --row-cost-us)"
        )
    c_d = _mean(y - c_row * x for x, y in zip(xs, ys))
    return DistDGLFit(compute_s=c_d, row_cost_s=c_row, round_trips=round_trips, buckets=buckets, wire_overhead=overhead)


def fit_grappa(runs: list[dict], M: float, buckets: int, overhead: float) -> GrappaFit:
    """Grappa's step from its runs: each run's step time minus its all-reduce at its own point
    (undoing prefetch's overlap), kept per part count; the correction's bytes beyond the
    gradients' ``M``."""
    prefetch = any(f["prefetch"] for f in runs)
    comp_g: dict[int, list[float]] = {}
    samp, bwd = [], []
    for f in runs:
        net = _net_at(f, overhead * ring_factor(f["parts"]) * f["grad_step_bytes"], buckets * 2 * (f["parts"] - 1))
        s, b = f["sample_s"], f["backward_s"]
        comp_g.setdefault(f["parts"], []).append(
            f["step_s"] + s + b - max(b + net, s) if f["prefetch"] else f["step_s"] - net
        )
        samp.append(s)
        bwd.append(b)
    by_parts = [[p, _mean(cs)] for p, cs in sorted(comp_g.items())]
    corr = max(0.0, _mean(f["grad_step_bytes"] - M for f in runs))
    return GrappaFit(
        compute_s=_mean(c for _, c in by_parts),
        compute_by_parts=by_parts,
        sample_s=_mean(samp),
        backward_s=_mean(bwd),
        prefetch=prefetch,
        corr_bytes=corr,
        buckets=buckets,
        wire_overhead=overhead,
    )


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
            files = [
                f
                for f in files
                if not any((a / "summary.json").exists() for a in f.parent.parents if a == p or p in a.parents)
            ]
        if not files:
            raise ProjectError(
                f"project: no summary.json under '{p}'; pass the folder of a finished compare run "
                f"(python -m dgl_grappa compare --config ... --run.output_dir={p})"
            )
        for f in files:
            try:
                s = json.loads(f.read_text())
                if not isinstance(s, dict) or "system" not in s:
                    raise ValueError("no 'system'")
            except (OSError, ValueError) as exc:
                raise ProjectError(
                    f"project: '{f}' is not a run's summary.json ({exc}); pass folders of finished compare runs"
                ) from None
            m = f.parent / "metrics.jsonl"
            recs = None
            if m.exists():
                try:
                    recs = [json.loads(line) for line in m.read_text().splitlines() if line.strip()]
                except ValueError:
                    recs = None
            found.append((f.parent, s, recs))
    return found


def facts_under(paths: list[str | Path]) -> list[dict]:
    """:func:`run_facts` of every Grappa and DistDGL summary under the paths (:func:`find_summaries`).

    Raises:
        ProjectError: what :func:`find_summaries` refuses, or no summary of either system.
    """
    out = []
    for folder, s, recs in find_summaries(paths):
        f = run_facts(s, recs, str(folder))
        if f is not None:
            out.append(f)
    if not out:
        raise ProjectError(
            f"project: no Grappa or DistDGL summary under {', '.join(map(str, paths))} (only "
            f"drop-in or other systems); pass the folder of a compare run"
        )
    return out


def calibrate(paths: list[str | Path], **kw) -> Calibration:
    """The calibration from run folders or summary.json files (:func:`calibrate_from` on their facts).

    Example:
        >>> cal = calibrate(["runs/compare-p1", "runs/compare-p4"])     # doctest: +SKIP
        >>> project(cal, 16, 10, 50)["speedup"]                          # doctest: +SKIP
    """
    return calibrate_from(facts_under(paths), **kw)
