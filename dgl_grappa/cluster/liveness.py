"""Which workers are alive and reachable, judged over the network the collectives use.

A worker started by the multi-host launcher runs a :class:`Beacon`: a listening TCP socket on
its host's address (the address its collectives use) and a daemon thread that, every few
seconds (:func:`beat_every`), connects to every peer on another host, bounded, and writes what
it saw to ``<run.output_dir>/membership/beat-<rank>.json``: a counter, its address, and for each
peer how long ago it last reached it. The file is only the report; the judgement is over the
network: the launcher's :class:`Watch` reads the reports and names

* a host that no worker on another host reached for ``run.peer_timeout_s`` (while they reach
  each other, or its own workers find their network gone) as **unreachable**: its link is down,
  its switch or its power is gone;
* a worker whose reports stopped for ``run.peer_timeout_s`` while its host is still reached as
  **stopped answering** (SIGSTOP, a frozen process);
* hosts that reach nobody, with no side to tell apart, as a **partition** the job cannot go
  on from.

The beacon thread also acts on the job's generations (:mod:`.membership`): a worker that a
later generation replaced is fenced (it stops at once and writes nothing: its host was judged
lost and has come back), and a survivor cuts its connections to the hosts a new generation
names unreachable, so that a collective waiting on them fails now instead of after its whole
timeout, and the survivor moves on to the new group.

Example:
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> w = Watch(d, 2, timeout_s=10)
    >>> w.judge([True, True], host_of=[0, 1], addresses=["10.0.0.1", "10.0.0.2"])   # no reports yet
    []
"""

from __future__ import annotations

import errno
import json
import logging
import os
import select
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .membership import Entered, fenced_by, newest_generation, read_pending
from .ptree import kill_with_parent

log = logging.getLogger("dgl_grappa")

EXIT_FENCED = 75
"""Exit status of a worker that stopped because a later generation replaced it."""


def beat_every(peer_timeout_s: float) -> float:
    """Seconds between two reports for a bound of ``peer_timeout_s`` (several per bound)."""
    return max(0.2, min(2.0, peer_timeout_s / 5))


def join_window(peer_timeout_s: float) -> float:
    """How long the launcher waits after a loss for others before it writes the one generation of them all:
    one and a half report intervals (so losses judged from reports land together), at least one second."""
    return max(1.0, 1.5 * beat_every(peer_timeout_s))


def clear_reports(folder: str | Path) -> None:
    """Remove an earlier run's reports (a resumed job's folder): they are not the new workers'."""
    for p in Path(folder).glob("beat-*.json"):
        p.unlink(missing_ok=True)


def _report_path(folder: Path, rank: int) -> Path:
    return folder / f"beat-{rank}.json"


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------------------------
# A worker's side
# ---------------------------------------------------------------------------------------


class Beacon:
    """One worker's liveness: a reporter process (listener, probes, reports) and a thread (fence, cuts).

    The reporter is a small process of its own (``python -m dgl_grappa.cluster.liveness``, no torch):
    a worker busy in a long call that holds Python's lock (a part's load, an import) still reports,
    while a worker that is stopped (SIGSTOP) or gone does not (the reporter looks at its state and
    dies with it). Fencing and cutting act on this process, so they are a thread here; both matter
    while the worker waits in a collective, where that lock is free.

    Args:
        folder: the job's membership folder (shared by every host).
        rank: this worker's rank.
        address: its host's address, as its peers reach it.
        every_s: seconds between reports.
        since: the generation this worker was started for (0: the job's start; a take-over's
            generation): a later generation that names this rank lost fences it.

    Example:
        >>> b = Beacon(folder, rank=1, address="10.77.0.2", every_s=2.0, since=0).start()   # doctest: +SKIP
    """

    def __init__(self, folder: str | Path, rank: int, address: str, every_s: float, since: int = 0):
        self.folder, self.rank, self.address, self.every_s = Path(folder), rank, address, every_s
        self.since = since
        Entered.enter(since)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.reporter: subprocess.Popen | None = None

    def start(self) -> "Beacon":
        """Start the reporter process and the fence thread (both end with this process)."""
        self.reporter = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dgl_grappa.cluster.liveness",
                str(self.folder),
                str(self.rank),
                self.address,
                str(self.every_s),
                str(os.getpid()),
            ],
            stdin=subprocess.DEVNULL,
            preexec_fn=kill_with_parent,
        )
        threading.Thread(target=self._loop, name="dgl_grappa-fence", daemon=True).start()
        return self

    def _loop(self) -> None:
        while True:
            try:
                self._fence()
                self._cut()
            except Exception as exc:  # noqa: BLE001 - the watch must go on whatever one round met
                log.debug("fence: %s", exc)
            time.sleep(self.every_s)

    def _fence(self) -> None:
        g = fenced_by(self.folder, self.rank, self.since)
        if g is not None:
            fence_exit(self.rank, g)

    def _newer(self) -> tuple[int, str] | None:
        """(number, reason) of a generation newer than any this worker entered, written or being formed."""
        g = newest_generation(self.folder, Entered.gen)
        if g is not None:
            return g.gen, g.reason
        pending = read_pending(self.folder)
        if pending is not None and pending["gen"] > Entered.gen:
            return pending["gen"], f"ranks {pending['lost']} lost"
        return None

    def _cut(self) -> None:
        """A newer generation than any this worker entered: its group is over (a member was lost, maybe behind
        a link that went down, where no reset ever comes), so every connection it holds is cut and whatever
        collective waits on them fails now; the worker then joins the new generation. Done as soon as the
        launcher starts forming it: a lost host that comes back must not find the old group still going."""
        if self._newer() is None:
            return
        with Entered.lock:
            newer = self._newer()
            if newer is None:
                return
            n = cut_connections()
            Entered.gen = newer[0]
        log.warning(
            "generation %d replaces this worker's group (%s): %d connection(s) of the old one cut",
            newer[0],
            newer[1],
            n,
        )


def _stopped(pid: int) -> bool | None:
    """Whether process ``pid`` is stopped (SIGSTOP, a debugger); None when it is gone."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None
    return state in ("T", "t") if state != "Z" else None


class Reporter:
    """The reporter process's work (see :class:`Beacon`): listen, probe the peers, write the report."""

    def __init__(self, folder: str | Path, rank: int, address: str, every_s: float, worker_pid: int):
        self.folder, self.rank, self.address, self.every_s = Path(folder), rank, address, every_s
        self.worker_pid = worker_pid
        self.last_ok: dict[int, tuple[int, float]] = {}  # peer rank -> (its pid, when this worker last reached it)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((address, 0))
        except OSError:  # an address this host does not carry (a name behind NAT, ...): every interface
            self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]

    def run(self) -> None:
        """Report every ``every_s`` seconds while the worker runs; skip while it is stopped; end with it."""
        threading.Thread(target=self._accept, name="accept", daemon=True).start()
        n = 0
        while True:
            stopped = _stopped(self.worker_pid)
            if stopped is None or os.getppid() != self.worker_pid:
                return
            if not stopped:
                n += 1
                try:
                    seen, net_down = self._probe()
                    self._write(n, seen, net_down)
                except OSError as exc:
                    print(f"dgl_grappa.cluster.liveness: {exc}", file=sys.stderr, flush=True)
            time.sleep(self.every_s)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
                conn.close()
            except OSError:
                time.sleep(0.1)

    def _peers(self) -> dict[int, tuple[str, int, int]]:
        """Peer rank -> (address, port, worker pid) of every reporting worker on another host."""
        out = {}
        for p in self.folder.glob("beat-*.json"):
            rep = _read(p)
            if rep and rep.get("rank") != self.rank and rep.get("address") != self.address:
                out[int(rep["rank"])] = (rep["address"], int(rep["port"]), int(rep["pid"]))
        return out

    def _probe(self) -> tuple[dict, bool]:
        """Connect to every peer at once, bounded by one report interval; (peer -> [pid, seconds since reached],
        whether this host's own network is gone: every try failed with 'network unreachable')."""
        now = time.monotonic()
        peers = self._peers()
        pending: dict[socket.socket, int] = {}
        unreachable_net = 0
        for r, (addr, port, pid) in peers.items():
            if self.last_ok.get(r, (None,))[0] != pid:
                self.last_ok[r] = (pid, now)  # a new peer (or a new worker of that rank): counted from now
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            err = s.connect_ex((addr, port))
            if err in (0, errno.EINPROGRESS):
                pending[s] = r
            else:
                unreachable_net += err == errno.ENETUNREACH
                s.close()
        deadline = now + min(1.0, self.every_s)
        while pending and time.monotonic() < deadline:
            _, ready, _ = select.select([], list(pending), [], max(0.0, deadline - time.monotonic()))
            for s in ready:
                r = pending.pop(s)
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err == 0:
                    self.last_ok[r] = (self.last_ok[r][0], time.monotonic())
                unreachable_net += err == errno.ENETUNREACH
                s.close()
        for s in pending:
            s.close()
        t = time.monotonic()
        seen = {str(r): [self.last_ok[r][0], round(t - self.last_ok[r][1], 2)] for r in peers}
        return seen, bool(peers) and unreachable_net == len(peers)

    def _write(self, n: int, seen: dict, net_down: bool) -> None:
        path = _report_path(self.folder, self.rank)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(
            json.dumps(
                {
                    "rank": self.rank,
                    "n": n,
                    "pid": self.worker_pid,
                    "address": self.address,
                    "port": self.port,
                    "seen": seen,
                    "net_down": net_down,
                }
            )
        )
        os.replace(tmp, path)


def fence_exit(rank: int, g) -> None:
    """End this stale worker at once (no cleanup, no file written): generation ``g`` replaced it."""
    log.error(
        "worker %d was replaced in generation %d (%s): this stale worker stops and writes nothing",
        rank,
        g.gen,
        g.reason,
    )
    for h in logging.getLogger("dgl_grappa").handlers:
        h.flush()
    os._exit(EXIT_FENCED)


def cut_connections() -> int:
    """Shut down every TCP connection of this process (listening sockets stay); how many.

    A collective blocked on a peer that vanished (its link down: no reset ever comes) then fails at
    once, as it would after the peer's crash. ``shutdown`` leaves the descriptors to their owners
    (gloo's own threads): nothing is closed under them.
    """
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            s = socket.socket(fileno=os.dup(int(fd)))
        except OSError:
            continue
        try:
            if s.type == socket.SOCK_STREAM and s.family in (socket.AF_INET, socket.AF_INET6):
                s.getpeername()  # OSError for a listening or unconnected socket
                s.shutdown(socket.SHUT_RDWR)
                n += 1
        except OSError:
            pass
        finally:
            s.close()  # the duplicate only
    return n


# ---------------------------------------------------------------------------------------
# The launcher's side
# ---------------------------------------------------------------------------------------


@dataclass
class Verdict:
    """What the launcher concluded about some workers.

    Attributes:
        kind: "unreachable" (their host), "stalled" (one worker) or "partition" (no side to keep).
        ranks: the workers concerned.
        host: their host (-1 for a partition).
        line: one line for the log and the user, naming the host or worker and the cause.
        why: the cause in a few words, for the generation's reason.
    """

    kind: str
    ranks: list[int]
    host: int
    line: str
    why: str


@dataclass
class _Seen:
    raw: str | None = None
    report: dict | None = None
    changed: float = field(default_factory=time.monotonic)


class Watch:
    """The launcher's view of the workers' reports (see the module docstring).

    A report counts when the launcher sees it change, on the launcher's own clock (hosts' clocks may
    differ); a worker is judged only after its first report, and a peer only by witnesses that have
    known its current worker for ``timeout_s``.
    """

    def __init__(self, folder: str | Path, n: int, timeout_s: float):
        self.folder, self.timeout_s = Path(folder), timeout_s
        self.seen = [_Seen() for _ in range(n)]
        self.polled = time.monotonic()

    def reset(self, rank: int) -> None:
        """A new worker for ``rank``: its predecessor's reports no longer count."""
        self.seen[rank] = _Seen()
        _report_path(self.folder, rank).unlink(missing_ok=True)

    def _refresh(self, now: float) -> None:
        if now - self.polled > max(2.0, self.timeout_s / 2):  # the launcher itself was not running: start afresh
            for s in self.seen:
                s.changed = now
        self.polled = now
        for r, s in enumerate(self.seen):
            try:
                raw = _report_path(self.folder, r).read_text()
            except OSError:
                raw = None
            if raw is not None and raw != s.raw:
                try:
                    s.report = json.loads(raw)
                except ValueError:
                    continue
                s.raw, s.changed = raw, now

    def judge(self, alive: list[bool], host_of: list[int], addresses: list[str]) -> list[Verdict]:
        """Verdicts about the live workers (``alive[r]``: rank r's process is running), host by host.

        A host that no fresh witness on another host reached for the bound is cut off when its own reports
        stopped too (it is gone), when its own workers found their network gone and reached nobody, or when
        the witnesses still reach some other host (the network works elsewhere). Where hosts merely cannot
        reach each other and no side can be told apart, the verdict is a partition.
        """
        now = time.monotonic()
        self._refresh(now)
        t = self.timeout_s
        live = [r for r, a in enumerate(alive) if a and self.seen[r].report is not None]
        fresh = {r for r in live if now - self.seen[r].changed <= t}
        hosts = sorted({host_of[r] for r in live})
        on = {h: [r for r in live if host_of[r] == h] for h in hosts}

        def reached(w: int, r: int) -> bool | None:
            """Whether witness w reached rank r's current worker within the bound (None: it cannot tell yet)."""
            entry = (self.seen[w].report.get("seen") or {}).get(str(r))
            if entry is None or entry[0] != self.seen[r].report.get("pid"):
                return None
            return entry[1] <= t

        def none_reached(witnesses, targets) -> bool:
            votes = [v for v in (reached(w, r) for w in witnesses for r in targets) if v is not None]
            return bool(votes) and not any(votes)

        cut: dict[int, str] = {}
        tied: list[int] = []
        for h in hosts:
            witnesses = [w for w in fresh if host_of[w] != h]
            if not none_reached(witnesses, on[h]):
                continue
            mine = [r for r in on[h] if r in fresh]
            elsewhere = [r for r in live if host_of[r] != h]
            if not mine:
                cut[h] = "no worker on another host reached it and its own workers stopped reporting"
            elif any(self.seen[r].report.get("net_down") for r in mine) and none_reached(mine, elsewhere):
                cut[h] = "its own network is down"
            elif any(
                not none_reached([w for w in witnesses if host_of[w] != g], on[g])
                for g in hosts
                if g != h and any(host_of[w] != g for w in witnesses)
            ):
                cut[h] = "no worker on another host reached it"
            else:
                tied.append(h)
        if len(tied) > 1 and not cut:
            names = ", ".join(f"{h} ({addresses[h]})" for h in tied)
            return [
                Verdict(
                    "partition",
                    [r for h in tied for r in on[h]],
                    -1,
                    f"hosts {names} cannot reach each other for {t:g} s (run.peer_timeout_s): the network "
                    "between them is down and no side can be told from the other",
                    "network partition",
                )
            ]
        out = [
            Verdict(
                "unreachable",
                on[h],
                h,
                f"host {h} ({addresses[h]}) is unreachable: {how} for {t:g} s (run.peer_timeout_s); "
                f"worker(s) {', '.join(map(str, on[h]))} on it",
                f"host {h} unreachable",
            )
            for h, how in sorted(cut.items())
        ]
        for r in live:
            age = now - self.seen[r].changed
            if r not in fresh and host_of[r] not in cut:
                h = host_of[r]
                line = (
                    f"worker {r} (rank {r} on host {h}, {addresses[h]}) stopped answering: no heartbeat for "
                    f"{age:.0f} s (run.peer_timeout_s={t:g})"
                )
                out.append(Verdict("stalled", [r], h, line, f"it stopped answering for {age:.0f} s"))
        return out


def main(argv: list[str] | None = None) -> int:
    """``python -m dgl_grappa.cluster.liveness FOLDER RANK ADDRESS EVERY_S WORKER_PID``: a worker's reporter."""
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m dgl_grappa.cluster.liveness",
        description="a worker's liveness reporter (the multi-host launcher starts it beside "
        "each worker; not a command for users)",
    )
    ap.add_argument("folder", help="the job's membership folder")
    ap.add_argument("rank", type=int, help="the worker's rank")
    ap.add_argument("address", help="its host's address (the one its collectives use)")
    ap.add_argument("every_s", type=float, help="seconds between probes")
    ap.add_argument("pid", type=int, help="the worker's pid (the reporter ends with it)")
    a = ap.parse_args(argv)
    Reporter(a.folder, a.rank, a.address, a.every_s, a.pid).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
