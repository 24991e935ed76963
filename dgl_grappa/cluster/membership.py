"""Who trains when machines are lost: the generations of a job's process group, as files.

A gloo group cannot shrink or grow in place, so a job that keeps training after losing workers
(``launch.on_failure: continue``) forms a new group: generation 1, 2, ... with the same ranks,
the lost ones now new workers that loaded the lost parts' files on surviving hosts. The
launcher decides each generation and writes it as ``<run.output_dir>/membership/gen-<g>.json``
(through a temporary file, so a reader never sees half of one). Losses the launcher sees close
together (a switch, a power feed, a host with several workers) are one generation, never one
each; a loss while a generation is still forming is the next generation, which everyone
forming the earlier one follows (:func:`rendezvous` gives a generation up as soon as a newer
one is written). A file rather than a socket: the launcher may sit outside every host's
network (test hosts), while the output folder is on storage every host shares, as the rest of
the job already assumes.

A worker replaced in a generation is *fenced*: when it learns of that generation (at once on
storage outside the network, or when its host comes back), it stops and writes nothing
(:func:`fenced_by`).

Example:
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> g = Generation(1, "10.0.0.3", 29501, lost=[2], joined=[{"rank": 2, "host": 3}], reason="worker 2 was killed")
    >>> write_generation(d, g)
    >>> wait_generation(d, after=0, timeout_s=1.0).joined
    [{'rank': 2, 'host': 3}]
    >>> fenced_by(d, rank=2, since=0).gen, fenced_by(d, rank=2, since=1)
    (1, None)
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("dgl_grappa")

FOLDER = "membership"
"""The generations' folder inside ``run.output_dir``."""
_CONNECT_S = 5.0
"""Bound on one try to reach a generation's rendezvous (then a newer generation is looked for)."""


class Entered:
    """The newest generation this process entered (began to join) or left behind; one per process.

    A worker's liveness thread (:class:`~dgl_grappa.cluster.liveness.Beacon`) breaks the worker out
    of a group a newer generation replaced by cutting its connections; under this lock it can never
    cut the connections of a generation the worker is already joining.
    """

    lock = threading.Lock()
    gen = 0

    @classmethod
    def enter(cls, gen: int) -> None:
        with cls.lock:
            cls.gen = max(cls.gen, gen)


@dataclass(frozen=True)
class Generation:
    """One process group of a job: its number, its rendezvous, and what changed since the one before.

    Attributes:
        gen: 0 for the group the job started with, then 1, 2, ...
        master_addr: the address of rank 0's host (rank 0 hosts the rendezvous).
        master_port: the rendezvous port of this generation (a new one each time).
        lost: the ranks whose workers were lost before this generation (every loss the launcher
            saw within one join window).
        joined: ``{"rank", "host"}`` of the workers started for them (the host that took the part over).
        reason: one line, e.g. "worker 2 on host 2 was lost (SIGKILL)".
        detected_s: seconds since the job's start when the launcher saw the (first) loss.
        unreachable: the addresses of hosts judged unreachable: a survivor cuts its connections to
            them (a collective waiting on such a host would otherwise wait for its whole timeout).
    """

    gen: int
    master_addr: str
    master_port: int
    lost: list = field(default_factory=list)
    joined: list = field(default_factory=list)
    reason: str = ""
    detected_s: float = 0.0
    unreachable: list = field(default_factory=list)


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
        for p in [*folder.glob("gen-*.json"), folder / PENDING, folder / FORMED]:
            p.unlink(missing_ok=True)


FORMED = "formed"
"""Written by rank 0 once the job's first group has formed and its workers are set up: from then on a loss
is taken over; before it there is no state to hand over, and every worker starts again."""


def mark_formed(folder: str | Path) -> None:
    """The first group formed (rank 0, at the end of its set-up)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / FORMED).touch()


def is_formed(folder: str | Path) -> bool:
    """Whether :func:`mark_formed` was called for this run."""
    return (Path(folder) / FORMED).exists()


PENDING = "pending.json"
"""The generation the launcher is forming (its losses so far), written at the first loss of a change."""


def write_pending(folder: str | Path, gen: int, lost: list[int]) -> None:
    """Say that generation ``gen`` is coming and which ranks it replaces (before its join window ends).

    The workers act on it at once: the group it replaces is over (they cut its connections), and a
    worker it names stops (its host was judged lost and may come back before the generation is written).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{PENDING}.tmp"
    tmp.write_text(json.dumps({"gen": gen, "lost": sorted(lost)}))
    os.replace(tmp, folder / PENDING)


def read_pending(folder: str | Path) -> dict | None:
    """``{"gen", "lost"}`` of the generation being formed, or None."""
    try:
        return json.loads((Path(folder) / PENDING).read_text())
    except (OSError, ValueError):
        return None


def clear_pending(folder: str | Path) -> None:
    """The generation was written (or the job restarts): nothing is pending."""
    (Path(folder) / PENDING).unlink(missing_ok=True)


def newer_generations(folder: str | Path, after: int) -> list[Generation]:
    """Every written generation above ``after``, oldest first."""
    out, g = [], after + 1
    while (found := read_generation(folder, g)) is not None:
        out.append(found)
        g += 1
    return out


def newest_generation(folder: str | Path, after: int) -> Generation | None:
    """The newest written generation above ``after``, or None."""
    found = newer_generations(folder, after)
    return found[-1] if found else None


def wait_generation(folder: str | Path, after: int, timeout_s: float, poll_s: float = 0.1) -> Generation | None:
    """The newest generation above ``after``, waiting at most ``timeout_s`` for the launcher to write one.

    Returns:
        The newest written generation above ``after`` (a second change may already have followed the
        first), or None when none came in time.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        newest = newest_generation(folder, after)
        if newest is not None or time.monotonic() > deadline:
            return newest
        time.sleep(poll_s)


def fenced_by(folder: str | Path, rank: int, since: int) -> Generation | None:
    """The generation after ``since`` that replaced ``rank`` (this worker is stale: it must stop), or None.

    ``since`` is the generation the worker was started for (0 for the job's first workers): a
    generation that names ``rank`` lost after that lost *this* worker; so does one being formed
    (:func:`write_pending`), returned as a Generation without a rendezvous.
    """
    for g in newer_generations(folder, since):
        if rank in g.lost:
            return g
    pending = read_pending(folder)
    if pending is not None and pending["gen"] > since and rank in pending["lost"]:
        return Generation(pending["gen"], "", 0, lost=pending["lost"], reason="being formed")
    return None


def folded_change(gens: list[Generation]) -> dict:
    """The one change of membership that generations ``gens`` (oldest first) made together.

    A generation given up while it formed (a further loss came first) is part of the change of the
    one that formed: its lost ranks count, and of the workers started for a rank the last one.

    Example:
        >>> a = Generation(1, "h", 1, lost=[2], joined=[{"rank": 2, "host": 3}], reason="worker 2 was lost")
        >>> b = Generation(2, "h", 2, lost=[2, 1], joined=[{"rank": 2, "host": 0}, {"rank": 1, "host": 0}],
        ...                reason="worker 2 on host 3 was lost; worker 1 was lost")
        >>> c = folded_change([a, b])
        >>> c["lost"], c["joined"], c["folded"]
        ([1, 2], [{'rank': 1, 'host': 0}, {'rank': 2, 'host': 0}], [1])
    """
    lost: set = set()
    joined: dict = {}
    reasons: list[str] = []
    unreachable: list = []
    for g in gens:
        lost.update(g.lost)
        joined.update({j["rank"]: j for j in g.joined})
        reasons += [r for r in g.reason.split("; ") if r and r not in reasons]
        unreachable += [a for a in g.unreachable if a not in unreachable]
    return {
        "gen": gens[-1].gen,
        "lost": sorted(lost),
        "joined": [joined[r] for r in sorted(joined)],
        "reason": "; ".join(reasons),
        "folded": [g.gen for g in gens[:-1]],
        "unreachable": unreachable,
    }


def rendezvous(
    folder: str | Path,
    g: Generation,
    rank: int,
    world_size: int,
    timeout_s: float,
    backend: str = "gloo",
    poll_s: float = 0.05,
    form_s: float | None = None,
) -> Generation:
    """Join generation ``g``'s process group (the default group) as ``rank`` of ``world_size``, or a newer one.

    Every member counts itself in at the generation's store (on rank 0's host); the group is made
    once all ``world_size`` are in. While it waits, a member looks for a newer generation (a further
    loss: one of this generation's members will never come) and moves to it, so no member waits in a
    generation the others left. A member that is merely slow (a new worker still loading its part on a
    busy host) is waited for: one that is lost is the launcher's to judge, and its judgement is a newer
    generation. Every collective of the group is bounded by ``timeout_s``; the wait for a generation
    to form by ``form_s`` (default ``timeout_s``; the launcher passes the job's own bound).

    A member lost while the group connects (after every member counted itself in) breaks that generation
    for the others too: they wait for the launcher's next one.

    Returns:
        The generation whose group this process joined.

    Raises:
        RuntimeError: no generation formed within ``form_s``.
    """
    import torch.distributed as dist  # deferred: the launcher reads generations without torch.distributed

    form_s = timeout_s if form_s is None else form_s
    deadline = time.monotonic() + form_s
    bound = datetime.timedelta(seconds=timeout_s)
    while True:
        newer = newest_generation(folder, g.gen)
        if newer is not None:  # each generation has the whole bound to form
            g, deadline = newer, time.monotonic() + form_s
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"generation {g.gen} did not form within {form_s:.0f} s: its members did not all arrive")
        Entered.enter(g.gen)
        if rank != 0 and not _listening(g.master_addr, g.master_port):
            time.sleep(poll_s * 4)  # not up yet (rank 0 still starting) or gone: look again, quietly
            continue
        try:
            store = dist.TCPStore(
                g.master_addr,
                g.master_port,
                is_master=rank == 0,
                wait_for_workers=False,
                timeout=datetime.timedelta(seconds=min(_CONNECT_S, timeout_s, max(left, 0.1))),
            )
            key = f"arrived/{g.gen}"
            store.add(key, 1)
            while int(store.add(key, 0)) < world_size:
                if newest_generation(folder, g.gen) is not None or time.monotonic() > deadline:
                    store = None
                    break
                time.sleep(poll_s)
        except RuntimeError as exc:  # its rendezvous is not (yet, or any more) reachable
            log.debug("generation %d's rendezvous %s:%d: %s", g.gen, g.master_addr, g.master_port, exc)
            store = None
            time.sleep(min(poll_s * 10, max(0.0, deadline - time.monotonic())))
        if store is None:
            continue
        store.set_timeout(bound)
        try:
            dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=bound)
        except RuntimeError as exc:  # a member lost while the group connected: the launcher writes the next one
            if dist.is_initialized():
                dist.destroy_process_group()
            log.warning(
                "generation %d broke while its group connected (%s): waiting for the next one",
                g.gen,
                " ".join(str(exc).split())[-160:],
            )
            newer = wait_generation(folder, g.gen, max(0.0, deadline - time.monotonic()))
            if newer is None:
                raise
            g, deadline = newer, time.monotonic() + form_s
            continue
        return g


def _listening(addr: str, port: int) -> bool:
    """Whether something accepts connections at addr:port (asked before torch's store, which logs every miss)."""
    try:
        socket.create_connection((addr, port), timeout=1.0).close()
        return True
    except OSError:
        return False


def join_generation(
    g: Generation,
    rank: int,
    world_size: int,
    timeout_s: float,
    backend: str = "gloo",
    folder: str | Path | None = None,
    form_s: float | None = None,
) -> Generation:
    """Join generation ``g`` (or, with ``folder``, a newer one written meanwhile: :func:`rendezvous`, which waits
    at most ``form_s`` for it to form)."""
    if folder is not None:
        return rendezvous(folder, g, rank, world_size, timeout_s, backend, form_s=form_s)
    import torch.distributed as dist  # deferred: the launcher reads generations without torch.distributed

    dist.init_process_group(
        backend,
        init_method=f"tcp://{g.master_addr}:{g.master_port}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    return g
