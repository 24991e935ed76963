"""The multi-host launcher's watch over its workers: what a lost worker does to the job (``launch.on_failure``).

* ``stop`` (and ``restart`` with no restart left): the first worker that fails ends the job, with
  the tail of its log; every other worker on every host is stopped.
* ``restart``: every worker is stopped and the whole group started again; the workers resume from
  the newest intact checkpoint (``resume="auto"``), up to ``launch.max_restarts`` times.
* ``continue``: a worker that died by a signal, or whose host dropped it (ssh's status 255), is
  taken over without a restart. The launcher picks the surviving host with the fewest workers,
  writes the next generation of the group (:mod:`dgl_grappa.cluster.membership`: the lost rank,
  where its part goes, the new rendezvous) and starts a worker there that loads the lost part's
  files and joins; the survivors, whose collective failed, join the same generation and hand it
  their model, optimizer and position. A worker that exited with a status of its own (a Python
  error, a user error) is not taken over: the same input would fail again.

Every wait is bounded by ``run.timeout_s``.
"""
from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass, field
from typing import Callable

from ..cluster.membership import BeatWatch, Generation, clear_generations, membership_dir, write_generation
from ..cluster.procs import JobFailed
from ..cluster.remote import RemoteProcess
from ..config import Config
from ..runtime.checkpoint import CheckpointStore, checkpoint_dir, fingerprint
from ..runtime.restarts import RestartBudget

log = logging.getLogger("dgl_grappa")

SSH_LOST = 255
"""ssh's exit status when the connection (the host) was lost."""
USER_ERROR = 2
"""A worker's exit status for a user error (one line): never restarted."""


def _port(port: int, attempt: int, gen: int) -> int:
    """The rendezvous port of a group: a new one for every whole-group start and every generation."""
    return port + 100 * attempt + gen


def lost_signal(rc: int) -> str | None:
    """The way a worker was lost, read from its exit status as the launcher sees it; None if it exited itself.

    A signal shows as -N (a direct child), 128 + N (a shell) or 256 - N (the guard's own ``exit(-N)``).

    Example:
        >>> lost_signal(-9), lost_signal(137), lost_signal(247), lost_signal(255), lost_signal(1)
        ('SIGKILL', 'SIGKILL', 'SIGKILL', 'its host (connection lost)', None)
    """
    if rc == SSH_LOST:
        return "its host (connection lost)"
    n = -rc if rc < 0 else rc - 128 if 128 < rc < 128 + 65 else 256 - rc if rc > 192 else 0
    try:
        return signal.Signals(n).name if n > 0 else None
    except ValueError:
        return f"signal {n}"


@dataclass
class Placement:
    """Which host each rank runs on now (it changes with take-overs), and the hosts that lost a worker.

    Example:
        >>> p = Placement([0, 1, 2, 3])
        >>> p.take_over_host(2, 4)            # rank 2's host lost it: the next host takes the part
        3
        >>> p.host_of[2] = 3; p.lost_hosts.add(2)
        >>> p.take_over_host(0, 4)            # hosts 1 and 3 survive; 1 has fewer workers
        1
    """

    host_of: list[int]
    lost_hosts: set = field(default_factory=set)

    def workers_on(self, host: int) -> int:
        return sum(1 for h in self.host_of if h == host)

    def take_over_host(self, rank: int, n_hosts: int) -> int:
        """The host that takes ``rank``'s part: of the hosts that lost no worker, one with the fewest workers,
        the next after the lost one first (so several losses spread over the survivors); the lost host
        itself only when no other is left."""
        lost = self.host_of[rank]
        order = [(lost + k) % n_hosts for k in range(1, n_hosts + 1)]
        alive = [h for h in order if h not in self.lost_hosts and h != lost] or [lost]
        return min(alive, key=lambda h: self.workers_on(h))


def supervise(cfg: Config, procs: list[RemoteProcess], start: Callable[[int, int, int, int, int], RemoteProcess],
              addresses: list[str], port: int, out_dir, t0: float, prepare_host: Callable[[int, int], None]) -> dict:
    """Wait for every worker to exit 0, handling losses per ``launch.on_failure``; bounded by ``run.timeout_s``.

    Args:
        cfg: the run's config.
        procs: the running workers, in rank order.
        start: ``start(rank, host, local_rank, gen, port)`` starts rank's worker on a host as its
            ``local_rank``-th worker: ``gen`` > 0 joins that generation (a take-over), else it joins a
            whole group's start at ``port``.
        addresses: every host's address (a generation's rendezvous is on rank 0's host).
        port: the first rendezvous port; each generation and each restart uses the next one.
        out_dir: the run's output folder (the generations are written in it).
        t0: the job's start (time.perf_counter()), for the seconds in the records.
        prepare_host: ``prepare_host(host, rank)`` makes rank's part readable on that host (copies it
            where storage is not shared); called before a take-over starts there.

    Returns:
        ``{"restarts": [...], "takeovers": [...]}``: what the launcher did.

    Raises:
        JobFailed: a worker failed and the policy (or its budget) says stop, or the deadline passed.
    """
    mode, n = cfg.launch.on_failure, len(procs)
    folder = membership_dir(out_dir)
    clear_generations(folder)
    watch = BeatWatch(folder, n, cfg.run.peer_timeout_s)
    stalled: dict[int, str] = {}  # ranks stopped here for a missing heartbeat: why
    placement = Placement([p.host_index for p in procs])
    first = [(r, h, sum(1 for q in placement.host_of[:r] if q == h)) for r, h in enumerate(placement.host_of)]
    deadline = time.monotonic() + cfg.run.timeout_s
    gen = attempt = 0
    takeovers_left = cfg.launch.max_restarts or n
    budget = RestartBudget(cfg.launch.max_restarts if mode == "restart" else 0, "Grappa job")
    store = CheckpointStore(checkpoint_dir(cfg, out_dir))
    done: dict = {"restarts": budget.taken, "takeovers": []}
    while True:
        late = watch.stalled([p.poll() is None for p in procs])
        if late is not None:  # stopped or frozen: named, then lost (its tree is killed on its host)
            rank, age = late
            host = placement.host_of[rank]
            line = (f"worker {rank} (rank {rank} on host {host}, {addresses[host]}) "
                    f"stopped answering: no heartbeat for {age:.0f} s (run.peer_timeout_s={cfg.run.peer_timeout_s:g})")
            log.warning("%s; it is stopped%s", line, " and its part taken over" if mode == "continue" else "")
            procs[rank].stop()
            stalled[rank] = f"it stopped answering for {age:.0f} s"
            if mode != "continue":
                raise JobFailed(f"{line}; every worker was stopped and the job with them")
        rcs = [p.poll() for p in procs]
        if all(rc == 0 for rc in rcs):
            return done
        for rank, (p, rc) in enumerate(zip(procs, rcs)):
            if rc is None or rc == 0:
                continue
            how = stalled.pop(rank, None) or lost_signal(rc)
            if mode == "continue" and how is not None and takeovers_left > 0:
                gen, takeovers_left = gen + 1, takeovers_left - 1
                lost_host = placement.host_of[rank]
                placement.lost_hosts.add(lost_host)  # a machine that lost a worker gets no part while others can
                host = placement.take_over_host(rank, len(addresses))
                reason = f"worker {rank} on host {lost_host} was lost ({how})"
                log.warning("%s: host %d takes part %d over (generation %d; %d take-over(s) left)", reason, host,
                            rank, gen, takeovers_left)
                prepare_host(host, rank)
                local_rank = placement.workers_on(host)
                placement.host_of[rank] = host
                at_port = _port(port, attempt, gen)
                write_generation(folder, Generation(gen, addresses[placement.host_of[0]], at_port, lost=[rank],
                                                    joined=[{"rank": rank, "host": host}], reason=reason,
                                                    detected_s=round(time.perf_counter() - t0, 3)))
                watch.reset(rank)
                procs[rank] = start(rank, host, local_rank, gen, at_port)
                done["takeovers"].append({"gen": gen, "rank": rank, "lost_host": lost_host, "host": host,
                                          "how": how})
                continue
            if budget.left > 0 and rc != USER_ERROR:
                attempt += 1
                point = store.newest_valid(fingerprint(cfg))  # the one the workers resume from ("auto")
                said = (f"worker {rank} on host {placement.host_of[rank]} was lost ({how})" if how is not None
                        else p.failure("worker").splitlines()[0])
                budget.restart(said, point.path if point else None, point.epoch if point else 0)
                for q in procs:
                    q.stop()
                gen = 0
                clear_generations(folder)
                for r in range(n):
                    watch.reset(r)
                procs[:] = [start(r, h, local, 0, _port(port, attempt, 0)) for r, h, local in first]
                placement = Placement([h for _, h, _ in first])
                break
            raise JobFailed(p.failure("worker") + "\n  the job was stopped")
        if time.monotonic() > deadline:
            running = [p.name for p in procs if p.poll() is None]
            raise JobFailed(f"the job ran past run.timeout_s={cfg.run.timeout_s:.0f}s ({', '.join(running)} still "
                            "running); every process was stopped (raise --run.timeout_s if it is just slow)")
        time.sleep(0.2)
