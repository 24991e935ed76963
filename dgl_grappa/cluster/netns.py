"""Private namespaces for one job: a loopback of its own, shaped bandwidth, private /dev/shm.

This module makes namespaces and checks that they can be made; the counters read inside
them are :mod:`dgl_grappa.runtime.metrics` (:class:`~dgl_grappa.runtime.metrics.WireMeter`), and running a
command in them, bounded, is :mod:`dgl_grappa.cluster.procs`. Why namespaces:

* **Bytes on the wire.** In a private network namespace the job's loopback carries the
  job's traffic and nothing else, so the interface counter (``/proc/self/net/dev``, which
  always shows the *reader's* namespace, unlike ``/sys/class/net`` which shows the
  namespace that mounted sysfs) is an exact measurement of what the job put on the
  network. Rank 0 reads it at epoch boundaries (:class:`dgl_grappa.runtime.metrics.WireMeter`).
* **Bandwidth emulation.** The namespace's ``lo`` can be shaped with ``tc qdisc ... tbf``
  without touching the host's loopback (other jobs on the machine are unaffected).
* **Private /dev/shm.** DistDGL names its shared-memory segments after the graph and the
  tensor only, so two DistDGL "machines" on one host overwrite each other's segments
  unless each has its own /dev/shm; a tmpfs mounted in a private mount namespace also
  vanishes with the namespace, so nothing is left behind when a process is killed.

The isolation itself is done by a tiny helper process, ``python -m dgl_grappa.cluster.netns
[--net] [--bandwidth R] [--shm SIZE] -- CMD...``: it calls ``unshare(2)`` (no torch or DGL
imported yet, so it is single-threaded), mounts the tmpfs, brings ``lo`` up, adds the tc
qdisc, arranges to be SIGKILLed when its parent dies, and then ``exec``s CMD. Build the
command with :func:`isolate_argv`. Everything needs root (CAP_SYS_ADMIN + CAP_NET_ADMIN);
where that is missing the helper exits with :data:`EXIT_ISOLATION` and one line on stderr
that says why, which :func:`check_isolation` turns into a message for the user.

This module must stay free of heavy imports (torch, dgl): the helper runs it before
``unshare`` and a thread started by an import would make that unsafe.

Example:
    >>> argv = isolate_argv(["python", "-m", "dgl_grappa", "train"], net=True, bandwidth="1gbit")  # doctest: +SKIP
    >>> subprocess.run(argv, check=True)                                                           # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import fcntl
import os
import shutil
import socket
import struct
import subprocess
import sys

from ..config import TC_RATE, ConfigError

# ENV_NETNS is "1" inside a private namespace (set by the helper): only then does the wire
# meter read the counters (in the host namespace they would include everybody's traffic).
from ..env import ENV_NETNS
from .ptree import kill_with_parent

EXIT_ISOLATION = 97
"""Exit status of the helper when the namespace cannot be made (not root, no tc, ...)."""

_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 2, 4, 16384, 1 << 18
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_RATE_UNIT = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


class IsolationError(ConfigError):
    """The job cannot get the namespace it asked for (the message says why, in one line)."""


def in_private_netns() -> bool:
    """True inside a network namespace made by this module's helper."""
    return os.environ.get(ENV_NETNS) == "1"


# ---------------------------------------------------------------------------------------
# Building the isolated command (used by launchers)
# ---------------------------------------------------------------------------------------


def rate_bits(rate: str) -> float:
    """A tc rate such as "200mbit" in bits per second.

    Raises:
        ValueError: not of the form <number><bit|kbit|mbit|gbit>.
    """
    m = TC_RATE.fullmatch(rate.strip().lower())
    if not m:
        raise ValueError(f"{rate!r} is not a tc rate; write e.g. 1gbit, 200mbit or 500kbit")
    return float(m.group(1)) * _RATE_UNIT[m.group(2)]


def isolate_argv(argv: list[str], *, net: bool = True, bandwidth: str = "", shm: str = "") -> list[str]:
    """The command that runs ``argv`` in fresh namespaces.

    Args:
        argv: the command to run (its first element is looked up on PATH).
        net: a private network namespace with ``lo`` up (wire bytes are then measured).
        bandwidth: tc rate for ``lo`` (e.g. "1gbit"); empty = not shaped. Implies net.
        shm: size of a private /dev/shm tmpfs (e.g. "8g") in a private mount namespace;
            empty = keep the caller's /dev/shm.

    Returns:
        ``[python, -m, dgl_grappa.cluster.netns, ...flags, --, *argv]``.
    """
    out = [sys.executable, "-m", "dgl_grappa.cluster.netns"]
    if net or bandwidth:
        out.append("--net")
    if bandwidth:
        rate_bits(bandwidth)  # fail here, in the caller, on a malformed rate
        out += ["--bandwidth", bandwidth]
    if shm:
        out += ["--shm", shm]
    return out + ["--"] + list(argv)


def check_isolation(*, net: bool = True, bandwidth: str = "", shm: str = "") -> str | None:
    """Try the namespaces once (in a throw-away child); None if they work, else why not.

    Returns:
        None, or a one-line reason (e.g. "needs root ...", "needs the tc command ...").
    """
    argv = isolate_argv([], net=net, bandwidth=bandwidth, shm=shm)
    argv.insert(argv.index("--"), "--check")
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "the namespace check did not finish in 30 s"
    if p.returncode == 0:
        return None
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    if not lines:
        return f"the namespace check failed with status {p.returncode}"
    return lines[-1].removeprefix("dgl_grappa.cluster.netns: error: ")


def require_isolation(*, net: bool = True, bandwidth: str = "", shm: str = "") -> None:
    """Raise :class:`IsolationError` (one line) unless the namespaces can be made here."""
    why = check_isolation(net=net, bandwidth=bandwidth, shm=shm)
    if why is not None:
        what = f"network.bandwidth={bandwidth}" if bandwidth else "an isolated job"
        raise IsolationError(f"{what} cannot run here: {why}")


# ---------------------------------------------------------------------------------------
# The helper process
# ---------------------------------------------------------------------------------------


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _fail(msg: str) -> None:
    print(f"dgl_grappa.cluster.netns: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(EXIT_ISOLATION)


def _unshare(libc, flags: int) -> None:
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        if err == 1:  # EPERM
            _fail(
                "creating a private namespace needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN); "
                "run as root, or leave network.bandwidth empty"
            )
        _fail(f"unshare failed: {os.strerror(err)}")


def _mount_shm(libc, size: str) -> None:
    # Stop mount events from propagating back to the host before mounting anything.
    if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        _fail(f"making / private failed: {os.strerror(ctypes.get_errno())}")
    opts = f"size={size},mode=1777".encode()
    if libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", _MS_NOSUID | _MS_NODEV, opts) != 0:
        _fail(f"mounting a private /dev/shm failed: {os.strerror(ctypes.get_errno())}")


def _join_mnt(libc, pid: int) -> None:
    cwd = os.getcwd()
    try:
        fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
    except OSError as exc:
        _fail(f"cannot open the mount namespace of process {pid}: {exc}")
    if libc.setns(fd, _CLONE_NEWNS) != 0:
        _fail(f"entering the mount namespace of process {pid} failed: {os.strerror(ctypes.get_errno())}")
    os.close(fd)
    os.chdir(cwd)  # setns resets the working directory to the namespace's root


def _lo_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, _SIOCGIFFLAGS, ifr))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def _shape(bandwidth: str) -> None:
    tc = shutil.which("tc") or next((p for p in ("/usr/sbin/tc", "/sbin/tc") if os.path.exists(p)), None)
    if tc is None:
        _fail(
            f"network.bandwidth={bandwidth} needs the tc command (iproute2); install it, e.g. "
            "apt-get install -y iproute2"
        )
    # The bucket must hold at least one 64 KiB loopback segment (GSO) and ~4 ms of traffic,
    # or tbf drops packets instead of delaying them.
    burst = max(256 * 1024, int(rate_bits(bandwidth) / 8 / 250))
    cmd = [tc, "qdisc", "add", "dev", "lo", "root", "tbf", "rate", bandwidth, "burst", str(burst), "latency", "100ms"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        _fail(f"'{' '.join(cmd)}' failed: {p.stderr.strip() or p.returncode}")


def main(argv: list[str] | None = None) -> int:
    """The helper: make the namespaces, then exec the command after ``--``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" in argv:
        i = argv.index("--")
        own, cmd = argv[:i], argv[i + 1 :]
    else:
        own, cmd = argv, []
    ap = argparse.ArgumentParser(
        prog="python -m dgl_grappa.cluster.netns", description="run a command in private network / mount namespaces"
    )
    ap.add_argument("--net", action="store_true", help="private network namespace, lo up")
    ap.add_argument("--bandwidth", default="", help="shape lo with tc tbf at this rate (e.g. 1gbit)")
    ap.add_argument("--shm", default="", help="private /dev/shm tmpfs of this size (e.g. 8g)")
    ap.add_argument("--check", action="store_true", help="make the namespaces, then exit 0 (no command)")
    ap.add_argument(
        "--join-mnt",
        type=int,
        default=0,
        metavar="PID",
        help="enter the mount namespace of process PID (e.g. to share its private /dev/shm)",
    )
    args = ap.parse_args(own)
    if not cmd and not args.check:
        ap.error("no command after --")
    libc = _libc()
    # If the launcher is killed (even with SIGKILL) the whole job goes with it: the
    # signal is kept across exec, and every process we start sets it again for itself.
    kill_with_parent(os.getppid())
    flags = (_CLONE_NEWNET if (args.net or args.bandwidth) else 0) | (_CLONE_NEWNS if args.shm else 0)
    if flags:
        _unshare(libc, flags)
    if args.shm:
        _mount_shm(libc, args.shm)
    if args.join_mnt:
        _join_mnt(libc, args.join_mnt)
    if flags & _CLONE_NEWNET:
        try:
            _lo_up()
        except OSError as exc:
            _fail(f"bringing lo up failed: {exc}")
        if args.bandwidth:
            _shape(args.bandwidth)
        os.environ[ENV_NETNS] = "1"
    if args.check:
        return 0
    sys.stdout.flush()
    try:
        os.execvp(cmd[0], cmd)
    except OSError as exc:
        _fail(f"cannot run {cmd[0]!r}: {exc}")
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
