"""A DistDGL job that survives a dead trainer: restarted (servers and trainers) from the newest checkpoint.

DistDGL itself has no answer to a dead trainer (the others hang in the client barrier and
the servers stay up; the launcher kills the whole job, bounded). Here the job is started
again from the newest intact checkpoint its trainers wrote (``--checkpoint_dir``, every
``checkpoint.every`` epochs and at the job's end), up to ``launch.max_restarts`` times in
the whole run (:class:`~dgl_grappa.runtime.restarts.RestartBudget`, shared by the segments of a
repartitioning run). A user error (one line, e.g. a checkpoint that cannot be written) is
not retried.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from ..cluster.procs import JobFailed
from ..config import ConfigError
from ..runtime.checkpoint import CheckpointStore, fingerprint
from ..runtime.restarts import RestartBudget
from .job import run_job
from .launcher import FAILURE_FILE


def failure_reason(exc: JobFailed, out: Path | None = None) -> str:
    """One line out of a failed job: the launcher's own error line when there is one."""
    f = out / FAILURE_FILE if out is not None else None
    if f is not None and f.is_file():
        text = f.read_text().strip()
        if text:
            return text
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    for ln in lines:
        if "dgl_grappa.distdgl: error: " in ln:
            return ln.split("error: ", 1)[1]
    return lines[0] if lines else "the job failed"


def one_line(exc: JobFailed, out: Path | None = None) -> str:
    r"""A failed job in one line: its reason (:func:`failure_reason`) and where its whole log is.

    Example:
        >>> one_line(JobFailed("DistDGL job exited with status 1 (full log: /r/job.log):\n"
        ...                    "    dgl_grappa.distdgl: error: trainer 1 was killed by SIGKILL"))
        'trainer 1 was killed by SIGKILL (full log: /r/job.log)'
    """
    reason = failure_reason(exc, out)
    m = re.search(r"\(full log: ([^)]+)\)", str(exc))
    return reason + (f" (full log: {m.group(1)})" if m and m.group(1) not in reason else "")


def supports_checkpoints(cfg, script: str | None) -> bool:
    """Whether the trainer takes ``--checkpoint_dir``/``--segment_start``: the package's own trainer
    always; a script of the user's own only when the run needs them anyway (repartitioning)."""
    return not (script or cfg.compare.script) or cfg.schedule.k > 0


def run_resumable_job(
    cfg,
    out: Path,
    *,
    grappa: bool,
    script: str | None,
    extra_args: list[str] | None,
    in_ns: bool,
    quiet: bool,
    start: int,
    stop: int,
    segment_start: int,
    resume: str | None,
    budget: RestartBudget,
    ckdir: Path | None,
    timing: dict | None = None,
    **where,
) -> dict:
    """Run the DistDGL job for epochs [start, stop); when it dies, again from the newest checkpoint.

    Args:
        cfg, out, grappa, script, extra_args, in_ns, quiet: as for :func:`~dgl_grappa.distdgl.job.run_job`.
        start, stop: the epochs to train.
        segment_start: the first epoch this job's summary covers (a repartitioning segment's start).
        resume: the checkpoint to start from (None: from scratch).
        budget: the run's restarts.
        ckdir: where the trainers write checkpoints (None: the trainer takes no checkpoint
            arguments; a restart then starts from ``start`` again).
        timing: filled with ``job_start`` / ``job_end`` of the attempt that succeeded.
        where: extra fields for the restart records (e.g. ``segment``).

    Returns:
        The job's summary.

    Raises:
        ConfigError: a user error reported by a trainer.
        JobFailed: the job failed and no restart was left.
    """
    store = CheckpointStore(ckdir, cfg.checkpoint.keep_last) if ckdir is not None else None
    fp = fingerprint(cfg)
    while True:
        args = list(extra_args or []) + ["--start_epoch", str(start), "--stop_epoch", str(stop)]
        if store is not None:
            args += ["--segment_start", str(segment_start), "--checkpoint_dir", str(ckdir)]
        if resume:
            args += ["--resume", str(resume)]
        t0 = time.time()
        (out / FAILURE_FILE).unlink(missing_ok=True)
        try:
            summary = run_job(cfg, out, grappa=grappa, script=script, extra_args=args, in_ns=in_ns, quiet=quiet)
        except JobFailed as exc:
            if exc.user_error:
                raise ConfigError(failure_reason(exc, out)) from None
            if budget.left <= 0:  # one line: the launcher's own error line, not a second one inside the log's tail
                raise JobFailed(one_line(exc, out)) from None
            point = store.newest_valid(fp) if store is not None else None  # corrupt newest: falls back
            if point is not None and point.epoch >= segment_start:
                start, resume = point.epoch, point.path
            budget.restart(failure_reason(exc, out), resume, start, **where)
            continue
        if timing is not None:
            timing.update(job_start=t0, job_end=time.time())
        return summary
