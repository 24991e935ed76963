"""Running the matrix: each cell's partitioning, then its systems one after the other, the cell
file rewritten after every run (:mod:`dgl_grappa.bench.storage`).

A system whose stored entry is still good is not run again (:mod:`dgl_grappa.bench.staleness`);
one failing run never stops the sweep. A run's figures are :func:`derive_metrics` of its summary.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import time
from pathlib import Path

from ..cluster.procs import isolation_plan
from ..config import Config
from ..distdgl import run_distdgl
from ..kinds import kind_of
from ..partition.layout import read_stats
from ..partition.store import ensure_partitions
from ..runtime.metrics import format_bytes, read_jsonl
from .compare import run_grappa
from .plan import Cell, PlannedSystem, cell_fingerprint, digest, normalised
from .staleness import stale_reason
from .storage import SCHEMA, archive_path, cell_path, stored_cell, write_archived, write_cell

log = logging.getLogger("dgl_grappa")

SCALARS = (int, float, str, bool, type(None))
"""The summary fields a cell keeps as metrics (their types)."""


def derive_metrics(summary: dict) -> dict:
    """The figures the reports read, from a run's summary.json.

    Every scalar top-level field of the summary is kept (so fields that new mechanisms add,
    e.g. ``floor_epoch_s``, arrive as they are), plus:

    * ``one_time_bytes``: the summary's ``one_time_bytes_total`` when it has one, else the
      halo feature bytes its workers read at load time (``workers[*].halo_bytes_loaded``);
    * ``bytes_per_epoch``: measured wire bytes per epoch, else the application's count
      (``bytes_source`` says which); ``bytes_per_epoch_amortised`` = that + one-time bytes /
      epochs; ``app_bytes_per_epoch_amortised`` likewise from the application's count;
    * ``stall_fraction`` (Grappa repartitioning, ``schedule.stall_fraction``),
      ``restart_s_total`` and ``restart_fraction`` (DistDGL restart segments).
    """
    m = {k: v for k, v in summary.items() if isinstance(v, SCALARS)}
    one_time = summary.get("one_time_bytes_total")
    if one_time is None:
        one_time = sum(
            float(w.get("halo_bytes_loaded") or 0) for w in summary.get("workers") or [] if isinstance(w, dict)
        )
        m["one_time_bytes_source"] = "halo_bytes_loaded"
    else:
        m["one_time_bytes_source"] = "one_time_bytes_total"
    epochs = max(int(summary.get("epochs") or 1), 1)
    wire, app = summary.get("wire_bytes_per_epoch"), summary.get("app_bytes_per_epoch")
    per_epoch = wire if wire is not None else app
    m["one_time_bytes"] = one_time
    m["bytes_per_epoch"] = per_epoch
    m["bytes_source"] = "wire" if wire is not None else ("app" if app is not None else None)
    m["bytes_per_epoch_amortised"] = None if per_epoch is None else per_epoch + one_time / epochs
    m["app_bytes_per_epoch_amortised"] = None if app is None else app + one_time / epochs
    sched = summary.get("schedule") if isinstance(summary.get("schedule"), dict) else {}
    m["stall_fraction"] = sched.get("stall_fraction")
    m["restart_s_total"] = summary.get("restart_s_total")
    m["restart_fraction"] = summary.get("restart_fraction_of_train")
    return m


def _now() -> str:
    return datetime.datetime.now().isoformat(timespec="seconds")


def _log_path(ps: PlannedSystem) -> Path:
    out = Path(ps.cfg.run.output_dir)
    return out / ("run.log" if ps.system.kind == "grappa" else f"{ps.system.kind}.log")


def run_system(ps: PlannedSystem, isolate: bool) -> tuple[dict, list[dict]]:
    """Run one system of a cell; its summary and per-epoch records. Raises on failure."""
    out = Path(ps.cfg.run.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").unlink(missing_ok=True)
    if ps.system.kind == "grappa":
        summary = run_grappa(ps.cfg, out, isolate)
    else:
        summary = run_distdgl(ps.cfg, isolate=isolate, quiet=True, grappa=ps.system.kind == "distdgl-grappa")
    metrics = out / "metrics.jsonl"
    return summary, (read_jsonl(metrics) if metrics.is_file() else [])


class Progress:
    """A line per run with an ETA from the runs of this invocation (mean per system, else overall)."""

    def __init__(self, total: int):
        self.total, self.done = total, 0
        self.seconds: dict[str, list[float]] = {}

    def add(self, name: str, seconds: float) -> None:
        self.done += 1
        self.seconds.setdefault(name, []).append(seconds)

    def eta(self, remaining: list[str]) -> str:
        every = [s for v in self.seconds.values() for s in v]
        if not every:
            return "ETA after the first run"
        overall = sum(every) / len(every)
        left = sum((sum(self.seconds[n]) / len(self.seconds[n])) if n in self.seconds else overall for n in remaining)
        return f"ETA {_duration(left)}"


def _duration(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


class _GraphCache:
    """The last loaded graph, by data settings: cells of one dataset partition it once each."""

    def __init__(self):
        self.key, self.graph = None, None

    def get(self, cfg: Config):
        key = digest(dataclasses.asdict(cfg.data))
        return self.graph if key == self.key else None

    def put(self, cfg: Config, g) -> None:
        if g is not None:
            self.key, self.graph = digest(dataclasses.asdict(cfg.data)), g


def ensure_cell_partition(cell: Cell, graphs: _GraphCache) -> dict:
    """Make (or reuse) the cell's partitioning; its statistics plus ``dir``/``reused``."""
    before = read_stats(cell.partition_dir)
    reused = before is not None and before.get("fingerprint") == json.loads(json.dumps(cell.partition_fp))
    if not reused:
        print(
            f"  partitioning {cell.axes['dataset']}: {cell.axes['partition']} into {cell.axes['parts']} parts, "
            f"seed {cell.cfg.partition.seed} -> {cell.partition_dir}",
            flush=True,
        )
    stats, g = ensure_partitions(cell.cfg, graphs.get(cell.cfg))  # DGL's own prints go to the run's partition.log
    graphs.put(cell.cfg, g)
    keep = (
        "edge_cut",
        "halo_share",
        "inner_nodes",
        "halo_nodes",
        "num_nodes",
        "num_edges",
        "seconds",
        "method",
        "seed",
    )
    return {
        "dir": str(cell.partition_dir),
        "fingerprint": digest(cell.partition_fp),
        "reused": reused,
        **{k: stats.get(k) for k in keep},
    }


def _one_line(exc: BaseException) -> str:
    """An exception as one line: its first line, plus its last (a job's log tail ends with the error)."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    text = lines[0] if len(lines) == 1 else f"{lines[0].rstrip(':')}: {lines[-1]}"
    return text[:500]


def run_cells(cells: list[Cell], out_dir: Path, command: str, archive: Path | None = None) -> dict:
    """Run what is not done yet of ``cells``; write each cell's JSON after each of its runs
    (and its gzip'd copy to ``archive``, where given; a cell found only there counts as stored).

    Returns:
        ``{"runs": n, "ok": n, "failed": n, "skipped_cells": n}`` of this invocation.
    """
    # (cell, systems to run, the cell as stored): read once, here (an archived copy is gzip'd).
    todo: list[tuple[Cell, list[str], dict]] = []
    skipped = 0
    for cell in cells:
        stored = stored_cell(out_dir, archive, cell.cell_id) or {}
        entries = stored.get("systems") or {}
        need = [n for n, ps in cell.systems.items() if stale_reason(entries.get(n), ps) is not None]
        if need:
            todo.append((cell, need, stored))
        else:
            skipped += 1
            print(f"skip {cell.cell_id}: done (every system ok with the same config)", flush=True)
    total = sum(len(n) for _, n, _ in todo)
    print(
        f"bench: {len(cells)} cells selected, {skipped} done, {len(todo)} to run ({total} runs); output in {out_dir}",
        flush=True,
    )
    prog = Progress(total)
    counts = {"runs": 0, "ok": 0, "failed": 0, "skipped_cells": skipped}
    graphs = _GraphCache()
    remaining = [n for _, need, _ in todo for n in need]
    for cell, need, doc in todo:
        path = cell_path(out_dir, cell.cell_id)
        doc.update(
            {
                "schema": SCHEMA,
                "cell_id": cell.cell_id,
                "axes": cell.axes,
                "config": normalised(cell.cfg),
                "fingerprint": cell_fingerprint(cell),
                "command": command,
            }
        )
        doc.setdefault("systems", {})
        for n in need:
            why = stale_reason(doc["systems"].get(n), cell.systems[n])
            if why not in ("not run yet",):
                print(f"  {cell.cell_id} {n}: runs again ({why})", flush=True)
        try:
            doc["partition"] = ensure_cell_partition(cell, graphs)
            part_error = None
        except Exception as exc:  # noqa: BLE001 - recorded, the sweep goes on
            part_error = f"partitioning failed: {_one_line(exc)}"
            log.error("%s: %s", cell.cell_id, part_error)
        for n in need:
            ps = cell.systems[n]
            remaining.remove(n)
            entry = {
                "kind": ps.system.kind,
                "entry": ps.system.entry,
                "overrides": ps.system.overrides,
                "config": ps.config,
                "fingerprint": ps.fingerprint,
                "log": str(_log_path(ps)),
                "out_dir": ps.cfg.run.output_dir,
            }
            print(f"[{prog.done + 1}/{total}] {cell.cell_id} {n}: running (log {entry['log']})", flush=True)
            t0 = time.perf_counter()
            try:
                if part_error:
                    raise RuntimeError(part_error)
                summary, records = run_system(ps, isolation_plan(ps.cfg))
                entry.update(
                    {
                        "status": "ok",
                        "metrics": derive_metrics(summary),
                        "summary": {k: v for k, v in summary.items() if k != "config"},
                        "records": records,
                    }
                )
                counts["ok"] += 1
            except Exception as exc:  # noqa: BLE001 - one failing run never stops the sweep
                entry.update({"status": "failed", "reason": _one_line(exc)})
                counts["failed"] += 1
            wall = time.perf_counter() - t0
            entry.update({"wall_s": wall, "finished_at": _now()})
            doc["systems"][n] = entry
            doc["wall_s"] = sum(float(s.get("wall_s") or 0) for s in doc["systems"].values())
            doc["updated_at"] = _now()
            write_cell(path, doc)
            if archive is not None:
                write_archived(archive_path(archive, cell.cell_id), doc)
            counts["runs"] += 1
            prog.add(n, wall)
            if entry["status"] == "ok":
                m = entry["metrics"]
                q = kind_of(cell.cfg).metric.test_key  # the kind's test figure: accuracy, MRR, ...
                what = (
                    f"ok in {wall:.0f} s: {q.replace('_', ' ')} {m.get(q) or float('nan'):.4f}, epoch "
                    f"{m.get('epoch_time_s') or float('nan'):.3f} s, "
                    f"{format_bytes(m.get('bytes_per_epoch_amortised'))}/epoch"
                )
            else:
                what = f"FAILED in {wall:.0f} s: {entry['reason']}"
            print(f"    {what} | {prog.eta(remaining)}", flush=True)
    return counts
