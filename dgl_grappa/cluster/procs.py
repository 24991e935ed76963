"""Running a command in its namespaces, bounded, and killed as a tree: the job runner of every launcher.

Nothing here is specific to DistDGL or to Grappa: ``compare`` runs Grappa jobs with it,
``train`` re-runs itself in a private network namespace with it, and the DistDGL side runs
its launcher with it. Every process of a job carries the :data:`ENV_JOB` tag, every wait is
bounded, and whatever the outcome no process of the command outlives :func:`run_isolated`.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from ..config import uses_hosts, write_resolved_config
from ..env import ENV_JOB
from .netns import EXIT_ISOLATION, check_isolation, isolate_argv, require_isolation
from .ptree import job_processes, kill_session

"""Every process of a job carries this tag (a fresh id per job): tests use it to prove that
nothing outlived the job."""


EXIT_USER_ERROR = 3
"""Exit status of a process that stopped on a user error and printed it as its last line
(e.g. a checkpoint that cannot be written): a restart would not help."""


class JobFailed(RuntimeError):
    """A job failed (a process died, a wait ran past its bound); the CLI prints it in one line.

    Attributes:
        user_error: the job ended on a user error (:data:`EXIT_USER_ERROR`); the message is that line.
    """

    def __init__(self, msg: str, user_error: bool = False):
        super().__init__(msg)
        self.user_error = user_error


def processes_of_job(job: str) -> list[int]:
    """PIDs of live processes (this one excluded) whose environment carries ``DGL_GRAPPA_JOB=job``."""
    return [p.pid for p in job_processes(job)]


def set_subreaper() -> None:
    """Make this process the reaper of its orphaned descendants.

    Orphans of our children (e.g. DGL sampler processes of a killed trainer) are then
    re-parented to us, so ``ptree.kill_tree(os.getpid())`` still finds them.
    """
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def process_start_time() -> float:
    """Wall-clock time (``time.time()`` scale) at which this process was created, to 10 ms.

    Read from ``/proc/self/stat`` (clock ticks since boot) against ``CLOCK_BOOTTIME``;
    unlike a mark taken by the program itself it includes the interpreter's start and
    every import before the program's first line (psutil's ``create_time`` would round
    the boot time to whole seconds).
    """
    stat = Path("/proc/self/stat").read_text()
    ticks = int(stat.rpartition(")")[2].split()[19])  # field 22, counted after the command name
    since_boot = ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - since_boot)


def tail(path: Path, n: int = 15) -> str:
    """The last ``n`` lines of a log file, indented (for error messages)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join("    " + ln for ln in lines[-n:])


def rc_text(rc: int) -> str:
    """A process's exit status in words ("exited with status 1", "was killed by SIGKILL")."""
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    # a shell reports a signal as 128 + N; the guard on a host, which exits with its child's -N, as 256 - N
    n = rc - 128 if 128 < rc <= 128 + 64 else 256 - rc if 192 < rc < 255 else 0
    try:
        return f"exited with status {rc} (killed by {signal.Signals(n).name})" if n else f"exited with status {rc}"
    except ValueError:
        return f"exited with status {rc}"


def isolation_plan(cfg, force: bool | None = None) -> bool:
    """Whether a job runs in its own network namespace.

    Args:
        cfg: network.bandwidth set -> required (an error if impossible).
        force: True -> required; False -> never (unless bandwidth); None -> when possible.

    Returns:
        True when the job will run in a private network namespace.

    Raises:
        IsolationError: shaping or isolation was required but cannot be done here.
    """
    if uses_hosts(cfg):
        return False  # across hosts each host is its own namespace (or machine), shaped and counted there
    if cfg.network.bandwidth:
        require_isolation(bandwidth=cfg.network.bandwidth)
        return True
    if force:
        require_isolation(net=True)
        return True
    if force is False:
        return False
    return check_isolation(net=True) is None


def run_isolated(
    argv: list[str],
    cfg,
    isolate: bool,
    timeout_s: float,
    *,
    shm: str = "",
    label: str = "job",
    log_path: Path | None = None,
) -> None:
    """Run ``argv`` (in private namespaces when ``isolate``), bounded, killed as a tree at the end.

    Args:
        argv: the command.
        cfg: its Config (network.bandwidth shapes the namespace's loopback).
        isolate: private network namespace (and, with ``shm``, a private /dev/shm).
        timeout_s: bound on the whole command.
        shm: size of a private /dev/shm ("" = keep the host's).
        label: name of the job in messages.
        log_path: the command's stdout and stderr go to this file (None: to ours).

    Raises:
        JobFailed: non-zero exit (with the last lines of its log) or timeout. Whatever
            the outcome, no process of the command is left when this returns.
    """
    if isolate:
        argv = isolate_argv(argv, net=True, bandwidth=cfg.network.bandwidth, shm=shm)
    env = dict(os.environ, DGLBACKEND="pytorch", PYTHONUNBUFFERED="1")
    env.setdefault(ENV_JOB, uuid.uuid4().hex)
    sink = None
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        sink = open(log_path, "w")
    try:
        # Own session: the whole job is one process group, killable at once.
        proc = subprocess.Popen(
            argv,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT if sink else None,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise JobFailed(
                f"{label} ran past {timeout_s:.0f}s and was killed" + (f" (log: {log_path})" if log_path else "")
            ) from None
        finally:
            # Nothing of the job may outlive it: on success, failure, timeout or Ctrl+C.
            kill_session(proc)
    finally:
        if sink is not None:
            sink.close()
    if rc != 0:
        if log_path is None:
            raise JobFailed(f"{label} {rc_text(rc)}", user_error=rc == EXIT_USER_ERROR)
        lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
        if rc == EXIT_ISOLATION and lines:
            raise JobFailed(lines[-1])
        if rc == EXIT_USER_ERROR and lines:
            raise JobFailed(lines[-1].split("error: ", 1)[-1], user_error=True)
        tail_text = "\n".join("    " + ln for ln in lines[-20:])
        raise JobFailed(f"{label} {rc_text(rc)} (full log: {log_path}):\n{tail_text}")


def rerun_isolated(command: str, cfg) -> int:
    """Run ``python -m dgl_grappa <command>`` for ``cfg`` again, inside a private network namespace.

    Used by ``train`` when network.bandwidth (or network.isolate) is set: the whole job,
    launcher and workers, then runs on the namespace's own (shaped) loopback, and rank 0
    measures its bytes. The child gets the fully resolved config, so it sees exactly
    ``cfg``; its output goes to this terminal.

    Returns:
        0 (the child's failures raise).

    Raises:
        IsolationError: the namespace cannot be made here (not root, no tc).
        JobFailed: the child failed or ran past its bound.
    """
    require_isolation(bandwidth=cfg.network.bandwidth)
    out = Path(cfg.run.output_dir)
    resolved = write_resolved_config(cfg, out / "config.resolved.yaml")
    argv = [sys.executable, "-m", "dgl_grappa", command, "--config", str(resolved)]
    run_isolated(argv, cfg, True, cfg.run.timeout_s + 120, shm=cfg.distdgl.shm_size, label=command)
    return 0
