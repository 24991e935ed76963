"""The reports' markdown: the matrix, speed, phase, pair, goal and settings tables, and settings paragraphs.

Functions of the rows (:mod:`.rows`), goals (:mod:`.goals`) and cell results (:mod:`.results`);
:func:`~dgl_grappa.bench.report.write.render` puts them together.
"""

from __future__ import annotations

from collections import defaultdict

from ...runtime.grading import LINK_POINTS
from ...runtime.metrics import PHASE_KEYS, format_bytes
from .goals import pair_summary
from .notes import PAIR_NOTES
from .results import BASELINE, CellResult, network, select, systems_order
from .rows import pair_rows
from .tasks import pair_columns, rows_metric, task_of, task_text


def _f(x, fmt: str, none: str = "-") -> str:
    return none if x is None else format(x, fmt)


def _mark(met) -> str:
    return "-" if met is None else ("met" if met else "**not met**")


def table(head: list[str], lines: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in lines]
    return "\n".join(out)


def accuracy_table(rows: list[dict]) -> str:
    """The accuracy matrix as markdown: the rows' test figure as their metric shows it (accuracies in %),
    differences in its points, the goal of its direction."""
    metric = rows_metric(rows)
    multi_bw = len({r["bandwidth"] for r in rows}) > 1
    extra_stall = any(r["stall_fraction"] is not None for r in rows)
    memory = any(r.get("held_ratio") is not None or r.get("peak_rss") is not None for r in rows)
    tta = any(r.get("tta_reached") for r in rows)
    head = (
        ["dataset", "partitioner", "parts", "model", "layers"]
        + (["network"] if multi_bw else [])
        + [
            "system",
            "seeds",
            f"{metric.column} (mean ± std)",
            f"Δ vs DistDGL, {metric.points} (95 % CI)",
            "goal",
            "bytes/epoch (amortised)",
            "bytes ratio",
            "edge cut",
        ]
        + (["stall"] if extra_stall else [])
        + (["one-time bytes", "held / own rows", "peak RSS"] if memory else [])
        + ["converged"]
        + (["time to target s (reached)", "DistDGL / system time to target"] if tta else [])
    )
    lines = []
    for r in rows:
        acc = metric.show(r["acc_mean"]) + ("" if r["acc_std"] is None else f" ± {metric.show(r['acc_std'])}")
        diff, goal = _diff_cells(r)
        line = _axes_cells(r, multi_bw)
        line += [
            r["system"],
            str(r["seeds"]),
            acc,
            diff,
            goal,
            format_bytes(r["bytes"]),
            "1" if r["system"] == BASELINE else _f(r["bytes_ratio"], ".4f"),
            _f(r["edge_cut"], ".3f"),
        ]
        line += [_f(r["stall_fraction"], ".2%")] if extra_stall else []
        if memory:
            line += [
                format_bytes(r.get("one_time_bytes")) if r.get("one_time_bytes") else "-",
                _f(r.get("held_ratio"), ".2f"),
                format_bytes(r.get("peak_rss")) if r.get("peak_rss") else "-",
            ]
        conv, judged = r.get("converged") or (0, 0)
        line += [f"{conv}/{judged}" if judged else "-"]
        line += _tta_cells(r) if tta else []
        lines.append(line)
    return table(head, lines)


def _axes_cells(r: dict, multi_bw: bool) -> list[str]:
    """A matrix row's axes (dataset, partitioner, parts, model, layers and, when they differ, the network)."""
    line = [str(r["dataset"]), str(r["partition"]), str(r["parts"]), str(r["model"]), str(r["layers"])]
    return line + ([network(r["bandwidth"])] if multi_bw else [])


def _tta_cells(r: dict) -> list[str]:
    """A matrix row's time to the target (seconds, seeds that reached it) and its speed-up over DistDGL."""
    return [
        f"{_f(r.get('tta_s'), '.1f')} ({r.get('tta_reached', 0)}/{r['seeds']})",
        "1" if r["system"] == BASELINE else _f(r.get("tta_speedup"), ".2f") + ("x" if r.get("tta_speedup") else ""),
    ]


def _diff_cells(r: dict) -> tuple[str, str]:
    """A matrix row's difference to DistDGL (mean and 95 % interval, in points) and its goal mark."""
    if r["system"] == BASELINE:
        return "(reference)", ""
    if r["diff_mean"] is None:
        return "no paired DistDGL run", "-"
    ci = "" if r["diff_lo"] is None else f" [{r['diff_lo']:+.2f}, {r['diff_hi']:+.2f}]"
    return f"{r['diff_mean']:+.2f}{ci}", _mark(r["met"])


def link_table(rows: list[dict]) -> str:
    """The link-prediction rows of the accuracy matrix as markdown: test MRR (as itself), its paired
    difference to DistDGL in MRR points (1 point = 0.01 MRR) with the link goal, test hits@k, the
    share of edges trained on (with the halo dropped in parentheses), epoch time, bytes, memory,
    convergence on the validation MRR and the time to a validation-MRR target."""
    multi_bw = len({r["bandwidth"] for r in rows}) > 1
    k = next((r.get("hits_k") for r in rows if r.get("hits_k")), None)
    tta = any(r.get("tta_reached") for r in rows)
    head = (
        ["dataset", "partitioner", "parts", "model", "layers"]
        + (["network"] if multi_bw else [])
        + [
            "system",
            "seeds",
            "test MRR (mean ± std)",
            "Δ vs DistDGL, MRR points (95 % CI)",
            f"within {LINK_POINTS:g}",
            f"test hits@{k or 'k'}",
            "edges trained on (halo dropped)",
            "epoch",
            "bytes/epoch (amortised)",
            "bytes ratio",
            "edge cut",
            "peak RSS",
            "converged",
        ]
        + (["time to val-MRR target s (reached)", "DistDGL / system time to target"] if tta else [])
    )
    lines = []
    for r in rows:
        mrr = _f(r["acc_mean"], ".4f") + ("" if r["acc_std"] is None else f" ± {r['acc_std']:.4f}")
        diff, goal = _diff_cells(r)
        used = (
            "-"
            if r.get("usable_edges") is None
            else f"{r['usable_edges']:.1%}"
            + ("" if r.get("usable_edges_drop") is None else f" ({r['usable_edges_drop']:.1%})")
        )
        line = _axes_cells(r, multi_bw)
        conv, judged = r.get("converged") or (0, 0)
        line += [
            r["system"],
            str(r["seeds"]),
            mrr,
            diff,
            goal,
            _f(r.get("hits"), ".4f"),
            used,
            _f(r.get("epoch_time_s"), ".3f") + (" s" if r.get("epoch_time_s") is not None else ""),
            format_bytes(r["bytes"]),
            "1" if r["system"] == BASELINE else _f(r["bytes_ratio"], ".4f"),
            _f(r["edge_cut"], ".3f"),
            format_bytes(r.get("peak_rss")) if r.get("peak_rss") else "-",
            f"{conv}/{judged}" if judged else "-",
        ]
        line += _tta_cells(r) if tta else []
        lines.append(line)
    return table(head, lines)


def speed_table(rows: list[dict], link: bool = False) -> str:
    """The speed matrix as markdown; floor columns only when some summary has a floor. With
    ``link`` (link-prediction rows) the quality columns are the test MRR, its difference in MRR
    points, the test hits@k and the share of edges trained on; without, the rows' metric's test figure as it
    shows it (accuracies in %) and its difference in its points."""
    metric = rows_metric(rows)
    floors = any(r["floor_ratio"] is not None for r in rows)
    head = [
        "dataset",
        "partitioner",
        "parts",
        "model",
        "layers",
        "network",
        "system",
        "seeds",
        "epoch",
        "speedup",
        "bytes/epoch (amortised)",
        "bytes ratio",
        "ratio w/o one-time",
    ]
    if link:
        k = next((r.get("hits_k") for r in rows if r.get("hits_k")), None)
        head += ["test MRR", "Δ MRR, points", f"test hits@{k or 'k'}", "edges trained on"]
    else:
        head += [metric.column, f"Δ {metric.short}, {metric.points}"]
    head += ["floor", "epoch / floor"] if floors else []
    head += ["note"]
    lines = []
    for r in rows:
        base = r["system"] == BASELINE
        note = ""
        if r["loses_accuracy"]:
            note = (
                f"**loses MRR** ({r['acc_diff']:+.2f} points)"
                if link
                else f"**loses {metric.words}** ({r['acc_diff']:+.2f} {metric.points})"
            )
        line = [
            str(r["dataset"]),
            str(r["partition"]),
            str(r["parts"]),
            str(r["model"]),
            str(r["layers"]),
            network(r["bandwidth"]),
            r["system"],
            str(r["seeds"]),
            _f(r["epoch_time_s"], ".3f") + " s",
            "(reference)" if base else _f(r["speedup"], ".2f", "-") + ("" if r["speedup"] is None else "x"),
            format_bytes(r["bytes"]),
            "1" if base else _f(r["bytes_ratio"], ".4f"),
            "1" if base else _f(r.get("steady_bytes_ratio"), ".4f"),
        ]
        if link:
            line += [
                _f(r["acc"], ".4f"),
                "" if base else _f(r["acc_diff"], "+.2f"),
                _f(r.get("hits"), ".4f"),
                _f(r.get("usable_edges"), ".1%"),
            ]
        else:
            line += [metric.show(r["acc"]), "" if base else _f(r["acc_diff"], "+.2f")]
        if floors:
            line += [_f(r["floor_s"], ".3f"), _f(r["floor_ratio"], ".2f")]
        lines.append(line + [note])
    return table(head, lines)


def phase_table(rows: list[dict]) -> str:
    """Where an epoch goes: per row, each phase's share of the epoch (slowest worker's clock).

    The phases are :data:`dgl_grappa.runtime.metrics.PHASE_KEYS` (seconds per epoch of the median
    epoch, rank 0's worker); ``wait`` is the time that worker waited for the slowest one,
    ``overlap`` what ran concurrently (prefetching), so the shares add up to 100 % minus
    the overlap. Rows without phases (runs from before they were logged) are left out.
    """
    shown = [k for k in PHASE_KEYS if k != "overlap_s"]
    head = ["dataset", "partitioner", "parts", "model", "layers", "network", "system", "epoch"] + [
        k[:-2] + " %" for k in shown
    ]
    lines = []
    for r in rows:
        ph = r.get("phases") or {}
        total = sum(ph.get(k, 0.0) for k in shown) - ph.get("overlap_s", 0.0)
        if not ph or total <= 0:
            continue
        lines.append(
            [
                str(r["dataset"]),
                str(r["partition"]),
                str(r["parts"]),
                str(r["model"]),
                str(r["layers"]),
                network(r["bandwidth"]),
                r["system"],
                _f(total, ".3f") + " s",
            ]
            + [f"{100 * ph.get(k, 0.0) / total:.0f}" for k in shown]
        )
    return table(head, lines) if lines else "(no run logged its phases)"


def pair_table(pair: dict) -> str:
    """One pair's rows as markdown (accuracies in %, the difference in points)."""
    a, b, rows = pair["a"], pair["b"], pair["rows"]
    multi_bw = len({r["bandwidth"] for r in rows}) > 1
    what, tol = pair_columns(rows)
    head = (
        ["dataset", "partitioner", "parts", "model", "layers"]
        + (["network"] if multi_bw else [])
        + ["paired seeds", f"{a} {what}", f"{b} {what}", f"{a} − {b}, points (95 % CI)", f"within {tol}"]
    )
    lines = []
    for r in rows:
        ci = "" if r["diff_lo"] is None else f" [{r['diff_lo']:+.2f}, {r['diff_hi']:+.2f}]"
        line = _axes_cells(r, multi_bw)
        q = task_of(r.get("task")).show
        line += [str(r["paired"]), q(r["a_acc"]), q(r["b_acc"]), f"{r['diff_mean']:+.2f}{ci}", _mark(r["met"])]
        lines.append(line)
    return table(head, lines)


def pairs_section(cells: list[dict | CellResult], pairs: list[tuple[str, str]]) -> list[str]:
    """The "System against system" section of the accuracy report (no lines without pairs).

    Per pair its summary line, its table and, where rows lack a seed with both systems ok, a
    note that names them (they are not in the table nor the count).
    """
    if not pairs:
        return []
    out = ["## System against system", ""]
    for a, b in pairs:
        pair = pair_rows(cells, a, b)
        out += [f"### {a} vs {b}", "", pair_summary(pair), ""]
        if pair["rows"]:
            out += [pair_table(pair), ""]
        if pair["skipped"]:
            out += [
                f"{len(pair['skipped'])} row(s) skipped, without a seed where both ran ok: "
                + ", ".join(pair["skipped"])
                + ".",
                "",
            ]
    return out + [PAIR_NOTES]


def goals_table(goals: list[dict]) -> str:
    """Goals (:mod:`.goals`) as a markdown table: goal, status, figure."""
    return table(["goal", "status", "figure"], [[g["goal"], _mark(g["met"]), g["figure"]] for g in goals])


def settings_table(cells: list[dict | CellResult]) -> str:
    """Per dataset: base config and the fixed hyper-parameters the runs used (first finished cell)."""
    seen: dict[str, CellResult] = {}
    for c in select(cells):
        if c.axes["dataset"] not in seen and c.finished:
            seen[c.axes["dataset"]] = c
    head = [
        "dataset",
        "base config",
        "task",
        "nodes",
        "epochs",
        "batch",
        "hidden",
        "dropout",
        "lr",
        "weight decay",
        "eval every",
    ]
    lines = []
    for name, c in seen.items():
        t, m = c.config.get("train", {}), c.config.get("model", {})
        lines.append(
            [
                name,
                f"`{c.axes.get('dataset_config', '')}`",
                task_text(c.config, c.task.name),
                str(c.partition.get("num_nodes", "-")),
                str(t.get("epochs", "-")),
                str(t.get("batch_size", "-")),
                str(m.get("hidden", "-")),
                str(m.get("dropout", "-")),
                str(t.get("lr", "-")),
                str(t.get("weight_decay", "-")),
                str(t.get("eval_every", "-")),
            ]
        )
    return table(head, lines) if lines else "(no finished cell yet)"


def systems_text(plan: dict | None, cells: list[dict | CellResult]) -> str:
    """The systems of the matrix, one line each (its bench.systems entry: name and overrides)."""
    entries = (plan or {}).get("system_entries")
    if not entries:
        names = systems_order(select(cells), plan)
        entries = names
    return "\n".join(f"- `{e}`" for e in entries)


def baseline_text(cells: list[CellResult], partition: str) -> str:
    """A settings paragraph on borrowed DistDGL runs (:func:`~.results.borrow_baseline`), or "" when none is."""
    borrowed = sorted(
        {c.axes.get("partition") for c in cells if (c.systems.get(BASELINE) or {}).get("borrowed_from")}, key=str
    )
    if not partition or not borrowed:
        return ""
    return (
        f"DistDGL, the reference of every row, ran on {partition} partitions (`bench.baseline_partition`): the "
        f"rows of {', '.join(borrowed)} partitions compare with its run in the {partition} cell of the same "
        "dataset, parts, model, depth, network and seed, which is listed once, in its own row.\n"
    )


def dilation_text(cells: list[CellResult]) -> str:
    """A settings paragraph on test hosts' time dilation (``network_dilation`` of the runs), or ""."""
    seen = defaultdict(set)
    for c in cells:
        for s in c.systems.values():
            d = (s.get("metrics") or {}).get("network_dilation")
            if s.get("status") == "ok" and d and float(d) != 1.0:
                seen[float(d)].add(f"{c.axes.get('parts')} parts")
    if not seen:
        return ""
    per = "; ".join(f"D = {d:g} at {', '.join(sorted(v))}" for d, v in sorted(seen.items()))
    return (
        f"Times are as measured on test hosts with time dilation ({per}): each host had 1/D of a core and its "
        "link ran at bandwidth / D, so every time here is D times the emulated cluster's (divide by D); ratios "
        "and bytes are not affected (docs/cluster.md).\n"
    )
