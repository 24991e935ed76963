"""Grappa's summary.json: every worker's figures gathered once after training, written by rank 0.

The fields every system writes come from :func:`dgl_grappa.runtime.meter.run_summary` (the
same code as the DistDGL trainer's); here are the ones only Grappa's runtime has: what each
worker holds (inner and local nodes, feature rows, memory), the one-time bytes of halo rows
and first-hop aggregates, the floor (:mod:`.floor`) and the repartition schedule.
"""

from __future__ import annotations

from ..config import Config
from ..method.models import gradient_bytes
from ..runtime.meter import all_workers, run_summary
from ..runtime.metrics import (
    ANON_PEAK,
    median,
    memory_stats,
    ring_allreduce_wire_bytes,
    write_json,
)
from .floor import floor_summary


def write_summary(trainer, train_wall_s: float) -> dict | None:
    """Gather the per-worker figures (a collective, once, after training); on rank 0 write summary.json.

    Args:
        trainer: the :class:`~dgl_grappa.native.trainer.Trainer` that trained.
        train_wall_s: wall time of the epoch loop without evaluation (epochs + switches).

    Returns:
        summary.json's content on rank 0, None on the other ranks.

    Example:
        >>> summary = write_summary(trainer, train_wall_s=12.5)   # doctest: +SKIP
    """
    ident, rt, meter = trainer.ident, trainer.rt, trainer.meter
    lp, records = rt.lp, meter.records
    mine = {
        "rank": ident.rank,
        "part": ident.part,
        "inner_nodes": lp.part_inner,
        "inner_kept": lp.num_inner,
        "local_nodes": lp.graph.num_nodes(),
        "train_seeds": int(lp.train_ids.numel()),
        "load_s": lp.load_seconds,
        "halo_bytes_loaded": lp.halo_bytes_loaded,
        "setup": trainer.setup,
        "memory_end": memory_stats(),
        "peak_anon_gb": ANON_PEAK.sample(),
        "one_time_bytes": trainer.one_time_bytes,
        "rows_held": lp.rows_held,
        "coverage_train": rt.coverage_stats(),
        **meter.worker_figures(),
        "feature_bytes_total": sum(r["feature_bytes"] for r in records),
        # model.embed: bytes of embedding rows moved to or from another worker (there is no such path: 0)
        "embed_bytes_per_epoch": median([r.get("embed_bytes", 0) for r in records]),
    }
    mine.update(rt.summary())  # the kind's own figures (link prediction: the edges it owns and could train on)
    mine.update(trainer.kind.worker_summary(lp))  # (a heterogeneous graph: its types and what it holds of each)
    per_worker = all_workers(mine)
    if not ident.is_main:
        return None
    summary = build_summary(trainer.cfg, trainer.kind, records, per_worker, rt.steps, gradient_bytes(trainer.model))
    summary["device"] = str(trainer.device)
    summary["kernels"] = trainer.kernels  # the layers' message passing: dgl or torch (train.kernels resolved)
    # launch.on_failure: continue: one record per new process group (lost and joined workers, where, what it cost)
    summary["membership"] = trainer.membership
    if trainer.driver is not None:
        summary.update(trainer.driver.summary(train_wall_s))
    write_json(trainer.out_dir / "summary.json", summary)
    return summary


def build_summary(
    cfg: Config, kind, records: list[dict], per_worker: list[dict], steps: int, model_grad_bytes: int
) -> dict:
    """The run's summary.json (see the README for every field).

    Args:
        cfg: the run's config.
        kind: the run's kind of job (:mod:`dgl_grappa.kinds`): its own fields.
        records: rank 0's epoch records.
        per_worker: every worker's figures, in rank order.
        steps: training steps per epoch (the same on every worker).
        model_grad_bytes: the model's gradient bytes.
    """
    own = {
        "first_hop": cfg.first_hop,
        "empty": cfg.model.empty if cfg.model.name == "sage" else None,
        "embed": cfg.model.embed,
        # learnable rows that crossed the network per epoch, all workers (model.embed; DistDGL: pulls + gradients)
        "embed_bytes_per_epoch": sum(w["embed_bytes_per_epoch"] for w in per_worker),
        **floor_summary(records),
        "feature_bytes_total": sum(w["feature_bytes_total"] for w in per_worker),
        # all workers together: what the app handed over (wire bytes: measured)
        "app_bytes_per_epoch": ring_allreduce_wire_bytes([w["grad_bytes_per_epoch"] for w in per_worker])
        + sum(w["feature_bytes_per_epoch"] + w["embed_bytes_per_epoch"] for w in per_worker),
        # One-time bytes (halo rows and first-hop aggregates, read once per partitioning, all
        # workers and partitionings together) and what they add to every epoch they serve.
        "one_time_bytes_total": sum(w["one_time_bytes"] for w in per_worker),
        "one_time_bytes_per_epoch": sum(w["one_time_bytes"] for w in per_worker) / max(len(records), 1),
        # Memory: feature-width rows a worker holds (features, + aggregates with exact) per inner node.
        "rows_held_max": max(w["rows_held"] for w in per_worker),
        "rows_per_inner_max": max(w["rows_held"] / max(w["inner_nodes"], 1) for w in per_worker),
    }
    own.update(kind.run_summary(cfg, per_worker))
    return run_summary(
        cfg,
        records,
        per_worker,
        system="grappa",
        num_parts=cfg.partition.num_parts,
        mode=cfg.train.mode,
        halo=cfg.train.halo,
        correction=cfg.grappa.correction,
        steps_per_epoch=steps,
        model_grad_bytes=model_grad_bytes,
        own=own,
        metric=kind.metric,
    )
