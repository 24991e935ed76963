"""The projection's text: the calibration, the projected grid and the check, as the terminal shows them."""

from __future__ import annotations

from pathlib import Path

from ...runtime.metrics import format_bytes as fmt_bytes
from .calibration import Calibration
from .check import TARGET


def fmt_s(x: float) -> str:
    """Seconds in a short unit: "12.3 ms", "1.234 s", "321 s"."""
    return f"{x * 1e3:.1f} ms" if x < 1 else f"{x:.3f} s" if x < 100 else f"{x:.0f} s"


def text_table(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows of cells as aligned text lines, the first row a header underlined with dashes.

    Example:
        >>> print("\\n".join(text_table([("P", "speedup"), ("4", "5.83x")])))
        P  speedup
        -  -------
        4  5.83x
    """
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for i, row in enumerate(rows):
        out.append("  ".join(c.ljust(wd) for c, wd in zip(row, widths)).rstrip())
        if i == 0:
            out.append("  ".join("-" * wd for wd in widths))
    return out


def format_calibration(cal: Calibration) -> str:
    """What the calibration measured, in a few lines."""
    g, d = cal.grappa, cal.distdgl
    w = cal.workload
    lines = [
        f"calibration: {w['dataset']}, {w['model']} x{w['num_layers']}, fan-outs {w['fanouts']}, batch "
        f"{cal.batch_size}, {cal.train_nodes:.0f} training nodes, rows of {cal.row_bytes:.0f} B, "
        f"gradients {fmt_bytes(cal.model_bytes)} ({g.buckets} DDP bucket{'s' if g.buckets > 1 else ''}); "
        f"{len(cal.runs)} runs",
        "  Grappa per step: compute "
        + (
            ", ".join(f"{fmt_s(c)} at {q} part{'s' if q > 1 else ''}" for q, c in g.compute_by_parts)
            if g.compute_by_parts
            else fmt_s(g.compute_s)
        )
        + (f" (prefetch: sampling {fmt_s(g.sample_s)} overlaps the backward)" if g.prefetch else "")
        + f"; wire / app bytes {g.wire_overhead:.3f}",
        f"  DistDGL per step: compute {fmt_s(d.compute_s)} + {d.row_cost_s * 1e6:.2f} us per remote row; "
        f"{d.round_trips} round trips (sampling per layer, pulls); wire / app bytes {d.wire_overhead:.3f}",
    ]
    for name, p in cal.partitions.items():
        lines.append(
            f"  {name}: {p.input_rows:.0f} input rows a step, {p.remote_fraction0:.1%} remote at "
            f"{p.parts0} parts ({p.q0:.2f} x a random partition's, growth (P/{p.parts0})^"
            f"{p.growth:.2f}), sampling RPC {p.rpc_share:.1%} of feature bytes"
        )
    if cal.cores_per_host:
        lines.append(f"  calibration hosts: {', '.join(map(str, cal.cores_per_host))} cores each (after dilation)")
    for n in cal.notes:
        lines.append(f"  note: {n}")
    return "\n".join(lines)


def format_table(rows: list[dict]) -> str:
    """The projection grid as a text table (one per partitioner and latency)."""
    out = []
    keys = []
    for r in rows:
        k = (r["partition"], r["latency_us"])
        if k not in keys:
            keys.append(k)
    for part, lat in keys:
        out.append(
            f"\n{part} partitions, one NIC per machine, one-way latency {lat:g} us "
            f"(epoch: its network share in brackets)"
        )
        head = (
            "P",
            "link",
            "remote",
            "DistDGL epoch",
            "Grappa epoch",
            "speedup",
            "DistDGL B/worker",
            "Grappa B/worker",
        )
        table = [head]
        for r in rows:
            if (r["partition"], r["latency_us"]) != (part, lat):
                continue
            link = f"{r['gbit']:g} Gbit/s" if r["gbit"] else "unlimited"

            def ep(sys_):
                e, n = r[f"{sys_}_epoch_s"], r[f"{sys_}_network_s"]
                return f"{fmt_s(e)} ({n / e:.0%})" if e else "-"

            table.append(
                (
                    str(r["parts"]),
                    link,
                    f"{r['remote_fraction']:.1%}",
                    ep("distdgl"),
                    ep("grappa"),
                    f"{r['speedup']:.2f}x",
                    fmt_bytes(r["distdgl_bytes_per_epoch"]),
                    fmt_bytes(r["grappa_bytes_per_epoch"]),
                )
            )
        out += text_table(table)
    return "\n".join(out)


def format_check(rows: list[dict], target: float = TARGET, cores: list[float] | None = None) -> str:
    """Projected against measured, one line per run, and how many are within the target.

    ``cores``: the calibration runs' cores per host; a checked run on hosts with other cores
    gets a note (its compute is not the calibration's).
    """
    head = (
        "run",
        "system",
        "P",
        "link",
        "latency",
        "dilation",
        "measured",
        "projected",
        "error",
        "wire meas.",
        "wire proj.",
        "wire error",
        "CPU/step vs cal.",
        "error at its CPU",
    )
    table = [head]
    for r in rows:
        table.append(
            (
                Path(r["where"]).name if r["where"] else "-",
                r["system"],
                str(r["parts"]),
                f"{r['link']} {r['bandwidth'] or 'unshaped'}",
                f"{r['latency_ms']:g} ms",
                f"{r['dilation']:g}",
                fmt_s(r["measured_epoch_s"]),
                fmt_s(r["projected_epoch_s"]),
                f"{r['error']:+.1%}" if r["error"] is not None else "-",
                fmt_bytes(r["measured_wire"]),
                fmt_bytes(r["projected_wire"]),
                f"{r['wire_error']:+.1%}" if r["wire_error"] is not None else "-",
                f"{r['cpu_ratio']:.2f}x" if r.get("cpu_ratio") else "-",
                f"{r['error_at_run_cpu']:+.1%}" if r.get("error_at_run_cpu") is not None else "-",
            )
        )
    out = text_table(table)
    errs = [abs(r["error"]) for r in rows if r["error"] is not None]
    ok = sum(e <= target for e in errs)
    out.append(
        f"{ok} of {len(errs)} epochs within {target:.0%} of the measured (largest error {max(errs) if errs else 0:.1%})"
    )
    other = sorted({round(r["cores_per_host"], 3) for r in rows if r.get("cores_per_host")} - set(cores or []))
    slow = [r for r in rows if (r.get("cpu_ratio") or 0) > 1 + target]
    if slow:
        lo, hi = min(r["cpu_ratio"] for r in slow), max(r["cpu_ratio"] for r in slow)
        span = f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}x"
        out.append(
            f"note: {len(slow)} Grappa run(s) spent {span} the calibration's compute in CPU seconds a step: "
            "the same work done slower on their hosts (time-sliced cores), which the projection does "
            "not model; 'error at its CPU' is the error with that compute"
        )
    if cores and other:
        out.append(
            f"note: some checked runs' hosts had {', '.join(map(str, other))} cores, the calibration runs' "
            f"{', '.join(map(str, cores))}: their compute per step differs from the calibration's"
        )
    return "\n".join(out)
