"""Loading the config tree: YAML, coercion of values to the fields' types, ``--section.key=value`` overrides.

Precedence: ``--section.key=value`` on the command line > the YAML file > field defaults.
Unknown keys are rejected by name, and every user error is raised as :class:`ConfigError`
whose message is one line naming the key, the bad value and the fix.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml

from .errors import ConfigError
from .rules import validate
from .tree import Config, to_dict

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


# String settings one of whose words is "off", which YAML 1.1 reads as false when unquoted.
_OFF_WORDS = {"network.dilation"}

# What to do instead, for a choice the list of allowed values alone does not answer.
_OTHERWISE = {
    "data.name": "; any other graph: save it with dgl.save_graphs(path, [g]) and use --data.name=dgl "
    "--data.path=path (docs/configuration.md#your-own-graph), or add the aggregates to "
    "partitions DGL already wrote with python -m dgl_grappa prepare --part-config PATH "
    "(docs/dropin.md)"
}


def coerce(key: str, value: Any, tp: Any) -> Any:
    """Turn a YAML or CLI value into ``tp``; raise ConfigError naming the key otherwise."""
    origin = get_origin(tp)
    if origin is Literal:
        choices = get_args(tp)
        if isinstance(value, str) and value in choices:
            return value
        near = [c for c in choices if isinstance(value, str) and str(c).lower() == value.lower()]
        if near:
            raise ConfigError(f"{key}={value!r} is not allowed; did you mean {near[0]}? (names are case-sensitive)")
        raise ConfigError(
            f"{key}={value!r} is not allowed; use one of {', '.join(map(str, choices))}{_OTHERWISE.get(key, '')}"
        )
    if origin is list:
        (item_tp,) = get_args(tp)
        if isinstance(value, str):
            text = value.strip().strip("[]")
            value = [v for v in (t.strip() for t in text.split(",")) if v]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}={value!r} is not a list; write e.g. {key}=[10,25]")
        return [coerce(f"{key}[{i}]", v, item_tp) for i, v in enumerate(value)]
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise ConfigError(f"{key}={value!r} is not a boolean; use true or false")
    if tp is int:
        if isinstance(value, bool):
            raise ConfigError(f"{key}={value!r} is not an integer; give a whole number")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value.replace("_", ""))
            except ValueError:
                pass
        raise ConfigError(f"{key}={value!r} is not an integer; give a whole number")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{key}={value!r} is not a number; give e.g. {key}=0.5")
    if tp is str:
        if value is False and key in _OFF_WORDS:  # YAML reads a bare off as false
            return "off"
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, dict):  # YAML reads an unquoted "name: value" list entry as a mapping
            raise ConfigError(f'{key}={value!r} is not a string; quote it, e.g. "name: --a.b=v"')
        raise ConfigError(f"{key}={value!r} is not a string")
    raise TypeError(f"unsupported config type {tp} for {key}")  # programming error


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _apply(obj: Any, mapping: dict, prefix: str) -> None:
    if not isinstance(mapping, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'} must be a mapping of keys, got {mapping!r}")
    hints = _hints(type(obj))
    names = {f.name for f in dataclasses.fields(obj)}
    for key, value in mapping.items():
        full = f"{prefix}{key}"
        if key not in names:
            raise ConfigError(f"unknown config key '{full}'; known keys here: {', '.join(sorted(names))}")
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            _apply(getattr(obj, key), value, f"{full}.")
        else:
            setattr(obj, key, coerce(full, value, tp))


def _set_dotted(cfg: Config, dotted: str, raw: str) -> None:
    parts = dotted.split(".")
    obj: Any = cfg
    for i, part in enumerate(parts):
        names = {f.name for f in dataclasses.fields(obj)}
        full = ".".join(parts[: i + 1])
        if part not in names:
            raise ConfigError(f"unknown config key '{full}'; known keys here: {', '.join(sorted(names))}")
        tp = _hints(type(obj))[part]
        if i == len(parts) - 1:
            if dataclasses.is_dataclass(tp):
                raise ConfigError(f"'{full}' is a section; set one of its keys, e.g. --{full}.<key>=value")
            try:
                value = yaml.safe_load(raw) if raw.strip() else raw
            except yaml.YAMLError:
                raise ConfigError(
                    f"--{full}={raw} cannot be read as a YAML value; write e.g. a list as "
                    f'[a, b] and quote empty strings: ["", b]'
                ) from None
            if tp is str and not isinstance(value, str):
                value = raw  # keep strings verbatim ("001" stays "001")
            setattr(obj, part, coerce(full, value, tp))
        else:
            if not dataclasses.is_dataclass(tp):
                raise ConfigError(f"'{full}' is not a section; write --{full}=value")
            obj = getattr(obj, part)


def parse_overrides(args: list[str]) -> list[tuple[str, str]]:
    """Parse ``--a.b=v`` (or ``--a.b v``) arguments into (key, raw value) pairs."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            raise ConfigError(f"unexpected argument {arg!r}; overrides look like --section.key=value")
        body = arg[2:]
        if "=" in body:
            key, raw = body.split("=", 1)
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            key, raw = body, args[i + 1]
            i += 1
        else:
            raise ConfigError(f"override {arg!r} has no value; write {arg}=value")
        out.append((key, raw))
        i += 1
    return out


def config_changes(old: dict, new: dict, default: dict, prefix: str = "") -> list[str]:
    """Dotted keys where ``new`` differs from ``old``, as "key: old -> new".

    A key that ``old`` lacks (added to the code since) counts only when ``new`` holds a
    value other than its default; a key that ``new`` lacks (removed since) does not count.
    So a record written before a setting existed (a cached partitioning, a checkpoint, a
    benchmark run) still matches a config that leaves the setting at its default, which is
    what the code did before it existed.

    Example:
        >>> config_changes({"a": 1}, {"a": 1, "new": False}, {"a": 0, "new": False})
        []
    """
    out = []
    for k, v in new.items():
        d = default.get(k) if isinstance(default, dict) else None
        if isinstance(v, dict):
            o = old.get(k) if isinstance(old.get(k), dict) else {}
            if k not in old:
                o = d if isinstance(d, dict) else {}
            out += config_changes(o, v, d if isinstance(d, dict) else {}, f"{prefix}{k}.")
        elif k in old:
            if old[k] != v:
                out.append(f"{prefix}{k}: {old[k]!r} -> {v!r}")
        elif v != d:
            out.append(f"{prefix}{k}: (absent) -> {v!r}")
    return out


class _DuplicateKey(yaml.YAMLError):
    """A mapping of a config file names a key twice (YAML keeps the last one silently)."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (two ``train:`` blocks would
    otherwise drop the first block's settings without a word)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise _DuplicateKey(
                    f"key '{key}' is given twice in one block (lines {seen[key]} and "
                    f"{key_node.start_mark.line + 1}), and only the second would count; merge them "
                    "into one"
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def load_config(path: str | os.PathLike | None, overrides: list[str] | None = None) -> Config:
    """Build a validated Config from defaults, an optional YAML file and CLI overrides.

    Args:
        path: YAML file, or None for the built-in defaults.
        overrides: ``--section.key=value`` strings, applied last.

    Returns:
        The validated :class:`Config`.

    Raises:
        ConfigError: unknown key, bad value, or unreadable file (one-line message).

    Example:
        >>> load_config(None, ["--train.epochs=3"]).train.epochs
        3
    """
    cfg = Config()
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(
                f"config file '{p}' does not exist; pass an existing YAML file, e.g. configs/default.yaml"
            )
        try:
            data = yaml.load(p.read_text(), Loader=_UniqueKeyLoader) or {}
        except _DuplicateKey as exc:
            raise ConfigError(f"config file '{p}': {exc}") from None
        except yaml.YAMLError as exc:
            line = getattr(getattr(exc, "problem_mark", None), "line", None)
            where = f" at line {line + 1}" if line is not None else ""
            raise ConfigError(f"config file '{p}' is not valid YAML{where}; fix the syntax") from None
        _apply(cfg, data, "")
        if "name" not in data:
            cfg.name = p.stem
        if "run" not in data or "output_dir" not in (data.get("run") or {}):
            cfg.run.output_dir = f"runs/{cfg.name}"
    for key, raw in parse_overrides(overrides or []):
        _set_dotted(cfg, key, raw)
    validate(cfg)
    return cfg


def write_resolved_config(cfg: Config, path: Path) -> Path:
    """Write the whole (validated) config to YAML so that child processes see exactly it.

    Args:
        cfg: the config to hand on.
        path: the YAML file to write (its folder is created).

    Returns:
        ``path``.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    return path
