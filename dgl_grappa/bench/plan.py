"""The benchmark matrix's plan: its cells, from the ``bench`` axes, and each system's config.

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

Cells that share a partitioning (data and partition settings) share its folder,
``<bench.out_dir>/partitions/<hash>/`` (a METIS partitioning is shared across seeds: METIS
ignores ``partition.seed``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shlex
import typing
from dataclasses import dataclass, field
from pathlib import Path

from ..config import BenchConfig, Config, ConfigError, coerce, load_config, parse_overrides, to_dict
from ..kinds import resolve
from ..partition.store import partition_fingerprint

SELECT_KEYS = ("datasets", "partitions", "parts", "models", "layers", "bandwidths", "seeds", "systems")
"""bench keys whose command-line override selects a subset to run (the report keeps the file's matrix)."""
DISTDGL_SYSTEMS = {"distdgl": "distdgl", "distdgl-grappa": "distdgl-grappa"}
"""System names with a DistDGL job (and names that start with them plus '-', e.g.
``distdgl-grappa-script: --compare.script=...``); every other name is a Grappa ``train`` run."""


def system_kind(name: str) -> str:
    """The kind of a bench system, from its name (see :data:`DISTDGL_SYSTEMS`)."""
    for prefix in ("distdgl-grappa", "distdgl"):
        if name == prefix or name.startswith(prefix + "-"):
            return DISTDGL_SYSTEMS[prefix]
    return "grappa"


SHARED = (
    "data.",
    "partition.",
    "network.",
    "bench.",
    "model.name",
    "model.num_layers",
    "train.seed",
    "run.output_dir",
    "name",
)
"""Keys a system may not override: what all systems of a cell share, and the cell's axes."""
UNSHAPED = ("", "unshaped", "none")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


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
        raise ConfigError(
            f"bench.systems entry {entry!r}: the name {name!r} must be letters, digits, '_', '.', "
            "'+' or '-'; write e.g. \"grappa-old: --grappa.correction=batch\""
        )
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
                "every system in bench.overrides"
            )
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
    """A system of one cell as planned: its entry, its validated config, that config normalised
    (:func:`normalised`) and the fingerprint a stored run must match."""

    system: System
    cfg: Config
    config: dict  # normalised
    fingerprint: str


@dataclass
class Cell:
    """One cell of the matrix as planned: its id, axes, config (before system overrides), its
    partitioning's fingerprint and folder, and its systems."""

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
            raise ConfigError(
                f"bench.fanouts[{layers - 1}]={spec[layers - 1]!r} is not a comma-separated list of "
                'integers; write e.g. "10,25"'
            ) from None
        if len(fan) != layers:
            raise ConfigError(
                f"bench.fanouts[{layers - 1}]={spec[layers - 1]!r} has {len(fan)} entries; entry i "
                f"is for i+1 layers, so this one needs {layers}"
            )
        return fan
    if len(base.train.fanouts) == layers:
        return list(base.train.fanouts)
    raise ConfigError(
        f"no fan-outs for {layers} layers: bench.fanouts has no entry {layers - 1} and {dataset} has "
        f'train.fanouts={base.train.fanouts}; add e.g. bench.fanouts: ["10", "10,25", "10,15,25"]'
    )


EXTRA_KEYS = tuple(k for k in SELECT_KEYS if k != "systems")
"""Axes an entry of ``bench.extra`` may set."""


def parse_extra(entry: str, key: str = "bench.extra") -> dict[str, list]:
    """One ``bench.extra`` entry, ``"parts=[8] layers=[2]"``, as coerced axis values.

    Example:
        >>> parse_extra("parts=[8] layers=[2,3]")
        {'parts': [8], 'layers': [2, 3]}
    """
    hints = typing.get_type_hints(BenchConfig)
    out: dict[str, list] = {}
    for token in entry.split():
        name, sep, value = token.partition("=")
        if not sep or name not in EXTRA_KEYS:
            raise ConfigError(
                f'{key}: {token!r} is not an axis setting; write e.g. "parts=[8] layers=[2]" with keys '
                f"{', '.join(EXTRA_KEYS)}"
            )
        if name in out:
            raise ConfigError(f"{key}: {name} is set twice in {entry!r}; set each axis once")
        out[name] = coerce(f"{key}.{name}", value, hints[name])
    if not out:
        raise ConfigError(f'{key}: an entry is empty; write e.g. "parts=[8] layers=[2]"')
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
    return (
        f"{axes['dataset']}-{axes['partition']}-p{axes['parts']}-{axes['model']}-l{axes['layers']}-{bw}-s{axes['seed']}"
    )


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
    b = cfg.bench
    if not b.datasets:
        raise ConfigError(
            "bench.datasets is empty; list base config files, e.g. bench.datasets: [configs/bench/cora.yaml]"
        )
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
    benches = [b] + [
        dataclasses.replace(b, extra=[], **parse_extra(e, f"bench.extra[{i}]")) for i, e in enumerate(b.extra)
    ]
    seen: set[str] = set()
    for sub in benches:
        for cell in _product(sub, common, systems, out_dir, stems):
            if cell.cell_id not in seen:  # an extra entry may repeat cells of the base product
                seen.add(cell.cell_id)
                cells.append(cell)
    return cells


def _product(b, common: list[str], systems: list[System], out_dir: Path, stems: dict[str, str]) -> list[Cell]:
    cells: list[Cell] = []
    for ds in b.datasets:
        if not Path(ds).is_file():
            raise ConfigError(
                f"bench.datasets: {ds} does not exist; give a base config file, e.g. configs/bench/cora.yaml"
            )
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
                                axes = {
                                    "dataset": stem,
                                    "dataset_config": ds,
                                    "data_name": base.data.name,
                                    "partition": method,
                                    "parts": k,
                                    "model": model,
                                    "layers": layers,
                                    "fanouts": fan,
                                    "bandwidth": bw,
                                    "seed": seed,
                                }
                                cells.append(_cell(ds, axes, common, systems, out_dir))
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
            f'"datasets=[{ds}] models=[{base.model.name}]"'
        ) from None


def _cell(ds: str, axes: dict, common: list[str], systems: list[System], out_dir: Path) -> Cell:
    cid = cell_id(axes)
    axis = [
        f"--partition.method={axes['partition']}",
        f"--partition.num_parts={axes['parts']}",
        f"--model.name={axes['model']}",
        f"--model.num_layers={axes['layers']}",
        f"--train.fanouts=[{','.join(map(str, axes['fanouts']))}]",
        f"--network.bandwidth={axes['bandwidth']}",
        f"--train.seed={axes['seed']}",
        f"--partition.seed={axes['seed']}",
    ]
    cfg = load_config(
        ds, common + axis + [f"--name={cid}", "--run.progress=false", f"--run.output_dir={out_dir / 'runs' / cid}"]
    )
    pfp = partition_fingerprint(cfg)
    pdir = out_dir / "partitions" / digest(pfp)
    cfg = dataclasses.replace(cfg, partition=dataclasses.replace(cfg.partition, out_dir=str(pdir.resolve())))
    cell = Cell(cell_id=cid, axes=axes, cfg=cfg, partition_fp=pfp, partition_dir=pdir)
    for s in systems:
        scfg = load_config(
            ds,
            common
            + axis
            + s.overrides
            + [
                f"--name={cid}.{s.name}",
                "--run.progress=false",
                f"--run.output_dir={(out_dir / 'runs' / cid / s.name).resolve()}",
                f"--partition.out_dir={pdir.resolve()}",
            ],
        )
        resolve(scfg)  # a system's overrides must suit the kind of job (one line before anything runs)
        norm = normalised(scfg)
        cell.systems[s.name] = PlannedSystem(
            system=s, cfg=scfg, config=norm, fingerprint=digest({"kind": s.kind, "config": norm})
        )
    return cell


def cell_fingerprint(cell: Cell) -> str:
    """A hash of the cell's partitioning and its systems' fingerprints."""
    return digest({"partition": cell.partition_fp, "systems": {n: p.fingerprint for n, p in cell.systems.items()}})


def make_plan(cells: list[Cell], cfg: Config) -> dict:
    """The configured matrix for the report: cell ids, their axes and planned systems."""

    def values(key):
        out = []
        for c in cells:
            v = c.axes[key]
            if v not in out:
                out.append(v)
        return out

    return {
        "cells": {c.cell_id: {"axes": c.axes, "systems": list(c.systems)} for c in cells},
        "axes": {a: values(a) for a in ("dataset", "partition", "parts", "model", "layers", "bandwidth", "seed")},
        "systems": [parse_system(e).name for e in cfg.bench.systems],
        "system_entries": list(cfg.bench.systems),
        "partial": list(cfg.bench.partial),
    }
