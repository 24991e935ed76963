"""Restart policy of every launcher: the whole group restarts from the last checkpoint (torchrun's semantics).

When a worker dies (any signal, any exit status) the launcher has already stopped the
others (bounded); :class:`RestartBudget` decides whether the job goes again
(``launch.max_restarts`` restarts in all), logs where it resumes and why, and keeps the
list for summary.json (``restarts``). A deadline (``run.timeout_s``) or a user error
(one-line ConfigError) is never retried: a restart cannot fix either.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("dgl_grappa")


class RestartBudget:
    """``launch.max_restarts`` restarts for one job, and the record of those taken.

    Args:
        max_restarts: restarts allowed in all.
        label: the job's name in log lines ("Grappa job", "DistDGL segment 1").

    Example:
        >>> budget = RestartBudget(2, "Grappa job")
        >>> budget.left
        2
    """

    def __init__(self, max_restarts: int, label: str):
        self.max_restarts = max_restarts
        self.label = label
        self.taken: list[dict] = []

    @property
    def left(self) -> int:
        return self.max_restarts - len(self.taken)

    def restart(
        self, reason: str, resume_path: str | None, epoch: int, action: str | None = None, **extra
    ) -> dict | None:
        """Take one restart if any is left: log it and record it.

        Args:
            reason: one line, why the previous attempt ended (e.g. "worker 1 was killed by SIGKILL").
            resume_path: the checkpoint the next attempt starts from (None: from the beginning).
            epoch: the epoch it starts at.
            action: what the restart does, when it is not a resume (e.g. "building partitioning 1 again").
            extra: more fields for the record (e.g. the segment).

        Returns:
            The record, or None when no restart is left (the caller re-raises).
        """
        if self.left <= 0:
            return None
        rec = {
            "restart": len(self.taken) + 1,
            "reason": reason,
            "resumed_from": resume_path,
            "epoch": epoch,
            "at": time.time(),
            **extra,
        }
        self.taken.append(rec)
        where = f"checkpoint {resume_path} (epoch {epoch})" if resume_path else "the beginning (no checkpoint yet)"
        log.warning(
            "restart %d/%d of the %s: %s; %s",
            rec["restart"],
            self.max_restarts,
            self.label,
            reason,
            action or f"resuming from {where}",
        )
        return rec


def restart_budget(launch, label: str) -> RestartBudget:
    """The restarts a job may take: ``launch.max_restarts``, none with ``launch.on_failure: stop``.

    (``continue`` takes lost parts over instead where it applies, Grappa across hosts; the DistDGL
    jobs, whose servers hold the partitions, restart as a whole group.)
    """
    return RestartBudget(0 if launch.on_failure == "stop" else launch.max_restarts, label)
