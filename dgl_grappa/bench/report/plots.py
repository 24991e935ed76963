"""The reports' plots (matplotlib, Agg): accuracy against depth and bytes; speed-ups, time and bytes."""
from __future__ import annotations

from pathlib import Path

from .results import BASELINE, baseline_first, network, sort_key
from .tasks import quality_axis

PLOT_PREFIXES = ("acc_vs_layers_", "acc_vs_bytes_", "speedup", "acc_vs_time", "bytes_per_epoch")
"""The names our plot files start with (a report removes its old ones before it writes new ones)."""


def _plt():
    """matplotlib's pyplot on the Agg backend (files only, no display)."""
    import matplotlib  # deferred: it takes a second to import and only a report's plots need it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: after choosing the Agg backend

    return plt


def _save(fig, path: Path) -> Path:
    """Lay out, write (110 dpi) and close a report figure; its path."""
    import matplotlib.pyplot as plt  # deferred as in _plt (imported by then)

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_accuracy(rows: list[dict], out: Path) -> list[Path]:
    """acc_vs_layers_<dataset>_p<parts>.png (rows: models, columns: partitioners; a line per
    system, std as error bars) and acc_vs_bytes_<dataset>.png (log x)."""
    plt = _plt()
    files = []
    for (ds, parts) in sorted({(r["dataset"], r["parts"]) for r in rows}, key=sort_key):
        rs = [r for r in rows if r["dataset"] == ds and r["parts"] == parts]
        models = sorted({r["model"] for r in rs})
        parts_m = sorted({r["partition"] for r in rs})
        fig, axs = plt.subplots(len(models), len(parts_m), figsize=(4.2 * len(parts_m), 3.2 * len(models)),
                                squeeze=False, sharey=True)
        for i, m in enumerate(models):
            for j, p in enumerate(parts_m):
                ax = axs[i][j]
                for sysname in _ordered_systems(rs):
                    pts = sorted((r["layers"], r["acc_mean"] * 100, (r["acc_std"] or 0) * 100) for r in rs
                                 if r["model"] == m and r["partition"] == p and r["system"] == sysname)
                    if pts:
                        x, y, e = zip(*pts)
                        ax.errorbar(x, y, yerr=e, marker="o", ms=4, capsize=3, label=sysname)
                ax.set_title(f"{m}, {p}", fontsize=9)
                ax.set_xlabel("layers")
                ax.set_xticks(sorted({r["layers"] for r in rs}))
                ax.grid(alpha=0.3)
                if j == 0:
                    ax.set_ylabel(quality_axis(rs))
        axs[0][0].legend(fontsize=7)
        fig.suptitle(f"{ds}, {parts} parts: accuracy vs layers (mean ± std over seeds)", fontsize=10)
        f = _save(fig, out / f"acc_vs_layers_{ds}_p{parts}.png")
        files.append(f)
    for ds in sorted({r["dataset"] for r in rows}):
        rs = [r for r in rows if r["dataset"] == ds and r["bytes"]]
        if not rs:
            continue
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        markers = "os^Dv<>p*h"
        for k, sysname in enumerate(_ordered_systems(rs)):
            pts = [r for r in rs if r["system"] == sysname]
            ax.errorbar([r["bytes"] for r in pts], [r["acc_mean"] * 100 for r in pts],
                        yerr=[(r["acc_std"] or 0) * 100 for r in pts], fmt=markers[k % len(markers)], ms=5,
                        capsize=2, label=sysname)
        ax.set_xscale("log")
        ax.set_xlabel("bytes per epoch, amortised (log)")
        ax.set_ylabel(quality_axis(rs))
        ax.set_title(f"{ds}: accuracy vs bytes per epoch (each point: one partitioner/parts/model/layers)", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        f = _save(fig, out / f"acc_vs_bytes_{ds}.png")
        files.append(f)
    return files


def _ordered_systems(rows: list[dict]) -> list[str]:
    """The rows' systems in order of appearance, DistDGL first."""
    return baseline_first(list(dict.fromkeys(r["system"] for r in rows)))


def _row_label(r: dict) -> str:
    """A row's cell in one label (its axes but the seed)."""
    return f"{r['dataset']} {r['partition']} p{r['parts']} {r['model']} L{r['layers']} {network(r['bandwidth'])}"


def plot_speed(rows: list[dict], out: Path) -> list[Path]:
    """speedup.png (a bar per cell and system; red edge = loses accuracy), acc_vs_time.png
    (test accuracy vs training time, DistDGL joined to each system of its cell) and
    bytes_per_epoch.png (log scale)."""
    plt = _plt()
    files = []
    g = [r for r in rows if r["system"] != BASELINE and r["speedup"] is not None]
    if g:
        fig, ax = plt.subplots(figsize=(7.5, 0.28 * len(g) + 1.5))
        y = range(len(g))
        colors = {bw: c for bw, c in zip(sorted({network(r["bandwidth"]) for r in g}), ("C0", "C1", "C2", "C3", "C4"))}
        ax.barh(list(y), [r["speedup"] for r in g], color=[colors.get(network(r["bandwidth"]), "C5") for r in g],
                edgecolor=["red" if r["loses_accuracy"] else "none" for r in g], linewidth=1.5)
        ax.set_yticks(list(y))
        ax.set_yticklabels([f"{_row_label(r)} {r['system']}" for r in g], fontsize=6)
        ax.axvline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("speedup: DistDGL epoch / system epoch (red edge: loses > 1 point)")
        ax.invert_yaxis()
        ax.grid(alpha=0.3, axis="x")
        f = _save(fig, out / "speedup.png")
        files.append(f)
    base = {_row_label(r): r for r in rows if r["system"] == BASELINE}
    pts = [r for r in rows if r["acc"] is not None and r["train_time_s"]]
    if pts:
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        for k, sysname in enumerate(_ordered_systems(pts)):
            rs = [r for r in pts if r["system"] == sysname]
            ax.scatter([r["train_time_s"] for r in rs], [r["acc"] * 100 for r in rs], s=18, label=sysname,
                       color=f"C{k}")
            if sysname != BASELINE:
                for r in rs:
                    b = base.get(_row_label(r))
                    if b is not None and b["acc"] is not None and b["train_time_s"]:
                        ax.plot([b["train_time_s"], r["train_time_s"]], [b["acc"] * 100, r["acc"] * 100],
                                color="grey", lw=0.5, alpha=0.6)
        ax.set_xscale("log")
        ax.set_xlabel("training time (s, all epochs, evaluation excluded; log)")
        ax.set_ylabel(quality_axis(pts))
        ax.set_title("accuracy vs training time (grey: same cell)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        f = _save(fig, out / "acc_vs_time.png")
        files.append(f)
    cellkeys = list(dict.fromkeys(_row_label(r) for r in rows if r["bytes"]))
    if cellkeys:
        names = _ordered_systems(rows)
        fig, ax = plt.subplots(figsize=(7.5, 0.3 * len(cellkeys) * max(1, len(names)) / 2 + 1.5))
        h = 0.8 / max(1, len(names))
        for k, sysname in enumerate(names):
            by = {_row_label(r): r["bytes"] for r in rows if r["system"] == sysname and r["bytes"]}
            ys = [i + k * h for i, ck in enumerate(cellkeys) if ck in by]
            ax.barh(ys, [by[ck] for ck in cellkeys if ck in by], height=h, label=sysname, color=f"C{k}")
        ax.set_yticks([i + 0.4 - h / 2 for i in range(len(cellkeys))])
        ax.set_yticklabels(cellkeys, fontsize=6)
        ax.set_xscale("log")
        ax.set_xlabel("bytes per epoch, amortised (log)")
        ax.invert_yaxis()
        ax.grid(alpha=0.3, axis="x")
        ax.legend(fontsize=8)
        f = _save(fig, out / "bytes_per_epoch.png")
        files.append(f)
    return files
