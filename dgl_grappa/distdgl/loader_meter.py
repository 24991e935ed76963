"""A script's epochs, measured around its loaders: what the launcher records of a DistDGL script it runs.

A script of the user's own (DGL's examples, say) times and counts nothing for the package. When the
launcher runs it, :mod:`.runscript` installs this meter in each trainer before the script's first
line (``DGL_GRAPPA_EPOCHS`` names the folder): every pass over one of DGL's distributed loaders
(``DistDataLoader`` and so ``DistNodeDataLoader`` and ``DistEdgeDataLoader``) or one of the package's
drop-in loaders is measured, from the loop's first batch request to its end, the loop's body
included, and written as one JSON line to ``<folder>/trainer<rank>.jsonl`` as soon as it ends.

A pass made with autograd on is a training epoch (``"train": true``); an evaluation's passes run under
``torch.no_grad()`` (DGL's examples all do) and are recorded apart. Nothing in the meter is a
collective, so a script's loops stay exactly as they are, whatever each trainer iterates. Per pass:

* ``time_s`` and ``steps`` (batches);
* the application's bytes of :class:`~dgl_grappa.distdgl.metering.TrafficCounter` (KVStore rows
  owned by another machine, sampling RPC), and the DDP gradient payload: ``steps`` x the parameter
  bytes of every ``DistributedDataParallel`` the script made (one all-reduce of each per step);
* ``wire_bytes``: on rank 0, in the job's private network namespace, the loopback's bytes over the
  pass (every process of the job); across hosts (``DGL_GRAPPA_WIRE=nic``) each trainer's host's
  interface bytes (``host_tx_bytes`` / ``host_rx_bytes``);
* a drop-in loader's ``one_time_bytes``; the trainer's peak resident memory; ``log_offset``, the
  length of the trainer's output at the pass's end (where its printed metric falls,
  :mod:`.script_metric`).

Example (what :mod:`.runscript` does when the launcher asks)::

    install("runs/x/epochs")        # then the script runs; runs/x/epochs/trainer0.jsonl fills
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import sys
import time
from pathlib import Path

import torch

from ..env import ENV_EPOCHS, ENV_WIRE
from ..runtime.metrics import WireMeter, nic_bytes, peak_rss_bytes
from .launcher import RECORDS_DIR, records_path  # noqa: F401  (the launcher names the folder; re-exported)
from .metering import TrafficCounter

_DDP_BYTES = [0]
"""Parameter bytes of every DistributedDataParallel made in this process (one all-reduce of each per step)."""


def _log_offset() -> int | None:
    """The length of this process's output so far (its stdout is the launcher's log file), or None (a pipe)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        return os.lseek(sys.stdout.fileno(), 0, os.SEEK_CUR)
    except (OSError, ValueError, AttributeError):
        return None


class LoaderMeter:
    """This trainer's passes over its loaders, each written as one JSON line when it ends.

    Args:
        path: the trainer's records file (truncated here).
        rank: the trainer's rank (rank 0 reads the job's loopback).
    """

    def __init__(self, path: Path, rank: int):
        self.path, self.rank = Path(path), rank
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(self.path, "w", buffering=1)
        self.traffic = TrafficCounter.install().view()  # its own differences: the script's meter reads too
        self.wire = WireMeter(main=rank == 0)
        self.nic = os.environ.get(ENV_WIRE) == "nic"
        self.passes = 0
        self.ids: dict[int, int] = {}  # loader object -> its number (a pass of which loader)
        atexit.register(self.close)

    def write(self, rec: dict) -> None:
        if not self.file.closed:
            self.file.write(json.dumps(rec) + "\n")

    def close(self) -> None:
        """The trainer's peak memory after everything (evaluation included), then close the file."""
        self.write({"exit": True, "peak_rss_bytes": peak_rss_bytes()})
        self.file.close()

    def measured(self, loader, batches):
        """The batches of ``batches`` (one pass over ``loader``), measured; the record written when it ends."""
        train = torch.is_grad_enabled()
        self.traffic.take()  # what came before this pass is not its
        self.wire.start()
        nic0 = nic_bytes() if self.nic else None
        steps, complete = 0, False
        t0 = time.perf_counter()
        try:
            for batch in batches:
                steps += 1
                yield batch
            complete = True
        finally:
            t = time.perf_counter() - t0
            counts = self.traffic.take()
            rec = {
                "pass": self.passes,
                "loader": type(loader).__name__,
                "loader_id": self.ids.setdefault(id(loader), len(self.ids)),
                "train": train,
                "complete": complete,
                "time_s": t,
                "steps": steps,
                **counts,
                "grad_bytes": steps * _DDP_BYTES[0],
                "wire_bytes": self.wire.stop(),
                "one_time_bytes": int(getattr(loader, "one_time_bytes", 0) or 0),
                "peak_rss_bytes": peak_rss_bytes(),
                "log_offset": _log_offset(),
            }
            if nic0 is not None:
                rx, tx = nic_bytes()
                rec.update(host_rx_bytes=rx - nic0[0], host_tx_bytes=tx - nic0[1], hostname=socket.gethostname())
            self.passes += 1
            self.write(rec)


def _wrap_iter(cls, meter: LoaderMeter) -> None:
    inner = cls.__iter__

    def metered(self):
        if getattr(self, "_dgl_grappa_metered", False):  # a subclass's pass through its base's: measured once
            return inner(self)
        # at once, as the loader's own __iter__ (DGL's resets and shuffles here); DGL's loaders return themselves,
        # so the pass iterates what this returned, never the loader again
        return _pass(self, inner(self))

    def _pass(self, it):
        self._dgl_grappa_metered = True
        try:
            yield from meter.measured(self, _batches(it))
        finally:
            self._dgl_grappa_metered = False

    cls.__iter__ = metered


def _batches(it):
    while True:
        try:
            item = next(it)
        except StopIteration:
            return
        yield item


def _count_ddp() -> None:
    ddp = torch.nn.parallel.DistributedDataParallel
    inner = ddp.__init__

    def init(self, module, *args, **kwargs):
        inner(self, module, *args, **kwargs)
        _DDP_BYTES[0] += sum(p.numel() * p.element_size() for p in module.parameters() if p.requires_grad)

    ddp.__init__ = init


def loader_classes() -> list[type]:
    """The loaders whose passes are measured: DGL's distributed base loader and the package's drop-in loaders."""
    import dgl.distributed  # deferred: the trainer's script imports DGL anyway; the caller's side needs none

    from ..method.dropin import GrappaEdgeLoader, GrappaHeteroLoader, GrappaLoader

    return [dgl.distributed.DistDataLoader, GrappaLoader, GrappaEdgeLoader, GrappaHeteroLoader]


def install(folder: str | Path | None = None) -> LoaderMeter | None:
    """Measure this trainer's loader passes into ``folder`` (default: ``$DGL_GRAPPA_EPOCHS``); None when unset.

    Only a trainer's main process measures (``DGL_ROLE=client``; a server runs the same script).
    """
    folder = folder or os.environ.get(ENV_EPOCHS)
    if not folder or os.environ.get("DGL_ROLE") == "server":
        return None
    meter = LoaderMeter(records_path(folder, int(os.environ.get("RANK", "0"))), int(os.environ.get("RANK", "0")))
    for cls in loader_classes():
        _wrap_iter(cls, meter)
    _count_ddp()
    return meter
