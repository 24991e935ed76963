"""Command line: ``python -m dgl_grappa.distdgl`` (and its internal ``_launch`` / ``_server``)."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from ..cluster.basics import setup_logging
from ..cluster.netns import IsolationError
from ..cluster.procs import EXIT_USER_ERROR, JobFailed
from ..config import ConfigError, load_config
from ..runtime.metrics import format_bytes
from .launcher import FAILURE_FILE, JOB_FILE, _server_main, launch

# The internal ``_launch`` (the job's supervisor) imports neither torch nor DGL (:mod:`.launcher`); the kinds and
# the job runner, which do, are imported by the commands that use them.


def main(argv: list[str] | None = None) -> int:
    """``python -m dgl_grappa.distdgl --config C [--grappa] [--script S [--script-args "..."]]
    [--section.key=value ...]``.

    Runs the DistDGL job (servers + trainers, ``python -m dgl_grappa.distdgl.train`` or the script)
    on the config's partitions and prints its summary line; for a script that writes no
    summary.json, what the launcher knows (exit statuses, wall time, logs). ``_launch`` and
    ``_server`` are internal.

    Example::

        python -m dgl_grappa.distdgl --config C --partition.prebuilt=parts --script node_classification.py \\
            --script-args="--graph_name {graph_name} --ip_config {ip_config} --part_config {part_config} --num_epochs 3"
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    setup_logging(None)
    if argv[:1] == ["_server"]:
        _server_main()
        return 0
    if argv[:1] == ["_launch"]:
        i = argv.index("--")
        ap = argparse.ArgumentParser(prog="python -m dgl_grappa.distdgl _launch")
        ap.add_argument("--config", required=True)
        ap.add_argument("--out", required=True)
        ap.add_argument("--part-config", required=True)
        ap.add_argument("--script-servers", action="store_true", help="the servers run the trainers' command")
        a = ap.parse_args(argv[1:i])
        cfg = load_config(a.config)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanup in launch()
        trainer = argv[i + 1 :]
        try:
            launch(cfg, a.part_config, a.out, trainer, trainer if a.script_servers else None)
        except JobFailed as exc:
            first, _, detail = str(exc).partition("\n")
            # The one error line is the caller's (python -m dgl_grappa.distdgl, compare, bench), read from this
            # file; here only what follows it (the failed process's last log lines), so that a terminal shows
            # the error once, last.
            (Path(a.out) / FAILURE_FILE).write_text(first + "\n")
            if detail:
                print(detail, file=sys.stderr, flush=True)
            return EXIT_USER_ERROR if exc.user_error else 1
        return 0
    ap = argparse.ArgumentParser(
        prog="python -m dgl_grappa.distdgl",
        description="run the DistDGL job (servers + trainers) on the config's partitions",
    )
    ap.add_argument("--config", default=None, help="YAML config")
    ap.add_argument("--grappa", action="store_true", help="drop-in Grappa: local-only loader + corrected hook")
    ap.add_argument(
        "--script",
        default=None,
        help="trainer script of your own (default: compare.script, else python -m dgl_grappa.distdgl.train)",
    )
    ap.add_argument(
        "--script-args",
        default=None,
        help="the script's own arguments, passed verbatim (compare.script_args): nothing is added; "
        "{ip_config}, {part_config}, {graph_name}, {out_dir}, {config} and {grappa} are filled in",
    )
    a, rest = ap.parse_known_args(argv)
    from .run import run_distdgl

    try:
        cfg = load_config(a.config, rest)
        if a.script_args is not None:  # verbatim: not through the overrides' YAML reading
            cfg.compare.script_args = a.script_args
        s = run_distdgl(cfg, grappa=a.grappa, script=a.script, announce=True)
    except (ConfigError, IsolationError, JobFailed) as exc:
        print(f"dgl_grappa.distdgl: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ConfigError) else 1
    if s.get("has_summary") is False:
        print(_job_line(s, Path(cfg.run.output_dir)))
        return 0
    print((script_line if s.get("measured") == "loaders" else summary_line)(s, Path(cfg.run.output_dir)))
    return 0


def script_line(s: dict, out: Path) -> str:
    """The terminal line of a script job's summary (what the launcher measured around its loaders): epoch time
    and steps, bytes per epoch, memory per machine and the script's own metric.

    Example:
        >>> s = {"system": "distdgl", "epochs": 3, "epoch_time_s": 0.243, "steps_per_epoch": 5,
        ...      "wire_bytes_per_epoch": 1.6e6, "app_bytes_per_epoch": 1.55e6, "one_time_bytes_total": 0,
        ...      "machine_peak_rss_bytes_max": 1.07e9, "metric": 0.7335, "metric_label": "Test Acc",
        ...      "metric_per_trainer": [0.72, 0.747]}
        >>> script_line(s, Path("out")).split(";")[0]
        'distdgl: 3 epochs, epoch 0.243 s (5 steps)'
    """
    if s.get("metric") is not None:
        found = [m for m in s.get("metric_per_trainer") or [] if m is not None]
        metric = f"{s['metric_label']} {s['metric']:.4f} (mean of {len(found)} trainers)"
    elif s.get("metric_pattern"):
        metric = f"no line of the trainers' output matched the metric pattern {s['metric_pattern']!r}"
    else:
        metric = "no metric pattern (set --compare.metric='<regex with one group>')"
    memory = s.get("machine_peak_rss_bytes_max") or s.get("peak_rss_bytes_max")
    return (
        f"{s['system']}: {s['epochs']} epochs, epoch {s['epoch_time_s']:.3f} s ({s['steps_per_epoch']:.0f} steps); "
        f"per epoch: wire {format_bytes(s.get('wire_bytes_per_epoch'))}, app "
        f"{format_bytes(s.get('app_bytes_per_epoch'))}; one-time {format_bytes(s.get('one_time_bytes_total'))}; "
        f"peak memory per machine {format_bytes(memory)}; {metric}; wrote {out / 'summary.json'}"
    )


def summary_line(s: dict, out: Path) -> str:
    """The terminal line of a DistDGL job's ``summary.json`` ``s``: its quality (its kind of job's figures:
    accuracies, or a link prediction job's MRR), epoch time, bytes per epoch and restarts.

    Example:
        >>> s = {"system": "distdgl", "task": "link", "val_mrr": 0.52, "test_mrr": 0.5, "epoch_time_s": 3.5,
        ...      "wire_bytes_per_epoch": None, "app_bytes_per_epoch": 8e7, "feature_bytes_per_epoch": 2e7}
        >>> summary_line(s, Path("out")).split(";")[0]
        'distdgl: val MRR 0.5200 test MRR 0.5000 epoch 3.500 s'
    """
    from ..kinds import metric_of

    quality = metric_of(s.get("task")).line(s, sep=" ")  # the job's kind's figures (accuracies, MRR, ...)
    return (
        f"{s['system']}: {quality} epoch {s['epoch_time_s']:.3f} s; "
        f"per epoch: wire {format_bytes(s.get('wire_bytes_per_epoch'))}, app "
        f"{format_bytes(s['app_bytes_per_epoch'])}, remote features/worker "
        f"{format_bytes(s['feature_bytes_per_epoch'])}; "
        + (
            f"{len(s['switches'])} restarts {s['restart_s_total']:.1f} s "
            f"({s['restart_fraction_of_train']:.2f}x training time); "
            if s.get("switches")
            else ""
        )
        + f"wrote {out / 'summary.json'}"
    )


def _job_line(rec: dict, out: Path) -> str:
    """What the launcher knows of a job whose script wrote no summary.json: statuses, wall time, logs."""
    return (
        f"{rec['system']}: the script ran to its end on {rec['machines']} machines in {rec['wall_time_s']:.1f} s "
        f"(trainers exited {[t['exit_code'] for t in rec['trainers']]}, servers "
        f"{[s['exit_code'] for s in rec['servers']]}); it wrote no summary.json, so no metrics here: its own "
        f"output is in {out / 'logs'}/trainer<i>.log; wrote {out / JOB_FILE}"
    )
