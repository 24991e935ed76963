"""Where a job's workers live: hosts, identities, placement and remote commands (pure functions).

Nothing here starts a process or reads the environment by itself: every function takes
what it needs and returns data, so the launcher (ssh, namespace test hosts, or none) and a
worker started by torchrun or Slurm share one tested code path.

* :func:`parse_ip_config` reads DGL's ``ip_config.txt`` ("IP [port]" per line);
  :func:`format_ip_config` writes one DGL itself can read (DGL rejects comments and blank lines).
* :func:`worker_identity` turns a torchrun (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
  ``MASTER_ADDR``, ``MASTER_PORT``) or Slurm (``SLURM_PROCID``, ``SLURM_NTASKS``,
  ``SLURM_LOCALID``, ``SLURM_NODELIST``...) environment into a :class:`WorkerIdentity`;
  :func:`torchrun_env` is its inverse, for launchers.
* :func:`place_workers` puts W workers on hosts, ``workers_per_host`` each, in rank order.
* :func:`remote_argv` builds the command that runs argv on host i for ``remote`` = ssh,
  netns or none: one shell string (``cd DIR && exec env K=V argv...``, quoted with shlex)
  behind a different prefix, so the namespace path exercises the ssh path's quoting.

Example:
    >>> slots = place_workers(4, ["10.0.0.1", "10.0.0.2"], workers_per_host=2)
    >>> [(s.rank, s.host, s.local_rank) for s in slots][:3]
    [(0, '10.0.0.1', 0), (1, '10.0.0.1', 1), (2, '10.0.0.2', 0)]
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from ..config import ConfigError
from ..env import ENV_JOIN

DGL_DEFAULT_PORT = 30050
"""The port DGL's ``read_ip_config`` uses for a line without one."""
DEFAULT_MASTER_PORT = 29500
_HOSTNAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
REMOTES = ("ssh", "netns", "none")


# ---------------------------------------------------------------------------------------
# ip_config.txt
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IpConfigEntry:
    """One machine of an ip_config: its address and the DGL server port (None = DGL's default)."""

    host: str
    port: int | None = None


def _check_host(host: str, where: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if not _HOSTNAME.fullmatch(host):
        raise ConfigError(f"{where}: {host!r} is neither an IP address nor a host name; write e.g. 10.0.0.1")
    return host


def _port(text: str, where: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ConfigError(f"{where}: port {text!r} must be a number between 1 and 65535")
    return int(text)


def parse_ip_config(text: str, source: str = "ip_config") -> list[IpConfigEntry]:
    """Parse DGL's ip_config format: one machine per line, "IP [port]".

    Blank lines and ``#`` comments are tolerated (DGL's own reader is not that lenient;
    write files for DGL with :func:`format_ip_config`).

    Args:
        text: the file's contents.
        source: name used in error messages (e.g. the path).

    Returns:
        One :class:`IpConfigEntry` per machine, in file order (= machine id order).

    Raises:
        ConfigError: a line with more than two fields, a bad address or port, a duplicate
            (address, port), or no machine at all.

    Example:
        >>> parse_ip_config("10.0.0.1 30050  # head\\n10.0.0.2\\n")
        [IpConfigEntry(host='10.0.0.1', port=30050), IpConfigEntry(host='10.0.0.2', port=None)]
    """
    out: list[IpConfigEntry] = []
    seen: dict[tuple[str, int], int] = {}
    for no, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        where = f"{source} line {no}"
        if len(fields) > 2:
            raise ConfigError(f"{where}: {line.strip()!r} has {len(fields)} fields; each line must be 'IP [port]'")
        entry = IpConfigEntry(_check_host(fields[0], where), _port(fields[1], where) if len(fields) == 2 else None)
        key = (entry.host, entry.port or DGL_DEFAULT_PORT)
        if key in seen:
            raise ConfigError(
                f"{where}: {key[0]} port {key[1]} repeats line {seen[key]}; "
                "give machines on one address different ports"
            )
        seen[key] = no
        out.append(entry)
    if not out:
        raise ConfigError(f"{source}: no machine listed; write one 'IP [port]' line per machine")
    return out


def read_ip_config(path: str | Path) -> list[IpConfigEntry]:
    """:func:`parse_ip_config` of a file (ConfigError when it cannot be read)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read ip_config {path}: {exc.strerror}; pass an existing file") from None
    return parse_ip_config(text, str(path))


def format_ip_config(entries: Sequence[IpConfigEntry]) -> str:
    """ip_config text that DGL's own reader accepts (no comments, no blank lines).

    Returns:
        "IP port" lines (the port is written out, DGL's default when the entry has none).
    """
    return "".join(f"{e.host} {e.port or DGL_DEFAULT_PORT}\n" for e in entries)


# ---------------------------------------------------------------------------------------
# Slurm's compressed lists
# ---------------------------------------------------------------------------------------


def _split_top(text: str) -> list[str]:
    # Split at commas outside brackets: "a[1,2],b" -> ["a[1,2]", "b"].
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if depth < 0 or depth > 1:
            raise ConfigError(f"host list {text!r} has unbalanced or nested brackets")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise ConfigError(f"host list {text!r} has an unclosed '['")
    return parts + [cur]


def _expand_range(spec: str, text: str) -> list[str]:
    out = []
    for item in spec.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", item.strip())
        if not m:
            raise ConfigError(f"host list {text!r}: {item!r} is not a number or a range like 01-04")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise ConfigError(f"host list {text!r}: range {item!r} runs backwards")
        out += [str(k).zfill(len(lo)) for k in range(int(lo), int(hi) + 1)]  # Slurm keeps the padding
    return out


def expand_nodelist(text: str) -> list[str]:
    """Expand Slurm's compressed host list (``SLURM_NODELIST``).

    Args:
        text: e.g. ``"node[01-03,07],gpu5,rack[1-2]-n[1-2]"``.

    Returns:
        Host names in Slurm's order, e.g. ``["node01", "node02", "node03", "node07", "gpu5",
        "rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]``.

    Raises:
        ConfigError: unbalanced brackets, bad ranges, empty names.

    Example:
        >>> expand_nodelist("node[1-2],login")
        ['node1', 'node2', 'login']
    """
    hosts: list[str] = []
    for item in _split_top(text.strip()):
        if not item:
            raise ConfigError(f"host list {text!r} has an empty entry")
        names = [""]
        for literal, spec in re.findall(r"([^\[\]]*)(?:\[([^\]]*)\])?", item):
            names = [n + literal for n in names]
            if spec:
                names = [n + s for n in names for s in _expand_range(spec, text)]
        hosts += names
    return hosts


def expand_tasks_per_node(text: str) -> list[int]:
    """Expand ``SLURM_TASKS_PER_NODE`` ("2(x3),1" -> [2, 2, 2, 1])."""
    out = []
    for item in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", item)
        if not m:
            raise ConfigError(f"SLURM_TASKS_PER_NODE={text!r}: {item!r} is not like 2 or 2(x3)")
        out += [int(m.group(1))] * int(m.group(2) or 1)
    return out


# ---------------------------------------------------------------------------------------
# Worker identity from a torchrun or Slurm environment
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerIdentity:
    """Who a worker is in a multi-host job.

    Attributes:
        rank, world_size: global rank and number of workers.
        local_rank, local_world_size: rank among the workers of its host, and their number.
        host_index: index of its host (torchrun's GROUP_RANK, Slurm's SLURM_NODEID).
        master_addr, master_port: rendezvous of the process group (rank 0's host).
        source: "torchrun" or "slurm".
    """

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    host_index: int
    master_addr: str
    master_port: int
    source: str


def _int(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        if default is None:
            raise ConfigError(f"{name} is not set; the launcher (torchrun, srun) must set it")
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None


def _check(ok: bool, msg: str) -> None:
    if not ok:
        raise ConfigError(msg)


def worker_identity(env: Mapping[str, str]) -> WorkerIdentity:
    """This worker's identity from a torchrun-style or Slurm environment.

    torchrun variables win when both are present (torchrun inside srun is the innermost
    starter). A hand-set torchrun environment without LOCAL_RANK means one worker per
    host. Under Slurm, MASTER_ADDR defaults to the first host of SLURM_NODELIST and
    MASTER_PORT to 20000 + SLURM_JOB_ID % 10000 (29500 without a job id).

    Args:
        env: the environment (e.g. ``os.environ``).

    Returns:
        A :class:`WorkerIdentity`.

    Raises:
        ConfigError: neither environment is present, a variable is missing or not an
            integer, or the values contradict each other (rank >= world size, ...).

    Example:
        >>> worker_identity({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1",
        ...                  "MASTER_PORT": "29500"}).host_index
        1
    """
    if "RANK" in env or "WORLD_SIZE" in env:
        return _from_torchrun(env)
    if "SLURM_PROCID" in env:
        return _from_slurm(env)
    raise ConfigError(
        "no torchrun or Slurm environment (RANK/WORLD_SIZE or SLURM_PROCID); start workers "
        "with torchrun or srun, or let the launcher start them"
    )


def _from_torchrun(env: Mapping[str, str]) -> WorkerIdentity:
    rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
    _check(world >= 1, f"WORLD_SIZE={world} must be >= 1")
    _check(0 <= rank < world, f"RANK={rank} must be in [0, WORLD_SIZE={world})")
    addr = env.get("MASTER_ADDR", "")
    _check(bool(addr), "MASTER_ADDR is not set; set it to the address of rank 0's host")
    port = _int(env, "MASTER_PORT")
    _check(1 <= port <= 65535, f"MASTER_PORT={port} must be between 1 and 65535")
    if "LOCAL_RANK" in env:
        _check(
            "LOCAL_WORLD_SIZE" in env,
            "LOCAL_RANK is set but LOCAL_WORLD_SIZE is not; set it to the "
            "number of workers on this host, as torchrun does",
        )
        local, lws = _int(env, "LOCAL_RANK"), _int(env, "LOCAL_WORLD_SIZE")
    else:
        local, lws = 0, _int(env, "LOCAL_WORLD_SIZE", 1)
    _check(1 <= lws <= world, f"LOCAL_WORLD_SIZE={lws} must be in [1, WORLD_SIZE={world}]")
    _check(0 <= local < lws, f"LOCAL_RANK={local} must be in [0, LOCAL_WORLD_SIZE={lws})")
    # a worker that took a lost part over (ENV_JOIN) joined a host out of torchrun's order
    _check(local <= rank or bool(env.get(ENV_JOIN)), f"LOCAL_RANK={local} exceeds RANK={rank}")
    # torchrun numbers ranks host by host: rank = host * local_world_size + local_rank.
    host = _int(env, "GROUP_RANK", rank // lws)
    _check(host >= 0, f"GROUP_RANK={host} must be >= 0")
    return WorkerIdentity(rank, world, local, lws, host, addr, port, "torchrun")


def _from_slurm(env: Mapping[str, str]) -> WorkerIdentity:
    rank = _int(env, "SLURM_PROCID")
    world = _int(env, "SLURM_NTASKS", _int(env, "SLURM_NPROCS", 0) or None)
    _check(0 <= rank < world, f"SLURM_PROCID={rank} must be in [0, SLURM_NTASKS={world})")
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
    _check(bool(nodelist), "SLURM_NODELIST is not set; run the worker under srun or sbatch")
    nodes = expand_nodelist(nodelist)
    if "SLURM_NODEID" in env:
        host = _int(env, "SLURM_NODEID")
    else:
        name = env.get("SLURMD_NODENAME", "")
        _check(name in nodes, "neither SLURM_NODEID nor a SLURMD_NODENAME from SLURM_NODELIST is set")
        host = nodes.index(name)
    _check(0 <= host < len(nodes), f"SLURM_NODEID={host} but SLURM_NODELIST has {len(nodes)} hosts")
    local = _int(env, "SLURM_LOCALID", 0)
    per_node = expand_tasks_per_node(env["SLURM_TASKS_PER_NODE"]) if env.get("SLURM_TASKS_PER_NODE") else []
    if per_node:
        _check(
            len(per_node) == len(nodes),
            f"SLURM_TASKS_PER_NODE gives {len(per_node)} hosts, SLURM_NODELIST {len(nodes)}",
        )
        _check(sum(per_node) == world, f"SLURM_TASKS_PER_NODE adds up to {sum(per_node)}, SLURM_NTASKS={world}")
    lws = per_node[host] if per_node else _int(env, "SLURM_NTASKS_PER_NODE", max(1, world // len(nodes)))
    _check(0 <= local < lws, f"SLURM_LOCALID={local} must be in [0, {lws}) tasks on this host")
    addr = env.get("MASTER_ADDR") or nodes[0]
    job = _int(env, "SLURM_JOB_ID", -1)
    port = _int(env, "MASTER_PORT", 20000 + job % 10000 if job >= 0 else DEFAULT_MASTER_PORT)
    _check(1 <= port <= 65535, f"MASTER_PORT={port} must be between 1 and 65535")
    return WorkerIdentity(rank, world, local, lws, host, addr, port, "slurm")


def torchrun_env(identity: WorkerIdentity) -> dict[str, str]:
    """The torchrun variables that make :func:`worker_identity` return ``identity``.

    Returns:
        RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT.
    """
    return {
        "RANK": str(identity.rank),
        "WORLD_SIZE": str(identity.world_size),
        "LOCAL_RANK": str(identity.local_rank),
        "LOCAL_WORLD_SIZE": str(identity.local_world_size),
        "GROUP_RANK": str(identity.host_index),
        "MASTER_ADDR": identity.master_addr,
        "MASTER_PORT": str(identity.master_port),
    }


# ---------------------------------------------------------------------------------------
# Placement
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """Where one worker runs: global rank, host (index and address), rank on that host."""

    rank: int
    host_index: int
    host: str
    local_rank: int


def place_workers(num_workers: int, hosts: Sequence[str], workers_per_host: int = 1) -> list[Slot]:
    """Place workers host by host in rank order (as torchrun numbers them).

    Args:
        num_workers: W, e.g. the number of partitions.
        hosts: host addresses, host 0 first (it also runs rank 0, the master).
        workers_per_host: at most this many workers per host.

    Returns:
        W slots; rank r runs on host r // workers_per_host.

    Raises:
        ConfigError: W < 1, no hosts, workers_per_host < 1, or W > hosts x workers_per_host.

    Example:
        >>> [s.host_index for s in place_workers(3, ["a", "b"], 2)]
        [0, 0, 1]
    """
    _check(num_workers >= 1, f"{num_workers} workers: need at least 1")
    _check(len(hosts) >= 1, "no hosts given; list them in launch.hosts or an ip_config file")
    _check(workers_per_host >= 1, f"workers_per_host={workers_per_host} must be >= 1")
    cap = len(hosts) * workers_per_host
    _check(
        num_workers <= cap,
        f"{num_workers} workers do not fit on {len(hosts)} hosts x {workers_per_host} "
        f"per host; add hosts or set workers_per_host={-(-num_workers // len(hosts))}",
    )
    return [
        Slot(r, r // workers_per_host, hosts[r // workers_per_host], r % workers_per_host) for r in range(num_workers)
    ]


# ---------------------------------------------------------------------------------------
# Remote commands
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Remote:
    """How the launcher reaches a host.

    Attributes:
        kind: "ssh" (over ssh), "netns" (a test host's namespaces), "none" (this machine).
        user, port, identity_file, ssh_options: ssh settings (ssh_options are extra argv,
            e.g. ("-o", "StrictHostKeyChecking=accept-new")).
        env: extra environment variables set for every remote command.
        prefixes: for "netns", one argv prefix per host (``TestHosts[i].prefix()``).
    """

    kind: str = "none"
    user: str = ""
    port: int = 22
    identity_file: str = ""
    ssh_options: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    prefixes: tuple[tuple[str, ...], ...] = ()


def shell_command(argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None) -> str:
    """One POSIX shell string that runs argv (with env, in cwd); exec keeps the PID.

    Example:
        >>> print(shell_command(["echo", "a b"], {"RANK": "0"}, "/data dir"))
        cd '/data dir' && exec env RANK=0 echo 'a b'
    """
    _check(len(argv) > 0, "empty command")
    words = list(argv)
    if env:
        for k in env:
            _check(
                bool(_ENV_NAME.fullmatch(k)), f"environment variable name {k!r} is invalid; use [A-Za-z_][A-Za-z0-9_]*"
            )
        words = ["env"] + [f"{k}={v}" for k, v in env.items()] + words
    cmd = "exec " + shlex.join(words)
    return f"cd {shlex.quote(cwd)} && {cmd}" if cwd else cmd


def remote_argv(
    remote: Remote,
    host_index: int,
    host: str,
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> list[str]:
    """The local command that runs ``argv`` on host ``host_index`` (address ``host``).

    All kinds run the same :func:`shell_command` string; only the prefix differs:
    ``ssh [opts] [user@]host STRING``, ``<netns prefix> sh -c STRING``, ``sh -c STRING``.

    Args:
        remote: how hosts are reached.
        host_index, host: the target (index into ``remote.prefixes``; address for ssh).
        argv: the command on the host.
        env: per-command environment (on top of ``remote.env``).
        cwd: working directory on the host (None: ssh's home / the caller's cwd).

    Returns:
        argv for :class:`subprocess.Popen` on this machine.

    Example:
        >>> remote_argv(Remote("ssh", user="me", port=2222), 0, "10.0.0.1", ["hostname"])
        ['ssh', '-o', 'BatchMode=yes', '-p', '2222', 'me@10.0.0.1', 'exec hostname']
    """
    _check(remote.kind in REMOTES, f"launch.remote={remote.kind!r} is unknown; use ssh, netns or none")
    script = shell_command(argv, {**remote.env, **(env or {})}, cwd)
    if remote.kind == "ssh":
        _check(1 <= remote.port <= 65535, f"ssh port {remote.port} must be between 1 and 65535")
        # BatchMode: fail at once instead of waiting for a password prompt nobody sees.
        out = ["ssh", "-o", "BatchMode=yes", "-p", str(remote.port)]
        if remote.identity_file:
            out += ["-i", remote.identity_file]
        out += list(remote.ssh_options)
        return out + [f"{remote.user}@{host}" if remote.user else host, script]
    if remote.kind == "netns":
        _check(
            0 <= host_index < len(remote.prefixes),
            f"host {host_index} has no namespace prefix ({len(remote.prefixes)} test hosts); "
            "start one TestHosts host per launch host",
        )
        return list(remote.prefixes[host_index]) + ["sh", "-c", script]
    return ["sh", "-c", script]
