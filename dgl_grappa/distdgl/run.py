"""The DistDGL side's entry point: :func:`run_distdgl`, one job or one job per partitioning."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..cluster.launch import check_port_free
from ..cluster.procs import isolation_plan
from ..cluster.remote import DILATION_KEYS
from ..config import ConfigError, dropin_problem
from ..partition.prebuilt import prebuilt_stats
from ..partition.store import ensure_partitions
from ..runtime.checkpoint import CheckpointStore, checkpoint_dir, resolve_resume
from ..runtime.folders import check_output_dir, replacing
from ..runtime.restarts import restart_budget
from .job import check_script_args
from .launcher import JOB_FILE, SERVERS_FILE, log
from .prepare_check import check_job
from .recovery import run_resumable_job, supports_checkpoints
from .script_metric import pattern_for
from .script_summary import script_summary
from .segments import run_segments


def machine_memory(out: Path, summary: dict) -> dict:
    """Each DistDGL machine's peak memory: its server's (the launcher's reading) plus its trainer's.

    Returns:
        ``servers_peak_rss_bytes`` and ``machine_peak_rss_bytes_max`` (server + trainer of
        the same machine, the largest), or {} when the launcher read nothing (other hosts).
    """
    f = out / SERVERS_FILE
    try:
        servers = json.loads(f.read_text())["peak_rss_bytes"]
    except (OSError, ValueError, KeyError):
        return {}
    trainers = [w.get("peak_rss_bytes") for w in summary.get("workers") or []]
    machines = [s + t for s, t in zip(servers, trainers) if s and t]
    return {"servers_peak_rss_bytes": servers, "machine_peak_rss_bytes_max": max(machines) if machines else None}


OUTPUTS = ("summary.json", "metrics.jsonl", JOB_FILE, "logs")
"""What a DistDGL job writes in its output folder (an earlier job's are replaced)."""


def _announce(out: Path) -> None:
    """The line compare prints, for a job's own folder: what of an earlier job the job replaces."""
    note = replacing(out, list(OUTPUTS))
    if note:
        log.warning("%s (copy them elsewhere first to keep them, or set --run.output_dir)", note)


def run_distdgl(
    cfg,
    out_dir: str | Path | None = None,
    *,
    grappa: bool = False,
    script: str | None = None,
    extra_args: list[str] | None = None,
    isolate: bool | None = None,
    quiet: bool = False,
    announce: bool = False,
) -> dict:
    """Run the DistDGL job (baseline, or the drop-in script with ``--grappa``) and return its summary.

    Args:
        cfg: validated Config; the partitions of ``cfg.partition`` are made if missing.
        out_dir: where logs, metrics.jsonl and summary.json go (default: run.output_dir).
        grappa: pass ``--grappa`` to the trainer script (local-only loader + corrected hook).
        script: trainer script (default: compare.script, else the package's trainer module).
        extra_args: more arguments for the script (e.g. config overrides).
        isolate: private network namespace: None = when possible (needed to measure
            wire bytes), True = required, False = no (not allowed with a bandwidth).
        quiet: the job's output goes to ``out_dir/<system>.log`` instead of the terminal.
        announce: say what of an earlier job in ``out_dir`` is replaced, once everything is checked
            and before the first process starts (the command line's jobs; compare says it for its own).

    With ``schedule.k > 0`` the run is one job per partitioning, each resumed from the
    previous one's checkpoint (:func:`~dgl_grappa.distdgl.segments.run_segments`); the summary then has ``switches``
    and ``restart_s_total``.

    With ``compare.script_args`` the script gets exactly those arguments (placeholders filled
    in, :func:`~dgl_grappa.distdgl.job.expand_script_args`); a restart (``launch.max_restarts``)
    then starts it from the beginning again.

    Returns:
        The summary dict (also in ``out_dir/summary.json``). For a script that writes no
        summary.json (DGL's examples), the summary of what the launcher measured around its
        loaders (:func:`~dgl_grappa.distdgl.script_summary.script_summary`: ``"measured": "loaders"``,
        epoch times and steps, bytes, memory, the script's own metric read from its output with
        ``compare.metric``; ``job``: the launcher's record), written as summary.json and metrics.jsonl; when its
        trainers made no
        training pass over a DGL or drop-in loader, the launcher's record alone (``"has_summary":
        False``: exit statuses, logs, wall time, ``edge_cut``, ``restarts``). ``out_dir/job.json``
        holds the launcher's record in both cases.

    Example:
        >>> from dgl_grappa.config import load_config
        >>> cfg = load_config(None, ["--partition.prebuilt=parts", "--compare.script=node_classification.py",
        ...     "--compare.script_args=--graph_name {graph_name} --ip_config {ip_config} --part_config {part_config}"])
        >>> run_distdgl(cfg)["trainers"]  # doctest: +SKIP
        [{'rank': 0, 'exit_code': 0, 'log': '.../logs/trainer0.log'}, {'rank': 1, ...}]

    Raises:
        JobFailed, IsolationError, ConfigError.
    """
    why = dropin_problem(cfg.grappa.correction, cfg.train.halo) if grappa else None
    if why is not None:
        raise ConfigError(why)  # here, before servers start, rather than in every trainer
    _check_script_args(cfg, grappa=grappa, script=script, extra_args=extra_args)

    check_output_dir(out_dir or cfg.run.output_dir, "run.output_dir")
    if cfg.schedule.k > 0 and cfg.launch.copy_partitions:
        raise ConfigError(
            "DistDGL with schedule.k > 0 resumes every segment from rank 0's checkpoint file, which "
            "needs storage all hosts share: set --launch.copy_partitions=false (shared run.output_dir)"
        )
    out = Path(out_dir or cfg.run.output_dir).resolve()
    cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, output_dir=str(out)))
    in_ns = isolation_plan(cfg, isolate)
    if cfg.launch.master_port:
        check_port_free(cfg.launch.master_port, "launch.master_port")
    if cfg.distdgl.base_port and not in_ns:  # inside a private namespace every port is free
        for i in range(cfg.partition.num_parts + 1):
            check_port_free(cfg.distdgl.base_port + 10 * i, "distdgl.base_port")
    if cfg.schedule.k > 0:
        if cfg.checkpoint.resume:
            raise ConfigError(
                "checkpoint.resume is not available for a DistDGL run with schedule.k > 0 (one job per "
                "partitioning); its trainers are restarted in-run with --launch.max_restarts=N"
            )
        if announce:
            _announce(out)
        return run_segments(cfg, out, grappa=grappa, script=script, extra_args=extra_args, in_ns=in_ns, quiet=quiet)

    point = resolve_resume(cfg, out_dir=out)
    if cfg.partition.prebuilt:  # a folder made elsewhere (DGL's layout); the drop-in needs it prepared
        stats = prebuilt_stats(cfg)
    else:
        stats, _ = ensure_partitions(cfg)
    if grappa and 0 in stats.get("train_nodes", []):
        raise ConfigError(
            f"partition part {stats['train_nodes'].index(0)} has no training nodes, and the drop-in "
            "loader needs some on every machine; use fewer parts or --partition.balance_train=true"
        )
    check_job(cfg, stats["part_config"], grappa=grappa, script=script)  # before any server starts
    if announce:  # everything checked: the job goes ahead (its checkpoints, logs and files are replaced)
        _announce(out)
    cfg = dataclasses.replace(
        cfg, partition=dataclasses.replace(cfg.partition, out_dir=str(Path(stats["part_config"]).resolve().parent))
    )
    ckdir = checkpoint_dir(cfg, out) if supports_checkpoints(cfg, script) else None
    if ckdir is not None and point is None:
        CheckpointStore(ckdir).clear()  # a fresh run: checkpoints of an earlier one must not be resumed
    budget = restart_budget(cfg.launch, "DistDGL job")
    summary = run_resumable_job(
        cfg,
        out,
        grappa=grappa,
        script=script,
        extra_args=extra_args,
        in_ns=in_ns,
        quiet=quiet,
        start=point.epoch if point else 0,
        stop=cfg.train.epochs,
        segment_start=0,
        resume=point.path if point else None,
        budget=budget,
        ckdir=ckdir,
    )
    summary["edge_cut"] = stats["edge_cut"]
    summary["restarts"] = budget.taken
    if summary.get("has_summary") is False:  # the script wrote no metrics: what the launcher measured
        (out / JOB_FILE).write_text(json.dumps(summary, indent=1))
        chosen = script or cfg.compare.script
        measured = script_summary(
            out,
            cfg.partition.num_parts,
            summary["system"],
            chosen,
            pattern_for(cfg.compare.metric, chosen) or pattern_for("", cfg.compare.script),
        )
        if measured is None:
            return summary
        records = measured.pop("records")
        measured.update(
            edge_cut=stats["edge_cut"],
            restarts=budget.taken,
            job={k: summary[k] for k in ("wall_time_s", "machines", "trainers", "servers", "command") if k in summary},
            # across hosts: where it ran, and the test hosts' time dilation
            **{k: summary[k] for k in ("cluster", *DILATION_KEYS) if k in summary},
        )
        summary = measured
        (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    summary.update(machine_memory(out, summary))
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def _check_script_args(cfg, *, grappa: bool, script: str | None, extra_args: list[str] | None) -> None:
    """``compare.script_args``: one line on what cannot go with a verbatim argument list, before anything starts."""
    if not cfg.compare.script_args:
        return
    if not (script or cfg.compare.script):
        raise ConfigError(
            "compare.script_args is set but no script is: name it with --compare.script=PATH "
            "(or --script PATH); the package's trainer takes the package's arguments"
        )
    if cfg.schedule.k > 0:
        raise ConfigError(
            f"compare.script_args passes the script its own arguments only, and repartitioning "
            f"(schedule.k={cfg.schedule.k}) resumes every partitioning's job through the package's "
            "--start_epoch/--resume arguments: use --schedule.k=0, or a script that takes the package's "
            "arguments (empty compare.script_args)"
        )
    if cfg.checkpoint.resume:
        raise ConfigError(
            "checkpoint.resume needs the package's --resume argument, which compare.script_args does "
            "not pass: put the script's own resume flag into compare.script_args instead"
        )
    if extra_args:
        raise ConfigError(
            f"extra trainer arguments {extra_args} cannot go with compare.script_args (the script "
            "gets exactly its own): put them into compare.script_args"
        )
    check_script_args(cfg, grappa=grappa, script=script)
