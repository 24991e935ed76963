"""Run records: the per-epoch JSONL log, the summary, and small statistics helpers."""
from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any


class JsonlLog:
    """Append-only JSON-lines file; one record per epoch (written by rank 0)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("")

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")


def read_jsonl(path: str | Path) -> list[dict]:
    """All records of a JSONL file."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON, through a temporary file so a reader never sees half of it."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1))
    tmp.replace(path)


def median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def time_to_target(records: list[dict], target: float, key: str = "val_acc") -> float | None:
    """Training seconds (evaluation excluded) until ``key`` first reached ``target``, or None."""
    elapsed = 0.0
    for r in records:
        elapsed += r["epoch_time_s"]
        if r.get(key) is not None and r[key] >= target:
            return elapsed
    return None


def format_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n:.1f} GB"
