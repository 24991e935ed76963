"""The remote end of every launched command: it dies with its launcher (``python -m dgl_grappa.cluster.guard``).

A launcher starts each worker and server on a host as ``python -m dgl_grappa.cluster.guard -- CMD ...``
behind ``ssh host`` (or a test host's nsenter prefix), with the guard's stdin a pipe that the
launcher holds open. The guard starts CMD in a session of its own and waits; it kills CMD's
whole process tree, by PID, when

* its stdin reaches end-of-file: the launcher closed the pipe (a deliberate hang-up), or the
  launcher died, even by SIGKILL: its end of the pipe closes with it. Over ssh the same
  happens one hop further: the local ssh client dies with the launcher (or is killed by it),
  the connection closes, and sshd closes the remote command's stdin;
* it receives SIGTERM, SIGHUP or SIGINT (sshd sends SIGHUP on some disconnects);

and when CMD ends by itself the guard kills whatever CMD left behind in its session (e.g. a
daemon child) and exits with CMD's status. CMD also gets SIGKILL if the guard itself is
killed (``PR_SET_PDEATHSIG``). ``--kill-job ID`` is the launcher's last resort on a host it
can still reach: kill every process there whose environment carries ``DGL_GRAPPA_JOB=ID``.

Why not ``ssh -tt``: a pseudo-terminal does deliver SIGHUP to the remote session when the
connection drops, but it merges stderr into stdout, rewrites line ends, and a process that
ignores SIGHUP or leaves the session (DGL's and torch's helpers) survives it; the stdin
guard needs no terminal and kills by PID (:mod:`dgl_grappa.cluster.ptree`). Kept free of heavy
imports (psutil only, here and in ptree): it starts in a fraction of a second and can run
before torch or DGL are importable.

Example (what the launcher runs on host 1)::

    ssh 10.0.0.2 \\
        'cd /work && exec env RANK=1 ... python -m dgl_grappa.cluster.guard -- python -m dgl_grappa worker --config C'
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import sys

from ..env import ENV_JOB  # import-free, like this module
from .ptree import kill_job, kill_session, kill_with_parent  # import-free too

EXIT_HANGUP = 128 + signal.SIGHUP
"""Exit status of a guard whose launcher hung up (or died) before CMD finished."""


def _die_with_guard() -> None:
    # Runs in the child between fork and exec: SIGKILL it when the guard dies.
    kill_with_parent()


def run(cmd: list[str], watch_stdin: bool = True, poll_s: float = 0.5) -> int:
    """Run ``cmd`` under the guard (see the module docstring); its exit status."""
    child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_guard)
    stop = {"sig": 0}

    def on_signal(signum, frame):
        stop["sig"] = signum

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)
    watching = watch_stdin
    try:
        while True:
            rc = child.poll()
            if rc is not None:
                return rc
            if stop["sig"]:
                return 128 + stop["sig"]
            if not watching:
                try:
                    child.wait(timeout=poll_s)
                except subprocess.TimeoutExpired:
                    pass
                continue
            try:
                ready, _, _ = select.select([0], [], [], poll_s)
            except InterruptedError:
                continue
            if ready:
                try:
                    data = os.read(0, 4096)
                except OSError:
                    data = b""
                if not data:  # the launcher hung up or is gone
                    print(
                        f"dgl_grappa.cluster.guard: launcher gone (stdin closed); killing {cmd[0]} (pid {child.pid})",
                        file=sys.stderr,
                        flush=True,
                    )
                    return EXIT_HANGUP
    finally:
        kill_session(child)


def main(argv: list[str] | None = None) -> int:
    """``python -m dgl_grappa.cluster.guard [--no-stdin] -- CMD ...`` or ``--kill-job ID``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    own, cmd = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    ap = argparse.ArgumentParser(
        prog="python -m dgl_grappa.cluster.guard", description="run a command that dies when its launcher goes away"
    )
    ap.add_argument("--no-stdin", action="store_true", help="do not watch stdin (only signals end the command early)")
    ap.add_argument(
        "--kill-job", default="", metavar="ID", help=f"kill every process whose environment has {ENV_JOB}=ID, then exit"
    )
    args = ap.parse_args(own)
    if args.kill_job:
        n = kill_job(args.kill_job)
        print(f"dgl_grappa.cluster.guard: killed {n} processes of job {args.kill_job}", flush=True)
        return 0
    if not cmd:
        ap.error("no command after --")
    try:
        return run(cmd, watch_stdin=not args.no_stdin)
    except OSError as exc:
        print(f"dgl_grappa.cluster.guard: error: cannot run {cmd[0]!r}: {exc.strerror}", file=sys.stderr, flush=True)
        return 127


if __name__ == "__main__":
    sys.exit(main())
