"""The caller side: one DistDGL job (resolved config, trainer script, namespaces, bounded wait) and run_distdgl."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from .launcher import JobFailed
from .processes import ENV_JOB, _rc_text, kill_group_and_tree

DEFAULT_SCRIPT = Path(__file__).resolve().parent.parent.parent / "scripts" / "distdgl_train.py"


def write_resolved_config(cfg, path: Path) -> Path:
    """Write the whole (validated) config to YAML so that child processes see exactly it."""
    import yaml

    from ..config import to_dict

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    return path


def script_path(cfg) -> Path:
    """The trainer script: compare.script, or this checkout's scripts/distdgl_train.py."""
    from ..config import ConfigError

    p = Path(cfg.compare.script) if cfg.compare.script else DEFAULT_SCRIPT
    if not p.is_file():
        raise ConfigError(f"DistDGL trainer script {p} does not exist; set --compare.script=<path to "
                          "scripts/distdgl_train.py or your own DistDGL script>")
    return p


def isolation_plan(cfg, force: bool | None = None) -> bool:
    """Whether a job runs in its own network namespace.

    Args:
        cfg: network.bandwidth set -> required (an error if impossible).
        force: True -> required; False -> never (unless bandwidth); None -> when possible.

    Returns:
        True when the job will run in a private network namespace.

    Raises:
        IsolationError: shaping or isolation was required but cannot be done here.
    """
    from ..netns import check_isolation, require_isolation

    if cfg.network.bandwidth:
        require_isolation(bandwidth=cfg.network.bandwidth)
        return True
    if force:
        require_isolation(net=True)
        return True
    if force is False:
        return False
    return check_isolation(net=True) is None


def run_isolated(argv: list[str], cfg, isolate: bool, timeout_s: float, *, shm: str = "",
                 label: str = "job", log_path: Path | None = None) -> None:
    """Run ``argv`` (in private namespaces when ``isolate``), bounded, killed as a tree at the end.

    Args:
        argv: the command.
        cfg: its Config (network.bandwidth shapes the namespace's loopback).
        isolate: private network namespace (and, with ``shm``, a private /dev/shm).
        timeout_s: bound on the whole command.
        shm: size of a private /dev/shm ("" = keep the host's).
        label: name of the job in messages.
        log_path: the command's stdout and stderr go to this file (None: to ours).

    Raises:
        JobFailed: non-zero exit (with the last lines of its log) or timeout. Whatever
            the outcome, no process of the command is left when this returns.
    """
    from ..netns import EXIT_ISOLATION, isolate_argv

    if isolate:
        argv = isolate_argv(argv, net=True, bandwidth=cfg.network.bandwidth, shm=shm)
    env = dict(os.environ, DGLBACKEND="pytorch", PYTHONUNBUFFERED="1")
    env.setdefault(ENV_JOB, uuid.uuid4().hex)
    sink = None
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        sink = open(log_path, "w")
    try:
        # Own session: the whole job is one process group, killable at once.
        proc = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT if sink else None,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise JobFailed(f"{label} ran past {timeout_s:.0f}s and was killed"
                            + (f" (log: {log_path})" if log_path else "")) from None
        finally:
            # Nothing of the job may outlive it: on success, failure, timeout or Ctrl+C.
            kill_group_and_tree(proc)
    finally:
        if sink is not None:
            sink.close()
    if rc != 0:
        if log_path is None:
            raise JobFailed(f"{label} {_rc_text(rc)}")
        lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
        if rc == EXIT_ISOLATION and lines:
            raise JobFailed(lines[-1])
        tail = "\n".join("    " + ln for ln in lines[-20:])
        raise JobFailed(f"{label} {_rc_text(rc)} (full log: {log_path}):\n{tail}")


def run_distdgl(cfg, out_dir: str | Path | None = None, *, grappa: bool = False, script: str | None = None,
                extra_args: list[str] | None = None, isolate: bool | None = None, quiet: bool = False) -> dict:
    """Run the DistDGL job (baseline, or the drop-in script with ``--grappa``) and return its summary.

    Args:
        cfg: validated Config; the partitions of ``cfg.partition`` are made if missing.
        out_dir: where logs, metrics.jsonl and summary.json go (default: run.output_dir).
        grappa: pass ``--grappa`` to the trainer script (local-only loader + corrected hook).
        script: trainer script (default: compare.script or scripts/distdgl_train.py).
        extra_args: more arguments for the script (e.g. config overrides).
        isolate: private network namespace: None = when possible (needed to measure
            wire bytes), True = required, False = no (not allowed with a bandwidth).
        quiet: the job's output goes to ``out_dir/<system>.log`` instead of the terminal.

    With ``schedule.k > 0`` the run is one job per partitioning, each resumed from the
    previous one's checkpoint (:func:`_run_segments`); the summary then has ``switches``
    and ``restart_s_total``.

    Returns:
        The summary dict (also in ``out_dir/summary.json``).

    Raises:
        JobFailed, IsolationError, ConfigError.
    """
    import dataclasses

    from ..cli import ensure_partitions
    from .segments import _run_segments

    out = Path(out_dir or cfg.run.output_dir).resolve()
    cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, output_dir=str(out)))
    in_ns = isolation_plan(cfg, isolate)
    if cfg.schedule.k > 0:
        return _run_segments(cfg, out, grappa=grappa, script=script, extra_args=extra_args, in_ns=in_ns, quiet=quiet)
    stats, _ = ensure_partitions(cfg)
    cfg = dataclasses.replace(cfg, partition=dataclasses.replace(
        cfg.partition, out_dir=str(Path(stats["part_config"]).resolve().parent)))
    summary = _run_job(cfg, out, grappa=grappa, script=script, extra_args=extra_args, in_ns=in_ns, quiet=quiet)
    summary["edge_cut"] = stats["edge_cut"]
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def _run_job(cfg, out: Path, *, grappa: bool, script: str | None, extra_args: list[str] | None, in_ns: bool,
             quiet: bool) -> dict:
    """One DistDGL job (servers + trainers) on ``cfg.partition.out_dir``; its summary.json."""
    resolved = write_resolved_config(cfg, out / "config.resolved.yaml")
    (out / "summary.json").unlink(missing_ok=True)
    trainer = [sys.executable, str(Path(script).resolve() if script else script_path(cfg).resolve()),
               "--config", str(resolved)] + (["--grappa"] if grappa else []) + list(extra_args or [])
    argv = [sys.executable, "-m", "dgl_grappa.distdgl", "_launch", "--config", str(resolved), "--out", str(out),
            "--"] + trainer
    bound = cfg.distdgl.startup_timeout_s + cfg.run.timeout_s + cfg.distdgl.shutdown_timeout_s + 60
    label = "distdgl-grappa" if grappa else "distdgl"
    run_isolated(argv, cfg, in_ns, bound, label=label, log_path=out / f"{label}.log" if quiet else None)
    summary_path = out / "summary.json"
    if not summary_path.is_file():
        raise JobFailed(f"the DistDGL job ended without writing {summary_path}")
    return json.loads(summary_path.read_text())


