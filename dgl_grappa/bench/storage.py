"""The matrix's cell files: one JSON per cell under ``bench.out_dir``, and their gzip'd archive.

Files under ``bench.out_dir``:

* ``partitions/<hash>/``: one partitioning per (data, partition settings), made once in
  this process and reused by every cell and system that shares it (a METIS partitioning
  is shared across seeds: METIS ignores ``partition.seed``);
* ``runs/<cell>/<system>/``: each run's output folder (config, logs, metrics.jsonl, summary.json);
* ``cells/<cell>.json``: the cell, rewritten after every run of it::

    {"schema": 1, "cell_id": "cora-random-p4-sage-l2-unshaped-s0",
     "axes": {"dataset", "dataset_config", "data_name", "partition", "parts", "model", "layers",
              "fanouts", "bandwidth", "seed"},
     "config": <the cell's resolved config, before system overrides>,
     "partition": {"dir", "fingerprint", "edge_cut", "halo_share", "num_nodes", "num_edges", "seconds",
                   "reused"},
     "fingerprint": <hash of the systems' fingerprints and the partitioning's>,
     "systems": {<name>: {"kind": "distdgl" | "distdgl-grappa" | "grappa", "entry": <bench.systems entry>,
                          "overrides": [...], "config": <its normalised resolved config>,
                          "fingerprint": <hash of that>, "status": "ok" | "failed",
                          "reason": <one line, failed only>, "log": <path>, "out_dir": <path>,
                          "wall_s": <seconds>, "finished_at": <ISO time>,
                          "metrics": <every scalar of summary.json + the derived fields of
                                      derive_metrics: bytes_per_epoch(_amortised), one_time_bytes,
                                      stall_fraction, restart_s_total, ...>,
                          "summary": <summary.json without its config>,
                          "records": <metrics.jsonl: one record per epoch (curves)>}},
     "wall_s": <seconds of all runs>, "updated_at": <ISO time>, "command": <the bench command>}

* ``<bench.archive>/<cell>.json.gz`` (where set): the same cell, gzip'd, in a folder kept in
  the repository (out_dir is not): results outlive the machine, a fresh clone resumes from
  them and regenerates the report (out_dir's file wins where both have the cell).

The reports read a cell through :class:`dgl_grappa.bench.report.CellResult`
(:func:`dgl_grappa.bench.report.read_result`), the runs' figures through
:func:`dgl_grappa.bench.execute.derive_metrics`.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from ..runtime.metrics import write_json

SCHEMA = 1
"""The cell files' ``schema``."""


def cell_path(out_dir: Path, cid: str) -> Path:
    """Where cell ``cid``'s JSON file lives under ``out_dir``."""
    return out_dir / "cells" / f"{cid}.json"


def read_cell(path: Path) -> dict | None:
    """A cell file, or None when missing or unreadable (a half-written file is never left: writes are atomic)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def archive_path(archive: Path, cid: str) -> Path:
    """Where cell ``cid``'s gzip'd copy lives in the archive."""
    return archive / f"{cid}.json.gz"


def read_archived(path: Path) -> dict | None:
    """An archived (gzip'd) cell file, or None when missing or unreadable."""
    try:
        return json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, ValueError, EOFError):
        return None


def write_archived(path: Path, doc: dict) -> None:
    """Write ``doc`` gzip'd (compact JSON, no timestamp in the header, so that an unchanged
    cell gives identical bytes and no diff), through a temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(gzip.compress(json.dumps(doc, separators=(",", ":"), sort_keys=True).encode(), mtime=0))
    tmp.replace(path)


def stored_cell(out_dir: Path, archive: Path | None, cid: str) -> dict | None:
    """The cell as last written: ``out_dir``'s file, else the archive's copy."""
    doc = read_cell(cell_path(out_dir, cid))
    if doc is None and archive is not None:
        doc = read_archived(archive_path(archive, cid))
    return doc


def archive_missing(out_dir: Path, archive: Path) -> int:
    """Copy into the archive the cells of ``out_dir`` it lacks (those written before
    ``bench.archive`` was set); the archive's own files are not touched. Returns how many."""
    n = 0
    d = out_dir / "cells"
    for p in sorted(d.glob("*.json")) if d.is_dir() else []:
        if archive_path(archive, p.stem).exists():
            continue  # already archived: not read at all (a large matrix starts with many)
        doc = read_cell(p)
        if doc and "axes" in doc:
            write_archived(archive_path(archive, p.stem), doc)
            n += 1
    return n


def read_cells(out_dir: Path, archive: Path | None = None) -> list[dict]:
    """Every cell file under ``<out_dir>/cells``, plus the archive's cells that out_dir lacks."""
    d = out_dir / "cells"
    cells = [read_cell(p) for p in sorted(d.glob("*.json"))] if d.is_dir() else []
    cells = [c for c in cells if c and "axes" in c]
    if archive is not None and archive.is_dir():
        have = {c.get("cell_id") for c in cells}
        for p in sorted(archive.glob("*.json.gz")):
            c = read_archived(p)
            if c and "axes" in c and c.get("cell_id") not in have:
                cells.append(c)
    return cells


def write_cell(path: Path, doc: dict) -> None:
    """Write a cell file (its folder made first; atomic, as :func:`read_cell` expects)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, doc)
