"""Before any server starts: does the drop-in run need ``prepare``, and has the folder had it?

A drop-in loader with a first-hop mode (``first_hop="block"`` or ``"exact"``) reads the first-hop
aggregates that ``python -m dgl_grappa prepare`` adds beside a partition's files. On a folder without
them the loader could only fail in every trainer, after the servers have loaded the graph; the
launcher looks first. What it reads:

* a script: its source, without running it. Every ``GrappaLoader(...)`` / ``GrappaEdgeLoader(...)``
  / ``LoaderOptions(...)`` call whose ``first_hop`` is written as ``"block"`` or ``"exact"`` (with
  ``aggregate="gcn"``: the ``--gcn`` table too). A mode the source computes (``first_hop=args.mode``) is
  left to the loader, whose own error is then the job's one line (:mod:`.runscript`). On a heterogeneous partitioning
  these loaders cannot run, so a call to one is in a branch the script does not take there.
* the package's own trainer: the config's first-hop mode (``train.first_hop``).

Example:
    >>> [n.call for n in first_hop_calls('loader = GrappaLoader(g, s, 64, first_hop="block", part_config=p)')]
    ['GrappaLoader(first_hop="block")']
    >>> [n.call for n in first_hop_calls('opts = LoaderOptions(first_hop="exact", part_config=p)')]
    ['LoaderOptions(first_hop="exact")']
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path

from ..config import ConfigError
from ..partition.aggregates import AUTO_KEY, read_prepared

LOADERS = ("GrappaLoader", "GrappaEdgeLoader", "LoaderOptions")
"""The calls that set a first-hop mode: the drop-in loaders, and their options object (``options=``)."""


@dataclass
class FirstHopCall:
    """A drop-in loader call that reads the prepared aggregates."""

    line: int
    call: str
    gcn: bool
    feat_key: str | None


def _constant(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def first_hop_calls(source: str) -> list[FirstHopCall]:
    """The drop-in loader calls in ``source`` that are written with a first-hop mode (a syntax error: none)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # the script's own error, when it runs
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        if name not in LOADERS:
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        mode = _constant(kw["first_hop"]) if "first_hop" in kw else None
        if mode not in ("block", "exact"):
            continue
        feat = _constant(kw["feat_key"]) if "feat_key" in kw else None
        out.append(
            FirstHopCall(
                node.lineno,
                f'{name}(first_hop="{mode}")',
                "aggregate" in kw and _constant(kw["aggregate"]) == "gcn",
                feat if feat not in (None, AUTO_KEY) else None,
            )
        )
    return out


def _heterogeneous(part_config: Path) -> bool:
    """Whether the partitioning has more than one node type (an unreadable json: False, the launcher says why)."""
    try:
        return len(json.loads(part_config.read_text()).get("ntypes", {})) > 1
    except (OSError, ValueError, AttributeError):
        return False


def missing(part_config: Path, gcn: bool) -> bool:
    """True when ``part_config``'s folder lacks current aggregates (with ``gcn``: the GCN table too)."""
    rec = read_prepared(part_config)
    return rec is None or (gcn and not rec.get("gcn"))


def prepare_command(part_config: Path, gcn: bool = False, feat_key: str | None = None) -> str:
    """The command that prepares ``part_config``'s folder.

    Example:
        >>> prepare_command(Path("parts/g.json"), gcn=True)
        'python -m dgl_grappa prepare --part-config parts/g.json --gcn'
    """
    return (
        f"python -m dgl_grappa prepare --part-config {part_config}"
        + (f" --feat-key {feat_key}" if feat_key else "")
        + (" --gcn" if gcn else "")
    )


def check_prepared(
    part_config: str | Path, script: str | None, *, first_hop: str = "sampled", gcn: bool = False
) -> None:
    """Raise one line naming the command to run when the drop-in run would read aggregates the folder lacks.

    Args:
        part_config: the partition json the job runs on.
        script: the drop-in run's script (its source is read), or None for the package's trainer.
        first_hop, gcn: the package trainer's first-hop mode and table (``script`` None).

    Raises:
        ConfigError: ``prepare`` is needed and was not run (or not with ``--gcn`` where the loader needs it).
    """
    part_config = Path(part_config)
    if script is None:
        if first_hop != "sampled" and missing(part_config, gcn):
            raise ConfigError(
                f"train.first_hop={first_hop} reads the first-hop aggregates that prepare adds, and "
                f"{part_config} has none: run `{prepare_command(part_config, gcn)}` first (once per "
                "partitioning), or set --train.first_hop=sampled"
            )
        return
    if _heterogeneous(part_config):
        return  # the homogeneous loaders cannot run on it (a script's call to one is in a branch not taken here)
    try:
        source = Path(script).read_text()
    except (OSError, UnicodeDecodeError):
        return  # the launcher says what is wrong with the file
    for c in first_hop_calls(source):
        if missing(part_config, c.gcn):
            raise ConfigError(
                f"{Path(script).name}:{c.line} makes {c.call}, which reads the first-hop aggregates "
                f"that prepare adds, and {part_config} has none: run "
                f"`{prepare_command(part_config, c.gcn, c.feat_key)}` first (once per partitioning)"
            )


def check_job(cfg, part_config: str | Path, *, grappa: bool, script: str | None) -> None:
    """:func:`check_prepared` for one DistDGL job of ``cfg`` (``grappa``: the drop-in run; ``script``: its script,
    else ``compare.script``, else the package's trainer).

    A script that takes ``{grappa}`` (or the package's ``--grappa``) uses a drop-in loader only in the drop-in
    run; a script without it (the converted copy) in every run.
    """
    chosen = script or cfg.compare.script
    if chosen:
        toggled = not cfg.compare.script_args or "{grappa}" in cfg.compare.script_args.split()
        if grappa or not toggled:
            check_prepared(part_config, chosen)
    elif grappa and not cfg.hetero:
        from ..method.local_part import first_hop_table  # deferred: the method's modules load DGL's

        check_prepared(part_config, None, first_hop=cfg.first_hop, gcn=first_hop_table(cfg.model) == "gcn")
