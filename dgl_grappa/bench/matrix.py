"""``python -m dgl_grappa bench --config C``: a benchmark matrix, resumable, one JSON file per cell.

A **cell** is one point of the product of the ``bench`` axes: datasets (base config files)
x partitions x parts x models x layers x bandwidths x seeds. Every **system** of a cell
(``bench.systems``: the DistDGL baseline, the drop-in script, Grappa runs with overrides)
runs on the same partitioning, with the same model, fan-outs, batch size, optimizer and
evaluation, one after the other, each in its own network namespace (as in ``compare``).

How a cell's config is made, last wins: the base config file of its dataset; the bench
file's other sections (e.g. ``train: {epochs: 5}``) and ``bench.overrides`` (also every
non-bench ``--a.b=v`` given on the bench command line); the axes (``partition.method``,
``partition.num_parts``, ``model.name``, ``model.num_layers``, ``train.fanouts`` from
``bench.fanouts``, ``network.bandwidth``, ``train.seed`` and ``partition.seed`` from the
seed); then each system's own overrides. A seed therefore varies the partitioning (for a
seeded method), the initialisation and the sampling; the graph stays the same. An empty axis
is the base config's value, so a matrix of datasets that need different models (the
heterogeneous graph trains RGCN only, and RGCN nothing else) leaves ``models`` empty or
gives a dataset its own in a ``bench.extra`` line; a model a dataset cannot train stops the
bench in one line before anything runs. A base config with ``train.task: link`` makes link
prediction cells, which the reports grade on MRR (:mod:`dgl_grappa.bench.report`). (A system
with ``schedule.k > 0`` repartitions: its partitionings, the first included, are then its
scheduler's builds, not the cell's shared one.)

Files under ``bench.out_dir``:

* ``partitions/<hash>/``: one partitioning per (data, partition settings), made once in
  this process and reused by every cell and system that shares it (a METIS partitioning
  is shared across seeds: METIS ignores ``partition.seed``);
* ``runs/<cell>/<system>/``: each run's output folder (config, logs, metrics.jsonl, summary.json);
* ``cells/<cell>.json``: the cell, rewritten after every run of it::

    {"schema": 1, "cell_id": "cora-random-p4-sage-l2-unshaped-s0",
     "axes": {"dataset", "dataset_config", "data_name", "partition", "parts", "model", "layers",
              "fanouts", "bandwidth", "seed"},
     "config": <the cell's resolved config, before system overrides>,
     "partition": {"dir", "fingerprint", "edge_cut", "halo_share", "num_nodes", "num_edges", "seconds",
                   "reused"},
     "fingerprint": <hash of the systems' fingerprints and the partitioning's>,
     "systems": {<name>: {"kind": "distdgl" | "distdgl-grappa" | "grappa", "entry": <bench.systems entry>,
                          "overrides": [...], "config": <its normalised resolved config>,
                          "fingerprint": <hash of that>, "status": "ok" | "failed",
                          "reason": <one line, failed only>, "log": <path>, "out_dir": <path>,
                          "wall_s": <seconds>, "finished_at": <ISO time>,
                          "metrics": <every scalar of summary.json + the derived fields of
                                      derive_metrics: bytes_per_epoch(_amortised), one_time_bytes,
                                      stall_fraction, restart_s_total, ...>,
                          "summary": <summary.json without its config>,
                          "records": <metrics.jsonl: one record per epoch (curves)>}},
     "wall_s": <seconds of all runs>, "updated_at": <ISO time>, "command": <the bench command>}

* ``<bench.archive>/<cell>.json.gz`` (where set): the same cell, gzip'd, in a folder kept in
  the repository (out_dir is not): results outlive the machine, a fresh clone resumes from
  them and regenerates the report (out_dir's file wins where both have the cell).

**Resuming.** A system whose entry is ``ok`` and whose stored config equals the one the
bench would run now (keys added to the code since, at their default value, do not count)
is not run again; a cell whose selected systems all are is skipped with a printed line.
Failed and changed systems run again; one failing run never stops the sweep (the exit
status is 1 when a run of this invocation failed). Axis overrides on the command line
(``--bench.seeds=[0]``) select what runs now; the report always covers the matrix of the
config file. The report (:mod:`dgl_grappa.bench.report`) is regenerated from the JSON
files at the end of every invocation (also after Ctrl+C), or alone with ``bench.report_only``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import gzip
import hashlib
import io
import json
import logging
import re
import shlex
import sys
import time
import typing
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..config import Config, ConfigError, config_changes, load_config, parse_overrides, parse_pairs, to_dict
from ..kinds import resolve

log = logging.getLogger("dgl_grappa")

SCHEMA = 1
SELECT_KEYS = ("datasets", "partitions", "parts", "models", "layers", "bandwidths", "seeds", "systems")
"""bench keys whose command-line override selects a subset to run (the report keeps the file's matrix)."""
KINDS = {"distdgl": "distdgl", "distdgl-grappa": "distdgl-grappa"}
"""System names with a DistDGL job (and names that start with them plus '-', e.g.
``distdgl-grappa-script: --compare.script=...``); every other name is a Grappa ``train`` run."""


def system_kind(name: str) -> str:
    """The kind of a bench system, from its name (see :data:`KINDS`)."""
    for prefix in ("distdgl-grappa", "distdgl"):
        if name == prefix or name.startswith(prefix + "-"):
            return KINDS[prefix]
    return "grappa"
SHARED = ("data.", "partition.", "network.", "bench.", "model.name", "model.num_layers", "train.seed",
          "run.output_dir", "name")
"""Keys a system may not override: what all systems of a cell share, and the cell's axes."""
UNSHAPED = ("", "unshaped", "none")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


# ---------------------------------------------------------------------------------------
# The plan: systems, cells, configs
# ---------------------------------------------------------------------------------------

@dataclass
class System:
    """One entry of ``bench.systems``."""

    name: str
    kind: str
    overrides: list[str]
    entry: str


def parse_system(entry: str) -> System:
    """Parse ``"NAME"`` or ``"NAME: --a.b=v --c.d=w"``.

    Raises:
        ConfigError: a bad name, an override that is not ``--key=value``, or one that
            touches what the systems of a cell share (see :data:`SHARED`).
    """
    name, _, rest = entry.partition(":")
    name = name.strip()
    if not _NAME.fullmatch(name):
        raise ConfigError(f"bench.systems entry {entry!r}: the name {name!r} must be letters, digits, '_', '.', "
                          "'+' or '-'; write e.g. \"grappa-old: --grappa.correction=batch\"")
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        raise ConfigError(f"bench.systems entry {entry!r}: {exc}; quote values with spaces") from None
    overrides = []
    for key, raw in parse_overrides(words):
        if any(key.startswith(s) if s.endswith(".") else key == s for s in SHARED):
            raise ConfigError(
                f"bench.systems entry {entry!r} overrides {key}, which all systems of a cell share (data, "
                "partition, network, the axes); set it on an axis (bench.partitions, bench.parts, ...) or for "
                "every system in bench.overrides")
        overrides.append(f"--{key}={raw}")
    return System(name=name, kind=system_kind(name), overrides=overrides, entry=entry.strip())


def _cli_value(value) -> str:
    """A YAML value as the raw text of a ``--a.b=v`` override (JSON is YAML)."""
    return value if isinstance(value, str) else json.dumps(value)


def flatten_sections(data: dict, prefix: str = "") -> list[str]:
    """``{"train": {"epochs": 5}}`` -> ``["--train.epochs=5"]`` (nested sections flattened)."""
    out = []
    for k, v in data.items():
        if isinstance(v, dict):
            out += flatten_sections(v, f"{prefix}{k}.")
        else:
            out.append(f"--{prefix}{k}={_cli_value(v)}")
    return out


def normalised(cfg: Config) -> dict:
    """A run's config without what does not change its result (names, output folders, progress,
    bench, where the Planetoid files sit: ``data.root`` defaults to a folder next to the
    checkout, so a cell archived on one machine stays done in a clone anywhere else; and the
    ``compare`` command's own choices: a bench runs each system itself, and of that section only
    ``compare.script``, the DistDGL trainer, reaches a run)."""
    d = to_dict(cfg)
    d.pop("name", None)
    d.pop("bench", None)
    d["run"].pop("output_dir", None)
    d["run"].pop("progress", None)
    d["partition"].pop("out_dir", None)
    d["data"].pop("root", None)
    d["compare"] = {"script": d["compare"]["script"]}
    return d


def digest(obj) -> str:
    """A short stable hash of a JSON-able object."""
    return hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class PlannedSystem:
    system: System
    cfg: Config
    config: dict  # normalised
    fingerprint: str


@dataclass
class Cell:
    cell_id: str
    axes: dict
    cfg: Config
    partition_fp: dict
    partition_dir: Path
    systems: dict[str, PlannedSystem] = field(default_factory=dict)


def _bandwidth(v: str) -> str:
    return "" if v.strip().lower() in UNSHAPED else v.strip()


def _fanouts(spec: list[str], layers: int, base: Config, dataset: str) -> list[int]:
    if layers - 1 < len(spec) and spec[layers - 1].strip():
        try:
            fan = [int(x) for x in spec[layers - 1].replace("[", "").replace("]", "").split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"bench.fanouts[{layers - 1}]={spec[layers - 1]!r} is not a comma-separated list of "
                              "integers; write e.g. \"10,25\"") from None
        if len(fan) != layers:
            raise ConfigError(f"bench.fanouts[{layers - 1}]={spec[layers - 1]!r} has {len(fan)} entries; entry i "
                              f"is for i+1 layers, so this one needs {layers}")
        return fan
    if len(base.train.fanouts) == layers:
        return list(base.train.fanouts)
    raise ConfigError(f"no fan-outs for {layers} layers: bench.fanouts has no entry {layers - 1} and {dataset} has "
                      f"train.fanouts={base.train.fanouts}; add e.g. bench.fanouts: [\"10\", \"10,25\", \"10,15,25\"]")


EXTRA_KEYS = tuple(k for k in SELECT_KEYS if k != "systems")
"""Axes an entry of ``bench.extra`` may set."""


def parse_extra(entry: str, key: str = "bench.extra") -> dict[str, list]:
    """One ``bench.extra`` entry, ``"parts=[8] layers=[2]"``, as coerced axis values.

    Example:
        >>> parse_extra("parts=[8] layers=[2,3]")
        {'parts': [8], 'layers': [2, 3]}
    """
    from ..config import BenchConfig, _coerce

    hints = typing.get_type_hints(BenchConfig)
    out: dict[str, list] = {}
    for token in entry.split():
        name, sep, value = token.partition("=")
        if not sep or name not in EXTRA_KEYS:
            raise ConfigError(f"{key}: {token!r} is not an axis setting; write e.g. \"parts=[8] layers=[2]\" with keys "
                              f"{', '.join(EXTRA_KEYS)}")
        if name in out:
            raise ConfigError(f"{key}: {name} is set twice in {entry!r}; set each axis once")
        out[name] = _coerce(f"{key}.{name}", value, hints[name])
    if not out:
        raise ConfigError(f"{key}: an entry is empty; write e.g. \"parts=[8] layers=[2]\"")
    return out


def _axis_key(name: str, v) -> str:
    return _bandwidth(str(v)) if name == "bandwidths" else str(v)


def restrict_extra(entries: list[str], selection: dict[str, list]) -> list[str]:
    """The ``bench.extra`` entries narrowed to a command-line selection.

    An axis the entry sets keeps only the selected values (no value left: the entry is
    dropped); an axis it leaves alone takes the selection from the base matrix anyway.

    Example:
        >>> restrict_extra(["parts=[8] layers=[2,3]"], {"layers": [3], "models": ["gcn"]})
        ['parts=[8] layers=[3]']
    """
    out = []
    for i, entry in enumerate(entries):
        axes = parse_extra(entry, f"bench.extra[{i}]")
        for name, chosen in selection.items():
            if name in axes:
                keep = {_axis_key(name, v) for v in chosen}
                axes[name] = [v for v in axes[name] if _axis_key(name, v) in keep]
        if all(axes.values()):
            out.append(" ".join(f"{k}=[{','.join(map(str, v))}]" for k, v in axes.items()))
    return out


def cell_id(axes: dict) -> str:
    """``<dataset>-<partition>-p<parts>-<model>-l<layers>-<network>-s<seed>``."""
    bw = axes["bandwidth"] or "unshaped"
    return (f"{axes['dataset']}-{axes['partition']}-p{axes['parts']}-{axes['model']}-l{axes['layers']}-{bw}"
            f"-s{axes['seed']}")


def expand(cfg: Config, out_dir: Path, file_overrides: list[str]) -> list[Cell]:
    """Every cell of the matrix ``cfg.bench`` describes, with each system's validated config.

    Args:
        cfg: the bench config (its ``bench`` section).
        out_dir: the bench's output folder (partition cache, run folders).
        file_overrides: overrides from the bench file's other sections.

    Returns:
        The cells, in run order (dataset, partitioner, parts, seed, model, layers, network:
        cells that share a partitioning run one after the other).

    Raises:
        ConfigError: any bad axis value, system entry or base config (before anything runs).
    """
    from ..partition.store import partition_fingerprint

    b = cfg.bench
    if not b.datasets:
        raise ConfigError("bench.datasets is empty; list base config files, e.g. bench.datasets: [configs/bench/cora.yaml]")
    systems = [parse_system(e) for e in b.systems]
    if not systems:
        raise ConfigError("bench.systems is empty; list at least one, e.g. [distdgl, grappa]")
    names = [s.name for s in systems]
    if len(set(names)) != len(names):
        raise ConfigError(f"bench.systems has a name twice: {names}; give every system its own name")
    if not b.seeds:
        raise ConfigError("bench.seeds is empty; give at least one seed, e.g. [0]")
    common = list(file_overrides) + list(b.overrides)
    stems: dict[str, str] = {}
    cells: list[Cell] = []
    benches = [b] + [dataclasses.replace(b, extra=[], **parse_extra(e, f"bench.extra[{i}]"))
                     for i, e in enumerate(b.extra)]
    seen: set[str] = set()
    for sub in benches:
        for cell in _product(sub, common, systems, out_dir, stems, partition_fingerprint):
            if cell.cell_id not in seen:  # an extra entry may repeat cells of the base product
                seen.add(cell.cell_id)
                cells.append(cell)
    return cells


def _product(b, common: list[str], systems: list[System], out_dir: Path, stems: dict[str, str],
             partition_fingerprint) -> list[Cell]:
    cells: list[Cell] = []
    for ds in b.datasets:
        if not Path(ds).is_file():
            raise ConfigError(f"bench.datasets: {ds} does not exist; give a base config file, e.g. configs/bench/cora.yaml")
        stem = Path(ds).stem
        if stems.get(stem, ds) != ds:
            raise ConfigError(f"bench.datasets: {ds} and {stems[stem]} have the same name {stem!r}; rename one")
        stems[stem] = ds
        base = load_config(ds, common)
        for model in b.models:
            _check_model(ds, model, base, common)
        for method in b.partitions or [base.partition.method]:
            for k in b.parts or [base.partition.num_parts]:
                for seed in b.seeds:
                    for model in b.models or [base.model.name]:
                        for layers in b.layers or [base.model.num_layers]:
                            fan = _fanouts(b.fanouts, layers, base, ds)
                            for bw in [_bandwidth(x) for x in (b.bandwidths or [base.network.bandwidth])]:
                                axes = {"dataset": stem, "dataset_config": ds, "data_name": base.data.name,
                                        "partition": method, "parts": k, "model": model, "layers": layers,
                                        "fanouts": fan, "bandwidth": bw, "seed": seed}
                                cells.append(_cell(ds, axes, common, systems, out_dir, partition_fingerprint))
    ids = [c.cell_id for c in cells]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ConfigError(f"the bench matrix has the same cell twice ({dup[0]}): an axis lists a value twice")
    return cells


def _check_model(ds: str, model: str, base: Config, common: list[str]) -> None:
    """Refuse, in one line, a model of the ``models`` axis that the dataset cannot train (e.g. GraphSAGE
    on the heterogeneous graph, RGCN on a homogeneous one), before any cell of it is made.

    A matrix of several datasets gives each its own models through ``bench.extra``, e.g.
    ``"datasets=[configs/bench/hetsynth.yaml] models=[rgcn]"``.

    Raises:
        ConfigError: the dataset's base config refuses ``model.name=<model>``; the message names
            the dataset, the model, the reason and the extra line that would serve it.
    """
    if model == base.model.name:
        return
    try:
        resolve(load_config(ds, common + [f"--model.name={model}"]))  # the kind of job's own rules too
    except ConfigError as exc:
        raise ConfigError(
            f"bench.models: {ds} cannot train model {model!r} ({str(exc).splitlines()[0].rstrip('.')}); give each "
            f"dataset the models it serves, e.g. leave {ds} out of bench.datasets and add the bench.extra line "
            f"\"datasets=[{ds}] models=[{base.model.name}]\"") from None


def _cell(ds: str, axes: dict, common: list[str], systems: list[System], out_dir: Path, partition_fingerprint) -> Cell:
    cid = cell_id(axes)
    axis = [f"--partition.method={axes['partition']}", f"--partition.num_parts={axes['parts']}",
            f"--model.name={axes['model']}", f"--model.num_layers={axes['layers']}",
            f"--train.fanouts=[{','.join(map(str, axes['fanouts']))}]", f"--network.bandwidth={axes['bandwidth']}",
            f"--train.seed={axes['seed']}", f"--partition.seed={axes['seed']}"]
    cfg = load_config(ds, common + axis + [f"--name={cid}", "--run.progress=false",
                                           f"--run.output_dir={out_dir / 'runs' / cid}"])
    pfp = partition_fingerprint(cfg)
    pdir = out_dir / "partitions" / digest(pfp)
    cfg = dataclasses.replace(cfg, partition=dataclasses.replace(cfg.partition, out_dir=str(pdir.resolve())))
    cell = Cell(cell_id=cid, axes=axes, cfg=cfg, partition_fp=pfp, partition_dir=pdir)
    for s in systems:
        scfg = load_config(ds, common + axis + s.overrides + [
            f"--name={cid}.{s.name}", "--run.progress=false", f"--run.output_dir={(out_dir / 'runs' / cid / s.name).resolve()}",
            f"--partition.out_dir={pdir.resolve()}"])
        resolve(scfg)  # a system's overrides must suit the kind of job (one line before anything runs)
        norm = normalised(scfg)
        cell.systems[s.name] = PlannedSystem(system=s, cfg=scfg, config=norm,
                                             fingerprint=digest({"kind": s.kind, "config": norm}))
    return cell


def cell_fingerprint(cell: Cell) -> str:
    return digest({"partition": cell.partition_fp, "systems": {n: p.fingerprint for n, p in cell.systems.items()}})


# ---------------------------------------------------------------------------------------
# Cell files
# ---------------------------------------------------------------------------------------

def cell_path(out_dir: Path, cid: str) -> Path:
    return out_dir / "cells" / f"{cid}.json"


def read_cell(path: Path) -> dict | None:
    """A cell file, or None when missing or unreadable (a half-written file is never left: writes are atomic)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def archive_path(archive: Path, cid: str) -> Path:
    return archive / f"{cid}.json.gz"


def read_archived(path: Path) -> dict | None:
    """An archived (gzip'd) cell file, or None when missing or unreadable."""
    try:
        return json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, ValueError, EOFError):
        return None


def write_archived(path: Path, doc: dict) -> None:
    """Write ``doc`` gzip'd (compact JSON, no timestamp in the header, so that an unchanged
    cell gives identical bytes and no diff), through a temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(gzip.compress(json.dumps(doc, separators=(",", ":"), sort_keys=True).encode(), mtime=0))
    tmp.replace(path)


def stored_cell(out_dir: Path, archive: Path | None, cid: str) -> dict | None:
    """The cell as last written: ``out_dir``'s file, else the archive's copy."""
    doc = read_cell(cell_path(out_dir, cid))
    if doc is None and archive is not None:
        doc = read_archived(archive_path(archive, cid))
    return doc


def archive_missing(out_dir: Path, archive: Path) -> int:
    """Copy into the archive the cells of ``out_dir`` it lacks (those written before
    ``bench.archive`` was set); the archive's own files are not touched. Returns how many."""
    n = 0
    d = out_dir / "cells"
    for p in sorted(d.glob("*.json")) if d.is_dir() else []:
        if archive_path(archive, p.stem).exists():
            continue  # already archived: not read at all (a large matrix starts with many)
        doc = read_cell(p)
        if doc and "axes" in doc:
            write_archived(archive_path(archive, p.stem), doc)
            n += 1
    return n


def read_cells(out_dir: Path, archive: Path | None = None) -> list[dict]:
    """Every cell file under ``<out_dir>/cells``, plus the archive's cells that out_dir lacks."""
    d = out_dir / "cells"
    cells = [read_cell(p) for p in sorted(d.glob("*.json"))] if d.is_dir() else []
    cells = [c for c in cells if c and "axes" in c]
    if archive is not None and archive.is_dir():
        have = {c.get("cell_id") for c in cells}
        for p in sorted(archive.glob("*.json.gz")):
            c = read_archived(p)
            if c and "axes" in c and c.get("cell_id") not in have:
                cells.append(c)
    return cells


def _default_config() -> dict:
    return normalised(Config())


# Keys whose arrival changed what a native Grappa run does at its defaults: an entry stored
# before a key existed ran the old behaviour, so it is stale for that system kind even when
# the planned value is the key's default (config_changes passes over keys at their default).
NEW_BEHAVIOUR_KEYS = {"grappa": ("train.memory_budget", "train.storage")}


def _has_key(config: dict, dotted: str) -> bool:
    for part in dotted.split("."):
        if not isinstance(config, dict) or part not in config:
            return False
        config = config[part]
    return True


def stale_reason(stored: dict | None, planned: PlannedSystem) -> str | None:
    """Why a stored system entry cannot be reused for ``planned`` (None = it can)."""
    if not stored:
        return "not run yet"
    if stored.get("status") != "ok":
        return f"{stored.get('status', 'unknown')} before"
    if stored.get("kind") != planned.system.kind:
        return f"kind {stored.get('kind')} -> {planned.system.kind}"
    for key in NEW_BEHAVIOUR_KEYS.get(planned.system.kind, ()):
        if not _has_key(stored.get("config") or {}, key) and _has_key(planned.config, key):
            return f"run before {key} existed (the defaults have changed since)"
    changes = config_changes(stored.get("config") or {}, planned.config, _default_config())
    if changes:
        return "config changed: " + "; ".join(changes[:3]) + (" ..." if len(changes) > 3 else "")
    return None


SCALARS = (int, float, str, bool, type(None))


def derive_metrics(summary: dict) -> dict:
    """The figures the reports read, from a run's summary.json.

    Every scalar top-level field of the summary is kept (so fields that new mechanisms add,
    e.g. ``floor_epoch_s``, arrive as they are), plus:

    * ``one_time_bytes``: the summary's ``one_time_bytes_total`` when it has one, else the
      halo feature bytes its workers read at load time (``workers[*].halo_bytes_loaded``);
    * ``bytes_per_epoch``: measured wire bytes per epoch, else the application's count
      (``bytes_source`` says which); ``bytes_per_epoch_amortised`` = that + one-time bytes /
      epochs; ``app_bytes_per_epoch_amortised`` likewise from the application's count;
    * ``stall_fraction`` (Grappa repartitioning, ``schedule.stall_fraction``),
      ``restart_s_total`` and ``restart_fraction`` (DistDGL restart segments).
    """
    m = {k: v for k, v in summary.items() if isinstance(v, SCALARS)}
    one_time = summary.get("one_time_bytes_total")
    if one_time is None:
        one_time = sum(float(w.get("halo_bytes_loaded") or 0) for w in summary.get("workers") or [] if isinstance(w, dict))
        m["one_time_bytes_source"] = "halo_bytes_loaded"
    else:
        m["one_time_bytes_source"] = "one_time_bytes_total"
    epochs = max(int(summary.get("epochs") or 1), 1)
    wire, app = summary.get("wire_bytes_per_epoch"), summary.get("app_bytes_per_epoch")
    per_epoch = wire if wire is not None else app
    m["one_time_bytes"] = one_time
    m["bytes_per_epoch"] = per_epoch
    m["bytes_source"] = "wire" if wire is not None else ("app" if app is not None else None)
    m["bytes_per_epoch_amortised"] = None if per_epoch is None else per_epoch + one_time / epochs
    m["app_bytes_per_epoch_amortised"] = None if app is None else app + one_time / epochs
    sched = summary.get("schedule") if isinstance(summary.get("schedule"), dict) else {}
    m["stall_fraction"] = sched.get("stall_fraction")
    m["restart_s_total"] = summary.get("restart_s_total")
    m["restart_fraction"] = summary.get("restart_fraction_of_train")
    return m


# ---------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------

def _now() -> str:
    return datetime.datetime.now().isoformat(timespec="seconds")


def _log_path(ps: PlannedSystem) -> Path:
    out = Path(ps.cfg.run.output_dir)
    return out / ("run.log" if ps.system.kind == "grappa" else f"{ps.system.kind}.log")


def run_system(ps: PlannedSystem, isolate: bool) -> tuple[dict, list[dict]]:
    """Run one system of a cell; its summary and per-epoch records. Raises on failure."""
    from ..distdgl import run_distdgl
    from ..runtime.metrics import read_jsonl
    from .compare import run_grappa

    out = Path(ps.cfg.run.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").unlink(missing_ok=True)
    if ps.system.kind == "grappa":
        summary = run_grappa(ps.cfg, out, isolate)
    else:
        summary = run_distdgl(ps.cfg, isolate=isolate, quiet=True, grappa=ps.system.kind == "distdgl-grappa")
    metrics = out / "metrics.jsonl"
    return summary, (read_jsonl(metrics) if metrics.is_file() else [])


class Progress:
    """A line per run with an ETA from the runs of this invocation (mean per system, else overall)."""

    def __init__(self, total: int):
        self.total, self.done = total, 0
        self.seconds: dict[str, list[float]] = {}

    def add(self, name: str, seconds: float) -> None:
        self.done += 1
        self.seconds.setdefault(name, []).append(seconds)

    def eta(self, remaining: list[str]) -> str:
        every = [s for v in self.seconds.values() for s in v]
        if not every:
            return "ETA after the first run"
        overall = sum(every) / len(every)
        left = sum((sum(self.seconds[n]) / len(self.seconds[n])) if n in self.seconds else overall for n in remaining)
        return f"ETA {_duration(left)}"


def _duration(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


class _GraphCache:
    """The last loaded graph, by data settings: cells of one dataset partition it once each."""

    def __init__(self):
        self.key, self.graph = None, None

    def get(self, cfg: Config):
        key = digest(dataclasses.asdict(cfg.data))
        return self.graph if key == self.key else None

    def put(self, cfg: Config, g) -> None:
        if g is not None:
            self.key, self.graph = digest(dataclasses.asdict(cfg.data)), g


def ensure_cell_partition(cell: Cell, graphs: _GraphCache) -> dict:
    """Make (or reuse) the cell's partitioning; its statistics plus ``dir``/``reused``."""
    from ..partition.layout import read_stats
    from ..partition.store import ensure_partitions

    before = read_stats(cell.partition_dir)
    reused = before is not None and before.get("fingerprint") == json.loads(json.dumps(cell.partition_fp))
    if not reused:
        print(f"  partitioning {cell.axes['dataset']}: {cell.axes['partition']} into {cell.axes['parts']} parts, "
              f"seed {cell.cfg.partition.seed} -> {cell.partition_dir}", flush=True)
    with contextlib.redirect_stdout(io.StringIO()):  # partition_graph prints a line per step
        stats, g = ensure_partitions(cell.cfg, graphs.get(cell.cfg))
    graphs.put(cell.cfg, g)
    keep = ("edge_cut", "halo_share", "inner_nodes", "halo_nodes", "num_nodes", "num_edges", "seconds", "method", "seed")
    return {"dir": str(cell.partition_dir), "fingerprint": digest(cell.partition_fp), "reused": reused,
            **{k: stats.get(k) for k in keep}}


def _one_line(exc: BaseException) -> str:
    """An exception as one line: its first line, plus its last (a job's log tail ends with the error)."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    text = lines[0] if len(lines) == 1 else f"{lines[0].rstrip(':')}: {lines[-1]}"
    return text[:500]


def run_cells(cells: list[Cell], out_dir: Path, command: str, archive: Path | None = None) -> dict:
    """Run what is not done yet of ``cells``; write each cell's JSON after each of its runs
    (and its gzip'd copy to ``archive``, where given; a cell found only there counts as stored).

    Returns:
        ``{"runs": n, "ok": n, "failed": n, "skipped_cells": n}`` of this invocation.
    """
    from ..cluster.procs import isolation_plan

    # (cell, systems to run, the cell as stored): read once, here (an archived copy is gzip'd).
    todo: list[tuple[Cell, list[str], dict]] = []
    skipped = 0
    for cell in cells:
        stored = stored_cell(out_dir, archive, cell.cell_id) or {}
        entries = stored.get("systems") or {}
        need = [n for n, ps in cell.systems.items() if stale_reason(entries.get(n), ps) is not None]
        if need:
            todo.append((cell, need, stored))
        else:
            skipped += 1
            print(f"skip {cell.cell_id}: done (every system ok with the same config)", flush=True)
    total = sum(len(n) for _, n, _ in todo)
    print(f"bench: {len(cells)} cells selected, {skipped} done, {len(todo)} to run ({total} runs); "
          f"output in {out_dir}", flush=True)
    prog = Progress(total)
    counts = {"runs": 0, "ok": 0, "failed": 0, "skipped_cells": skipped}
    graphs = _GraphCache()
    remaining = [n for _, need, _ in todo for n in need]
    for cell, need, doc in todo:
        path = cell_path(out_dir, cell.cell_id)
        doc.update({"schema": SCHEMA, "cell_id": cell.cell_id, "axes": cell.axes, "config": normalised(cell.cfg),
                    "fingerprint": cell_fingerprint(cell), "command": command})
        doc.setdefault("systems", {})
        for n in need:
            why = stale_reason(doc["systems"].get(n), cell.systems[n])
            if why not in ("not run yet",):
                print(f"  {cell.cell_id} {n}: runs again ({why})", flush=True)
        try:
            doc["partition"] = ensure_cell_partition(cell, graphs)
            part_error = None
        except Exception as exc:  # noqa: BLE001 - recorded, the sweep goes on
            part_error = f"partitioning failed: {_one_line(exc)}"
            log.error("%s: %s", cell.cell_id, part_error)
        for n in need:
            ps = cell.systems[n]
            remaining.remove(n)
            entry = {"kind": ps.system.kind, "entry": ps.system.entry, "overrides": ps.system.overrides,
                     "config": ps.config, "fingerprint": ps.fingerprint, "log": str(_log_path(ps)),
                     "out_dir": ps.cfg.run.output_dir}
            print(f"[{prog.done + 1}/{total}] {cell.cell_id} {n}: running (log {entry['log']})", flush=True)
            t0 = time.perf_counter()
            try:
                if part_error:
                    raise RuntimeError(part_error)
                summary, records = run_system(ps, isolation_plan(ps.cfg))
                entry.update({"status": "ok", "metrics": derive_metrics(summary),
                              "summary": {k: v for k, v in summary.items() if k != "config"}, "records": records})
                counts["ok"] += 1
            except Exception as exc:  # noqa: BLE001 - one failing run never stops the sweep
                entry.update({"status": "failed", "reason": _one_line(exc)})
                counts["failed"] += 1
            wall = time.perf_counter() - t0
            entry.update({"wall_s": wall, "finished_at": _now()})
            doc["systems"][n] = entry
            doc["wall_s"] = sum(float(s.get("wall_s") or 0) for s in doc["systems"].values())
            doc["updated_at"] = _now()
            _write_json(path, doc)
            if archive is not None:
                write_archived(archive_path(archive, cell.cell_id), doc)
            counts["runs"] += 1
            prog.add(n, wall)
            if entry["status"] == "ok":
                m = entry["metrics"]
                from ..runtime.metrics import format_bytes

                # link prediction: the test MRR stands where the test accuracy would
                q = "test_mrr" if cell.cfg.train.task == "link" else "test_acc"
                what = (f"ok in {wall:.0f} s: {q.replace('_', ' ')} {m.get(q) or float('nan'):.4f}, epoch "
                        f"{m.get('epoch_time_s') or float('nan'):.3f} s, {format_bytes(m.get('bytes_per_epoch_amortised'))}/epoch")
            else:
                what = f"FAILED in {wall:.0f} s: {entry['reason']}"
            print(f"    {what} | {prog.eta(remaining)}", flush=True)
    return counts


def _write_json(path: Path, obj) -> None:
    from ..runtime.metrics import write_json

    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, obj)


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------

def make_plan(cells: list[Cell], cfg: Config) -> dict:
    """The configured matrix for the report: cell ids, their axes and planned systems."""
    def values(key):
        out = []
        for c in cells:
            v = c.axes[key]
            if v not in out:
                out.append(v)
        return out

    return {"cells": {c.cell_id: {"axes": c.axes, "systems": list(c.systems)} for c in cells},
            "axes": {a: values(a) for a in ("dataset", "partition", "parts", "model", "layers", "bandwidth", "seed")},
            "systems": [parse_system(e).name for e in cfg.bench.systems],
            "system_entries": list(cfg.bench.systems),
            "partial": list(cfg.bench.partial)}


def current_view(stored: list[dict], cells: list[Cell]) -> list[dict]:
    """The stored cells with every system entry that no longer matches the plan marked ``stale``."""
    planned = {c.cell_id: c for c in cells}
    out = []
    for doc in stored:
        cell = planned.get(doc.get("cell_id"))
        if cell is None:
            out.append(doc)
            continue
        doc = dict(doc, systems=dict(doc.get("systems") or {}))
        for n, e in list(doc["systems"].items()):
            ps = cell.systems.get(n)
            if ps is None:
                del doc["systems"][n]  # no longer a system of this matrix
            elif e.get("status") == "ok" and stale_reason(e, ps) is not None:
                doc["systems"][n] = dict(e, status="stale")
        out.append(doc)
    return out


def _archive(cfg: Config) -> Path | None:
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
    from .report import write_report

    b = cfg.bench
    path = Path(b.report) if b.report else out_dir / "report.md"
    preamble = _preamble(cfg).read_text() if b.preamble else ""
    view = current_view(read_cells(out_dir, _archive(cfg)), cells)
    pairs = parse_pairs(b.pairs, [parse_system(e).name for e in b.systems])
    return write_report(b.report_kind, view, make_plan(cells, cfg), path, command=command, regenerate=regenerate,
                        preamble=preamble, pairs=pairs, baseline_partition=b.baseline_partition)


# ---------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------

@contextlib.contextmanager
def _lock(out_dir: Path):
    """One bench at a time per output folder."""
    import fcntl

    out_dir.mkdir(parents=True, exist_ok=True)
    f = open(out_dir / ".bench.lock", "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise ConfigError(f"another bench is running on {out_dir} (its lock: {out_dir / '.bench.lock'}); wait for it "
                          "or give this one its own --bench.out_dir") from None
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
        raise ConfigError(f"bench.partial names {unknown[0]!r}, which is not in bench.systems ({', '.join(names)}); "
                          "list only names of bench.systems")
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
        print(f"bench: {len(extra)} selected cell(s) are outside the matrix of {config_path} and will not be in "
              f"its report (e.g. {extra[0]})", flush=True)
    _preamble(plan_cfg)   # a report that cannot be written is found out before hours of runs
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
    print(f"bench: {counts['runs']} runs ({counts['ok']} ok, {counts['failed']} failed), "
          f"{counts['skipped_cells']} cells skipped as done", flush=True)
    if counts["failed"]:
        print("bench: some runs failed (see the report's coverage section and their logs); run the same command "
              "again to retry them", file=sys.stderr)
        return 1
    return 0
