"""The multi-host launcher's watch over its workers: what lost workers do to the job (``launch.on_failure``).

* ``stop`` (and ``restart`` with no restart left): the first worker that fails ends the job, in one
  line naming it and how; every other worker on every host is stopped.
* ``restart``: every worker is stopped and the whole group started again; the workers resume from
  the newest intact checkpoint (``resume="auto"``), up to ``launch.max_restarts`` times.
* ``continue``: workers that died by a signal, whose host dropped them (ssh's status 255), that
  stopped answering, or whose host became unreachable are taken over without a restart. After the
  first loss the launcher waits one join window (:func:`~dgl_grappa.cluster.liveness.join_window`)
  for others: every loss seen by then is one change. It picks, for each lost part, a surviving host
  (spares first, then the fewest workers, never a host that was lost as a whole), writes the next
  generation of the group (:mod:`dgl_grappa.cluster.membership`: the lost ranks, where their parts
  go, the new rendezvous) and starts a worker there for each that loads the part's files and joins;
  the survivors, whose collective failed, join the same generation and hand it their model,
  optimizer and position. A loss while a generation forms is the next generation, which everyone
  follows. A worker that exited with a status of its own (a Python error, a user error) is not taken
  over: the same input would fail again.

Liveness is judged over the network the collectives use (:mod:`dgl_grappa.cluster.liveness`): a host
that no other host reaches for ``run.peer_timeout_s`` is named unreachable; its workers are not
killed (the launcher cannot reach them either) but fenced: they stop by themselves, writing nothing,
once they learn of the generation that replaced them. Every wait is bounded by ``run.timeout_s``.
"""

from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass, field
from typing import Callable

from ..cluster.liveness import Watch, join_window
from ..cluster.membership import (
    Generation,
    clear_generations,
    clear_pending,
    is_formed,
    membership_dir,
    write_generation,
    write_pending,
)
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
START_OVERS = 3
"""How often losses before the first group formed start every worker again (then the job stops)."""


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
    """Which host each rank runs on now (it changes with take-overs), the hosts that lost a worker, and the
    hosts lost as a whole (unreachable, or every worker on them lost at once), which take nothing over.

    Example:
        >>> p = Placement([0, 1, 2, 3])
        >>> p.take_over_host(2, 4)            # rank 2's host lost it: the next host takes the part
        3
        >>> p.host_of[2] = 3; p.lost_hosts.add(2)
        >>> p.take_over_host(0, 4)            # hosts 1 and 3 survive; 1 has fewer workers
        1
        >>> p.dead_hosts.update({1, 3}); p.take_over_host(0, 4)   # only hosts that lost a worker are left
        2
    """

    host_of: list[int]
    lost_hosts: set = field(default_factory=set)
    dead_hosts: set = field(default_factory=set)

    def workers_on(self, host: int) -> int:
        return sum(1 for h in self.host_of if h == host)

    def take_over_host(self, rank: int, n_hosts: int, origin: int | None = None) -> int | None:
        """The host that takes ``rank``'s part (lost on host ``origin``, default its host now): of the hosts that
        lost no worker, one with the fewest workers, the next after the lost one first (so several losses
        spread over the survivors); then a host that lost a worker but not all of them; None when every
        host was lost as a whole."""
        lost = self.host_of[rank] if origin is None else origin
        order = [(lost + k) % n_hosts for k in range(1, n_hosts + 1)]
        usable = [h for h in order if h not in self.dead_hosts]
        best = [h for h in usable if h not in self.lost_hosts and h != lost] or usable
        return min(best, key=lambda h: self.workers_on(h)) if best else None


class Supervisor:
    """One job's watch (see the module docstring); :meth:`run` is :func:`supervise`."""

    def __init__(
        self,
        cfg: Config,
        procs: list[RemoteProcess],
        start: Callable,
        addresses: list[str],
        port: int,
        out_dir,
        t0: float,
        prepare_host: Callable[[int, int], None],
    ):
        self.cfg, self.procs, self.start, self.addresses = cfg, procs, start, addresses
        self.port, self.t0, self.prepare_host = port, t0, prepare_host
        self.mode, self.n = cfg.launch.on_failure, len(procs)
        self.folder = membership_dir(out_dir)
        clear_generations(self.folder)
        self.watch = Watch(self.folder, self.n, cfg.run.peer_timeout_s)
        self.judged: dict[int, str] = {}  # ranks the launcher gave up on (stalled, unreachable): why
        self.unreachable: set[str] = set()  # addresses of the hosts judged unreachable
        self.placement = Placement([p.host_index for p in procs])
        self.first = [
            (r, h, sum(1 for q in self.placement.host_of[:r] if q == h)) for r, h in enumerate(self.placement.host_of)
        ]
        self.gen = self.attempt = 0
        self.takeovers_left = cfg.launch.max_restarts or float("inf")  # 0: as many as the hosts can carry
        self.budget = RestartBudget(cfg.launch.max_restarts if self.mode == "restart" else 0, "Grappa job")
        self.store = CheckpointStore(checkpoint_dir(cfg, out_dir))
        self.done: dict = {"restarts": self.budget.taken, "takeovers": []}
        self.joiners: set[int] = set()  # the ranks started for the newest generation
        self.start_overs = 0  # whole-group starts after a loss before the first group formed

    # -- what was lost ----------------------------------------------------------------------------
    def _verdicts(self) -> None:
        """Apply the watch's verdicts: a partition ends the job; a stalled worker is stopped, an unreachable
        host's workers are left to their fence; under a policy other than continue either ends the job."""
        alive = [p.poll() is None and r not in self.judged for r, p in enumerate(self.procs)]
        for v in self.watch.judge(alive, self.placement.host_of, self.addresses):
            if v.kind == "partition":
                raise JobFailed(f"{v.line}; the job was stopped")
            going_on = self.mode == "continue"
            log.warning("%s; %s", v.line, "its part(s) are taken over" if going_on else "the job stops")
            if not going_on:
                raise JobFailed(f"{v.line}; every worker was stopped and the job with them")
            for r in v.ranks:
                if v.kind == "stalled":
                    self.judged[r] = f"worker {r} on host {v.host} was lost ({v.why})"
                    self.procs[r].stop()  # its host answers: the frozen process is killed there
                else:
                    self.judged[r] = f"host {v.host} ({self.addresses[v.host]}) is unreachable"
            if v.kind == "unreachable":
                self.placement.dead_hosts.add(v.host)
                self.unreachable.add(self.addresses[v.host])

    def _losses(self) -> dict[int, str | None]:
        """Every rank lost now: why, in words (None: it exited with an error of its own)."""
        self._verdicts()
        lost: dict[int, str | None] = dict(self.judged)
        for r, p in enumerate(self.procs):
            rc = p.poll()
            if r not in lost and rc is not None and rc != 0:
                how = lost_signal(rc)
                lost[r] = f"worker {r} on host {self.placement.host_of[r]} was lost ({how})" if how else None
        return lost

    # -- what is done about it ---------------------------------------------------------------------
    def _take_over(self, lost: dict[int, str]) -> None:
        """One generation for every rank in ``lost``: a new worker for each on a surviving host."""
        pl = self.placement
        for h in {pl.host_of[r] for r in lost}:
            on = [r for r, q in enumerate(pl.host_of) if q == h]
            (pl.dead_hosts if all(r in lost for r in on) else pl.lost_hosts).add(h)
        ranks = sorted(lost)
        if len(ranks) > self.takeovers_left:
            raise JobFailed(
                f"{self._said(lost)}; the job has {self.takeovers_left} take-over(s) left "
                f"(launch.max_restarts={self.cfg.launch.max_restarts}) and stopped"
            )
        placed = {}
        origin = {r: pl.host_of[r] for r in ranks}
        for r in ranks:  # the lost workers' places are free: a host's local ranks count the workers it runs
            pl.host_of[r] = -1
        for r in ranks:
            host = pl.take_over_host(r, len(self.addresses), origin[r])
            if host is None:
                raise JobFailed(
                    f"{self._said(lost)}; no host is left to take part {r} over (host(s) "
                    f"{', '.join(map(str, sorted(pl.dead_hosts)))} lost as a whole); the job stopped"
                )
            placed[r] = (host, pl.workers_on(host))
            pl.host_of[r] = host
        self.gen += 1
        self.takeovers_left -= len(ranks)
        unreachable = sorted(self.unreachable)
        at_port = _port(self.port, self.attempt, self.gen)
        reason = self._said(lost)
        log.warning(
            "%s: %s (generation %d)",
            reason,
            ", ".join(f"host {h} takes part {r} over" for r, (h, _) in placed.items()),
            self.gen,
        )
        for r, (h, _) in placed.items():
            self.prepare_host(h, r)
        write_generation(
            self.folder,
            Generation(
                self.gen,
                self.addresses[pl.host_of[0]],
                at_port,
                lost=ranks,
                joined=[{"rank": r, "host": h} for r, (h, _) in placed.items()],
                reason=reason,
                detected_s=round(time.perf_counter() - self.t0, 3),
                unreachable=unreachable,
            ),
        )
        clear_pending(self.folder)
        self.joiners = set(placed)
        for r, (h, local) in placed.items():
            self.watch.reset(r)
            self.judged.pop(r, None)
            self.procs[r] = self.start(r, h, local, self.gen, at_port)
            self.done["takeovers"].append({"gen": self.gen, "rank": r, "host": h, "how": lost[r]})

    def _said(self, lost: dict[int, str]) -> str:
        """The losses in one line, a host's once."""
        out: list[str] = []
        for r in sorted(lost):
            why = lost[r]
            line = (
                f"{why} (worker(s) {', '.join(str(q) for q in sorted(lost) if lost[q] == why)})"
                if why.startswith("host ")
                else why
            )
            if line not in out:
                out.append(line)
        return "; ".join(out)

    def _restart(self, rank: int, how: str | None) -> None:
        self.attempt += 1
        p = self.procs[rank]
        point = self.store.newest_valid(fingerprint(self.cfg))  # the one the workers resume from ("auto")
        said = how if how is not None else p.failure().splitlines()[0]
        self.budget.restart(said, point.path if point else None, point.epoch if point else 0)
        for q in self.procs:
            q.stop()
        self.gen = 0
        self.judged.clear()
        clear_generations(self.folder)
        for r in range(self.n):
            self.watch.reset(r)
        self.procs[:] = [self.start(r, h, local, 0, _port(self.port, self.attempt, 0)) for r, h, local in self.first]
        self.placement = Placement([h for _, h, _ in self.first])

    def _start_over(self, lost: dict[int, str]) -> None:
        """Losses before the first group formed: there is no state to hand over, so every worker starts again,
        the lost ones on hosts that were not lost as a whole (at most :data:`START_OVERS` times)."""
        self.start_overs += 1
        if self.start_overs > START_OVERS:
            raise JobFailed(f"{self._said(lost)} while the workers started, {START_OVERS} times; the job stopped")
        pl = self.placement
        for h in {pl.host_of[r] for r in lost}:
            (pl.dead_hosts if all(r in lost for r, q in enumerate(pl.host_of) if q == h) else pl.lost_hosts).add(h)
        for r in sorted(lost):
            if pl.host_of[r] in pl.dead_hosts:
                host = pl.take_over_host(r, len(self.addresses))
                if host is None:
                    raise JobFailed(
                        f"{self._said(lost)} while the workers started, and no host is left for part "
                        f"{r}; the job stopped"
                    )
                pl.host_of[r] = host
        log.warning(
            "%s before the workers had formed their group: every worker starts again (%d of %d)",
            self._said(lost),
            self.start_overs,
            START_OVERS,
        )
        for q in self.procs:
            q.stop()
        self.attempt += 1
        self.judged.clear()
        clear_generations(self.folder)
        for r in range(self.n):
            self.watch.reset(r)
        self.first = [(r, h, sum(1 for q in pl.host_of[:r] if q == h)) for r, h in enumerate(pl.host_of)]
        self.procs[:] = [self.start(r, h, local, 0, _port(self.port, self.attempt, 0)) for r, h, local in self.first]

    def _finished(self) -> bool:
        """Every worker exited 0; or every one but the newest generation's new workers, which still wait for
        it to form: the survivors finished the job first (a lost host came back before they left its group).
        Those are stopped, with a log line."""
        rcs = [p.poll() for p in self.procs]
        if all(rc == 0 for rc in rcs):
            return True
        waiting = [r for r in self.joiners if rcs[r] is None]
        if not waiting or any(rc != 0 for r, rc in enumerate(rcs) if r not in self.joiners):
            return False
        log.warning(
            "the job finished before generation %d formed; its new worker(s) %s are stopped",
            self.gen,
            ", ".join(map(str, sorted(waiting))),
        )
        for r in waiting:
            self.procs[r].stop()
        return True

    def run(self) -> dict:
        deadline = time.monotonic() + self.cfg.run.timeout_s
        window = join_window(self.cfg.run.peer_timeout_s)
        while True:
            lost = self._losses()
            if not lost and self._finished():
                return self.done
            if lost:
                own = [r for r, how in lost.items() if how is None]
                if self.mode == "continue" and not own:
                    settle = time.monotonic() + window  # losses close in time are one change
                    write_pending(self.folder, self.gen + 1, list(lost))  # the old group is over from now
                    while time.monotonic() < settle:
                        time.sleep(0.1)
                        if len(more := self._losses()) > len(lost):
                            write_pending(self.folder, self.gen + 1, list(more))
                        lost = more
                    own = [r for r, how in lost.items() if how is None]
                    if not own and not is_formed(self.folder):
                        self._start_over(lost)
                        continue
                    if not own:
                        self._take_over(lost)
                        continue
                rank = own[0] if own else min(lost)
                how = lost[rank]
                if self.budget.left > 0 and self.procs[rank].poll() != USER_ERROR:
                    self._restart(rank, how)
                    continue
                if how is not None:
                    raise JobFailed(f"{self._said({rank: how})}; every worker was stopped and the job with them")
                raise JobFailed(self.procs[rank].failure() + "\n  the job was stopped")
            if time.monotonic() > deadline:
                running = [p.name for p in self.procs if p.poll() is None]
                raise JobFailed(
                    f"the job ran past run.timeout_s={self.cfg.run.timeout_s:.0f}s ({', '.join(running)} "
                    "still running); every process was stopped (raise --run.timeout_s if it is just slow)"
                )
            time.sleep(0.2)


def supervise(
    cfg: Config,
    procs: list[RemoteProcess],
    start: Callable[[int, int, int, int, int], RemoteProcess],
    addresses: list[str],
    port: int,
    out_dir,
    t0: float,
    prepare_host: Callable[[int, int], None],
) -> dict:
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
        JobFailed: workers were lost and the policy (or its budget, or the hosts left) says stop, or the
            deadline passed; one line naming the worker or host and the cause.
    """
    return Supervisor(cfg, procs, start, addresses, port, out_dir, t0, prepare_host).run()
