"""compare's table and report when it runs a script of the user's own: unmodified against converted.

The rows are the same systems' (``distdgl``, ``distdgl-grappa``) with the same figures as for the
package's trainer (epoch time, bytes per epoch, one-time bytes, peak memory), measured by the launcher
around the script's loaders (:mod:`dgl_grappa.distdgl.loader_meter`), and in place of the package's
evaluation the script's own metric, read from its output (:mod:`dgl_grappa.distdgl.script_metric`).
There is no time to a target: a script prints its metric when it chooses, and it may be a loss.
Everything a script comparison shows differently is here; the rest is :mod:`.compare`'s.
"""

from __future__ import annotations

from ..runtime.metrics import format_bytes
from .figures import TERMINAL_WIDTH, fmt_ratio, seconds, short_ratio, wrap
from .labels import system_label, systems_legend


def script_setting(cfg, runs: dict[str, dict]) -> dict:
    """compare.json's ``script``: what ran, and the metric's pattern and name."""
    summaries = [r["summary"] for r in runs.values()]
    pattern = next((s["metric_pattern"] for s in summaries if s.get("metric_pattern")), None)
    return {
        "script": cfg.compare.script,
        "dropin_script": cfg.compare.dropin_script or None,
        "script_args": cfg.compare.script_args,
        "metric_pattern": pattern,
        "metric_label": next((s["metric_label"] for s in summaries if s.get("metric_label")), None) or "metric",
        "metric_found": any(s.get("metric") is not None for s in summaries),
    }


def script_row(s: dict) -> dict:
    """A script run's own fields of its table row, from its summary: the metric, steps, and each machine."""
    servers = s.get("servers_peak_rss_bytes") or []
    machines = []
    for i, w in enumerate(s.get("workers") or []):
        server = servers[i] if i < len(servers) else None
        machines.append(
            {
                "machine": w.get("rank", i),
                "epoch_time_s": w.get("epoch_time_s"),
                "steps_per_epoch": w.get("steps_per_epoch"),
                "app_bytes_per_epoch": w.get("app_bytes_per_epoch"),
                "wire_tx_bytes_per_epoch": w.get("host_tx_bytes_per_epoch"),
                "one_time_bytes": w.get("one_time_bytes"),
                "trainer_peak_rss_bytes": w.get("peak_rss_bytes"),
                "server_peak_rss_bytes": server,
                "peak_rss_bytes": (w.get("peak_rss_bytes") or 0) + (server or 0) or None,
                "metric": w.get("metric"),
                "loader": w.get("loader"),
            }
        )
    return {
        "metric": s.get("metric"),
        "metric_per_trainer": s.get("metric_per_trainer"),
        "steps_per_epoch": s.get("steps_per_epoch"),
        "epochs": s.get("epochs"),
        "machines": machines,
    }


def setting_text(result: dict, network: str) -> str:
    """The comparison's setting in one paragraph: the two scripts, their arguments, the partitions, the network."""
    sc = result["script"]
    converted = f"{sc['dropin_script']} (converted)" if sc["dropin_script"] else f"{sc['script']} with --grappa"
    cut = "" if result.get("edge_cut") is None else f" ({result['edge_cut'] * 100:.1f} % of edges cut)"
    nodes = "" if result.get("num_nodes") is None else f" of {result['num_nodes']} nodes"
    return (
        f"{sc['script']} (unmodified) against {converted}, arguments: {sc['script_args']}; "
        f"{result['num_parts']} {result['partition_method']} parts{nodes}{cut}; network: {network}"
    )


def _metric_note(result: dict) -> str:
    """What the metric column holds, or why it is empty (one sentence, without the column's name)."""
    sc = result["script"]
    if not sc["metric_pattern"]:
        return (
            "no metric: compare.metric is empty and the script is none of DGL's examples whose line is known; "
            "set --compare.metric='<regex with one group>' (times and bytes are measured all the same)"
        )
    if not sc["metric_found"]:
        return (
            f'no metric found: no line of the trainers\' output matched compare.metric "{sc["metric_pattern"]}" '
            "(times and bytes are measured all the same)"
        )
    return (
        f'the number in the last line of each trainer\'s output matching "{sc["metric_pattern"]}", mean over '
        "the trainers that printed one"
    )


def script_table(result: dict, markdown: bool = False) -> str:
    """The script comparison's table: the terminal's (at most :data:`TERMINAL_WIDTH` columns, with footnotes), or
    report.md's (every column, ratios in parentheses)."""
    label = result["script"]["metric_label"]
    measured = all(r.get("wire_bytes_per_epoch") is not None for r in result["rows"])
    bytes_key = "wire_bytes_per_epoch" if measured else "app_bytes_per_epoch"
    if markdown:
        return _markdown(result, label)
    head = ["system", "epoch", "steps", "wire/epoch" if measured else "app/epoch", "one-time", label, "peak RSS"]
    lines = []
    for r in result["rows"]:

        def both(text, ratio_key, kind="time"):
            ratio = "" if r["system"] == result["baseline"] else short_ratio(r.get(ratio_key), kind)
            return f"{text} {ratio}".strip()

        wire = r.get(bytes_key)
        lines.append(
            [
                system_label(r["system"], short=True),
                both(seconds(r["epoch_time_s"], 3), "epoch_time_s_ratio"),
                "-" if r.get("steps_per_epoch") is None else f"{r['steps_per_epoch']:.0f}",
                "-" if wire is None else both(format_bytes(wire), f"{bytes_key}_ratio", "bytes"),
                format_bytes(r["one_time_bytes_per_epoch"]) if r.get("one_time_bytes_per_epoch") else "-",
                "-" if r.get("metric") is None else f"{r['metric']:.4f}",
                format_bytes(r.get("peak_rss_bytes_max")) if r.get("peak_rss_bytes_max") else "-",
            ]
        )
    widths = [max(len(h), *(len(row[i]) for row in lines)) for i, h in enumerate(head)]
    fmt = lambda row: "  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip()  # noqa: E731
    notes = [
        f"ratios are to {system_label(result['baseline'])}; epoch: a pass over the script's training "
        "loader, its slowest trainer, median over epochs; steps: its batches; "
        + ("wire/epoch: bytes on the network" if measured else "app/epoch: bytes the application sent")
        + ", all machines; one-time: read once, per epoch; peak RSS: a machine's server + trainer; "
        "every column: report.md",
        f"{label}: {_metric_note(result)}",
    ]
    return "\n".join(
        [fmt(head), fmt(["-" * w for w in widths])]
        + [fmt(row) for row in lines]
        + [wrap(n, TERMINAL_WIDTH) for n in notes]
    )


def _markdown(result: dict, label: str) -> str:
    head = [
        "system",
        "epochs",
        "epoch time",
        "steps/epoch",
        "wire bytes/epoch",
        "app bytes/epoch",
        "one-time bytes/epoch",
        label,
        "peak RSS (machine)",
    ]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in result["rows"]:

        def fig(k, text):
            return f"{text} ({fmt_ratio(r.get(f'{k}_ratio'))})"

        out.append(
            "| "
            + " | ".join(
                [
                    r["system"],
                    str(r.get("epochs") or "-"),
                    fig("epoch_time_s", f"{r['epoch_time_s']:.3f} s"),
                    "-" if r.get("steps_per_epoch") is None else f"{r['steps_per_epoch']:.0f}",
                    fig("wire_bytes_per_epoch", format_bytes(r.get("wire_bytes_per_epoch"))),
                    fig("app_bytes_per_epoch", format_bytes(r.get("app_bytes_per_epoch"))),
                    format_bytes(r["one_time_bytes_per_epoch"]) if r.get("one_time_bytes_per_epoch") else "-",
                    "-" if r.get("metric") is None else fig("metric", f"{r['metric']:.4f}"),
                    format_bytes(r.get("peak_rss_bytes_max")) if r.get("peak_rss_bytes_max") else "-",
                ]
            )
            + " |"
        )
    return "\n".join(out)


def machines_table(result: dict) -> str:
    """report.md's per-machine table: each machine's own epoch, bytes, memory and metric, per system."""
    hosts = any(m.get("wire_tx_bytes_per_epoch") is not None for r in result["rows"] for m in r.get("machines", []))
    head = (
        ["system", "machine", "loader", "epoch time (own)", "steps/epoch", "app bytes/epoch"]
        + (["wire tx bytes/epoch (its host)"] if hosts else [])
        + ["one-time bytes", "peak RSS server + trainer", result["script"]["metric_label"]]
    )
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in result["rows"]:
        for m in r.get("machines", []):
            mem = (
                "-"
                if m.get("peak_rss_bytes") is None
                else f"{format_bytes(m['peak_rss_bytes'])} ({format_bytes(m.get('server_peak_rss_bytes'))} + "
                f"{format_bytes(m.get('trainer_peak_rss_bytes'))})"
            )
            out.append(
                "| "
                + " | ".join(
                    [
                        r["system"],
                        str(m["machine"]),
                        m.get("loader") or "-",
                        "-" if m.get("epoch_time_s") is None else f"{m['epoch_time_s']:.3f} s",
                        "-" if m.get("steps_per_epoch") is None else f"{m['steps_per_epoch']:.0f}",
                        format_bytes(m.get("app_bytes_per_epoch")),
                    ]
                    + ([format_bytes(m.get("wire_tx_bytes_per_epoch"))] if hosts else [])
                    + [
                        format_bytes(m.get("one_time_bytes")),
                        mem,
                        "-" if m.get("metric") is None else f"{m['metric']:.4f}",
                    ]
                )
                + " |"
            )
    return "\n".join(out)


def script_report(result: dict, setting: str, wire_note: str) -> str:
    """report.md of a script comparison: setting, table, how each column is measured, each machine, plots."""
    label = result["script"]["metric_label"]
    return "\n".join(
        [
            f"# Comparison: {result['script']['script']}, unmodified and converted",
            "",
            setting,
            "",
            script_table(result, markdown=True),
            "",
            f"Systems: {systems_legend([r['system'] for r in result['rows']])}. "
            f"Ratios in parentheses are to `{result['baseline']}`.",
            "",
            "- **epoch time**: the launcher runs the script unchanged and times, in each trainer, every pass over "
            "one of DGL's distributed loaders (`DistNodeDataLoader`, `DistEdgeDataLoader`, any `DistDataLoader`) or "
            "the package's drop-in loaders, from the loop's first batch to its end, the loop's body included. A pass "
            "with autograd on is a training epoch (an evaluation runs under `torch.no_grad()` and is left out); "
            "epoch k is every trainer's k-th, timed by the slowest; the column is the median over epochs. No "
            "barrier is added to the script, so a trainer's epoch starts when it reaches its loop.",
            "- **steps/epoch**: the batches of a training pass (the most of any trainer).",
            f"- **wire bytes/epoch**: {wire_note}.",
            "- **app bytes/epoch**: what the trainers handed to the network during the passes, all machines: rows "
            "read from another machine's KVStore (row + 8-byte id), sampling RPC payloads, and the DDP gradient "
            "payload (the parameters of every `DistributedDataParallel` the script made, once per step) x 2(W-1)/W.",
            "- **one-time bytes/epoch**: what the drop-in loaders read once (`loader.one_time_bytes`: the kept halo's "
            "rows, aggregates), all machines, divided by the epochs.",
            "- **peak RSS**: the largest machine's peak resident memory, its server's and its trainer's together "
            "(the trainer's at its exit, its evaluation included).",
            f"- **{label}**: {_metric_note(result)}.",
            "",
            "## Each machine",
            "",
            machines_table(result),
            "",
            "A machine's own figures, median over its epochs. Its epoch time is its own pass (the table above "
            "takes the slowest machine's per epoch).",
            "",
            "![metric against training time](accuracy_vs_time.png)",
            "",
            f"The script's {label} as it printed it, against the training seconds before it (the epochs' times "
            "up to the last training pass that ended before the line was printed); one point per evaluation.",
            "",
            "![bytes per epoch](bytes_per_epoch.png)",
            "",
            "Bytes on the network per training epoch, all machines, on a linear axis, with what the drop-in read "
            "once spread over the epochs on top; the ratio to the baseline is written on each bar.",
            "",
        ]
    )
