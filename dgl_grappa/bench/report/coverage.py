"""Coverage: how much of the configured matrix the cell files hold, and the report's lines on it."""

from __future__ import annotations

from collections import defaultdict

from .results import SELECT_AXES, network, sort_key


def coverage(cells: list[dict], plan: dict | None = None) -> dict:
    """How much of the configured matrix the JSON files hold.

    Args:
        cells: cell dicts (stale systems already marked so by the caller).
        plan: ``{"cells": {cell_id: {"axes": {...}, "systems": [...]}}, "axes": {axis: [values]}}``;
            None = the cells themselves are the matrix.

    Returns:
        ``cells_total`` (in the matrix), ``cells_done`` (every planned system ok but the
        plan's ``partial`` ones),
        ``cells_partial`` (some ok), ``runs_total``/``runs_ok``/``runs_failed``/``runs_stale``,
        ``systems``: name -> [cells where it ran ok, cells that plan it],
        ``outside`` (cell files not in the matrix), ``axes``: axis -> {"configured": [...],
        "done": [...]} (values with at least one done cell), ``failed``: [(cell, system, reason)].
    """
    by_id = {c.get("cell_id"): c for c in cells}
    if plan is None:
        planned = {
            cid: {"axes": c["axes"], "systems": list((c.get("systems") or {}).keys())} for cid, c in by_id.items()
        }
        axes_cfg = {a: sorted({c["axes"].get(a) for c in cells}, key=lambda v: sort_key((v,))) for a in SELECT_AXES}
    else:
        planned, axes_cfg = plan["cells"], plan["axes"]
    out = {
        "cells_total": len(planned),
        "cells_done": 0,
        "cells_partial": 0,
        "runs_total": 0,
        "runs_ok": 0,
        "runs_failed": 0,
        "runs_stale": 0,
        "outside": sorted(set(by_id) - set(planned), key=str),
        "failed": [],
    }
    done_axes: dict[str, set] = defaultdict(set)
    per_system: dict[str, list[int]] = {}
    partial = set((plan or {}).get("partial") or ())
    for cid, p in planned.items():
        c = by_id.get(cid) or {}
        systems = c.get("systems") or {}
        ok = 0
        required = [n for n in p["systems"] if n not in partial]
        for name in p["systems"]:
            out["runs_total"] += name in required
            st = (systems.get(name) or {}).get("status")
            tally = per_system.setdefault(name, [0, 0])
            tally[1] += 1
            if st == "ok":
                ok += name in required
                tally[0] += 1
            elif st == "failed":
                out["runs_failed"] += 1
                out["failed"].append((cid, name, systems[name].get("reason")))
            elif st == "stale":
                out["runs_stale"] += 1
        out["runs_ok"] += ok
        if required and ok == len(required):
            out["cells_done"] += 1
            for a in SELECT_AXES:
                done_axes[a].add(p["axes"].get(a))
        elif ok:
            out["cells_partial"] += 1
    out["systems"] = per_system
    out["partial"] = sorted(partial)
    out["axes"] = {
        a: {"configured": list(axes_cfg.get(a, [])), "done": [v for v in axes_cfg.get(a, []) if v in done_axes[a]]}
        for a in SELECT_AXES
    }
    return out


def coverage_text(cov: dict) -> str:
    """Coverage (:func:`coverage`) as markdown lines."""
    lines = [
        f"- cells done: **{cov['cells_done']} of {cov['cells_total']}** in the configured matrix "
        f"({cov['cells_partial']} partly done); runs ok {cov['runs_ok']} of {cov['runs_total']}, "
        f"failed {cov['runs_failed']}, stale {cov['runs_stale']} (ran with a config that has changed since)"
    ]
    if cov.get("systems"):
        lines.append(
            "- cells each system ran in: "
            + ", ".join(
                f"{name} {ok} of {n}" + (" (partial: run on a subset)" if name in cov.get("partial", ()) else "")
                for name, (ok, n) in cov["systems"].items()
            )
        )
    for a, v in cov["axes"].items():
        conf = [network(x) if a == "bandwidth" else x for x in v["configured"]]
        done = [network(x) if a == "bandwidth" else x for x in v["done"]]
        lines.append(
            f"- {a}: configured {', '.join(map(str, conf)) or '-'}; with a done cell: "
            f"{', '.join(map(str, done)) or 'none'}"
        )
    if cov["outside"]:
        lines.append(f"- {len(cov['outside'])} cell file(s) in the output folder are outside this matrix and not shown")
    if cov["failed"]:
        lines.append("- failed runs (rerun the command to retry them):")
        for cid, name, reason in cov["failed"][:30]:
            lines.append(f"  - `{cid}` {name}: {reason}")
        if len(cov["failed"]) > 30:
            lines.append(f"  - ... and {len(cov['failed']) - 30} more")
    return "\n".join(lines)
