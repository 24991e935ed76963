"""Which stored runs of a cell must run again: a stored system entry against the plan.

A system whose entry is ``ok`` and whose stored config equals the one the bench would run now
(keys added to the code since, at their default value, do not count) is not run again; a
cell whose selected systems all are is skipped. Failed and changed systems run again. The
report marks stored runs that no longer match the plan ``stale`` (:func:`current_view`).
"""

from __future__ import annotations

from ..config import HETERO_DATASETS, Config, config_changes
from .plan import Cell, PlannedSystem, normalised


def _default_config() -> dict:
    """The normalised config of the built-in defaults (what a key absent from a stored config had)."""
    return normalised(Config())


# Keys whose arrival changed what a native Grappa run does at its defaults: an entry stored
# before a key existed ran the old behaviour, so it is stale for that system kind even when
# the planned value is the key's default (config_changes passes over keys at their default).
NEW_BEHAVIOUR_KEYS = {"grappa": ("train.memory_budget", "train.storage")}
# The same, for keys that changed only a heterogeneous graph's runs (data.name in HETERO_DATASETS): the halo's
# learnable rows synced and its in-edges from featureless types completed.
NEW_HETERO_KEYS = {"grappa": ("model.embed_halo_sync", "train.halo_in_edges")}


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
    config = stored.get("config") or {}
    hetero = (config.get("data") or {}).get("name") in HETERO_DATASETS
    keys = NEW_BEHAVIOUR_KEYS.get(planned.system.kind, ()) + (
        NEW_HETERO_KEYS.get(planned.system.kind, ()) if hetero else ()
    )
    for key in keys:
        if not _has_key(config, key) and _has_key(planned.config, key):
            return f"run before {key} existed (the defaults have changed since)"
    changes = config_changes(config, planned.config, _default_config())
    if changes:
        return "config changed: " + "; ".join(changes[:3]) + (" ..." if len(changes) > 3 else "")
    return None


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
