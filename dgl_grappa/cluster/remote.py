"""The hosts of a multi-host job, and the commands a launcher runs on them.

:class:`Cluster` turns the ``launch`` section into machines and reaches them through a
:class:`~dgl_grappa.cluster.access.HostAccess` chosen by ``launch.remote``: ssh to the
machines of ``launch.hosts`` or ``launch.ip_config``, or the project's emulated test hosts
(``netns``, shaped from the ``network`` section), which it opens and closes again. This
module knows neither kind: everything it runs on a host goes through
:func:`dgl_grappa.cluster.hosts.remote_argv` with the access's
:class:`~dgl_grappa.cluster.hosts.Remote`, so every kind runs the same shell string, quoting
and environment; only the prefix differs.

* :meth:`Cluster.start` runs a long-lived command (a worker, a DGL server) under
  :mod:`dgl_grappa.cluster.guard`, whose stdin is a pipe held here: :meth:`RemoteProcess.stop`
  hangs up (the guard kills the command's tree on its host), then kills the local end.
  If the launcher dies, even by SIGKILL, the pipe (over ssh: the connection) closes and
  every guard kills its command: nothing outlives the launcher on any host.
* :meth:`Cluster.copy_to` / :meth:`Cluster.fetch_from` move files to / from the same path
  on a host (``tar`` streamed through the same remote command), for hosts without shared
  storage (``launch.copy_partitions``).
* The environment a remote command gets is explicit (:meth:`Cluster.remote_env`): ssh
  passes none of the launcher's, and test hosts are given the same minimal one.
* :meth:`Cluster.describe` and :meth:`Cluster.wire_bytes` report what the access knows of
  the links (test hosts: their dilation, CPU shares and byte counters).

Every wait is bounded; a failure is a :class:`~dgl_grappa.cluster.procs.JobFailed` naming the host,
the command and the tail of its log.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..config import Config, ConfigError
from ..env import ENV_FAULT
from .access import HostAccess, host_access
from .hosts import DGL_DEFAULT_PORT, IpConfigEntry, Remote, Slot, place_workers, read_ip_config, remote_argv
from .procs import ENV_JOB, JobFailed, rc_text, tail

log = logging.getLogger("dgl_grappa")

FORWARDED_ENV = ("PYTHONPATH", "DGLBACKEND", ENV_FAULT)
"""Variables of the launcher's environment that every remote command gets too (when set)."""
DILATION_KEYS = ("network_dilation", "host_cpu_share")
"""Keys of :meth:`Cluster.describe` (test hosts) that the launchers also put at the top of summary.json."""
_COPY_TIMEOUT_S = 600.0


@dataclass
class RemoteProcess:
    """One command running on a host under the guard (Popen-like: ``poll``, ``wait``, ``returncode``).

    Attributes:
        name: e.g. "worker1" or "server0" (its log is ``<logs>/<name>.log``).
        host_index: the host it runs on.
        popen: the local process (ssh client, or with test hosts the guard itself).
        log_path: where its output goes.
    """

    name: str
    host_index: int
    popen: subprocess.Popen
    log_path: Path
    _log: object = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout=timeout)

    def stop(self, grace_s: float = 5.0) -> None:
        """Hang up (the guard kills the command's tree on its host), then kill the local end."""
        if self.popen.poll() is None and self.popen.stdin is not None:
            try:
                self.popen.stdin.close()  # EOF at the guard
            except OSError:
                pass
            try:
                self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        if self.popen.poll() is None:
            self.popen.kill()
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self._log is not None:
            self._log.close()
            self._log = None

    def failure(self, what: str = "") -> str:
        """A one-paragraph message: what failed (``what`` unless its name says it), its exit status, its log's tail."""
        label = self.name if not what or self.name.startswith(what) else f"{what} {self.name}"
        return (
            f"{label} on host {self.host_index} {rc_text(self.popen.returncode)}\n"
            f"  last lines of {self.log_path}:\n{tail(self.log_path)}"
        )


class Cluster:
    """The machines of one job and how to reach them; a context manager.

    Args:
        cfg: the run's config (``launch``; ``network`` and ``distdgl.shm_size`` for test hosts).
        num_workers: W, placed ``launch.workers_per_host`` per host in rank order.
        job: the job's tag (``DGL_GRAPPA_JOB``), carried by every remote process.

    Attributes:
        entries: the machines (address and DGL server port, if one was given), host 0 first.
        slots: where each rank runs (:func:`dgl_grappa.cluster.hosts.place_workers`).
        access: how the hosts are reached (:func:`dgl_grappa.cluster.access.host_access`).

    Example:
        >>> with Cluster(cfg, 4, job) as cl:                                     # doctest: +SKIP
        ...     p = cl.start(0, [sys.executable, "-c", "print(1)"], {}, logs / "x.log", "x")
    """

    def __init__(self, cfg: Config, num_workers: int, job: str, spares: bool = False):
        la = cfg.launch
        self.cfg, self.job, self.kind = cfg, job, la.remote
        if la.remote not in ("ssh", "netns"):
            raise ConfigError(f"launch.remote={la.remote!r} starts no hosts; use ssh or netns")
        if la.ip_config:
            self.entries = read_ip_config(la.ip_config)
        elif la.hosts:
            self.entries = [IpConfigEntry(h) for h in la.hosts]
        else:  # netns without a list: one test host per workers_per_host workers (and the spares)
            n = -(-num_workers // (la.workers_per_host or 1)) + la.spare_hosts
            self.entries = [IpConfigEntry(f"h{i}") for i in range(n)]
        # launch.spare_hosts: the last hosts stay idle for take-overs; a job that cannot use them leaves them out
        spare = la.spare_hosts
        if not spares and spare:
            self.entries, spare = self.entries[:-spare], 0
        n = len(self.entries) - spare
        if n < 1:
            raise ConfigError(
                f"launch.spare_hosts={la.spare_hosts} leaves no host for the workers of the "
                f"{len(self.entries)} listed; list more hosts or fewer spares"
            )
        self.workers_per_host = la.workers_per_host or -(-num_workers // n)
        self.slots: list[Slot] = place_workers(num_workers, [e.host for e in self.entries][:n], self.workers_per_host)
        used = self.slots[-1].host_index + 1
        if used != n:
            raise ConfigError(
                f"{n} hosts listed but {num_workers} workers at {self.workers_per_host} per host use "
                f"only {used}; drop the idle hosts or change launch.workers_per_host"
                + (f" (the {spare} spare host(s) are not counted)" if spare else "")
            )
        # checks what it can before anything is built (test hosts: the spares are made too)
        self.access: HostAccess = host_access(cfg, len(self.entries), job)
        self.remote: Remote | None = None
        self.procs: list[RemoteProcess] = []

    # --- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> "Cluster":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self) -> "Cluster":
        """Reach the hosts (open the test hosts, or set up ssh). Returns self."""
        self.entries, self.remote = self.access.open(self.entries)
        self.slots = place_workers(len(self.slots), self.addresses, self.workers_per_host)  # rank order: spares last
        return self

    def close(self) -> None:
        """Stop every process started here (hang up, then kill), then release the hosts. Safe twice."""
        for p in self.procs:
            p.stop()
        used = sorted({p.host_index for p in self.procs})
        self.procs = []
        self.access.close(self._kill_job, used)

    def _kill_job(self, host_index: int) -> None:
        self.run(
            host_index,
            [sys.executable, "-m", "dgl_grappa.cluster.guard", "--kill-job", self.job],
            timeout=30,
            tag=False,
        )

    # --- what hosts there are --------------------------------------------------------------

    @property
    def addresses(self) -> list[str]:
        """The hosts' addresses (or names), host 0 first."""
        return [e.host for e in self.entries]

    def server_ports(self, base_port: int = 0) -> list[int]:
        """DGL server port of every host: the ip_config's, else ``base_port``, else DGL's default."""
        return [e.port or base_port or DGL_DEFAULT_PORT for e in self.entries]

    def ranks_on(self, host_index: int) -> list[int]:
        """Global ranks placed on a host."""
        return [s.rank for s in self.slots if s.host_index == host_index]

    def describe(self) -> dict:
        """For summary.json: how the hosts were reached, who ran where, the links.

        With test hosts also ``link``, ``network_dilation`` (D: the links ran at bandwidth / D
        and latency x D, so measured times are D x the emulated cluster's), ``host_cpu_share``
        (cores per host, None without CPU shares) and each host's ``cpus``.
        """
        out = {
            "remote": self.kind,
            "workers_per_host": self.workers_per_host,
            "hosts": [{"host": i, "address": a, "ranks": self.ranks_on(i)} for i, a in enumerate(self.addresses)],
        }
        out.update(self.access.describe(out["hosts"]))
        return out

    def threads_per_worker(self, requested: int = 0) -> int:
        """Torch threads of each worker: ``requested`` if > 0, else on test hosts the host's
        share of the cores (or, without CPU shares, this machine's) over its workers; over ssh
        0 (the worker decides on its own machine)."""
        if requested > 0:
            return requested
        return self.access.default_threads(self.workers_per_host, len(self.slots))

    def wire_bytes(self) -> list[dict] | None:
        """The hosts' interface counters right now, where the launcher can read them (test hosts; None over ssh)."""
        return self.access.wire_bytes()

    # --- running things ----------------------------------------------------------------------

    def remote_env(self, extra: dict[str, str] | None = None, *, tag: bool = True) -> dict[str, str]:
        """The environment of a remote command: forwarded variables, ``launch.env``, the job tag, ``extra``."""
        env = {k: os.environ[k] for k in FORWARDED_ENV if os.environ.get(k)}
        env["PYTHONUNBUFFERED"] = "1"
        for item in self.cfg.launch.env:
            k, _, v = item.partition("=")
            env[k] = v
        if tag:
            env[ENV_JOB] = self.job
        env.update(extra or {})
        return env

    def _local_env(self) -> dict[str, str]:
        return self.access.local_env()

    def argv(
        self,
        host_index: int,
        argv: Sequence[str],
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        *,
        tag: bool = True,
    ) -> list[str]:
        """The local command that runs ``argv`` on a host with :meth:`remote_env`."""
        return remote_argv(
            self.remote, host_index, self.addresses[host_index], list(argv), env=self.remote_env(env, tag=tag), cwd=cwd
        )

    def start(
        self,
        host_index: int,
        argv: Sequence[str],
        env: dict[str, str],
        log_path: Path,
        name: str,
        cwd: str | None = None,
    ) -> RemoteProcess:
        """Start a long-lived command on a host under the guard; it is stopped by :meth:`close`.

        Args:
            host_index: where.
            argv: the command (on the host; e.g. ``[python, -m, dgl_grappa, worker, ...]``).
            env: its own variables (on top of :meth:`remote_env`).
            log_path: its stdout and stderr, on this machine.
            name: for messages.
            cwd: working directory on the host (default: this process's, the same path).
        """
        guarded = [sys.executable, "-m", "dgl_grappa.cluster.guard", "--"] + list(argv)
        cmd = self.argv(host_index, guarded, env, cwd or os.getcwd())
        log_path.parent.mkdir(parents=True, exist_ok=True)
        f = open(log_path, "w")
        try:
            p = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=f,
                stderr=subprocess.STDOUT,
                env=self._local_env(),
                start_new_session=True,
            )
        except BaseException:
            f.close()
            raise
        rp = RemoteProcess(name, host_index, p, log_path, f)
        self.procs.append(rp)
        return rp

    def run(
        self, host_index: int, argv: Sequence[str], timeout: float, *, tag: bool = True, input: bytes | None = None
    ) -> subprocess.CompletedProcess:
        """Run a short command on a host to completion (bounded); JobFailed on a non-zero status."""
        cmd = self.argv(host_index, argv, tag=tag)
        try:
            p = subprocess.run(cmd, input=input, capture_output=True, timeout=timeout, env=self._local_env())
        except subprocess.TimeoutExpired:
            raise JobFailed(f"'{shlex.join(argv)}' on host {host_index} did not finish in {timeout:.0f} s") from None
        if p.returncode != 0:
            err = " ".join(p.stderr.decode(errors="replace").split())[-500:]
            raise JobFailed(f"'{shlex.join(argv)}' on host {host_index} {rc_text(p.returncode)}: {err}")
        return p

    def copy_to(
        self, host_index: int, root: str | Path, rel_paths: Sequence[str], timeout: float = _COPY_TIMEOUT_S
    ) -> None:
        """Copy files or folders under ``root`` to the same path on a host (``tar`` through the remote command).

        Args:
            host_index: the target host.
            root: an absolute folder on this machine; the paths land under the same folder there.
            rel_paths: paths relative to ``root``.
            timeout: bound on the whole copy.
        """
        root = str(Path(root).resolve())
        q = shlex.quote(root)
        remote = self.argv(host_index, ["sh", "-c", f"mkdir -p {q} && exec tar -C {q} -xf -"])
        self._pipe(
            ["tar", "-C", root, "-cf", "-", "--", *rel_paths],
            remote,
            timeout,
            f"copying {len(rel_paths)} paths under {root} to host {host_index}",
        )

    def fetch_from(
        self, host_index: int, root: str | Path, rel_paths: Sequence[str], timeout: float = _COPY_TIMEOUT_S
    ) -> None:
        """Copy files under ``root`` on a host to the same folder here (the inverse of :meth:`copy_to`)."""
        root = str(Path(root).resolve())
        Path(root).mkdir(parents=True, exist_ok=True)
        remote = self.argv(host_index, ["tar", "-C", root, "-cf", "-", "--", *rel_paths])
        self._pipe(
            remote,
            ["tar", "-C", root, "-xf", "-"],
            timeout,
            f"fetching {', '.join(rel_paths)} under {root} from host {host_index}",
        )

    def _pipe(self, producer: list[str], consumer: list[str], timeout: float, what: str) -> None:
        env = self._local_env()
        a = subprocess.Popen(producer, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
        b = subprocess.Popen(
            consumer, stdin=a.stdout, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True
        )
        a.stdout.close()  # b holds the read end; a sees EPIPE if b dies
        deadline = time.monotonic() + timeout
        try:
            for p in (b, a):
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise JobFailed(f"{what} did not finish in {timeout:.0f} s") from None
        finally:
            for p in (a, b):
                if p.poll() is None:
                    p.kill()
                    p.wait(timeout=10)
        if a.returncode or b.returncode:
            err = " ".join((a.stderr.read() + b.stderr.read()).decode(errors="replace").split())[-500:]
            raise JobFailed(f"{what} failed ({rc_text(a.returncode or b.returncode)}): {err}")
        a.stderr.close()
        b.stderr.close()


def wait_all(procs: Sequence[RemoteProcess], deadline: float, what: str, timeout_s: float, poll_s: float = 0.2) -> None:
    """Wait until every process has exited 0; bounded by ``deadline`` (time.monotonic()).

    Raises:
        JobFailed: the first one seen to fail (with the tail of its log), or the deadline
            passed. The caller stops the others (:meth:`Cluster.close`).
    """
    while True:
        rcs = [p.poll() for p in procs]
        for p, rc in zip(procs, rcs):
            if rc is not None and rc != 0:
                raise JobFailed(p.failure(what) + "\n  the job was stopped")
        if all(rc == 0 for rc in rcs):
            return
        if time.monotonic() > deadline:
            running = [p.name for p, rc in zip(procs, rcs) if rc is None]
            raise JobFailed(
                f"the job ran past run.timeout_s={timeout_s:.0f}s ({', '.join(running)} still "
                "running); every process was stopped (raise --run.timeout_s if it is just slow)"
            )
        time.sleep(poll_s)
