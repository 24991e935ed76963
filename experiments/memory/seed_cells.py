"""Seed benchmarks/memory/cells with the archived cells of the accuracy benchmarks, so their
DistDGL runs are reused instead of run again.

Every archived cell whose id is a cell of benchmarks/memory/config.yaml is copied with its
``distdgl`` entry as it is and its ``grappa`` entry renamed ``grappa-replicate``: it ran
before the memory budget existed, with every node of its part and every table in fp32,
which is what ``--train.memory_budget=0 --train.storage=fp32`` asks for (the loader's
pruning to what the seeds reach changes which random draws a run makes, not what it can
sample). Its stored config gets those two keys, and the entry says it was migrated.
Other systems (grappa-old) are left out. A cell already in the target archive is kept.

    python experiments/memory/seed_cells.py
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["benchmarks/accuracy/cells", "benchmarks/accuracy_replicate/cells", "benchmarks/accuracy_synlow/cells"]
TARGET = ROOT / "benchmarks/memory/cells"


def main() -> None:
    from dgl_grappa.bench.matrix import expand, load_bench

    _, full, file_overrides = load_bench(str(ROOT / "benchmarks/memory/config.yaml"), [])
    wanted = {c.cell_id for c in expand(full, ROOT / full.bench.out_dir, file_overrides)}
    TARGET.mkdir(parents=True, exist_ok=True)
    copied = 0
    for src in SOURCES:
        for f in sorted((ROOT / src).glob("*.json.gz")):
            cid = f.name[: -len(".json.gz")]
            out = TARGET / f.name
            if cid not in wanted or out.exists():
                continue
            doc = json.loads(gzip.decompress(f.read_bytes()))
            systems = {"distdgl": doc["systems"]["distdgl"]}
            if "grappa" in doc["systems"]:
                e = dict(doc["systems"]["grappa"])
                e["config"]["train"].update(memory_budget="0", storage="fp32")
                e.update(
                    entry="grappa-replicate: --train.memory_budget=0 --train.storage=fp32",
                    overrides=["--train.memory_budget=0", "--train.storage=fp32"],
                    migrated_from=f"{src} (grappa, before train.memory_budget existed)",
                )
                systems["grappa-replicate"] = e
            doc["systems"] = systems
            out.write_bytes(gzip.compress(json.dumps(doc).encode()))
            copied += 1
    print(f"{copied} cells copied into {TARGET} ({len(wanted)} in the matrix)")


if __name__ == "__main__":
    main()
