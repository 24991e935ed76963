"""``python -m dgl_grappa compare``: DistDGL and Grappa side by side, on the same partitions.

One after the other, on the partitioning of ``cfg.partition`` (made once, under
``<output dir>/partitions/0``), with the same model, fan-outs, batch size, optimizer and
the same global evaluation:

1. ``distdgl``: the real DistDGL job (servers + trainers, remote sampling and feature
   pulls; :mod:`dgl_grappa.distdgl`), unless ``compare.distdgl`` is false;
2. ``grappa-<variant>``: the Grappa runtime (``python -m dgl_grappa train``) once per
   correction in ``compare.variants``;
3. ``distdgl-grappa``: the drop-in script with ``--grappa`` when ``compare.dropin``.

Every run is its own process tree in its own network namespace (when the machine
allows it: root), so each measures its own loopback bytes; ``network.bandwidth`` shapes
that loopback for all runs alike. Writes ``<output dir>/compare.json``, ``report.md``
(the table, each figure also as a ratio to DistDGL), ``accuracy_vs_time.png`` and
``bytes_per_epoch.png``, and prints the table.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
import time
from pathlib import Path

from ..cluster.procs import JobFailed, isolation_plan, run_isolated
from ..config import ConfigError, dropin_problem, uses_hosts, write_resolved_config
from ..distdgl import run_distdgl, trainer_command
from ..distdgl.job import check_script_args
from ..distdgl.prepare_check import check_job
from ..kinds import kind_of
from ..partition.prebuilt import prebuilt_stats
from ..partition.store import ensure_partitions
from ..runtime.folders import FolderLock, check_output_dir, replacing
from ..runtime.metrics import PHASE_KEYS, format_bytes, read_jsonl, time_to_target, write_json
from .compare_plots import PLOTS, plot
from .figures import TERMINAL_WIDTH
from .figures import fmt_ratio as _fmt_ratio
from .figures import ratio as _ratio
from .figures import seconds as _seconds
from .figures import short_ratio as _short_ratio
from .figures import wrap as _wrap
from .labels import TARGET_FRACTION, result_metric, system_label, systems_legend, target_text
from .script_report import script_report, script_row, script_setting, script_table, setting_text

log = logging.getLogger("dgl_grappa")


def curve(records: list[dict], key: str = "val_acc") -> list[tuple[float, float]]:
    """(cumulative training seconds, ``key``: val acc, or val MRR for link prediction) at every evaluated
    epoch (evaluation time excluded)."""
    out, t = [], 0.0
    for r in records:
        t += r["epoch_time_s"]
        if r.get(key) is not None:
            out.append((t, r[key]))
    return out


def quality_key(cfg_or_result) -> str:
    """The validation figure the comparison targets (of a config or a compare.json): its kind of job's metric's
    (``val_acc`` of node classification, ``val_mrr`` of link prediction, a registered kind's own; a compare.json's
    as it recorded it, else its task's); a script's own metric (``metric``) when compare runs a script.

    Example:
        >>> quality_key({"metric": {"val_key": "val_rmse"}}), quality_key({"task": "link"}), quality_key({"script": {}})
        ('val_rmse', 'val_mrr', 'metric')
    """
    if isinstance(cfg_or_result, dict):
        if cfg_or_result.get("script") is not None:
            return "metric"
        return result_metric(cfg_or_result)["val_key"]
    if script_mode(cfg_or_result):
        return "metric"
    return kind_of(cfg_or_result).metric.val_key


def script_mode(cfg) -> bool:
    """compare runs a script of the user's own with its own arguments (``compare.script`` and
    ``compare.script_args``): unmodified, then converted, on the same partitions."""
    return bool(cfg.compare.script and cfg.compare.script_args)


def _check_script_runs(cfg, part_config: str) -> None:
    """Everything that would stop a script comparison's runs, before the first starts (one line each)."""
    dropin = cfg.compare.dropin_script
    if dropin and not Path(dropin).is_file():
        raise ConfigError(
            f"compare.dropin_script={dropin} does not exist; name the converted copy of "
            "compare.script, or leave it empty to run compare.script with --grappa for {grappa}"
        )
    trainer_command(cfg)  # compare.script exists
    if cfg.compare.distdgl:
        check_script_args(cfg, grappa=False)
    if not dropin and "{grappa}" not in cfg.compare.script_args.split():
        raise ConfigError(
            "compare runs compare.script twice, the second time with --grappa for {grappa} in "
            "compare.script_args, which has none: add {grappa} where the script takes the flag, or "
            "name the converted copy with --compare.dropin_script=PATH"
        )
    check_script_args(cfg, grappa=True, script=dropin or None)
    check_job(cfg, part_config, grappa=True, script=dropin or None)  # prepare, before any server starts


def run_grappa(cfg, out: Path, isolate: bool) -> dict:
    """One Grappa job (``python -m dgl_grappa train`` on ``cfg``, in its namespaces); its summary.json.

    Raises:
        JobFailed: the job failed (its log is ``out/run.log``).
    """
    resolved = write_resolved_config(cfg, out / "config.resolved.yaml")
    (out / "summary.json").unlink(missing_ok=True)
    argv = [sys.executable, "-m", "dgl_grappa", "train", "--config", str(resolved)]
    run_isolated(
        argv,
        cfg,
        isolate,
        cfg.run.timeout_s + 120,
        shm=cfg.distdgl.shm_size if isolate else "",
        label=out.name,
        log_path=out / "run.log",
    )
    return json.loads((out / "summary.json").read_text())


def run_compare(cfg) -> dict:
    """Run every system of the comparison and write compare.json, report.md and the plots.

    Args:
        cfg: validated Config (the ``compare`` section says what runs).

    Returns:
        The compare.json content: ``runs`` (name -> summary fields, curve), ``baseline``,
        ``target_acc``, ``rows`` (the table), ``isolated`` and the paths written.

    Raises:
        ConfigError / IsolationError: bad config, or bandwidth shaping impossible here.
        JobFailed: a run failed (the others already done are kept on disk).
    """
    script = script_mode(cfg)
    why = dropin_problem(cfg.grappa.correction, cfg.train.halo) if cfg.compare.dropin or script else None
    if why is not None:
        raise ConfigError(f"compare.dropin: {why}")  # before any run, not after the others

    check_output_dir(cfg.run.output_dir, "run.output_dir")
    out = Path(cfg.run.output_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with FolderLock(out, "run.output_dir"):  # one comparison per folder (its runs lock their own)
        if script and cfg.partition.prebuilt:  # a folder made by DGL's partition_graph, say
            stats = prebuilt_stats(cfg)
        else:
            stats, _ = ensure_partitions(cfg)
        if script:
            _check_script_runs(cfg, stats["part_config"])
        part_dir = str(Path(stats["part_config"]).resolve().parent)
        isolate = isolation_plan(cfg)  # False across hosts: each run opens its hosts, which count their own bytes
        hosts = uses_hosts(cfg)
        if not isolate and not hosts:
            log.warning("not root: runs share the host's loopback, so wire bytes are not measured (app counts only)")

        def sub(name: str, **grappa):
            return dataclasses.replace(
                cfg,
                partition=dataclasses.replace(cfg.partition, out_dir=part_dir),
                run=dataclasses.replace(cfg.run, output_dir=str(out / name), progress=False),
                # each run its own checkpoints (<its output>/checkpoints): they must not clear each other's
                checkpoint=dataclasses.replace(cfg.checkpoint, dir="", resume=""),
                grappa=dataclasses.replace(cfg.grappa, **grappa),
            )

        plan = []
        if cfg.compare.distdgl:
            plan.append(("distdgl", lambda c: run_distdgl(c, isolate=isolate, quiet=True), {}))
        # a script of the user's own: it, then its converted run (the package's trainer does not train it)
        for v in [] if script else cfg.compare.variants:
            plan.append((f"grappa-{v}", lambda c: run_grappa(c, Path(c.run.output_dir), isolate), {"correction": v}))
        converted = cfg.compare.dropin_script or None  # else compare.script, with --grappa
        if cfg.compare.dropin or script:
            plan.append(
                (
                    "distdgl-grappa",
                    lambda c: run_distdgl(c, grappa=True, script=converted, isolate=isolate, quiet=True),
                    {},
                )
            )

        note = replacing(out, ["compare.json", "report.md", *PLOTS, *(name for name, _, _ in plan)])
        if note:
            log.warning("%s (copy them elsewhere first to keep them, or set --run.output_dir)", note)
        runs: dict[str, dict] = {}
        for i, (name, fn, kw) in enumerate(plan):
            c = sub(name, **kw)
            t0 = time.perf_counter()
            print(f"[{i + 1}/{len(plan)}] {name}: running ... (log in {out / name})", flush=True)
            summary = fn(c)
            if summary.get("has_summary") is False:
                raise JobFailed(
                    f"{name}: the script made no training pass over a DGL distributed loader or a drop-in "
                    "loader (a loop over one with autograd on), so there are no epochs to compare; its "
                    f"output is in {out / name / 'logs'}"
                )
            records = read_jsonl(Path(c.run.output_dir) / "metrics.jsonl")
            key = quality_key(cfg)
            # a script's per-machine figures are the report's (its trainers' own files are not)
            runs[name] = {
                "summary": {k: v for k, v in summary.items() if k != "config" and (script or k != "workers")},
                "records": records,
                "curve": curve(records, key),
                "job_wall_s": time.perf_counter() - t0,
            }
            s = summary
            label = s.get("metric_label") or "metric" if script else key.replace("_", " ")
            print(
                f"    done in {runs[name]['job_wall_s']:.0f} s: epoch {s['epoch_time_s']:.3f} s, "
                f"{label} {'-' if s.get(key) is None else format(s[key], '.4f')}, "
                f"wire/epoch {format_bytes(s.get('wire_bytes_per_epoch'))}",
                flush=True,
            )

        result = compare_summary(cfg, runs, stats, isolate or hosts)
        write_json(out / "compare.json", result)
        (out / "report.md").write_text(report_markdown(result))
        plot(result, out)
        return result


def compare_summary(cfg, runs: dict[str, dict], stats: dict, isolated: bool) -> dict:
    """The comparison table and targets from the runs' summaries and records."""
    base_name = "distdgl" if "distdgl" in runs else next(iter(runs))
    base = runs[base_name]["summary"]
    kind = kind_of(cfg)
    metric = kind.metric  # the kind's figures: accuracies; link prediction's MRR and hits@k; ...
    script = script_mode(cfg)
    key = quality_key(cfg)  # the kind's validation figure; a script: its own metric
    best = base.get(f"best_{key}") or 0.0
    # a script's metric may be a loss, printed when the script chooses: no target to reach
    target = None if script else cfg.compare.target_acc or round(metric.target(best, TARGET_FRACTION), 4)
    figure = f"validation {metric.words}"
    share = (
        f"{TARGET_FRACTION * 100:.0f} % of"
        if metric.higher_is_better  # an error: as far above its best
        else f"{TARGET_FRACTION:g} x the target is"
    )
    rule = (
        None
        if script
        else (
            "set by compare.target_acc"
            if cfg.compare.target_acc
            else f"{share} {system_label(base_name)}'s best {figure}, {best:.4f}"
        )
    )
    rows = []
    for name, r in runs.items():
        s = r["summary"]
        tta = None if script else time_to_target(r["records"], target, key, metric=metric)
        b_tta = None if script else time_to_target(runs[base_name]["records"], target, key, metric=metric)
        row = {
            "system": name,
            "epoch_time_s": s["epoch_time_s"],
            "wire_bytes_per_epoch": s.get("wire_bytes_per_epoch"),
            "app_bytes_per_epoch": s.get("app_bytes_per_epoch"),
            "one_time_bytes_per_epoch": s.get("one_time_bytes_per_epoch"),
            "grad_bytes_per_epoch": s.get("grad_bytes_per_epoch"),
            "feature_bytes_per_epoch": s.get("feature_bytes_per_epoch"),
            "time_to_target_s": tta,
            "eval_time_s": s.get("eval_time_s"),
            "wire_hosts": s.get("wire_hosts"),
            "phases": s.get("phases"),
            # what the largest worker (DistDGL: machine, its server's shard) holds, and its peak RSS
            "resident_bytes_max": s.get("resident_bytes_max"),
            "resident_ratio_max": s.get("resident_ratio_max"),
            "peak_rss_bytes_max": s.get("machine_peak_rss_bytes_max") or s.get("peak_rss_bytes_max"),
        }
        # the kind's figures (link prediction: MRR and hits@k of the same held-out edges, and the share of edges a
        # worker could train on)
        for f in (*metric.figures, *metric.extra):
            row.update({k: s.get(k) for k in (f.key, f.paren) if k is not None})
        row.update({k: s.get(k) for k in (*metric.summary_keys, metric.best_key)})
        if script:  # the script's own figure, and what each machine did
            row.update(script_row(s))
        quality = ("metric",) if script else tuple(f.key for f in metric.figures)
        for k in ("epoch_time_s", "wire_bytes_per_epoch", "app_bytes_per_epoch") + quality:
            row[f"{k}_ratio"] = _ratio(row[k], base.get(k))
        row["time_to_target_ratio"] = _ratio(tta, b_tta)
        rows.append(row)
    c = cfg

    return {
        "name": c.name,
        "baseline": base_name,
        "target_acc": target,
        "target_rule": rule,
        "isolated": isolated,
        # the figures' names (their labels filled from the run's own summary fields: link prediction's hits@k)
        "task": c.train.task,
        "metric": metric.describe(kind.run_summary(c, None)),
        "script": script_setting(c, runs) if script else None,
        "network_bandwidth": c.network.bandwidth or None,
        "remote": c.launch.remote,
        "num_hosts": next(
            (len(r["summary"]["cluster"]["hosts"]) for r in runs.values() if r["summary"].get("cluster")), None
        ),
        "network_link": (c.network.link if c.launch.remote == "netns" else "real network")
        if uses_hosts(c)
        else "loopback (shared)",
        # test hosts: the links ran at bandwidth / D, so every time here is D x the emulated cluster's
        **{
            k: next((r["summary"][k] for r in runs.values() if k in r["summary"]), None)
            for k in ("network_dilation", "host_cpu_share")
        },
        "num_parts": c.partition.num_parts,
        # a prebuilt folder's own method (DGL's json says it), not the config's
        "partition_method": (stats.get("method") if c.partition.prebuilt else None) or c.partition.method,
        "edge_cut": stats.get("edge_cut"),
        "dataset": c.data.name,
        "num_nodes": stats.get("num_nodes"),
        "model": c.model.name,
        "num_layers": c.model.num_layers,
        "epochs": c.train.epochs,
        "fanouts": c.train.fanouts,
        "batch_size": c.train.batch_size,
        "rows": rows,
        "runs": runs,
        "plots": list(PLOTS),
    }


def compare_table(result: dict, markdown: bool = False) -> str:
    """The comparison as a markdown table with every column (report.md), or for the terminal a table of
    at most :data:`TERMINAL_WIDTH` columns (systems in words, the figures a reader compares, ratios to
    the baseline) with the target's footnote.

    Example:
        >>> row = {"system": "grappa-none", "epoch_time_s": 0.11, "epoch_time_s_ratio": 0.476,
        ...        "wire_bytes_per_epoch": 599310.0, "wire_bytes_per_epoch_ratio": 0.0403, "val_acc": 0.9862,
        ...        "test_acc": 0.9833, "time_to_target_s": 1.18, "time_to_target_ratio": 0.441}
        >>> print(compare_table({"rows": [row], "baseline": "distdgl", "target_acc": 0.966}))  # doctest: +ELLIPSIS
        system  epoch                wire/epoch      one-time  test acc  to val 0.966*       peak RSS
        ...
        Grappa  0.110 s 2.1x faster  599.31 KB 1/25  -         0.9833    1.18 s 2.3x faster  -
        ...
    """
    if result.get("script"):  # a script of the user's own: its metric, no target
        return script_table(result, markdown)
    if markdown:
        return _markdown_table(result)
    m = result_metric(result)
    # the test figures (val figures, app bytes and memory held are in report.md); with more than one (link
    # prediction: its hits@k) they take the place of the peak RSS
    tests = [f for f in m["figures"] if f["key"] != m["val_key"]]
    rss = len(tests) == 1
    quality = [f["label"] for f in tests]
    # not measured (no private namespace): the application's count for every row, said in the header
    measured = all(r.get("wire_bytes_per_epoch") is not None for r in result["rows"])
    bytes_key = "wire_bytes_per_epoch" if measured else "app_bytes_per_epoch"
    head = (
        ["system", "epoch", "wire/epoch" if measured else "app/epoch", "one-time"]
        + quality
        + [f"to val {result['target_acc']:.3f}*"]
        + (["peak RSS"] if rss else [])
    )  # the footnote names it
    lines = []
    for r in result["rows"]:

        def both(text, ratio_key, kind="time"):
            ratio = "" if r["system"] == result["baseline"] else _short_ratio(r.get(ratio_key), kind)
            return f"{text} {ratio}".strip()

        wire = r.get(bytes_key)
        tta = r.get("time_to_target_s")
        lines.append(
            [
                system_label(r["system"], short=True),
                both(_seconds(r["epoch_time_s"], 3), "epoch_time_s_ratio"),
                "-" if wire is None else both(format_bytes(wire), f"{bytes_key}_ratio", "bytes"),
                format_bytes(r["one_time_bytes_per_epoch"]) if r.get("one_time_bytes_per_epoch") else "-",
                *("-" if r.get(f["key"]) is None else format(r[f["key"]], f["spec"]) for f in tests),
                "not reached" if tta is None else both(_seconds(tta, 2), "time_to_target_ratio"),
            ]
            + ([format_bytes(r.get("peak_rss_bytes_max")) if r.get("peak_rss_bytes_max") else "-"] if rss else [])
        )
    widths = [max(len(h), *(len(row[i]) for row in lines)) for i, h in enumerate(head)]
    if rss and sum(widths) + 2 * (len(widths) - 1) > TERMINAL_WIDTH:  # many systems: peak RSS in report.md
        head, lines, widths = head[:-1], [row[:-1] for row in lines], widths[:-1]
    fmt = lambda row: "  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip()  # noqa: E731
    base = system_label(result["baseline"])
    notes = [
        f"against {base}: times as faster/slower, bytes as a share (1/25: a 25th); "
        + ("wire/epoch: bytes on the network" if measured else "app/epoch: bytes the application sent")
        + " per training epoch, all workers; one-time: what Grappa reads once per partitioning (the halo's "
        "rows, the aggregates), divided by the epochs it serves; every column: report.md",
        f"* {target_text(result)}; training seconds until the first evaluation at or "
        f"{'above' if m['higher_is_better'] else 'below'} it",
    ]
    return "\n".join(
        [fmt(head), fmt(["-" * w for w in widths])]
        + [fmt(row) for row in lines]
        + [_wrap(n, TERMINAL_WIDTH) for n in notes]
    )


def _markdown_table(result: dict) -> str:
    """report.md's table: every column, systems by key, each figure with its ratio to the baseline."""
    m = result_metric(result)
    val = next(f["label"] for f in m["figures"] if f["key"] == m["val_key"])
    quality = [f["label"] for f in m["figures"] + m["extra"]]
    head = (
        ["system", "epoch time", "wire bytes/epoch", "app bytes/epoch", "one-time bytes/epoch"]
        + quality
        + [f"time to {val} {result['target_acc']:.3f}*", "node tables held (x own fp32)", "peak RSS"]
    )
    lines = []
    for r in result["rows"]:
        tta = "not reached" if r["time_to_target_s"] is None else f"{r['time_to_target_s']:.2f} s"

        def fig(f):  # a figure with its ratio to the baseline
            k = f["key"]
            return "-" if r.get(k) is None else f"{format(r[k], f['spec'])} ({_fmt_ratio(r.get(f'{k}_ratio'))})"

        def extra(f):  # a figure without one, and its second key in parentheses
            k, p = f["key"], f["paren"]
            return (
                "-"
                if r.get(k) is None
                else (
                    format(r[k], f["spec"]) + ("" if p is None or r.get(p) is None else f" ({format(r[p], f['spec'])})")
                )
            )

        figures = [fig(f) for f in m["figures"]] + [extra(f) for f in m["extra"]]
        lines.append(
            [
                r["system"],
                f"{r['epoch_time_s']:.3f} s ({_short_ratio(r['epoch_time_s_ratio']) or '-'})",
                *(
                    f"{format_bytes(r[k])} ({_short_ratio(r[f'{k}_ratio'], 'bytes') or '-'})"
                    for k in ("wire_bytes_per_epoch", "app_bytes_per_epoch")
                ),
                format_bytes(r["one_time_bytes_per_epoch"]) if r.get("one_time_bytes_per_epoch") else "-",
                *figures,
                f"{tta} ({_short_ratio(r['time_to_target_ratio']) or '-'})",
                (
                    f"{format_bytes(r['resident_bytes_max'])} ({r['resident_ratio_max']:.2f}x)"
                    if r.get("resident_bytes_max") is not None and r.get("resident_ratio_max") is not None
                    else "-"
                ),
                format_bytes(r.get("peak_rss_bytes_max")) if r.get("peak_rss_bytes_max") else "-",
            ]
        )
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(row) + " |" for row in lines]
    return "\n".join(out)


def compare_phase_table(result: dict) -> str:
    """Where each system's epoch goes (median seconds per phase, rank 0; see dgl_grappa.runtime.metrics.PHASES)."""
    keys = [k for k in PHASE_KEYS if k != "overlap_s"]
    out = ["| system | epoch | " + " | ".join(k[:-2] for k in keys) + " |", "|" + "---|" * (len(keys) + 2)]
    for r in result["rows"]:
        ph = r.get("phases") or {}
        out.append(
            f"| {r['system']} | {r['epoch_time_s']:.3f} s | "
            + " | ".join(f"{ph[k]:.3f}" if k in ph else "-" for k in keys)
            + " |"
        )
    return "\n".join(out)


def _setting(result: dict) -> str:
    bw = _network(result)
    if result.get("script"):
        return setting_text(result, bw)
    return (
        f"{result['dataset']} ({result['num_nodes']} nodes), {result['num_parts']} {result['partition_method']} "
        f"parts ({result['edge_cut'] * 100:.1f} % of edges cut), {result['model']} x{result['num_layers']}, "
        f"fan-outs {result['fanouts']}, batch {result['batch_size']}, {result['epochs']} epochs; network: {bw}"
    )


def _network(result: dict) -> str:
    """The comparison's network in words (links, bandwidth, CPU share, time dilation)."""
    link = result.get("network_link", "loopback (shared)")
    if link == "per_host":
        bw = f"{result.get('num_hosts')} test hosts, each its own {result['network_bandwidth'] or 'unshaped'} link"
    elif link == "shared":
        bw = f"{result.get('num_hosts')} test hosts sharing one {result['network_bandwidth'] or 'unshaped'} link"
    elif link == "real network":
        bw = "ssh hosts, their real network"
    else:
        bw = result["network_bandwidth"] or "unshaped loopback"
    if result.get("host_cpu_share") is not None:
        bw += f", {result['host_cpu_share']:.3g} cores per host"
    if (result.get("network_dilation") or 1) != 1:
        bw += (
            f", time dilation {result['network_dilation']:.3g} (links at bandwidth / D; times are D x the "
            "emulated cluster's)"
        )
    return bw


def _quality_notes(result: dict) -> list[str]:
    """How report.md's figure columns (the kind of job's: accuracies; link prediction's MRR and hits@k) are
    measured."""
    m = result_metric(result)
    val = next(f["label"] for f in m["figures"] if f["key"] == m["val_key"])
    side = "above" if m["higher_is_better"] else "below"
    return [
        *m["notes"],
        f"- **time to {val} {result['target_acc']:.3f}**: training seconds until the first evaluation at or "
        f"{side} the target (evaluation time excluded); the {target_text(result)}.",
    ]


def report_markdown(result: dict) -> str:
    """report.md: setting, table, how each column is measured, plots."""
    wire_note = (
        "measured: tx bytes of the loopback of the run's private network namespace, all processes, "
        "training epochs only (evaluation excluded; the epoch clock's window, so its barrier and 8-byte "
        "max all-reduce are in it), median over epochs"
        if result["isolated"]
        else "not measured (needs root for a private network namespace)"
    )
    if result.get("remote", "none") != "none":
        wire_note = (
            "measured: the tx bytes of every host's network interface, summed over the hosts (each byte "
            "leaves one host), training epochs only (the epoch clock's window, read by one worker per host), "
            "median over epochs; each host's tx/rx is in the runs' summary.json (`wire_hosts`)"
        )
    if result.get("script"):
        if result.get("remote", "none") != "none":
            wire_note = (
                "measured: the tx bytes of every host's network interface over its trainer's pass, summed "
                "over the hosts, median over epochs; each machine's is below"
            )
        elif result["isolated"]:
            wire_note = (
                "measured: tx bytes of the loopback of the run's private network namespace, all processes, "
                "over trainer 0's pass, median over epochs"
            )
        return script_report(result, _setting(result), wire_note)
    return "\n".join(
        [
            f"# Comparison: {result['name']}",
            "",
            _setting(result),
            "",
            compare_table(result, markdown=True),
            "",
            f"Systems: {systems_legend([r['system'] for r in result['rows']])}. "
            f"In parentheses, against `{result['baseline']}`: times as faster or slower, bytes as a share (1/25: a "
            "25th of its bytes), accuracies as a ratio.",
            "",
            f"\\* The {target_text(result)}.",
            "",
            "- **epoch time**: one definition for every system (`dgl_grappa.runtime.metrics.EpochClock`): an epoch is "
            "timed from a barrier at its start to the end of its slowest worker, evaluation excluded; the column is "
            "the median of those per-epoch times over the epochs, and training time (time to target) is their sum. "
            "A DistDGL run restarted per partitioning concatenates its segments' epochs and applies the same rule.",
            f"- **wire bytes/epoch**: {wire_note}.",
            "- **app bytes/epoch**: what the application handed to the network, all workers: remote KVStore "
            "rows (row + 8-byte id), sampling RPC payloads, and the DDP gradient payload x 2(W-1)/W (gloo's ring "
            "all-reduce).",
            "- **one-time bytes/epoch**: what Grappa's workers read once per partitioning (with `train.halo=keep` "
            "each kept halo row's features, in-degree and first-hop aggregate, from its owner, in the stored "
            "precision; with an exact first hop, one partial sum per other owner of a node's in-neighbours whose rows "
            "are not kept), all workers, divided by the epochs; read at load time from the owners' partition files, "
            "so in neither column before it.",
            "- **node tables held**: the feature-width node tables of the largest worker (Grappa: features, first-hop "
            "aggregates and kept halo rows, in their stored precision, `train.memory_budget`; DistDGL: its machine's "
            "KVStore shard), and that as a multiple of the worker's own feature rows in fp32. **peak RSS**: the "
            "largest worker's peak resident memory (DistDGL: a machine's server plus its trainer).",
            *_quality_notes(result),
            "",
            "## Where an epoch goes",
            "",
            compare_phase_table(result),
            "",
            "Median seconds per epoch of rank 0 (`metrics.jsonl` has every epoch). sample: drawing the blocks "
            "(DistDGL: the loader's `next()`, with its sampling RPCs); gather: the input features (DistDGL: the "
            "KVStore pull); backward: until DDP hands the last gradient bucket to the hook (DistDGL, which has no "
            "hook to time: the whole backward with its all-reduce); allreduce (Grappa): from there to the end of "
            "`backward()`, i.e. the collective's exposed time and the wait for a peer behind in the step; other: "
            "the rest of rank 0's time; wait: rank 0's wait for the epoch's slowest worker. They add up to the "
            "epoch time (minus any overlap of prefetching).",
            "",
            "![validation accuracy against training time](accuracy_vs_time.png)",
            "",
            f"Validation {result_metric(result)['words']} of the whole graph at each "
            f"evaluation against the training seconds before it (evaluation excluded); the dashed line is the "
            f"{target_text(result)}.",
            "",
            "![bytes per epoch](bytes_per_epoch.png)",
            "",
            "Bytes on the network per training epoch, all workers, on a linear axis: each system's measured wire "
            "bytes (the application's count where the wire was not measured), with what it read once per "
            "partitioning spread over the epochs on top; each bar's text gives its share of the baseline's bytes with "
            "those one-time reads, and without them (the table's wire column).",
            "",
        ]
    )


def cmd_compare(cfg) -> int:
    """CLI entry: run the comparison, print the table and where everything went."""
    result = run_compare(cfg)
    out = Path(cfg.run.output_dir)
    print()
    print(_wrap(_setting(result), TERMINAL_WIDTH))
    print(compare_table(result))
    print(f"wrote in {out}: compare.json, report.md (every column), " + ", ".join(PLOTS))
    return 0
