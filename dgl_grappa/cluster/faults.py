"""Fault injection for the recovery tests: a worker kills itself at a chosen point, once.

Production code calls :func:`hit` at a few named points; it does nothing unless the
environment variable ``DGL_GRAPPA_FAULT`` holds a JSON object naming that point. Spawned
workers, the DistDGL launcher and its trainers inherit the variable, so a test (or
``tests/fault_soak.py``) picks where a run dies without touching its code:

* ``{"point": "step", "rank": 1, "epoch": 2, "step": 3}``: before that training step
  (native trainer and DistDGL trainer);
* ``{"point": "switch", "rank": 0, "epoch": 2}``: in the middle of the repartition switch
  that starts epoch 2 (native: after every worker agreed, while loading the new part;
  DistDGL: in the restarted segment, after its checkpoint was loaded);
* ``{"point": "checkpoint", "epoch": 3}``: while rank 0 writes the checkpoint taken after
  epoch 2 (``epoch`` = the checkpoint's next epoch), half of the file written;
* ``{"point": "join", "rank": 1, "gen": 1}``: a worker taking a lost part over, right after it
  joined that generation's group and before it has the survivors' state (a loss while a
  generation forms);
* ``{"point": "step", ..., "link": "down"}``: instead of a signal, the worker takes its own
  host's network down (``ip link set eth0 down`` inside a test host: the host is cut off,
  its processes run on).

Optional keys: ``"signal"`` (default ``"SIGKILL"``) or ``"exit"`` (an exit status
instead of a signal), ``"target": "parent"`` (the signal goes to the worker's parent, the
launcher, as a scheduler's would, instead of to the worker; with ``"wait": true`` the worker then
waits, at most 30 s, until the launcher's stop request reaches it), and ``"once"``: a file created
when the fault fires; while it exists the fault does not fire again (so the restarted job runs
through). A JSON list holds several faults (each with its own ``once`` file).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time

from ..env import ENV_FAULT
from .signals import stop_requested

"""Environment variable holding the fault (JSON); unset = no fault."""

POINTS = ("step", "switch", "checkpoint", "join")

log = logging.getLogger("dgl_grappa")


def _specs() -> list[dict]:
    raw = os.environ.get(ENV_FAULT)
    if not raw:
        return []
    specs = json.loads(raw)
    specs = specs if isinstance(specs, list) else [specs]
    for spec in specs:
        if spec.get("point") not in POINTS:
            raise ValueError(f"{ENV_FAULT}: point {spec.get('point')!r} is not one of {', '.join(POINTS)}")
    return specs


def hit(point: str, **where: int) -> None:
    """Fire a configured fault that names ``point`` and whose coordinates all match ``where``.

    Args:
        point: one of :data:`POINTS`.
        where: this place's coordinates (``rank``, ``epoch``, ``step``); a key the fault
            does not name matches anything.
    """
    for spec in _specs():
        if spec["point"] == point and not any(k in spec and spec[k] != v for k, v in where.items()):
            _fire(spec, point, where)


def _fire(spec: dict, point: str, where: dict) -> None:
    once = spec.get("once")
    if once:
        try:
            os.close(os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            return
    if "link" in spec:  # a test host's own interface, from inside it (the worker runs on as if cut off)
        log.warning("fault injection: link %s at %s %s (pid %d)", spec["link"], point, where, os.getpid())
        for h in logging.getLogger("dgl_grappa").handlers:
            h.flush()
        subprocess.run(["ip", "link", "set", spec.get("dev", "eth0"), spec["link"]], check=True, timeout=10)
        return
    if "exit" in spec:
        log.warning("fault injection: exit %d at %s %s", spec["exit"], point, where)
        os._exit(int(spec["exit"]))
    sig = signal.Signals[spec.get("signal", "SIGKILL")]
    to_parent = spec.get("target") == "parent"
    log.warning("fault injection: %s%s at %s %s", sig.name, " to the launcher" if to_parent else "", point, where)
    os.kill(os.getppid() if to_parent else os.getpid(), sig)
    if to_parent and spec.get("wait"):  # the stop then lands at this point of the run, not wherever the relay is
        deadline = time.monotonic() + 30
        while not stop_requested() and time.monotonic() < deadline:
            time.sleep(0.05)
