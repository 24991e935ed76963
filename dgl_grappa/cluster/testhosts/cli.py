"""The test hosts by hand: ``python -m dgl_grappa.cluster.testhosts`` (or ``scripts/testhosts.sh``).

Example:
    >>> main(["-n", "3", "--bandwidth", "1gbit", "--", "sh", "-c", "hostname"])   # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

from .base import TestHostsError
from .counters import format_delta
from .job import TestHosts
from .teardown import sweep_stale

PROG = "python -m dgl_grappa.cluster.testhosts"


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=PROG, description="emulated hosts on this machine (network + mount namespaces)")
    ap.add_argument("-n", "--hosts", type=int, default=2, help="number of hosts (default 2)")
    ap.add_argument("--bandwidth", default="", help="tc rate of each host's link, e.g. 1gbit (default: unshaped)")
    ap.add_argument("--latency-ms", type=float, default=0.0, help="one-way host-to-host delay (needs netem)")
    ap.add_argument("--shared-link", action="store_true", help="all hosts behind one shaped link")
    ap.add_argument(
        "--cpu-shares",
        action="store_true",
        help="give each host a fixed share of the cores (cgroups) and dilate the links to match",
    )
    ap.add_argument(
        "--host-cpus",
        default="",
        help="with --cpu-shares: the cores to share out, e.g. 0 or 0-3 (default: all this process may use)",
    )
    ap.add_argument(
        "--dilation",
        default="auto",
        help="auto (D = hosts per core with --cpu-shares), off, or a factor D: links at bandwidth / D, latency x D",
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="bound on CMD, seconds (default 600)")
    ap.add_argument("--sweep", action="store_true", help="only remove leftovers of dead jobs, then exit")
    return ap


def _run_everywhere(hosts: TestHosts, cmd: list[str], timeout: float) -> list[int]:
    """CMD in every host at once, output lines tagged ``[h<i>]``; each one's exit status (124: past the bound)."""
    procs, pumps = [], []
    for h in hosts:
        env = dict(
            os.environ,
            TESTHOST_INDEX=str(h.index),
            TESTHOST_ADDRS=",".join(hosts.addresses),
            MASTER_ADDR=hosts[0].address,
        )
        p = h.popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        t = threading.Thread(
            target=lambda p=p, i=h.index: [print(f"[h{i}] {ln}", end="", flush=True) for ln in p.stdout], daemon=True
        )
        t.start()
        procs.append(p)
        pumps.append(t)
    deadline, rcs = time.monotonic() + timeout, []
    for p in procs:
        try:
            rcs.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
            rcs.append(124)
    for t in pumps:
        t.join(timeout=5)
    return rcs


def main(argv: list[str] | None = None) -> int:
    """``python -m dgl_grappa.cluster.testhosts [-n N] [--bandwidth R] ... [-- CMD ...]``.

    Creates the hosts, prints their addresses and prefixes, runs CMD in every host at once
    (with ``TESTHOST_INDEX``, ``TESTHOST_ADDRS`` and ``MASTER_ADDR`` = host 0 set; output
    lines tagged ``[h<i>]``), prints the per-host wire bytes and tears everything down.

    Returns:
        The largest exit status of the commands (124 when they ran past ``--timeout``).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    args = _parser().parse_args(own)
    if args.sweep:
        print("removed stale jobs:", " ".join(sweep_stale()) or "none")
        return 0
    try:
        with TestHosts(
            args.hosts,
            args.bandwidth,
            args.latency_ms,
            args.shared_link,
            cpu_shares=args.cpu_shares,
            host_cpus=args.host_cpus,
            dilation=args.dilation,
        ) as hosts:
            cpu = (
                f", {hosts.cpu_share:.3g} cores per host, dilation {hosts.dilation:.3g}"
                if hosts.cpu_share is not None or hosts.dilation != 1
                else ""
            )
            print(f"job {hosts.job}: {len(hosts)} hosts, link {hosts.link}{cpu}", flush=True)
            for h in hosts:
                cpus = f" cpus {hosts.host_cpus[h.index].cpus}" if hosts.host_cpus else ""
                print(f"  h{h.index}  {h.address:<15}{cpus} {' '.join(h.prefix()[-6:])}", flush=True)
            if not cmd:
                return 0
            before = hosts.wire_bytes()
            rcs = _run_everywhere(hosts, cmd, args.timeout)
            print("\n".join(format_delta(before, hosts.wire_bytes(), rcs)))
            return max(rcs)
    except TestHostsError as exc:
        print(f"testhosts: error: {exc}", file=sys.stderr)
        return 2
