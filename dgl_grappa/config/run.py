"""The ``checkpoint`` and ``run`` sections: what resume starts from, and the job's files, processes and bounds."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from .errors import require


@dataclass
class CheckpointConfig:
    """Checkpoints (see dgl_grappa/runtime/checkpoint.py): what resume and recovery start from."""

    every: int = 1
    """Write a checkpoint every this many epochs; 0 = only at repartition boundaries and at
    the end (both are always written)."""
    keep_last: int = 2
    """Complete checkpoints kept (the newest ones); older ones are removed once a newer one
    is complete."""
    dir: str = ""
    """Where checkpoints go; empty = ``<run.output_dir>/checkpoints``."""
    resume: str = ""
    """Start from a checkpoint: "" (no), "auto" (the newest valid one in ``dir``; a fresh
    start when there is none) or the path of a checkpoint file. ``train --resume [PATH]``
    sets it."""

    def check(self) -> None:
        """How often and how many."""
        require(
            self.every >= 0,
            f"checkpoint.every={self.every} must be >= 0 (0 = only at repartition boundaries and the end)",
        )
        require(self.keep_last >= 1, f"checkpoint.keep_last={self.keep_last} must be >= 1")


@dataclass
class RunConfig:
    """Processes, files and limits."""

    output_dir: str = "runs/default"
    """Where metrics.jsonl, summary.json and partitions go."""
    timeout_s: float = 1800.0
    """Limit of one attempt of the job (its workers are killed past it); with
    launch.max_restarts = R the whole job is bounded by (R + 1) x timeout_s."""
    collective_timeout_s: float = 300.0
    """Bound on every collective (gloo timeout)."""
    peer_timeout_s: float = 30.0
    """A worker that stops answering for this long (stopped, hung, its machine frozen) is named in one
    line (rank and host) and the job stops (``launch.on_failure: continue`` across hosts: its part is
    taken over). On one machine every worker stamps a heartbeat from a thread of its own and the
    launcher watches them (raise it if a worker's single operations can hold Python's interpreter lock
    for longer). Across hosts each worker's reporter probes the other hosts over their network every
    peer_timeout_s / 5 seconds (0.2-2 s): a host no other host reached for this long is named
    unreachable. Keep it below ``collective_timeout_s``, which otherwise ends the job first, without
    naming anyone."""
    eval_timeout_s: float = 1800.0
    """Bound on the other workers' wait for rank 0's own work between epochs (the global
    evaluation on the whole graph, writing a checkpoint): a barrier on a group of its own."""
    num_threads: int = 0
    """Torch threads per worker; 0 = cores / workers (at least 1)."""
    progress: bool = True
    """Show a tqdm progress bar on rank 0."""
    device: Literal["cpu", "cuda"] = "cpu"
    """Where a worker trains: cpu (gloo), or cuda (the GPU of its LOCAL_RANK; NCCL all-reduces
    the gradients, gloo carries the small control collectives; needs a CUDA build of DGL)."""
    tensorboard: bool = False
    """Also log every epoch's scalars (those of metrics.jsonl) to TensorBoard event files in
    ``<output_dir>/tensorboard`` (rank 0; view with ``tensorboard --logdir <output_dir>``)."""
    floor: bool = False
    """Also measure the floor of every epoch in the same run (Grappa): the same steps with a
    no-op reducer (local compute only; model, optimizer and RNG restored afterwards, so
    training is unchanged) and the all-reduce of the same buckets alone. Roughly doubles
    the time per epoch; summary.json gets floor_epoch_s, allreduce_only_s, floor_s and
    epoch_over_floor."""

    def check(self) -> None:
        """The bounds, the thread count and an output folder."""
        require(self.timeout_s > 0, f"run.timeout_s={self.timeout_s} must be > 0")
        require(self.collective_timeout_s > 0, f"run.collective_timeout_s={self.collective_timeout_s} must be > 0")
        require(self.eval_timeout_s > 0, f"run.eval_timeout_s={self.eval_timeout_s} must be > 0")
        require(
            math.isfinite(self.peer_timeout_s) and self.peer_timeout_s >= 1,
            f"run.peer_timeout_s={self.peer_timeout_s} must be a number of seconds >= 1 (a heartbeat comes "
            "every few seconds), e.g. --run.peer_timeout_s=30",
        )
        require(self.num_threads >= 0, f"run.num_threads={self.num_threads} must be >= 0")
        require(bool(self.output_dir), "run.output_dir is empty; set --run.output_dir=<folder>")
