"""``python -m dgl_grappa bench --config C``: a benchmark matrix, resumable, one JSON file per cell.

The command (:func:`cmd_bench`): load the bench config (:func:`load_bench`), plan the matrix
(:mod:`dgl_grappa.bench.plan`: cells from the ``bench`` axes, each system's config), run what
is not done yet (:mod:`dgl_grappa.bench.execute`; :mod:`dgl_grappa.bench.staleness` says which
stored runs still hold), keep every cell in its JSON file and the archive
(:mod:`dgl_grappa.bench.storage`, which documents the files), and regenerate the report
(:mod:`dgl_grappa.bench.report`).

**Resuming.** A system whose entry is ``ok`` and whose stored config equals the one the
bench would run now (keys added to the code since, at their default value, do not count)
is not run again; a cell whose selected systems all are is skipped with a printed line.
Failed and changed systems run again; one failing run never stops the sweep (the exit
status is 1 when a run of this invocation failed). Axis overrides on the command line
(``--bench.seeds=[0]``) select what runs now; the report always covers the matrix of the
config file. The report is regenerated from the JSON files at the end of every invocation
(also after Ctrl+C), or alone with ``bench.report_only``.
"""

from __future__ import annotations

import contextlib
import fcntl
import shlex
import sys
from pathlib import Path

import yaml

from ..config import Config, ConfigError, load_config, parse_overrides, parse_pairs
from .execute import run_cells
from .plan import EXTRA_KEYS, SELECT_KEYS, Cell, expand, flatten_sections, make_plan, parse_system, restrict_extra
from .report import write_report
from .staleness import current_view
from .storage import archive_missing, read_cells


def _archive(cfg: Config) -> Path | None:
    """The archive folder of the bench config (None where it has none)."""
    return Path(cfg.bench.archive) if cfg.bench.archive else None


def _preamble(cfg: Config) -> Path | None:
    """The preamble file, checked (the bench checks it before its first run, not after the last)."""
    if not cfg.bench.preamble:
        return None
    p = Path(cfg.bench.preamble)
    if not p.is_file():
        raise ConfigError(f"bench.preamble: {p} does not exist; give a markdown file or leave it empty")
    return p


def report(cfg: Config, cells: list[Cell], out_dir: Path, command: str, regenerate: str) -> Path:
    """Regenerate the report from the JSON files (the matrix of ``cells``)."""
    b = cfg.bench
    path = Path(b.report) if b.report else out_dir / "report.md"
    preamble = _preamble(cfg).read_text() if b.preamble else ""
    view = current_view(read_cells(out_dir, _archive(cfg)), cells)
    pairs = parse_pairs(b.pairs, [parse_system(e).name for e in b.systems])
    return write_report(
        b.report_kind,
        view,
        make_plan(cells, cfg),
        path,
        command=command,
        regenerate=regenerate,
        preamble=preamble,
        pairs=pairs,
        baseline_partition=b.baseline_partition,
    )


@contextlib.contextmanager
def _lock(out_dir: Path):
    """One bench at a time per output folder."""
    out_dir.mkdir(parents=True, exist_ok=True)
    f = open(out_dir / ".bench.lock", "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise ConfigError(
            f"another bench is running on {out_dir} (its lock: {out_dir / '.bench.lock'}); wait for it "
            "or give this one its own --bench.out_dir"
        ) from None
    try:
        yield
    finally:
        fcntl.flock(f, fcntl.LOCK_UN)
        f.close()


def load_bench(path: str | None, args: list[str]) -> tuple[Config, Config, list[str]]:
    """The bench config to run and the one that defines the report's matrix.

    ``--bench.*`` arguments set the bench section; every other ``--a.b=v`` is appended to
    ``bench.overrides`` (it applies to every cell). Overrides of :data:`SELECT_KEYS` select
    what runs; the report's matrix leaves them out. A bare system name on the command line
    (``--bench.systems=[grappa-old]``) means the file's system of that name.

    Returns:
        (run config, matrix config, overrides from the bench file's other sections).
    """
    if path is None:
        raise ConfigError("bench needs --config, e.g. --config benchmarks/accuracy/config.yaml")
    pairs = parse_overrides(args)
    bench_args = [f"--{k}={v}" for k, v in pairs if k.startswith("bench.")]
    other = [f"--{k}={v}" for k, v in pairs if not k.startswith("bench.")]
    select = [f"--{k}={v}" for k, v in pairs if k.split(".", 1)[-1] in SELECT_KEYS and k.startswith("bench.")]
    run_cfg = load_config(path, bench_args)
    plan_cfg = load_config(path, [a for a in bench_args if a not in select])
    for c in (run_cfg, plan_cfg):
        c.bench.overrides = list(c.bench.overrides) + other
    # The extra sub-matrices run only where they meet the selection.
    chosen = {k.split(".", 1)[1] for k, _ in pairs if k.startswith("bench.") and k.split(".", 1)[1] in EXTRA_KEYS}
    run_cfg.bench.extra = restrict_extra(plan_cfg.bench.extra, {k: getattr(run_cfg.bench, k) for k in chosen})
    # name -> the file's entry (with its overrides)
    defined = {parse_system(e).name: e for e in plan_cfg.bench.systems}
    names = list(defined)
    unknown = [n for n in plan_cfg.bench.partial if n not in names]
    if unknown:
        raise ConfigError(
            f"bench.partial names {unknown[0]!r}, which is not in bench.systems ({', '.join(names)}); "
            "list only names of bench.systems"
        )
    parse_pairs(plan_cfg.bench.pairs, names)  # the file's systems: a selection may run a pair's half alone
    if not any(k == "bench.systems" for k, _ in pairs):  # partial systems run only when selected by name
        run_cfg.bench.systems = [e for e in run_cfg.bench.systems if parse_system(e).name not in plan_cfg.bench.partial]
    # A bare name on the command line selects the file's system of that name (with its overrides).
    run_cfg.bench.systems = [defined.get(e.strip(), e) if ":" not in e else e for e in run_cfg.bench.systems]
    data = yaml.safe_load(Path(path).read_text()) or {}
    file_overrides = flatten_sections({k: v for k, v in data.items() if k not in ("name", "bench")})
    return run_cfg, plan_cfg, file_overrides


def cmd_bench(config_path: str | None, args: list[str]) -> int:
    """CLI entry: expand, run what is missing, regenerate the report. Exit 1 when a run failed."""
    run_cfg, plan_cfg, file_overrides = load_bench(config_path, args)
    out_dir = Path(run_cfg.bench.out_dir or run_cfg.run.output_dir)
    command = f"python -m dgl_grappa bench --config {config_path}"
    invoked = "python -m dgl_grappa bench " + shlex.join(["--config", str(config_path), *args])
    selected = expand(run_cfg, out_dir, file_overrides)
    matrix = expand(plan_cfg, out_dir, file_overrides)
    extra = sorted({c.cell_id for c in selected} - {c.cell_id for c in matrix})
    if extra:
        print(
            f"bench: {len(extra)} selected cell(s) are outside the matrix of {config_path} and will not be in "
            f"its report (e.g. {extra[0]})",
            flush=True,
        )
    _preamble(plan_cfg)  # a report that cannot be written is found out before hours of runs
    if run_cfg.bench.report_only:
        path = report(plan_cfg, matrix, out_dir, command, invoked)
        where = f"{out_dir / 'cells'}" + (f" and {plan_cfg.bench.archive}" if plan_cfg.bench.archive else "")
        print(f"bench: report regenerated from {where}: {path}")
        return 0
    counts = None
    with _lock(out_dir):
        archive = _archive(plan_cfg)
        if archive is not None and (n := archive_missing(out_dir, archive)):
            print(f"bench: {n} cell(s) of {out_dir / 'cells'} copied into the archive {archive}", flush=True)
        try:
            counts = run_cells(selected, out_dir, invoked, archive)
        finally:
            path = report(plan_cfg, matrix, out_dir, command, invoked)
            print(f"bench: report {path}", flush=True)
    print(
        f"bench: {counts['runs']} runs ({counts['ok']} ok, {counts['failed']} failed), "
        f"{counts['skipped_cells']} cells skipped as done",
        flush=True,
    )
    if counts["failed"]:
        print(
            "bench: some runs failed (see the report's coverage section and their logs); run the same command "
            "again to retry them",
            file=sys.stderr,
        )
        return 1
    return 0


__all__ = ["cmd_bench", "expand", "load_bench", "report"]
