"""Byte counters of test hosts: what each host put on and took off its link.

Each host's ``eth0`` is its only way out, so its interface counters are the host's
traffic and nothing else's (the kernel's own counters, read with ``ip -s``).

Example:
    >>> before = wire_bytes(hosts)                                     # doctest: +SKIP
    >>> [a["tx_bytes"] - b["tx_bytes"] for a, b in zip(wire_bytes(hosts), before)]  # doctest: +SKIP
    [1048894, 7420]
"""

from __future__ import annotations

import json

from .base import run
from .namespaces import Host


def wire_bytes(hosts: list[Host]) -> list[dict]:
    """Counters of each host's interface right now.

    Returns:
        One dict per host: host, address, tx_bytes, rx_bytes, tx_packets, rx_packets.
    """
    out = []
    for h in hosts:
        info = json.loads(run(["ip", "-n", h.netns, "-j", "-s", "link", "show", "dev", "eth0"]).stdout)[0]
        s = info["stats64"]
        out.append(
            {
                "host": h.index,
                "address": h.address,
                "tx_bytes": s["tx"]["bytes"],
                "rx_bytes": s["rx"]["bytes"],
                "tx_packets": s["tx"]["packets"],
                "rx_packets": s["rx"]["packets"],
            }
        )
    return out


def format_delta(before: list[dict], after: list[dict], exit_codes: list[int]) -> list[str]:
    """One line per host: the bytes it sent and received between two readings, and its command's exit status."""
    return [
        f"  h{a['host']}  tx {a['tx_bytes'] - b['tx_bytes']:>12,d} B   "
        f"rx {a['rx_bytes'] - b['rx_bytes']:>12,d} B   exit {exit_codes[a['host']]}"
        for b, a in zip(before, after)
    ]
