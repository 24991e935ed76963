"""Single-mechanism screen (seed 0, random 4 parts, 3 layers): Δ test accuracy to DistDGL."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from summarize import load  # noqa: E402


def main():
    rows = load(Path(__file__).resolve().parent / "results")
    idx = {(r["dataset"], r["partition"], r["parts"], r["model"], r["layers"], r["seed"], r["tag"]): r for r in rows}
    cols = [
        ("cora", "sage"),
        ("cora", "gcn"),
        ("citeseer", "sage"),
        ("citeseer", "gcn"),
        ("syn20k", "sage"),
        ("syn20k", "gcn"),
    ]
    tags = [
        "grappa",
        "grappa[est=batch]",
        "grappa[est=node]",
        "grappa[sampler=foldback]",
        "grappa[empty=self]",
        "grappa[norm=ht]",
        "grappa[norm=ht,empty=self]",
        "grappa[norm=gdeg]",
        "grappa[halo=keep]",
        "grappa[fhc=True]",
        "grappa[fhc=True,empty=self]",
        "grappa[fhc=True,empty=self,fhcdrop=0]",
        "grappa[halo=keep,hist=1]",
        "grappa[halo=keep,fhc=True]",
        "grappa[halo=keep,fhc=True,fhcdrop=0]",
        "grappa[halo=keep,fhc=True,hist=1]",
        "grappa[repart=1]",
        "grappa[est=cv]",
        "distdgl-ht",
    ]
    print(
        "| variant (seed 0, random-4, 3 layers) | "
        + " | ".join(f"{d} {m}" for d, m in cols)
        + " | bytes ratio (Cora SAGE) | cache rows/inner (Cora, max) |"
    )
    print("|---|" + "---|" * (len(cols) + 2))
    base = {c: idx.get((c[0], "random", 4, c[1], 3, 0, "distdgl")) for c in cols}
    print(
        "| distdgl (acc %) | "
        + " | ".join(f"{base[c]['final_test'] * 100:.1f}" if base[c] else "" for c in cols)
        + " | 1 | 0 |"
    )
    for t in tags:
        cells = []
        for c in cols:
            r = idx.get((c[0], "random", 4, c[1], 3, 0, t))
            cells.append(f"{(r['final_test'] - base[c]['final_test']) * 100:+.1f}" if r and base[c] else "")
        rc = idx.get(("cora", "random", 4, "sage", 3, 0, t)) or idx.get(("cora", "random", 4, "gcn", 3, 0, t))
        bc = base[("cora", "sage")] if rc and rc["model"] == "sage" else base[("cora", "gcn")]
        ratio = f"{rc['bytes_per_epoch'] / bc['bytes_per_epoch']:.2f}" if rc else ""
        cache = f"{rc['cache_rows_over_inner_max']:.2f}" if rc else ""
        print(f"| `{t}` | " + " | ".join(cells) + f" | {ratio} | {cache} |")


if __name__ == "__main__":
    main()
