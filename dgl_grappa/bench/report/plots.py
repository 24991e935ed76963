"""The reports' plots (matplotlib, Agg): accuracy against depth and bytes; speed-ups, time and bytes.

Systems are named in words (:func:`~dgl_grappa.bench.labels.system_label`) and keep one colour
per system across a report's figures; bytes are compared as ratios to DistDGL on a linear axis.
"""

from __future__ import annotations

from pathlib import Path

from ...runtime.metrics import format_bytes
from ..compare_plots import ratio_text
from ..labels import system_label
from .results import BASELINE, baseline_first, network, sort_key
from .tasks import quality_axis, quality_words

PLOT_PREFIXES = ("acc_vs_layers_", "acc_vs_bytes_", "speedup", "acc_vs_time", "bytes_per_epoch")
"""The names our plot files start with (a report removes its old ones before it writes new ones)."""


def _plt():
    """matplotlib's pyplot on the Agg backend (files only, no display)."""
    import matplotlib  # deferred: it takes a second to import and only a report's plots need it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: after choosing the Agg backend

    return plt


def _save(fig, path: Path, top: float = 1.0) -> Path:
    """Lay out (below ``top``, a fraction of the height, leaving room for a title and legend), write
    (110 dpi) and close a report figure; its path."""
    import matplotlib.pyplot as plt  # deferred as in _plt (imported by then)

    fig.tight_layout(rect=(0, 0, 1, top))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_accuracy(rows: list[dict], out: Path) -> list[Path]:
    """acc_vs_layers_<dataset>_p<parts>.png (rows: models, columns: partitioners; a line per
    system, std as error bars) and acc_vs_bytes_<dataset>.png (log x)."""
    plt = _plt()
    files = []
    for ds, parts in sorted({(r["dataset"], r["parts"]) for r in rows}, key=sort_key):
        rs = [r for r in rows if r["dataset"] == ds and r["parts"] == parts]
        models = sorted({r["model"] for r in rs})
        parts_m = sorted({r["partition"] for r in rs})
        fig, axs = plt.subplots(
            len(models), len(parts_m), figsize=(4.2 * len(parts_m), 3.2 * len(models) + 0.4), squeeze=False, sharey=True
        )
        systems = _ordered_systems(rs)
        for i, m in enumerate(models):
            for j, p in enumerate(parts_m):
                ax = axs[i][j]
                for k, sysname in enumerate(systems):
                    pts = sorted(
                        (r["layers"], r["acc_mean"] * 100, (r["acc_std"] or 0) * 100)
                        for r in rs
                        if r["model"] == m and r["partition"] == p and r["system"] == sysname
                    )
                    if pts:
                        x, y, e = zip(*pts)
                        ax.errorbar(
                            x, y, yerr=e, marker="o", ms=4, capsize=3, color=f"C{k}", label=system_label(sysname)
                        )
                ax.set_title(f"{m}, {p}", fontsize=9)
                ax.set_xlabel("layers")
                ax.set_xticks(sorted({r["layers"] for r in rs}))
                ax.grid(alpha=0.3)
                if j == 0:
                    ax.set_ylabel(quality_axis(rs))
        legend_rows = _figure_legend(fig, axs, systems)  # every system of the figure, also one a panel lacks
        fig.suptitle(f"{ds}, {parts} parts: {quality_words(rs)} against depth (mean ± std over seeds)", fontsize=10)
        height = fig.get_size_inches()[1]
        f = _save(fig, out / f"acc_vs_layers_{ds}_p{parts}.png", top=1 - (0.3 + 0.2 * legend_rows) / height)
        files.append(f)
    for ds in sorted({r["dataset"] for r in rows}):
        rs = [r for r in rows if r["dataset"] == ds and r["bytes"]]
        if not rs:
            continue
        fig, ax = plt.subplots(figsize=(8.0, 4.4))
        markers = "os^Dv<>p*h"
        for k, sysname in enumerate(_ordered_systems(rs)):
            pts = [r for r in rs if r["system"] == sysname]
            ax.errorbar(
                [r["bytes"] for r in pts],
                [r["acc_mean"] * 100 for r in pts],
                yerr=[(r["acc_std"] or 0) * 100 for r in pts],
                fmt=markers[k % len(markers)],
                ms=5,
                capsize=2,
                color=f"C{k}",
                label=system_label(sysname),
            )
        log = _bytes_axis(ax, [r["bytes"] for r in rs])
        ax.set_xlabel("bytes per epoch, one-time reads spread over the epochs" + (" (log axis)" if log else ""))
        ax.set_ylabel(quality_axis(rs))
        ax.set_title(
            f"{ds}: {quality_words(rs)} against bytes per epoch\n(each point: one partitioner, parts, model "
            "and depth; mean ± std over seeds)",
            fontsize=9,
        )
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # off the points
        f = _save(fig, out / f"acc_vs_bytes_{ds}.png")
        files.append(f)
    return files


def _ordered_systems(rows: list[dict]) -> list[str]:
    """The rows' systems in order of appearance, DistDGL first."""
    return baseline_first(list(dict.fromkeys(r["system"] for r in rows)))


def _figure_legend(fig, axs, systems: list[str]) -> int:
    """One legend under the title of a grid of panels, with every system drawn in any of them (once each,
    in the order of ``systems``); its number of rows."""
    found = {}
    for ax in axs.flat:
        for h, label in zip(*ax.get_legend_handles_labels()):
            found.setdefault(label, h)
    handles = {system_label(s): found[system_label(s)] for s in systems if system_label(s) in found}
    ncol = min(4, len(handles)) or 1
    top = 1 - 0.3 / fig.get_size_inches()[1]  # just under the suptitle
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="upper center",
        bbox_to_anchor=(0.5, top),
        ncol=ncol,
        fontsize=8,
        frameon=False,
    )
    return -(-len(handles) // ncol)


def _bytes_axis(ax, values: list[float]) -> bool:
    """Byte counts on x, in B/KB/MB/GB: a log axis only where they span more than 20x; whether it is log."""
    import matplotlib.ticker as mticker  # deferred as in _plt (imported by then)

    vals = [v for v in values if v]
    log = bool(vals) and max(vals) > 20 * min(vals)
    if log:
        ax.set_xscale("log")
    label = mticker.FuncFormatter(lambda v, _: format_bytes(v).replace(".00", ""))
    ax.xaxis.set_major_formatter(label)
    # a log axis over one or two decades has one or two major ticks: label its minor 2s and 5s too
    ax.xaxis.set_minor_formatter(
        mticker.FuncFormatter(lambda v, _: label(v) if f"{v:g}"[0] in "25" else "") if log else mticker.NullFormatter()
    )
    return log


def _plain_log_ticks(axis) -> None:
    """A log axis labelled in plain numbers (6, 10, 20, 50) instead of powers of ten."""
    import matplotlib.ticker as mticker  # deferred as in _plt (imported by then)

    axis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(mticker.FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}"[0] in "25" else ""))


def _row_label(r: dict) -> str:
    """A row's cell in one label (its axes but the seed)."""
    return f"{r['dataset']} {r['partition']} p{r['parts']} {r['model']} L{r['layers']} {network(r['bandwidth'])}"


def plot_speed(rows: list[dict], out: Path) -> list[Path]:
    """speedup.png (a bar per cell and system, coloured by network; red edge = loses accuracy),
    acc_vs_time.png (test accuracy vs training time, DistDGL joined to each system of its cell) and
    bytes_per_epoch.png (each system's bytes as a share of DistDGL's in the same cell, linear)."""
    from matplotlib.patches import Patch  # deferred as in _plt (matplotlib is imported by then)

    plt = _plt()
    files = []
    g = [r for r in rows if r["system"] != BASELINE and r["speedup"] is not None]
    if g:
        fig, ax = plt.subplots(figsize=(7.5, 0.28 * len(g) + 1.9))
        y = range(len(g))
        nets = sorted({network(r["bandwidth"]) for r in g})
        colors = {bw: f"C{k}" for k, bw in enumerate(nets)}
        ax.barh(
            list(y),
            [r["speedup"] for r in g],
            color=[colors[network(r["bandwidth"])] for r in g],
            edgecolor=["red" if r["loses_accuracy"] else "none" for r in g],
            linewidth=1.5,
        )
        ax.set_yticks(list(y))
        ax.set_yticklabels([f"{_cell_label(r)}: {system_label(r['system'])}" for r in g], fontsize=6)
        ax.axvline(1.0, color="grey", lw=0.8, ls="--")
        for i, r in enumerate(g):
            ax.text(r["speedup"], i, f" {r['speedup']:.2g}x", va="center", fontsize=6)
        ax.set_xlim(0, max(r["speedup"] for r in g) * 1.12)
        ax.set_xlabel("speedup: DistDGL's epoch time / the system's (dashed: 1x)")
        handles = [Patch(color=colors[bw], label=f"network: {bw}") for bw in nets]
        if any(r["loses_accuracy"] for r in g):
            handles.append(Patch(facecolor="white", edgecolor="red", lw=1.5, label="loses accuracy (see the table)"))
        ax.legend(
            handles=handles,
            fontsize=7,
            loc="lower right",
            bbox_to_anchor=(1.0, 1.0),
            ncol=len(handles),
            frameon=False,
            borderaxespad=0.2,
        )
        ax.set_title("epoch speedup over DistDGL, per cell", fontsize=10, pad=18)
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
            ax.scatter(
                [r["train_time_s"] for r in rs],
                [r["acc"] * 100 for r in rs],
                s=18,
                label=system_label(sysname),
                color=f"C{k}",
            )
            if sysname != BASELINE:
                for r in rs:
                    b = base.get(_row_label(r))
                    if b is not None and b["acc"] is not None and b["train_time_s"]:
                        ax.plot(
                            [b["train_time_s"], r["train_time_s"]],
                            [b["acc"] * 100, r["acc"] * 100],
                            color="grey",
                            lw=0.5,
                            alpha=0.6,
                        )
        ax.set_xscale("log")
        _plain_log_ticks(ax.xaxis)
        ax.set_xlabel("training time (s, all epochs, evaluation excluded; log axis)")
        ax.set_ylabel(quality_axis(pts))
        ax.set_title(
            f"{quality_words(pts)} against training time, each cell\n(grey: a system joined to DistDGL in the "
            "same cell)",
            fontsize=10,
        )
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        f = _save(fig, out / "acc_vs_time.png")
        files.append(f)
    shares = [r for r in rows if r["system"] != BASELINE and r.get("bytes_ratio")]
    if shares:
        names = _ordered_systems(shares)
        cellkeys = list(dict.fromkeys(_row_label(r) for r in shares))
        fig, ax = plt.subplots(figsize=(7.5, 0.3 * len(cellkeys) * len(names) + 1.9))
        h = 0.8 / len(names)
        for k, sysname in enumerate(names):
            by = {_row_label(r): r for r in shares if r["system"] == sysname}
            ys = [i + k * h for i, ck in enumerate(cellkeys) if ck in by]
            vals = [by[ck]["bytes_ratio"] for ck in cellkeys if ck in by]
            ax.barh(ys, vals, height=h, label=system_label(sysname), color=f"C{k + 1}")  # C0 is DistDGL's colour
            for yy, ck in zip(ys, (ck for ck in cellkeys if ck in by)):
                r = by[ck]
                ax.text(
                    r["bytes_ratio"],
                    yy,
                    f" {ratio_text(r['bytes_ratio'], 1.0, 'DistDGL')} ({format_bytes(r['bytes'])})",
                    va="center",
                    fontsize=6,
                )
        ax.axvline(1.0, color="C0", lw=1.0, ls="--", label="DistDGL (1 = the same bytes)")
        ax.set_yticks([i + (len(names) - 1) * h / 2 for i in range(len(cellkeys))])
        ax.set_yticklabels(
            [_cell_label(by_r) for by_r in (next(r for r in shares if _row_label(r) == ck) for ck in cellkeys)],
            fontsize=6,
        )
        ax.set_xlim(0, max(1.0, max(r["bytes_ratio"] for r in shares)) * 1.35)
        ax.set_xlabel(
            "bytes per epoch / DistDGL's in the same cell (linear axis;\none-time reads spread over the epochs)",
            fontsize=8,
        )
        ax.set_title("bytes per epoch against DistDGL, per cell", fontsize=10, pad=18)
        ax.invert_yaxis()
        ax.grid(alpha=0.3, axis="x")
        ax.legend(
            fontsize=7,
            loc="lower right",
            bbox_to_anchor=(1.0, 1.0),
            ncol=len(names) + 1,
            frameon=False,
            borderaxespad=0.2,
        )
        f = _save(fig, out / "bytes_per_epoch.png")
        files.append(f)
    return files


def _cell_label(r: dict) -> str:
    """A row's cell in words for an axis: dataset, partitioner and parts, model and depth, network."""
    return f"{r['dataset']}, {r['partition']}-{r['parts']}, {r['model']} x{r['layers']}, {network(r['bandwidth'])}"
