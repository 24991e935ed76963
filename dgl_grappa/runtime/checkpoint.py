"""Checkpoints: atomic files, verified loads that never run code, RNG states as plain tensors.

A checkpoint is two files in ``checkpoint.dir`` (default ``<run.output_dir>/checkpoints``):

* ``ckpt-e<epoch>.pt``: ``torch.save`` of a dict of tensors and plain containers only
  (model, optimizer, next epoch, step, scheduler and builder state, every rank's RNG
  states, records, the config fingerprint), so ``torch.load(weights_only=True)`` reads it
  and loading can never execute code from the file;
* ``ckpt-e<epoch>.json``: its metadata (epoch, size, sha256, fingerprint), written last.

The commit protocol (:meth:`CheckpointStore.save`): the .pt goes to a temporary file in
the same folder, is fsynced and renamed into place, then the same for the .json, then the
folder is fsynced. A checkpoint counts only once its .json exists and the .pt matches its
size and sha256, so a writer killed at any moment leaves the previous checkpoints intact
and loadable; only then are checkpoints beyond ``checkpoint.keep_last`` removed. Loading
falls back from a corrupt newest checkpoint to the previous one, with a log line.

RNG states (:func:`rng_state`): torch's CPU generator (a uint8 tensor), numpy's global
MT19937 as its pieces (key as a tensor, position, Gaussian cache), Python's ``random`` as
lists, and CUDA's generators when CUDA is in use. DGL's sampling RNG needs no state: the
samplers reseed it at every epoch from (seed, epoch), see :mod:`dgl_grappa.method.sampler`.

Example:
    >>> store = CheckpointStore(checkpoint_dir(cfg), keep_last=2)          # doctest: +SKIP
    >>> store.save({"model": model.state_dict(), ...}, epoch=3, fp=fingerprint(cfg))  # doctest: +SKIP
    >>> path, meta = store.newest_valid(fingerprint(cfg))                   # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import io
import json
import logging
import os
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..cluster import faults
from ..config import Config, ConfigError, config_changes
from ..data.common import hold_out_of

log = logging.getLogger("dgl_grappa")

FORMAT = 1
"""Version of the checkpoint layout (stored in every checkpoint)."""

_NAME = re.compile(r"ckpt-e(\d+)\.pt")


class CheckpointError(ConfigError):
    """A checkpoint cannot be used or written (wrong model, corrupt, disk full): one line, no restart."""


# ---------------------------------------------------------------------------------------
# What a checkpoint must match
# ---------------------------------------------------------------------------------------


def fingerprint(cfg: Config) -> dict[str, Any]:
    """The settings a checkpoint must agree with to be resumed: model, data, partitioning, optimizer, schedule.

    Settings that may change between a run and its resumption on purpose (epochs, lr,
    evaluation, checkpointing, limits, paths such as ``data.root``) are left out.

    Returns:
        A flat ``{"model.hidden": 64, ...}`` dict of plain values.
    """
    data = dataclasses.asdict(cfg.data)
    data.pop("root")
    part = dataclasses.asdict(cfg.partition)
    part.pop("out_dir")
    fp: dict[str, Any] = {}
    for prefix, section in (("model", dataclasses.asdict(cfg.model)), ("data", data), ("partition", part)):
        _flatten(prefix, section, fp)
    if cfg.data.name == "dgl":
        try:
            fp["data.file_bytes"] = os.path.getsize(cfg.data.path)
        except OSError:
            pass
    fp["train.optimizer"] = cfg.train.optimizer
    fp["train.mode"] = cfg.train.mode
    fp["train.halo"] = cfg.train.halo
    fp["train.task"] = cfg.train.task
    held = hold_out_of(cfg)
    if held is not None:
        # the held-out split decides what a run trains on (link prediction: edges): another would train on test data
        for key, value in held.settings.items():
            fp[f"{held.section}.{key}"] = value
    fp["schedule.k"] = cfg.schedule.k
    if cfg.schedule.k > 0:
        fp["schedule.method"] = cfg.schedule.method
        fp["schedule.seed"] = cfg.schedule.seed
    return fp


def _flatten(prefix: str, obj: Any, out: dict) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(f"{prefix}.{k}", v, out)
    else:
        out[prefix] = list(obj) if isinstance(obj, tuple) else obj


def fingerprint_problem(stored: dict, current: dict) -> str | None:
    """The first setting that differs, as "key: there -> here", or None when they agree.

    A setting added to the code after the checkpoint was written counts at its default
    (:func:`dgl_grappa.config.config_changes`): such a checkpoint still resumes under it.
    """
    changes = config_changes(stored, current, fingerprint(Config()))
    return changes[0] if changes else None


def check_fingerprint(stored: dict | None, cfg_fp: dict, path: Path) -> None:
    """Raise :class:`CheckpointError` (one line) when checkpoint ``path`` was written for other settings."""
    why = fingerprint_problem(stored or {}, cfg_fp)
    if why is not None:
        raise CheckpointError(
            f"checkpoint {path} belongs to another model or graph ({why}); resume with the "
            "settings it was written with, or start afresh without --resume"
        )


# ---------------------------------------------------------------------------------------
# RNG states as tensors and plain containers
# ---------------------------------------------------------------------------------------


def rng_state() -> dict:
    """This process's RNG states in a form ``torch.load(weights_only=True)`` accepts."""
    name, key, pos, has_gauss, gauss = np.random.get_state()
    version, py_state, py_gauss = random.getstate()
    out = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "name": name,
            "key": torch.from_numpy(key.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(gauss),
        },
        "python": {"version": version, "state": list(py_state), "gauss_next": py_gauss},
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out


def set_rng_state(state: dict) -> None:
    """Restore what :func:`rng_state` returned."""
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state((n["name"], n["key"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"]))
    p = state["python"]
    random.setstate((p["version"], tuple(p["state"]), p["gauss_next"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def to_plain(obj: Any) -> Any:
    """Numpy scalars and arrays -> Python numbers and tensors, recursively (weights_only-safe)."""
    if isinstance(obj, dict):
        return {k: to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_plain(v) for v in obj)
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(obj.copy())
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    return obj


# ---------------------------------------------------------------------------------------
# Atomic files
# ---------------------------------------------------------------------------------------


def fsync_dir(path: Path) -> None:
    """fsync a folder, so that a rename inside it is on disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, view: memoryview) -> None:
    done = 0
    while done < len(view):
        done += os.write(fd, view[done:])


def atomic_write(path: Path, data: bytes, fault_epoch: int | None = None) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file, fsync, rename, fsync of the folder.

    Readers see the old file or the new one, never a part. On an error (disk full, ...)
    the temporary file is removed and ``path`` is untouched.

    Args:
        fault_epoch: the checkpoint's epoch, for the ``checkpoint`` fault point (tests).
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            half = len(view) // 2
            _write_all(fd, view[:half])
            if fault_epoch is not None:
                faults.hit("checkpoint", epoch=fault_epoch)  # tests: the writer is killed half-way
            _write_all(fd, view[half:])
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    fsync_dir(path.parent)


# ---------------------------------------------------------------------------------------
# The store
# ---------------------------------------------------------------------------------------


def checkpoint_dir(cfg: Config, out_dir: str | Path | None = None) -> Path:
    """``checkpoint.dir``, or ``<out_dir or run.output_dir>/checkpoints``."""
    if cfg.checkpoint.dir:
        return Path(cfg.checkpoint.dir)
    return Path(out_dir if out_dir is not None else cfg.run.output_dir) / "checkpoints"


def checkpoint_due(cfg: Config, epoch: int, last: int | None = None) -> bool:
    """Whether a checkpoint follows ``epoch``: every ``checkpoint.every`` epochs, before a
    repartition boundary and after the last epoch (``last``, default ``train.epochs``).

    Example:
        >>> from dgl_grappa.config import Config
        >>> checkpoint_due(Config(), epoch=0, last=1)
        True
    """
    nxt = epoch + 1
    every = cfg.checkpoint.every
    boundary = cfg.schedule.k > 0 and nxt % cfg.schedule.k == 0
    return nxt == (cfg.train.epochs if last is None else last) or boundary or (every > 0 and nxt % every == 0)


@dataclass(frozen=True)
class ResumePoint:
    """A checkpoint chosen to resume from.

    Attributes:
        path: the .pt file.
        epoch: the next epoch to train.
        step: training steps taken before it.
    """

    path: str
    epoch: int
    step: int = 0


class CheckpointStore:
    """The checkpoints of one run, in one folder (see the module docstring).

    Args:
        root: the folder (created on the first save).
        keep_last: complete checkpoints kept.
    """

    def __init__(self, root: str | Path, keep_last: int = 2):
        self.root = Path(root)
        self.keep_last = keep_last

    @staticmethod
    def pt_path(root: Path, epoch: int) -> Path:
        return root / f"ckpt-e{epoch:06d}.pt"

    def entries(self) -> list[tuple[int, Path]]:
        """Every ``ckpt-e*.pt`` in the folder (complete or not), newest (highest epoch) first."""
        if not self.root.is_dir():
            return []
        out = []
        for p in self.root.iterdir():
            m = _NAME.fullmatch(p.name)
            if m:
                out.append((int(m.group(1)), p))
        return sorted(out, reverse=True)

    def save(self, state: dict, epoch: int, fp: dict, step: int = 0) -> Path:
        """Write one checkpoint (atomically, then prune); returns its path.

        Checkpoints with a higher epoch than this one belong to a trajectory that was
        abandoned (a resume from an older checkpoint) and are removed first.

        Raises:
            CheckpointError: the folder cannot be written (disk full, read-only, ...); the
                checkpoints that were there before are untouched.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        for stale in self.root.glob(".ckpt-e*.tmp-*"):  # left by a writer that was killed
            stale.unlink(missing_ok=True)
        for e, p in self.entries():
            if e > epoch:
                self._remove(p)
        payload = dict(to_plain(state), format=FORMAT, epoch=epoch, step=step, fingerprint=fp)
        buf = io.BytesIO()
        torch.save(payload, buf)
        data = buf.getvalue()
        pt = self.pt_path(self.root, epoch)
        meta = {
            "format": FORMAT,
            "epoch": epoch,
            "step": step,
            "file": pt.name,
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "fingerprint": fp,
            "written_at": time.time(),
        }
        try:
            pt.with_suffix(".json").unlink(missing_ok=True)  # an older copy of this epoch no longer counts
            atomic_write(pt, data, fault_epoch=epoch)
            atomic_write(pt.with_suffix(".json"), json.dumps(meta, indent=1).encode())
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                why = "the disk is full"
            elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                why = "the folder is not writable"
            else:
                why = exc.strerror or str(exc)
            prev = self.entries()
            kept = f"; the previous checkpoint {prev[0][1]} is intact" if prev else ""
            raise CheckpointError(
                f"writing checkpoint {pt} ({len(data)} bytes) failed: {why}{kept}; free space or "
                "set --checkpoint.dir=<a folder with room>"
            ) from None
        self.prune()
        return pt

    def prune(self) -> list[Path]:
        """Remove complete checkpoints beyond the newest ``keep_last`` (and incomplete ones older than those)."""
        complete = [(e, p) for e, p in self.entries() if p.with_suffix(".json").is_file()]
        keep = {p for _, p in complete[: self.keep_last]}
        oldest_kept = min((e for e, p in complete if p in keep), default=None)
        gone = []
        for e, p in self.entries():
            if p in keep:
                continue
            if p.with_suffix(".json").is_file() or (oldest_kept is not None and e < oldest_kept):
                self._remove(p)
                gone.append(p)
        return gone

    @staticmethod
    def _remove(pt: Path) -> None:
        pt.with_suffix(".json").unlink(missing_ok=True)  # metadata first: the checkpoint stops counting
        pt.unlink(missing_ok=True)

    def clear(self) -> int:
        """Remove every checkpoint in the folder (a fresh run); returns how many there were."""
        n = 0
        for _, p in self.entries():
            self._remove(p)
            n += 1
        return n

    def verify(self, pt: Path) -> tuple[dict | None, str | None]:
        """(metadata, None) when ``pt`` is complete and intact, else (None, why not)."""
        meta_path = pt.with_suffix(".json")
        if not meta_path.is_file():
            return None, "it has no metadata file (its write did not finish)"
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            return None, f"its metadata {meta_path.name} is unreadable"
        try:
            data = pt.read_bytes()
        except OSError as exc:
            return None, f"it cannot be read ({exc.strerror})"
        if len(data) != meta.get("bytes"):
            return None, f"it is {len(data)} bytes, {meta.get('bytes')} were written (truncated?)"
        if hashlib.sha256(data).hexdigest() != meta.get("sha256"):
            return None, "its sha256 does not match the one recorded at writing"
        return meta, None

    def newest_valid(self, fp: dict | None = None) -> ResumePoint | None:
        """The newest complete, intact checkpoint (falling back past corrupt ones, with a log line).

        Args:
            fp: the current fingerprint; a checkpoint written for other settings raises.

        Returns:
            A :class:`ResumePoint`, or None when the folder holds no usable checkpoint.

        Raises:
            CheckpointError: the newest intact checkpoint belongs to another model, or the
                folder holds checkpoints but none of them is intact.
        """
        entries = self.entries()
        bad = []
        for epoch, pt in entries:
            meta, why = self.verify(pt)
            if meta is None:
                log.warning("checkpoint %s is not usable: %s; falling back to the previous one", pt, why)
                bad.append(pt.name)
                continue
            if fp is not None:
                check_fingerprint(meta.get("fingerprint"), fp, pt)
            return ResumePoint(str(pt), int(meta["epoch"]), int(meta.get("step", 0)))
        if bad and any(p.with_suffix(".json").is_file() for _, p in entries):
            raise CheckpointError(
                f"no intact checkpoint in {self.root} (broken: {', '.join(bad)}); remove them and "
                "start afresh, or resume from a copy with --resume=<file>"
            )
        return None


def load_checkpoint(path: str | Path, fp: dict | None = None) -> dict:
    """Read and check one checkpoint file: never runs code from it (``weights_only=True``).

    Args:
        path: the .pt file (its .json, when present, must match it).
        fp: the current fingerprint (None: not checked).

    Returns:
        The checkpoint dict.

    Raises:
        CheckpointError: missing, corrupt, not a checkpoint, or of another model (one line).
    """
    pt = Path(path)
    if not pt.is_file():
        raise CheckpointError(f"checkpoint {pt} does not exist; pass an existing file to --resume, or --resume=auto")
    if pt.with_suffix(".json").is_file():
        meta, why = CheckpointStore(pt.parent).verify(pt)
        if meta is None:
            raise CheckpointError(
                f"checkpoint {pt} is corrupt: {why}; resume from an older one (--resume=auto "
                "falls back by itself) or start afresh"
            )
    try:
        data = pt.read_bytes()
        ck = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any failure to parse is a corrupt file
        if "Weights only load failed" in str(exc):
            raise CheckpointError(
                f"checkpoint {pt} holds objects other than tensors and plain containers, and "
                "loading it could run code, so it is refused; resume from a file written by "
                "dgl_grappa"
            ) from None
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(
            f"checkpoint {pt} is corrupt or not a checkpoint ({first}); resume from another file or start afresh"
        ) from None
    if not isinstance(ck, dict) or ck.get("format") != FORMAT or "model" not in ck:
        raise CheckpointError(
            f"{pt} is not a dgl_grappa checkpoint (format {FORMAT}); resume from a file written by dgl_grappa"
        )
    if fp is not None:
        check_fingerprint(ck.get("fingerprint"), fp, pt)
    return ck


def resolve_resume(cfg: Config, resume: str | None = None, out_dir: str | Path | None = None) -> ResumePoint | None:
    """Where a run starts: the checkpoint ``resume`` names (default ``checkpoint.resume``), or None (fresh).

    Args:
        cfg: the run's config (its fingerprint is checked against the checkpoint).
        resume: "" (fresh start), "auto" (the newest intact checkpoint of the run's folder; when
            there is none, the file ``checkpoint.resume`` names if it names one, else a fresh start:
            a worker that torchrun or the multi-host launcher starts resumes "auto", so a job told
            to resume from a file starts from it and its restarts from the job's own newest) or a
            checkpoint file.
        out_dir: the run's output folder (default ``run.output_dir``).

    Raises:
        CheckpointError: the named file is missing, corrupt or of another model; or, with
            "auto", the folder holds checkpoints of another model or only broken ones.
    """
    resume = cfg.checkpoint.resume if resume is None else resume
    if not resume:
        return None
    fp = fingerprint(cfg)
    if resume == "auto":
        own = CheckpointStore(checkpoint_dir(cfg, out_dir), cfg.checkpoint.keep_last).newest_valid(fp)
        if own is not None or cfg.checkpoint.resume in ("", "auto"):
            return own
        resume = cfg.checkpoint.resume
    ck = load_checkpoint(resume, fp)
    return ResumePoint(str(Path(resume)), int(ck["epoch"]), int(ck.get("step", 0)))
