"""One DistDGL job from the caller's side: resolved config, trainer command, namespaces, bounded wait."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..cluster.procs import JobFailed, run_isolated
from ..config import write_resolved_config

TRAINER_MODULE = "dgl_grappa.distdgl.train"
"""The DistDGL trainer shipped inside the package (``python -m dgl_grappa.distdgl.train``), so
that an installed dgl_grappa (not only a checkout) can run the baseline."""


def trainer_command(cfg, script: str | None = None) -> list[str]:
    """The command that starts one DistDGL trainer (the launcher appends its cluster arguments).

    Args:
        cfg: the run's config (``compare.script`` names a script of the user's own).
        script: a trainer script that overrides ``compare.script``.

    Returns:
        ``[python, script]``, or ``[python, -m, dgl_grappa.distdgl.train]`` when no script is set.

    Raises:
        ConfigError: the script does not exist.
    """
    from ..config import ConfigError

    chosen = script or cfg.compare.script
    if not chosen:
        return [sys.executable, "-m", TRAINER_MODULE]
    p = Path(chosen)
    if not p.is_file():
        raise ConfigError(f"DistDGL trainer script {p} does not exist; set --compare.script=<path to your own "
                          f"DistDGL script>, or leave it empty for the package's trainer ({TRAINER_MODULE})")
    return [sys.executable, str(p.resolve())]


def run_job(cfg, out: Path, *, grappa: bool, script: str | None, extra_args: list[str] | None, in_ns: bool,
             quiet: bool) -> dict:
    """One DistDGL job (servers + trainers) on ``cfg.partition.out_dir``; its summary.json.

    Args:
        cfg: the job's config (its partitioning folder in ``partition.out_dir``).
        out: the job's output folder (logs, metrics.jsonl, summary.json).
        grappa: pass ``--grappa`` to the trainer (the drop-in).
        script: trainer script, or None for ``compare.script`` / the package's trainer module.
        extra_args: more trainer arguments.
        in_ns: run in a private network namespace (see :func:`dgl_grappa.cluster.procs.run_isolated`).
        quiet: the job's output goes to ``out/<label>.log``.

    Returns:
        The job's summary.json.

    Raises:
        JobFailed: the job failed or wrote no summary.
    """
    resolved = write_resolved_config(cfg, out / "config.resolved.yaml")
    (out / "summary.json").unlink(missing_ok=True)
    trainer = trainer_command(cfg, script) + ["--config", str(resolved)] + (["--grappa"] if grappa else []) + list(extra_args or [])
    argv = [sys.executable, "-m", "dgl_grappa.distdgl", "_launch", "--config", str(resolved), "--out", str(out),
            "--"] + trainer
    bound = cfg.distdgl.startup_timeout_s + cfg.run.timeout_s + cfg.distdgl.shutdown_timeout_s + 60
    label = "distdgl-grappa" if grappa else "distdgl"
    run_isolated(argv, cfg, in_ns, bound, label=label, log_path=out / f"{label}.log" if quiet else None)
    summary_path = out / "summary.json"
    if not summary_path.is_file():
        raise JobFailed(f"the DistDGL job ended without writing {summary_path}")
    return json.loads(summary_path.read_text())
