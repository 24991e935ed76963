"""Checkpoints as collectives: every rank agrees on what was written and on what to resume from.

Both runtimes use the same protocol; the files themselves are :mod:`dgl_grappa.runtime.checkpoint`.

* **Save** (:func:`save_on_rank0`): every rank's RNG states and records (and its own shard of
  state, e.g. its embedding rows and their sparse optimizer's state) are gathered to rank
  0, which writes the checkpoint; the others wait for the outcome on the group bounded by
  ``run.eval_timeout_s`` (``wait``: the evaluator's ``wait_for_rank0``), so a write that
  fails (disk full, ...) raises :class:`~dgl_grappa.runtime.checkpoint.CheckpointError` on
  every rank at once.
* **Resume** (:func:`agree_resume`): rank 0 picks the checkpoint (the newest intact one for
  ``resume="auto"``, with a log line for every corrupt one it passes) and tells the others;
  every rank then reads that file (:func:`load_everywhere`), and a rank that cannot read it
  (storage not shared) gets its bytes from rank 0.

``wait`` is any callable with the evaluator's ``wait_for_rank0(obj=None)`` contract: every
rank calls it, and it returns rank 0's ``obj`` on every rank.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

from ..config import Config
from .checkpoint import (
    CheckpointError,
    CheckpointStore,
    checkpoint_dir,
    load_checkpoint,
    resolve_resume,
    rng_state,
)

log = logging.getLogger("dgl_grappa")


def save_on_rank0(
    store: CheckpointStore,
    state: Callable[[list], dict],
    records: list[dict],
    epoch: int,
    fp: dict,
    step: int,
    wait: Callable,
    shard: dict | None = None,
) -> str:
    """Write a checkpoint (a collective; rank 0 writes); its path, on every rank.

    Args:
        store: the run's checkpoint folder.
        state: called on rank 0 only, with every rank's ``{"rng", "records"}`` (and ``"shard"``)
            in rank order; returns what the checkpoint holds (model, optimizer, ..., those states).
        records: this rank's epoch records.
        epoch: the next epoch to train (the checkpoint's epoch).
        fp: the config's fingerprint.
        step: training steps taken so far.
        wait: the bounded wait for rank 0 (see the module docstring).
        shard: this rank's own state (tensors and plain containers), stored as its ``"shard"``:
            what only this rank holds, such as its embedding rows (``model.embed``).

    Raises:
        CheckpointError: on every rank, when rank 0 could not write it.

    Example:
        >>> save_on_rank0(store, lambda ranks: dict(trainer.state_dict(), ranks=ranks), records,   # doctest: +SKIP
        ...               epoch=3, fp=fingerprint(cfg), step=120, wait=evaluator.wait_for_rank0)
        '/runs/x/checkpoints/ckpt-e000003.pt'
    """
    main = dist.get_rank() == 0
    mine = {"rng": rng_state(), "records": records}
    if shard is not None:
        mine["shard"] = shard
    gathered = [None] * dist.get_world_size() if main else None
    dist.gather_object(mine, gathered, dst=0)
    outcome = None
    if main:
        try:
            outcome = ("ok", str(store.save(state(gathered), epoch, fp, step)))
        except CheckpointError as exc:
            outcome = ("error", str(exc))
    status, body = wait(outcome)
    if status != "ok":
        raise CheckpointError(body)
    return body


def load_everywhere(path: str, fp: dict | None) -> dict:
    """Every rank: checkpoint ``path`` (a collective); a rank that cannot read it gets rank 0's bytes.

    Raises:
        CheckpointError: rank 0 cannot read it either (or another rank's copy is unusable).
    """
    ck, why = None, None
    try:
        ck = load_checkpoint(path, fp)
    except CheckpointError as exc:
        why = str(exc)
    ok = torch.tensor([0 if ck is None else 1])
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    if int(ok[0]) == 0:  # somebody cannot read the file: rank 0 sends it
        main = dist.get_rank() == 0
        if main and ck is None:
            raise CheckpointError(why)
        data = [Path(path).read_bytes() if main else None]
        dist.broadcast_object_list(data, src=0)
        if ck is None:
            ck = torch.load(io.BytesIO(data[0]), map_location="cpu", weights_only=True)
    return ck


def agree_resume(cfg: Config, resume: str, out_dir: str | Path, fp: dict, wait: Callable) -> tuple[dict, str] | None:
    """Every rank: the checkpoint to resume from, and its path (rank 0 chooses); None for a fresh start.

    Args:
        cfg: the run's config.
        resume: "" (fresh), "auto" (the newest intact checkpoint of the run; fresh when there
            is none) or a checkpoint file; the same on every rank.
        out_dir: the run's output folder (its checkpoint folder by default).
        fp: the config's fingerprint.
        wait: the bounded wait for rank 0 (see the module docstring).

    Raises:
        CheckpointError: on every rank, when rank 0 finds no usable checkpoint where one was named.

    Example:
        >>> agreed = agree_resume(cfg, "auto", out_dir, fingerprint(cfg), evaluator.wait_for_rank0)  # doctest: +SKIP
        >>> ck, path = agreed if agreed is not None else (None, None)                                 # doctest: +SKIP
    """
    main = dist.get_rank() == 0
    choice = None
    if main and resume:  # reads and hashes files: the others wait on the bounded group
        try:
            point = resolve_resume(cfg, resume, out_dir)
            choice = ("ok", point.path if point is not None else None)
        except CheckpointError as exc:
            choice = ("error", str(exc))
    choice = wait(choice)
    if choice is None:
        return None
    status, path = choice
    if status != "ok":
        raise CheckpointError(path)
    if path is None:
        if main:
            log.info("resume=auto: no checkpoint in %s; starting from epoch 0", checkpoint_dir(cfg, out_dir))
        return None
    return load_everywhere(path, fp), path
