"""``compare``'s two figures: validation accuracy (a script's own metric) against training time, and bytes per epoch.

Both name the systems in words (:func:`~dgl_grappa.bench.labels.system_label`). The bytes
are drawn on a linear axis with the ratio to the baseline written on each bar: on a log axis
a 25x gap looks like a small step. What Grappa reads once per partitioning is drawn on top of
its per-epoch bytes, spread over the epochs, so the bar is everything it moved.
"""

from __future__ import annotations

from pathlib import Path

from ..runtime.metrics import format_bytes
from .labels import result_metric, system_label, target_text

PLOTS = ("accuracy_vs_time.png", "bytes_per_epoch.png")


def ratio_text(x: float, base: float, base_name: str) -> str:
    """``x`` against the baseline's ``base`` in words a reader compares: "1/25 of DistDGL", "3.1x DistDGL".

    Example:
        >>> ratio_text(600e3, 15e6, "DistDGL"), ratio_text(45e6, 15e6, "DistDGL"), ratio_text(1, 1, "DistDGL")
        ('1/25 of DistDGL', '3x DistDGL', 'same as DistDGL')
        >>> ratio_text(1, 153.4, "DistDGL"), ratio_text(1, 7.84, "DistDGL")
        ('1/150 of DistDGL', '1/7.8 of DistDGL')
    """
    r = x / base
    if 0.95 <= r <= 1.05:
        return f"same as {base_name}"
    return f"1/{_factor(1 / r)} of {base_name}" if r < 1 else f"{_factor(r)}x {base_name}"


def _factor(f: float) -> str:
    """A factor above 1 in two significant digits, without an exponent: 1.3, 25, 150."""
    return f"{f:.2g}" if f < 10 else f"{f:.0f}" if f < 100 else f"{round(f, -1):.0f}"


def _pyplot():
    import matplotlib  # deferred: plotting alone needs it, and it is slow to import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: after choosing the Agg backend (no display)

    return plt


def plot(result: dict, out: Path) -> list[Path]:
    """Write accuracy_vs_time.png and bytes_per_epoch.png of a comparison into ``out``; their paths.

    Example:
        >>> plot(json.loads(Path("runs/default/compare.json").read_text()), Path("runs/default"))  # doctest: +SKIP
        [PosixPath('runs/default/accuracy_vs_time.png'), PosixPath('runs/default/bytes_per_epoch.png')]
    """
    plt = _pyplot()
    return [_accuracy(plt, result, out / PLOTS[0]), _bytes(plt, result, out / PLOTS[1])]


def _accuracy(plt, result: dict, path: Path) -> Path:
    script = result.get("script")  # a script's own metric, as it printed it: no target
    figure = script["metric_label"] if script else f"validation {result_metric(result)['words']}"
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    reached = {r["system"]: r.get("time_to_target_s") for r in result["rows"]}
    for name, r in result["runs"].items():
        if r["curve"]:
            xs, ys = zip(*r["curve"])
            (line,) = ax.plot(xs, ys, marker="o", ms=3, label=system_label(name))
            if reached.get(name) is not None:  # where the time-to-target column was read
                ax.axvline(reached[name], color=line.get_color(), ls=":", lw=0.9)
    if script:
        if not any(r["curve"] for r in result["runs"].values()):
            ax.text(
                0.5, 0.5, f"no {figure} found in the scripts' output", ha="center", va="center", transform=ax.transAxes
            )
        ax.set_xlabel("training time (s; the training passes before the line was printed)")
        ax.set_ylabel(f"{figure} (as the script printed it)")
        title = f"{Path(script['script']).name}: {figure} against training time"
    else:
        ax.axhline(result["target_acc"], color="grey", ls="--", lw=0.8, label=target_text(result))
        ax.set_xlabel("training time (s; evaluation excluded; dotted: where each reaches the target)")
        ax.set_ylabel(f"{figure} (whole graph)")
        title = f"{result['name']}: {figure} against training time"
    ax.set_title(title, fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7.5, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _bytes(plt, result: dict, path: Path) -> Path:
    rows = result["rows"]
    measured = all(r.get("wire_bytes_per_epoch") is not None for r in rows)
    key = "wire_bytes_per_epoch" if measured else "app_bytes_per_epoch"
    per_epoch = [r.get(key) or 0.0 for r in rows]
    once = [r.get("one_time_bytes_per_epoch") or 0.0 for r in rows]
    totals = [a + b for a, b in zip(per_epoch, once)]
    names = [system_label(r["system"]) for r in rows]
    base_i = next((i for i, r in enumerate(rows) if r["system"] == result["baseline"]), 0)
    fig, ax = plt.subplots(figsize=(7.2, 1.4 + 0.7 * len(rows)))
    y = list(range(len(rows)))
    ax.barh(
        y,
        per_epoch,
        height=0.55,
        color="C0",
        label="every epoch (wire, measured)" if measured else "every epoch (app count)",
    )
    if any(once):
        ax.barh(
            y,
            once,
            left=per_epoch,
            height=0.55,
            color="C1",
            hatch="//",
            edgecolor="white",
            label="one-time reads (per partitioning), spread per epoch",
        )
    top = max(totals) or 1.0
    for i, (pe, ot, tot) in enumerate(zip(per_epoch, once, totals)):
        # the one-time reads are a share per epoch here; the table's wire ratio leaves them out, so say both
        text = format_bytes(pe) + (f" + {format_bytes(ot)} one-time reads per epoch" if ot else "")
        if i != base_i and totals[base_i]:
            text += f" = {ratio_text(tot, totals[base_i], names[base_i])}"
            if ot and per_epoch[base_i]:
                text += f" ({ratio_text(pe, per_epoch[base_i], names[base_i]).removesuffix(' of ' + names[base_i])}"
                text += " without them)"
        inside = tot > 0.55 * top  # a long bar carries its text, a short one has it to its right
        ax.text(
            tot * 0.98 if inside else tot + 0.01 * top,
            i,
            text,
            va="center",
            ha="right" if inside else "left",
            fontsize=8,
            color="white" if inside else "black",
        )
    ax.set_yticks(y)
    ax.set_yticklabels(names, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.02)
    scale, unit = next((s, u) for s, u in ((1e9, "GB"), (1e6, "MB"), (1e3, "KB"), (1, "B")) if top >= 2 * s or s == 1)
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v / scale:g}"))
    ax.set_xlabel(f"{unit} per training epoch, all workers (linear axis)")
    ax.set_title(f"{result['name']}: bytes on the network per training epoch", fontsize=10, pad=22)
    ax.legend(fontsize=7.5, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, frameon=False, borderaxespad=0.2)
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
