"""How a launcher reaches the hosts of a job: :class:`HostAccess`, ssh's, and the choice by ``launch.remote``.

:class:`~dgl_grappa.cluster.remote.Cluster` knows a kind of host only through this
interface: how a command reaches a host (a :class:`~dgl_grappa.cluster.hosts.Remote` for
:func:`~dgl_grappa.cluster.hosts.remote_argv`, and the environment of the command's local
end), how the hosts' traffic is counted, what the summary records of them, and how they
are released. :func:`host_access` picks the implementation where ``launch.remote`` is
resolved: ``ssh`` is :class:`SshAccess` (real machines), ``netns`` the emulated test hosts'
:class:`dgl_grappa.cluster.testhosts.access.TestHostAccess`, which is imported for such a
launch only, so an ssh launch never loads the test-host harness.

Example:
    >>> access = host_access(cfg, 2, job)                                       # doctest: +SKIP
    >>> entries, remote = access.open(entries)                                 # doctest: +SKIP
    >>> remote_argv(remote, 0, entries[0].host, ["hostname"])                  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import subprocess
from typing import Callable, Protocol, Sequence, runtime_checkable

from ..config import Config, ConfigError, LaunchConfig
from .hosts import IpConfigEntry, Remote
from .procs import JobFailed

log = logging.getLogger("dgl_grappa")


@runtime_checkable
class HostAccess(Protocol):
    """A kind of host as the launcher sees it (``kind`` is its ``launch.remote`` value)."""

    kind: str

    def open(self, entries: list[IpConfigEntry]) -> tuple[list[IpConfigEntry], Remote]:
        """Reach the hosts.

        Args:
            entries: the hosts as ``launch`` lists them, host 0 first.

        Returns:
            The hosts as commands address them (same order), and how a command reaches each.

        Raises:
            ConfigError: a listed host that cannot be reached this way (one line).
        """

    def local_env(self) -> dict[str, str]:
        """The environment of a remote command's local end (the ssh client, a test host's nsenter)."""

    def default_threads(self, workers_per_host: int, num_workers: int) -> int:
        """Torch threads of each worker when ``run.num_threads`` is 0 (0: each worker decides on its machine)."""

    def wire_bytes(self) -> list[dict] | None:
        """Each host's interface counters now, where the launcher can read them (None: only the workers can)."""

    def describe(self, hosts: list[dict]) -> dict:
        """The fields of summary.json's ``cluster`` about links and CPUs ({}: none); may add to each of ``hosts``."""

    def close(self, kill_job: Callable[[int], None], used: Sequence[int]) -> None:
        """Release the hosts once the launcher's processes are stopped. Safe twice.

        Args:
            kill_job: kills whatever carries the job's tag on host i (a bounded remote command).
            used: the hosts that ran something.
        """


def _ssh_options(opts: Sequence[str]) -> tuple[str, ...]:
    out: list[str] = []
    for o in opts:
        out += [o] if o.startswith("-") else ["-o", o]
    return tuple(out)


class SshAccess:
    """Real machines over ssh (``launch.remote: ssh``): the launcher's environment, no counters of its own.

    Args:
        launch: the ``launch`` section (ssh user, port, identity, options).
        job: the job's tag, for messages.

    Example:
        >>> SshAccess(LaunchConfig(ssh_user="me")).open([IpConfigEntry("10.0.0.1")])[1].user
        'me'
    """

    kind = "ssh"

    def __init__(self, launch: LaunchConfig, job: str = ""):
        self.job = job
        self.remote = Remote(
            "ssh",
            user=launch.ssh_user,
            port=launch.ssh_port,
            identity_file=launch.ssh_identity,
            ssh_options=_ssh_options(launch.ssh_options),
        )

    def open(self, entries: list[IpConfigEntry]) -> tuple[list[IpConfigEntry], Remote]:
        return list(entries), self.remote

    def local_env(self) -> dict[str, str]:
        # ssh needs the launcher's own environment (HOME, SSH_AUTH_SOCK).
        return dict(os.environ)

    def default_threads(self, workers_per_host: int, num_workers: int) -> int:
        return 0  # a real machine's worker divides its own cores

    def wire_bytes(self) -> list[dict] | None:
        return None

    def describe(self, hosts: list[dict]) -> dict:
        return {}

    def close(self, kill_job: Callable[[int], None], used: Sequence[int]) -> None:
        # Last resort on hosts still reachable: whatever carries the job's tag dies.
        for i in used:
            try:
                kill_job(i)
            except (JobFailed, subprocess.TimeoutExpired, OSError) as exc:
                log.warning("could not reach host %d to kill job %s: %s", i, self.job, exc)


def host_access(cfg: Config, num_hosts: int, job: str) -> HostAccess:
    """The access for ``cfg.launch.remote``, checked before anything is built.

    Args:
        cfg: the run's config (``launch``; ``network`` and ``distdgl.shm_size`` for test hosts).
        num_hosts: how many hosts the job uses.
        job: the job's tag (``DGL_GRAPPA_JOB``), for messages.

    Raises:
        ConfigError: a kind that starts no hosts, or test hosts that cannot be made as
            configured here (one line).
    """
    kind = cfg.launch.remote
    if kind == "ssh":
        return SshAccess(cfg.launch, job)
    if kind == "netns":
        # Deferred: the test-host harness (namespaces, cgroups, tc) is loaded for a netns launch only.
        from .testhosts.access import TestHostAccess

        return TestHostAccess(cfg, num_hosts)
    raise ConfigError(f"launch.remote={kind!r} starts no hosts; use ssh or netns")
