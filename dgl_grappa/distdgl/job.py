"""One DistDGL job from the caller's side: resolved config, the trainers' and servers' command, bounded wait.

Three kinds of trainer program:

* the package's trainer (``python -m dgl_grappa.distdgl.train``), with the package's
  arguments; its servers are bare DGL servers (``python -m dgl_grappa.distdgl _server``);
* a script of the user's own (``compare.script``) that takes the package's arguments
  (``--config``, ``--ip_config``, ``--part_config``, ``--out_dir``, ``--grappa``, overrides), as the
  scripts in ``examples/`` do;
* a script with its own argument list (``compare.script`` + ``compare.script_args``, e.g. one of
  DGL's examples): the arguments are passed verbatim, with the placeholders of
  :data:`PLACEHOLDERS` filled in, and nothing is added.

A script runs through :mod:`dgl_grappa.distdgl.runscript` (the machine-id override first, then the
script as ``__main__``), in its trainers and, as DGL's ``tools/launch.py`` has it, in its servers
too: what the script pickles by name (a ``DistEmbedding`` initialiser) resolves there.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

from ..cluster.procs import JobFailed, run_isolated
from ..config import ConfigError, write_resolved_config
from ..partition.prebuilt import prebuilt_part_config
from .launcher import JOB_FILE, RECORDS_DIR, ip_config_path, server_command

TRAINER_MODULE = "dgl_grappa.distdgl.train"
"""The DistDGL trainer shipped inside the package (``python -m dgl_grappa.distdgl.train``), so
that an installed dgl_grappa (not only a checkout) can run the baseline."""

RUNSCRIPT_MODULE = "dgl_grappa.distdgl.runscript"
"""How a script is run (:mod:`dgl_grappa.distdgl.runscript`; named, not imported: ``python -m`` of a
module the package had already imported would run it twice)."""

PLACEHOLDERS = {
    "ip_config": "DGL's ip_config.txt the launcher wrote (one line per machine)",
    "part_config": "the partition json (<graph>.json)",
    "graph_name": "the graph's name in that json",
    "out_dir": "the job's output folder",
    "config": "the job's resolved YAML config",
    "grappa": "--grappa for the drop-in run (compare.dropin, --grappa), else nothing (a token of its own)",
}
"""What ``compare.script_args`` may name as ``{name}``: only the launcher knows these."""

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def trainer_command(cfg, script: str | None = None) -> list[str]:
    """The program that one DistDGL trainer runs, without its arguments.

    Args:
        cfg: the run's config (``compare.script`` names a script of the user's own).
        script: a trainer script that overrides ``compare.script``.

    Returns:
        ``[python, -m, dgl_grappa.distdgl.runscript, /abs/script]``, or ``[python, -m,
        dgl_grappa.distdgl.train]`` when no script is set.

    Raises:
        ConfigError: the script does not exist.

    Example:
        >>> from dgl_grappa.config import load_config
        >>> trainer_command(load_config(None, []))[1:]
        ['-m', 'dgl_grappa.distdgl.train']
    """
    chosen = script or cfg.compare.script
    if not chosen:
        return [sys.executable, "-m", TRAINER_MODULE]
    p = Path(chosen)
    if not p.is_file():
        raise ConfigError(
            f"DistDGL trainer script {p} does not exist; set --compare.script=<path to your own "
            f"DistDGL script>, or leave it empty for the package's trainer ({TRAINER_MODULE})"
        )
    return [sys.executable, "-m", RUNSCRIPT_MODULE, str(p.resolve())]


def expand_script_args(text: str, values: dict[str, str], *, grappa: bool) -> list[str]:
    """``compare.script_args`` as the script's argument list: split as a shell would, placeholders filled in.

    Args:
        text: the arguments, e.g. ``"--graph_name {graph_name} --ip_config {ip_config} --num_epochs 3"``.
        values: a value for every name of :data:`PLACEHOLDERS` but ``grappa``.
        grappa: whether this is the drop-in run (``{grappa}`` becomes ``--grappa``; otherwise it
            is left out).

    Returns:
        The argument list. Braces that do not enclose a bare word (JSON, say) stay as they are.

    Raises:
        ConfigError: unbalanced quotes, an unknown placeholder, ``{grappa}`` inside another
            argument, or a drop-in run whose arguments have no ``{grappa}``.

    Example:
        >>> expand_script_args("--ip_config {ip_config} {grappa}", {"ip_config": "/o/ip.txt"}, grappa=False)
        ['--ip_config', '/o/ip.txt']
    """
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise ConfigError(
            f"compare.script_args={text!r} cannot be split into arguments ({exc}); check its quotes"
        ) from None
    known = ", ".join("{" + k + "}" for k in PLACEHOLDERS)
    out: list[str] = []
    for tok in tokens:
        if tok == "{grappa}":
            if grappa:
                out.append("--grappa")
            continue

        def fill(m: re.Match) -> str:
            name = m.group(1)
            if name == "grappa":
                raise ConfigError(
                    f"compare.script_args: {{grappa}} must be an argument of its own, not part of {tok!r}"
                )
            if name not in values:
                raise ConfigError(
                    f"compare.script_args names {{{name}}}, which the launcher does not know; use {known}"
                )
            return values[name]

        out.append(_PLACEHOLDER.sub(fill, tok))
    if grappa and "{grappa}" not in tokens:
        raise ConfigError(
            "the drop-in run (--grappa, compare.dropin) passes --grappa to the script, but "
            "compare.script_args has no {grappa}: add it where the script takes the flag"
        )
    return out


def converted(cfg, script: str | None) -> bool:
    """``script`` is the converted copy, ``compare.dropin_script``: it is the drop-in without ``--grappa``."""
    return (
        bool(script and cfg.compare.dropin_script)
        and Path(script).resolve() == Path(cfg.compare.dropin_script).resolve()
    )


def check_script_args(cfg, *, grappa: bool, script: str | None = None) -> None:
    """Raise the ConfigError that :func:`expand_script_args` would, before anything starts."""
    if cfg.compare.script_args:
        expand_script_args(
            cfg.compare.script_args,
            {k: k for k in PLACEHOLDERS if k != "grappa"},
            grappa=grappa and not converted(cfg, script),
        )


def job_command(
    cfg, out: Path, part_config: Path, resolved: Path, *, grappa: bool, script: str | None, extra_args: list[str] | None
) -> tuple[list[str], list[str]]:
    """The trainers' and the servers' full commands (the launcher adds nothing to them).

    Args:
        cfg: the job's config.
        out: the job's output folder (the launcher writes ``ip_config.txt`` there).
        part_config: the partition json.
        resolved: the job's resolved config file.
        grappa: the drop-in run.
        script: trainer script, or None for ``compare.script`` / the package's trainer module.
        extra_args: more trainer arguments (overrides, the epoch range of a restart); not passed
            to a script with ``compare.script_args``, which gets exactly its own.

    Returns:
        ``(trainer_argv, server_argv)``.
    """
    program = trainer_command(cfg, script)
    own = script is None and not cfg.compare.script
    if cfg.compare.script_args and not own:
        graph_name = json.loads(part_config.read_text()).get("graph_name", "")
        values = {
            "ip_config": str(ip_config_path(out)),
            "part_config": str(part_config),
            "graph_name": graph_name,
            "out_dir": str(out),
            "config": str(resolved),
        }
        trainer = program + expand_script_args(
            cfg.compare.script_args, values, grappa=grappa and not converted(cfg, script)
        )
    else:
        trainer = (
            program
            + ["--config", str(resolved)]
            + (["--grappa"] if grappa else [])
            + list(extra_args or [])
            + ["--ip_config", str(ip_config_path(out)), "--part_config", str(part_config), "--out_dir", str(out)]
        )
    # The package's trainer pickles nothing of its __main__ to the servers: a bare DGL server
    # (the machine's memory is then DGL's alone). A script's servers run the script.
    return trainer, (server_command() if own else trainer)


def run_job(
    cfg, out: Path, *, grappa: bool, script: str | None, extra_args: list[str] | None, in_ns: bool, quiet: bool
) -> dict:
    """One DistDGL job (servers + trainers) on ``cfg.partition.out_dir``; its summary.json.

    Args:
        cfg: the job's config (its partitioning folder in ``partition.out_dir``).
        out: the job's output folder (logs, job.json, and the trainers' metrics.jsonl, summary.json).
        grappa: pass ``--grappa`` to the trainer (the drop-in).
        script: trainer script, or None for ``compare.script`` / the package's trainer module.
        extra_args: more trainer arguments (see :func:`job_command`).
        in_ns: run in a private network namespace (see :func:`dgl_grappa.cluster.procs.run_isolated`).
        quiet: the job's output goes to ``out/<label>.log``.

    Returns:
        The trainers' summary.json; for a script that writes none, the launcher's record of
        the job (``job.json``: exit statuses, logs, wall time) with ``"has_summary": False``.

    Raises:
        JobFailed: the job failed, or the package's trainer (or a repartitioning run, which
            merges the segments' summaries) wrote no summary.
    """
    resolved = write_resolved_config(cfg, out / "config.resolved.yaml")
    (out / "summary.json").unlink(missing_ok=True)
    (out / JOB_FILE).unlink(missing_ok=True)
    for f in (out / RECORDS_DIR).glob("trainer*.jsonl"):  # a script's loader passes: this job's only
        f.unlink()
    if cfg.compare.script_args:  # the launcher writes a script's epochs from those passes
        (out / "metrics.jsonl").unlink(missing_ok=True)
    # The json itself when partition.prebuilt names one (a folder may hold several graphs).
    part_config = prebuilt_part_config(cfg.partition.prebuilt or cfg.partition.out_dir).resolve()
    trainer, server = job_command(cfg, out, part_config, resolved, grappa=grappa, script=script, extra_args=extra_args)
    argv = (
        [
            sys.executable,
            "-m",
            "dgl_grappa.distdgl",
            "_launch",
            "--config",
            str(resolved),
            "--out",
            str(out),
            "--part-config",
            str(part_config),
        ]
        + (["--script-servers"] if server == trainer else [])
        + ["--"]
        + trainer
    )
    bound = cfg.distdgl.startup_timeout_s + cfg.run.timeout_s + cfg.distdgl.shutdown_timeout_s + 60
    label = "distdgl-grappa" if grappa else "distdgl"
    run_isolated(argv, cfg, in_ns, bound, label=label, log_path=out / f"{label}.log" if quiet else None)
    summary_path = out / "summary.json"
    if summary_path.is_file():
        return json.loads(summary_path.read_text())
    if trainer[:3] == [sys.executable, "-m", TRAINER_MODULE] or cfg.schedule.k > 0:
        raise JobFailed(f"the DistDGL job ended without writing {summary_path}")
    record = json.loads((out / JOB_FILE).read_text())
    return dict(record, system=label, has_summary=False, command=trainer)
