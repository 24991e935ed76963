"""``python -m dgl_grappa project``: the projection table (and JSON), or with ``--check`` the check.

Its options (:class:`ProjectOptions`) are set as every command's settings are, last wins: a
YAML file given with ``--config`` (its ``project:`` section), then the command line, where
each option is ``--project.<key>=<value>`` or the short flag docs/projection.md uses
(``--runs A B``, ``--parts 4,8``, ``--gbit 1,10``, ``--latency-us 50``, ``--check DIR``, ...).
Bad input is one line naming the problem and the fix (exit status 2), before anything is read
or written.
"""

from __future__ import annotations

import ast
import inspect
import json
import math
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path

import yaml

from ...config import ConfigError, coerce
from .calibration import ProjectError
from .check import TARGET, check
from .fit import calibrate
from .model import project_grid
from .text import format_calibration, format_check, format_table


@dataclass
class ProjectOptions:
    """What ``project`` does: its calibration runs, the grid it projects, or the runs it checks.

    Example:
        >>> load_options(None, ["--runs", "runs/cal-p1", "runs/cal-p4", "--project.gbit=10"]).gbit
        [10.0]
    """

    runs: list[str] = field(default_factory=list)
    """Compare run folders (or summary.json files) to calibrate on; required."""
    parts: list[int] = field(default_factory=lambda: [4, 8, 16, 32, 64])
    """Machines P (one worker each) to project to."""
    gbit: list[float] = field(default_factory=lambda: [1.0, 10.0, 25.0])
    """Link bandwidth per machine, Gbit/s."""
    latency_us: list[float] = field(default_factory=lambda: [50.0])
    """One-way latency between machines, microseconds."""
    partition: str = ""
    """Project only this calibrated partitioner (empty: each of them)."""
    remote_growth: float | None = None
    """a: a structure-aware partition's remote share grows as (P/P0)^a x a random one's (None: fitted, else 0)."""
    row_cost_us: float | None = None
    """DistDGL's CPU microseconds per remote row (None: fitted, else 0)."""
    compute_scale: float = 1.0
    """Multiplies every per-step compute (0.5: machines twice as fast as the calibration's hosts)."""
    check: list[str] = field(default_factory=list)
    """Emulated compare runs: print projected against measured epochs instead of the table."""
    target: float = TARGET
    """The check's target relative error."""
    out: str = ""
    """The JSON output (empty: <first runs folder>/projection.json, or projection_check.json)."""


FLAGS = {
    "--runs": "runs",
    "--parts": "parts",
    "--gbit": "gbit",
    "--latency-us": "latency_us",
    "--partition": "partition",
    "--remote-growth": "remote_growth",
    "--row-cost-us": "row_cost_us",
    "--compute-scale": "compute_scale",
    "--check": "check",
    "--target": "target",
    "--out": "out",
}
"""The short flags, each the same as ``--project.<key>``."""
USAGE = (
    "python -m dgl_grappa project --runs RUN_DIR [--parts 4,8] [--gbit 1,10] [--latency-us 50] [--check DIR] "
    "(or --project.<key>=<value>, or --config FILE with a project: section)"
)
_MANY = ("runs", "check")
"""Options that take several values (a flag given twice adds up)."""
_NUMBERS = {"parts": (int, 1), "gbit": (float, 0), "latency_us": (float, 0)}
"""Comma-separated number lists: (type, least value)."""


def project_options() -> list[tuple[str, str, str]]:
    """(short flag, key, its help) of every option, the help being the field's docstring in
    :class:`ProjectOptions` (one text for the code, the docs and ``project --help``).

    Example:
        >>> project_options()[0][:2]
        ('--runs', 'runs')
    """
    body = ast.parse(inspect.getsource(ProjectOptions)).body[0].body
    docs = {
        a.target.id: b.value.value
        for a, b in zip(body, body[1:])
        if isinstance(a, ast.AnnAssign) and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
    }
    return [(flag, key, docs[key].replace("%", "%%")) for flag, key in FLAGS.items()]


def _numbers(text: str, flag: str, kind=float, low: float = 0.0) -> list:
    try:
        xs = [kind(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        xs = []
    if not xs or any(x < low for x in xs) or any(isinstance(x, float) and not math.isfinite(x) for x in xs):
        what = "whole numbers" if kind is int else "numbers"
        raise ProjectError(
            f"project: {flag}={text!r} is not a comma-separated list of {what} >= {low:g}; "
            f"e.g. {flag} {'4,8,16' if kind is int else '1,10,25'}"
        )
    return xs


def _value(key: str, value, spelled: str):
    """One option's value, typed and checked; ``spelled`` is how the user wrote its name."""
    tp = typing.get_type_hints(ProjectOptions)[key]
    if key in _NUMBERS:
        kind, low = _NUMBERS[key]
        text = value if isinstance(value, str) else ",".join(map(str, value if isinstance(value, list) else [value]))
        xs = _numbers(text.strip().strip("[]"), spelled, kind, low)
        if key == "gbit" and any(b <= 0 for b in xs):
            raise ProjectError(f"project: {spelled}={text!r} must be > 0 Gbit/s; e.g. {spelled} 1,10,25")
        return xs
    if type(None) in typing.get_args(tp):  # an optional number: none, or the number
        if value is None or str(value).strip().lower() in ("", "none", "null"):
            return None
        tp = next(t for t in typing.get_args(tp) if t is not type(None))
    x = coerce(f"project.{key}", value, tp)
    if key == "compute_scale" and x <= 0:
        raise ProjectError(f"project: {spelled}={x:g} must be > 0")
    if key == "row_cost_us" and x < 0:
        raise ProjectError(f"project: {spelled}={x:g} must be >= 0")
    return x


def _command_line(args: list[str]) -> list[tuple[str, object, str]]:
    """The command line as (key, raw value, how it was spelled), in order; a repeated
    ``--runs``/``--check`` flag adds to the first one's values."""
    out: list[tuple[str, object, str]] = []
    many: dict[str, list[str]] = {}
    i = 0
    while i < len(args):
        name, eq, raw = args[i].partition("=")
        key = FLAGS.get(name) or (name[len("--project.") :] if name.startswith("--project.") else None)
        if key is None or key not in {f.name for f in fields(ProjectOptions)}:
            raise ProjectError(f"project: unknown option {name!r}; usage: {USAGE}")
        j = i + 1
        if not eq:  # the values follow, up to the next option (a negative number is a value)
            while j < len(args) and not args[j].startswith("--"):
                j += 1
            values = args[i + 1 : j]
            if not values:
                raise ProjectError(f"project: {name} has no value; usage: {USAGE}")
        else:
            values = [raw]
        if key in _MANY and name in FLAGS:  # paths as given, a repeated flag adding to the first
            if key in many:
                many[key] += values
            else:
                many[key] = list(values)
                out.append((key, many[key], name))
        elif key in _MANY:  # --project.runs=[a,b] (or a,b), or several values
            out.append((key, values if len(values) > 1 else values[0], name))
        elif len(values) > 1:
            raise ProjectError(
                f"project: {name} takes one value, not {' '.join(values)}; for several, "
                f"separate them by commas, e.g. {name} 4,8"
            )
        else:
            out.append((key, values[0], name))
        i = j
    return out


def _file_section(path: str) -> dict:
    """The ``project:`` section of a YAML file (the file holds nothing else)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(
            f"config file '{p}' does not exist; pass a YAML file with a project: section, or give "
            "the options on the command line (--runs RUN_DIR ...)"
        )
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError:
        raise ConfigError(f"config file '{p}' is not valid YAML; fix the syntax") from None
    other = sorted(set(data) - {"project", "name"}) if isinstance(data, dict) else ["(not a mapping)"]
    section = data.get("project") if isinstance(data, dict) else None
    if other or not isinstance(section, dict):
        raise ProjectError(
            f"project: config file '{p}' must hold a project: section of options and nothing else "
            f"(it has {', '.join(other) or 'no project: section'}); the runs' own settings are in "
            "their summaries"
        )
    return section


def load_options(config_path: str | None, args: list[str]) -> ProjectOptions:
    """The options of ``project``: defaults, then the file's ``project:`` section, then the command line.

    Raises:
        ProjectError: an unknown option, a bad value, or no ``runs``.
    """
    opts = ProjectOptions()
    known = {f.name for f in fields(ProjectOptions)}
    for key, value in (_file_section(config_path) if config_path is not None else {}).items():
        if key not in known:
            raise ProjectError(
                f"project: unknown key project.{key} in {config_path}; known keys: {', '.join(sorted(known))}"
            )
        setattr(opts, key, _value(key, value, f"project.{key}"))
    for key, value, spelled in _command_line(args):
        setattr(opts, key, _value(key, value, spelled))
    if not opts.runs:
        raise ProjectError(f"project: no calibration runs; pass compare run folders with --runs; usage: {USAGE}")
    return opts


def cmd_project(config_path: str | None, args: list[str]) -> int:
    """``python -m dgl_grappa project``: the projection table (and JSON), or with ``--check`` the check."""
    opts = load_options(config_path, args)
    cal = calibrate(
        opts.runs,
        remote_growth=opts.remote_growth,
        row_cost_s=None if opts.row_cost_us is None else opts.row_cost_us * 1e-6,
        compute_scale=opts.compute_scale,
    )
    if opts.partition:
        cal.partition(opts.partition)
    first = Path(opts.runs[0])
    out = (
        Path(opts.out)
        if opts.out
        else (first if first.is_dir() else first.parent)
        / ("projection_check.json" if opts.check else "projection.json")
    )
    if opts.check:
        rows = check(cal, opts.check)
        text = format_check(rows, opts.target, cal.cores_per_host)
        result = {"calibration": cal.to_dict(), "check": rows, "target": opts.target}
    else:
        names = [opts.partition] if opts.partition else list(cal.partitions)
        rows = [r for n in names for r in project_grid(cal, opts.parts, opts.gbit, opts.latency_us, partition=n)]
        text = format_table(rows)
        small = [p for p in opts.parts if cal.train_nodes / (p * cal.batch_size) < 1]
        if small:
            text += (
                f"\nnote: at P >= {min(small)} a worker has fewer than batch_size training nodes: per-step "
                f"compute and bytes stay those of the calibration's batches (an overestimate there)"
            )
        result = {"calibration": cal.to_dict(), "projection": rows}
    print(format_calibration(cal))
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")
    return 0
