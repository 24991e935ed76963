"""A script job's summary from what the launcher measured: its trainers' loader passes and their output.

A script of the user's own writes no summary.json; :mod:`.loader_meter` recorded every pass over its
loaders in each trainer (``epochs/trainer<i>.jsonl``). Here, after the job, the training passes
(autograd on, run to their end) become the job's epochs: epoch k is every trainer's k-th training pass,
timed by its slowest trainer as the package's own trainer times an epoch; its bytes are the trainers'
counts together (and the wire's, where measured). The summary has the fields compare and the bench read
in every system's summary.json, with the script's own metric (:mod:`.script_metric`) in place of the
package's evaluation, and is written as ``summary.json`` and ``metrics.jsonl`` beside ``job.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..runtime.metrics import epoch_summary, hosts_wire_summary, median, ring_allreduce_wire_bytes, wire_per_epoch
from .loader_meter import RECORDS_DIR, records_path
from .script_metric import mean, metric_label, read_metric

APP_KEYS = ("feature_bytes", "other_pull_bytes", "rpc_bytes", "embed_bytes")
"""A pass's application bytes besides its gradients (:class:`~dgl_grappa.distdgl.metering.TrafficCounter`)."""


def read_passes(out: Path, n: int) -> list[list[dict]]:
    """Each trainer's recorded passes (an empty list for a trainer that recorded none)."""
    trainers = []
    for i in range(n):
        try:
            lines = records_path(out / RECORDS_DIR, i).read_text().splitlines()
        except OSError:
            lines = []
        trainers.append([json.loads(ln) for ln in lines if ln.strip()])
    return trainers


def _exit_peak(passes: list[dict]) -> int | None:
    peaks = [r.get("peak_rss_bytes") for r in passes if r.get("peak_rss_bytes")]
    return max(peaks) if peaks else None


def _epoch(k: int, mine: list[dict]) -> dict:
    """Epoch ``k`` of the job from every trainer's k-th training pass (``mine``, in rank order)."""
    grads = [r["grad_bytes"] for r in mine]
    rec = {
        "epoch": k,
        "epoch_time_s": max(r["time_s"] for r in mine),
        "worker_epoch_time_s": mine[0]["time_s"],
        "steps": mine[0]["steps"],
        "steps_max": max(r["steps"] for r in mine),
        "loader": mine[0]["loader"],
        "grad_bytes": mine[0]["grad_bytes"],
        "feature_bytes": mine[0]["feature_bytes"],
        "wire_bytes": mine[0].get("wire_bytes"),
        "peak_rss_bytes_max": max((r["peak_rss_bytes"] or 0) for r in mine) or None,
    }
    for key in APP_KEYS + ("remote_rows", "pull_rows", "grad_bytes"):
        rec[f"{key}_all"] = sum(r.get(key, 0) for r in mine)
    rec["app_bytes"] = sum(rec[f"{key}_all"] for key in APP_KEYS) + ring_allreduce_wire_bytes(grads)
    if any("host_tx_bytes" in r for r in mine):  # across hosts: each trainer counted its own host's interfaces
        rec["wire_hosts"] = [
            {
                "host": i,
                "hostname": r.get("hostname"),
                "tx_bytes": r.get("host_tx_bytes", 0),
                "rx_bytes": r.get("host_rx_bytes", 0),
            }
            for i, r in enumerate(mine)
        ]
        rec["wire_bytes"] = sum(h["tx_bytes"] for h in rec["wire_hosts"])  # every byte leaves one host
    return rec


def script_summary(out: Path, n: int, system: str, script: str, pattern: str | None) -> dict | None:
    """The summary of a script job in ``out`` with ``n`` trainers, or None when no trainer made a training pass.

    Args:
        out: the job's output folder (``epochs/``, ``logs/trainer<i>.log``).
        n: its trainers.
        system: ``distdgl`` or ``distdgl-grappa``.
        script: the script that ran.
        pattern: the metric's pattern (None: no metric is read).

    Returns:
        summary.json's fields: those every system has (``epochs``, ``epoch_time_s``, ``train_time_s``,
        ``steps_per_epoch``, ``wire_bytes_per_epoch``, ``app_bytes_per_epoch``, ``one_time_bytes_per_epoch``,
        ``grad_bytes_per_epoch``, ``feature_bytes_per_epoch``, ``peak_rss_bytes_max``, ``workers``, ...), and
        ``metric`` (the mean over trainers of each one's last match; None when nothing matched),
        ``metric_label``, ``metric_pattern``, ``metric_per_trainer``; ``records`` holds the epochs.
    """
    passes = read_passes(out, n)
    train = [[r for r in p if r.get("train") and r.get("complete")] for p in passes]
    epochs = min((len(t) for t in train), default=0)
    if epochs == 0:
        return None
    records = [_epoch(k, [t[k] for t in train]) for k in range(epochs)]
    metrics = [
        read_metric(out / "logs" / f"trainer{i}.log", pattern, [r.get("log_offset") for r in t])
        if pattern
        else {"last": None, "after_epoch": {}}
        for i, t in enumerate(train)
    ]
    for k, rec in enumerate(records):  # the metric printed after epoch k, where a trainer printed one
        rec["metric"] = mean([m["after_epoch"][k] for m in metrics if k in m["after_epoch"]])
    workers = []
    ring = 2 * (n - 1) / n  # what one trainer sends of its gradient payload in gloo's ring all-reduce
    for i, (t, p) in enumerate(zip(train, passes)):
        once: dict[int, int] = {}
        for r in p:
            if "loader_id" in r:
                once[r["loader_id"]] = r.get("one_time_bytes", 0)  # a loader's count after its last pass
        workers.append(
            {
                "rank": i,
                "loader": t[0]["loader"] if t else None,
                "epochs": len(t),
                "epoch_time_s": median([r["time_s"] for r in t]) if t else None,
                "steps_per_epoch": median([r["steps"] for r in t]) if t else 0,
                "app_bytes_per_epoch": median([sum(r.get(k, 0) for k in APP_KEYS) + r["grad_bytes"] * ring for r in t])
                if t
                else None,
                "feature_bytes_per_epoch": median([r["feature_bytes"] for r in t]) if t else 0,
                "rpc_bytes_per_epoch": median([r["rpc_bytes"] for r in t]) if t else 0,
                "grad_bytes_per_epoch": median([r["grad_bytes"] for r in t]) if t else 0,
                "host_tx_bytes_per_epoch": median([r["host_tx_bytes"] for r in t])
                if t and "host_tx_bytes" in t[0]
                else None,
                "one_time_bytes": sum(once.values()),
                "peak_rss_bytes": _exit_peak(p),
                "eval_passes": sum(1 for r in p if "train" in r and not r["train"]),
                "metric": metrics[i]["last"],
            }
        )
    found = [w["metric"] for w in workers if w["metric"] is not None]
    once_total = sum(w["one_time_bytes"] for w in workers)
    summary = {
        "system": system,
        "script": str(script),
        "measured": "loaders",
        "num_parts": n,
        **epoch_summary(records),
        "steps_per_epoch": max(w["steps_per_epoch"] for w in workers),
        "app_bytes_per_epoch": wire_per_epoch(records, "app_bytes"),
        "grad_bytes_per_epoch": max(w["grad_bytes_per_epoch"] for w in workers),
        "feature_bytes_per_epoch": max(w["feature_bytes_per_epoch"] for w in workers),
        "one_time_bytes_total": once_total,
        "one_time_bytes_per_epoch": once_total / epochs,
        "peak_rss_bytes_max": max((w["peak_rss_bytes"] or 0) for w in workers) or None,
        "metric": mean(found),
        "metric_label": metric_label(pattern) if pattern else None,
        "metric_pattern": pattern,
        "metric_per_trainer": [w["metric"] for w in workers],
        "workers": workers,
        "records": records,
    }
    if (wh := hosts_wire_summary(records)) is not None:
        summary["wire_hosts"] = wh
    return summary
