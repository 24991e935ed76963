"""Who trains when a machine is lost: the generations of a job's process group, as files.

A gloo group cannot shrink or grow in place, so a job that keeps training after losing a
worker (``launch.on_failure: continue``) forms a new group: generation 1, 2, ... with the same
ranks, one of them now a new worker that loaded the lost part's files on a surviving host.
The launcher decides each generation and writes it as ``<run.output_dir>/membership/gen-<g>.json``
(through a temporary file, so a reader never sees half of one); the survivors wait for it,
bounded, and every member joins the group it names (:func:`join_generation`). A file rather
than a socket: the launcher may sit outside every host's network (test hosts), while the
output folder is on storage every host shares, as the rest of the job already assumes.

Example:
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> g = Generation(1, "10.0.0.3", 29501, lost=[2], joined=[{"rank": 2, "host": 3}], reason="worker 2 was killed")
    >>> write_generation(d, g)
    >>> wait_generation(d, after=0, timeout_s=1.0).joined
    [{'rank': 2, 'host': 3}]
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("dgl_grappa")

FOLDER = "membership"
"""The generations' folder inside ``run.output_dir``."""


@dataclass(frozen=True)
class Generation:
    """One process group of a job: its number, its rendezvous, and what changed since the one before.

    Attributes:
        gen: 0 for the group the job started with, then 1, 2, ...
        master_addr: the address of rank 0's host (rank 0 hosts the rendezvous).
        master_port: the rendezvous port of this generation (a new one each time).
        lost: the ranks whose workers were lost before this generation.
        joined: ``{"rank", "host"}`` of the workers started for them (the host that took the part over).
        reason: one line, e.g. "worker 2 (host 2) was killed by SIGKILL".
        detected_s: seconds since the job's start when the launcher saw the loss.
    """

    gen: int
    master_addr: str
    master_port: int
    lost: list = field(default_factory=list)
    joined: list = field(default_factory=list)
    reason: str = ""
    detected_s: float = 0.0


def membership_dir(out_dir: str | Path) -> Path:
    """Where a job's generations are written."""
    return Path(out_dir) / FOLDER


def _path(folder: str | Path, gen: int) -> Path:
    return Path(folder) / f"gen-{gen}.json"


def write_generation(folder: str | Path, g: Generation) -> None:
    """Write generation ``g`` (atomically: a reader sees all of it or none)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".gen-{g.gen}.json.tmp"
    tmp.write_text(json.dumps(dataclasses.asdict(g)))
    os.replace(tmp, _path(folder, g.gen))


def read_generation(folder: str | Path, gen: int) -> Generation | None:
    """Generation ``gen`` if it was written, else None."""
    try:
        return Generation(**json.loads(_path(folder, gen).read_text()))
    except FileNotFoundError:
        return None


def clear_generations(folder: str | Path) -> None:
    """Remove an earlier run's generations (a new job starts at generation 0)."""
    folder = Path(folder)
    if folder.is_dir():
        for p in folder.glob("gen-*.json"):
            p.unlink(missing_ok=True)


def wait_generation(folder: str | Path, after: int, timeout_s: float, poll_s: float = 0.1) -> Generation | None:
    """The first generation newer than ``after``, waiting at most ``timeout_s`` for the launcher to write it.

    Returns:
        The newest written generation above ``after`` (a second loss may already have followed the
        first), or None when none came in time.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        newest = None
        g = after + 1
        while (found := read_generation(folder, g)) is not None:
            newest, g = found, g + 1
        if newest is not None:
            return newest
        if time.monotonic() > deadline:
            return None
        time.sleep(poll_s)


def join_generation(g: Generation, rank: int, world_size: int, timeout_s: float, backend: str = "gloo") -> None:
    """Join generation ``g``'s process group (the default group) as ``rank`` of ``world_size``.

    Every collective of the group is bounded by ``timeout_s``, as the first generation's.
    """
    import torch.distributed as dist  # deferred: the launcher reads generations without torch.distributed

    dist.init_process_group(backend, init_method=f"tcp://{g.master_addr}:{g.master_port}", rank=rank,
                            world_size=world_size, timeout=datetime.timedelta(seconds=timeout_s))


# ---------------------------------------------------------------------------------------
# Heartbeats across hosts: a file per rank on the shared storage
# ---------------------------------------------------------------------------------------

def beat_every(peer_timeout_s: float) -> float:
    """Seconds between two heartbeats for a bound of ``peer_timeout_s`` (several beats per bound)."""
    return max(0.2, min(2.0, peer_timeout_s / 5))


def start_beating(folder: str | Path, rank: int, every_s: float) -> None:
    """Stamp ``<folder>/beat-<rank>`` every ``every_s`` seconds from a daemon thread of this worker.

    A thread of its own: a worker that is stopped (SIGSTOP) or whose machine freezes stops
    stamping; one busy in a long step does not.
    """
    import threading

    path = Path(folder) / f"beat-{rank}"
    path.parent.mkdir(parents=True, exist_ok=True)

    def beat() -> None:
        n = 0
        while True:
            n += 1
            path.write_text(str(n))  # the content changes at every beat: no reliance on mtime resolution
            time.sleep(every_s)

    threading.Thread(target=beat, name="dgl_grappa-heartbeat", daemon=True).start()


class BeatWatch:
    """The launcher's view of the workers' heartbeat files: which live one stopped beating for ``timeout_s``.

    A beat counts when the launcher sees the file change, on the launcher's own clock (hosts' clocks
    may differ); before a worker's first beat (its start-up) nothing is judged.
    """

    def __init__(self, folder: str | Path, n: int, timeout_s: float):
        self.folder, self.timeout_s = Path(folder), timeout_s
        self.seen: list[str | None] = [None] * n
        self.changed = [time.monotonic()] * n

    def reset(self, rank: int) -> None:
        """A new worker for ``rank``: its predecessor's beats no longer count."""
        self.seen[rank], self.changed[rank] = None, time.monotonic()
        (self.folder / f"beat-{rank}").unlink(missing_ok=True)

    def stalled(self, alive: list[bool]) -> tuple[int, float] | None:
        """(rank, seconds without a beat) of the first live worker that stopped beating, else None."""
        now = time.monotonic()
        for r, live in enumerate(alive):
            try:
                beat = (self.folder / f"beat-{r}").read_text()
            except OSError:
                beat = None
            if beat != self.seen[r]:
                self.seen[r], self.changed[r] = beat, now
            elif live and beat is not None and now - self.changed[r] > self.timeout_s:
                return r, now - self.changed[r]
        return None
