"""Signals as schedulers send them: a job stops as a whole, at a step the workers agree on, and never leaves
orphans.

* The launcher (:class:`StopSignals`): SIGTERM, SIGHUP and SIGINT are caught, also where the shell
  that started the job ignores SIGINT (``cmd &`` in a script). Before the workers run, the
  signal raises :class:`Stopped` at once; while they run, it is recorded and
  :func:`dgl_grappa.cluster.launch.spawn_workers` passes it on to every worker (as :data:`STOP_WORKER`),
  waits at most :data:`STOP_GRACE_S` for them to end, then kills what is left.
* A worker (:func:`catch_stop`, :func:`stop_requested`): :data:`STOP_WORKER` only sets a flag, which
  the trainer reads every few steps (``STOP_CHECK_STEPS`` of :mod:`dgl_grappa.native.trainer`) and at
  the end of each epoch, and agrees on with the other ranks (one collective), so every rank stops at the
  same step and a checkpoint holds it (inside an epoch: with the epoch's position). A worker
  ignores SIGINT (a terminal's Ctrl-C reaches the launcher too, which asks the workers to stop);
  SIGTERM and SIGHUP sent to a worker itself still end it at once, a worker's death as any other
  (a signal sent to the whole process group stops the job at once, from its last checkpoint).
* A worker torchrun or ``srun`` started (:func:`catch_scheduler_stop`): the scheduler's SIGTERM or SIGHUP
  reaches every task and sets the same flag; the workers stop together with a checkpoint and exit 143.
* Orphans (:func:`die_with_parent`): a spawned worker asks the kernel for SIGKILL when its
  launcher dies, even by SIGKILL (Linux ``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import signal
import threading

from .procs import JobFailed
from .ptree import kill_with_parent

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
"""The signals that stop a job: a scheduler's (SIGTERM), a closed terminal or ssh session's (SIGHUP), Ctrl-C."""

STOP_GRACE_S = 20.0
"""How long the launcher waits, after passing a stop on, for the workers to reach the step where they stop,
write the checkpoint and exit; past it every worker is killed (schedulers usually send SIGKILL 30 s after SIGTERM)."""

STOP_WORKER = signal.SIGUSR1
"""The launcher's request to a worker: stop at the next agreed step (its own signal, so that a SIGTERM
sent to one worker is still that worker's death)."""


class Stopped(JobFailed):
    """The job was stopped by a signal; ``signum`` is that signal (the command exits with 128 + signum)."""

    def __init__(self, msg: str, signum: int):
        super().__init__(msg)
        self.signum = signum


class StopSignals:
    """The launcher's handlers for :data:`STOP_SIGNALS`, installed while the block runs (main thread only).

    With :attr:`defer` False a signal raises :class:`Stopped` where the launcher is; with it True (while
    workers run) the signal is only recorded in :attr:`signum` for the wait loop to act on.

    Example:
        >>> with StopSignals() as stop:
        ...     stop.signum
        0
    """

    def __init__(self):
        self.signum = 0
        self.defer = False
        self._old: dict = {}

    def _handle(self, signum, frame):
        if self.signum:  # a second signal while the first one's cleanup runs must not cut that short
            return
        self.signum = signum
        if not self.defer:
            raise Stopped(f"stopped by {signal.Signals(signum).name}", signum)

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():  # only the main thread may set handlers
            for sig in STOP_SIGNALS:
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()


_requested = {"signum": 0}


def _record(signum, frame):
    _requested["signum"] = _requested["signum"] or signum


def catch_stop() -> None:
    """In a worker: :data:`STOP_WORKER` sets the flag :func:`stop_requested` reads; SIGINT is ignored."""
    signal.signal(STOP_WORKER, _record)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def catch_scheduler_stop() -> None:
    """In a worker an external starter began (torchrun, ``srun``): SIGTERM and SIGHUP, which a scheduler sends to
    every task, set the flag :func:`stop_requested` reads, so that the workers stop together at the next agreed
    step with a checkpoint instead of dying where they are (Slurm's ``--signal=TERM@60`` gives them a minute)."""
    signal.signal(signal.SIGTERM, _record)
    signal.signal(signal.SIGHUP, _record)


def stop_requested() -> int:
    """The stop signal this worker received (0: none)."""
    return _requested["signum"]


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies; exit now if ``parent_pid`` is already gone.

    Example:
        >>> die_with_parent(os.getppid())   # doctest: +SKIP
    """
    kill_with_parent(parent_pid)
