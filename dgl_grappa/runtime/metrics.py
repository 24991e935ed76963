"""Measurement, written once for every system: the epoch clock, bytes on the wire, run records.

* **Epoch time** (:class:`EpochClock`, :func:`epoch_summary`). An epoch is timed from a
  barrier at its start to the end of its slowest worker, evaluation excluded: every
  worker starts its clock right after the barrier, stops it after its last step, and one
  MAX all-reduce of that float (after the timed region) gives the epoch's time. A run's
  ``epoch_time_s`` is the median of those per-epoch maxima over its epochs, its
  ``train_time_s`` their sum; a run made of several jobs (DistDGL restart segments)
  concatenates their epoch records and applies the same rule. Grappa's trainer, the
  DistDGL trainer and the segment merge all use these two, so their times compare.
* **Wire bytes** (:class:`WireMeter`): loopback tx bytes of the job's private network
  namespace (see :mod:`dgl_grappa.cluster.netns`), read by rank 0 around the same window; the
  application's own expectation of them for an all-reduce is
  :func:`ring_allreduce_wire_bytes`. Across hosts (:class:`HostWireMeter`): each host's
  own interface counters, read by one worker per host around the same window and
  gathered, so every host's bytes in and out are known (``wire_hosts`` in summary.json).
* **Where an epoch goes** (:class:`PhaseTimes`): seconds per phase of one worker's epoch
  (sampling, feature gather, forward, backward, all-reduce, optimizer), the rest of its
  time (``other``) and its wait for the slowest worker (``wait``); they add up to the
  epoch's time. Every system fills the same keys (:data:`PHASES`), as far as it can.
* **Records**: the per-epoch JSONL log (and, with ``run.tensorboard``, the same scalars as
  TensorBoard events: :class:`EpochLog`), JSON files, small statistics and formatting.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import time
from pathlib import Path
from typing import Any

from ..cluster.netns import in_private_netns
from ..env import ENV_WIRE
from .grading import ACCURACY, Metric


def _dist():
    """``torch.distributed``, imported where a collective is made: a process that uses this module only to read
    /proc or write JSON (the DistDGL launcher) starts without torch."""
    import torch.distributed as dist

    return dist


class JsonlLog:
    """Append-only JSON-lines file; one record per epoch (written by rank 0).

    ``keep``: go on with the file as it is (a new rank 0 that took a lost one's place) instead of
    starting it empty.
    """

    def __init__(self, path: str | Path, keep: bool = False):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not keep or not self.path.exists():
            self.path.write_text("")

    def read(self) -> list[dict[str, Any]]:
        """The records in the file (a last line cut short by a killed writer is left out)."""
        out = []
        for line in self.path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break
        return out

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")

    def close(self) -> None:
        pass


def _tb_tag(key: str) -> str:
    """TensorBoard tag of a record key: the key itself, under a section the UI groups by."""
    if key.endswith("_acc"):
        return f"accuracy/{key}"
    if key in PHASE_KEYS or key == "allreduce_inflight_s":
        return f"phase/{key}"
    if key.endswith("_s"):
        return f"time/{key}"
    if "bytes" in key:
        return f"bytes/{key}"
    return f"train/{key}"


class TensorBoardLog:
    """The numeric scalars of every epoch record as TensorBoard events (rank 0), step = epoch.

    Tags are the record's keys, grouped into sections (``accuracy/val_acc``,
    ``phase/sample_s``, ``time/epoch_time_s``, ``bytes/grad_bytes``, ``train/loss``); None,
    booleans, strings and nested values are skipped. Events are flushed after every epoch, so
    a running job can be watched with ``tensorboard --logdir <run.output_dir>``.

    Args:
        log_dir: folder of the event files (``<run.output_dir>/tensorboard``).
    """

    def __init__(self, log_dir: str | Path):
        from torch.utils.tensorboard import (
            SummaryWriter,  # deferred: only run.tensorboard needs the tensorboard package
        )

        self.log_dir = Path(log_dir)
        self.writer = SummaryWriter(str(self.log_dir))

    def write(self, record: dict[str, Any]) -> None:
        step = int(record.get("epoch", 0))
        for k, v in record.items():
            if k == "epoch" or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            if v != v or v in (float("inf"), float("-inf")):
                continue
            self.writer.add_scalar(_tb_tag(k), float(v), step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class EpochLog:
    """Where rank 0 writes each epoch's record: ``metrics.jsonl``, and TensorBoard events if asked.

    Args:
        out_dir: the run's output folder.
        tensorboard: also write the record's scalars to ``<out_dir>/tensorboard`` (``run.tensorboard``).

    Example:
        >>> log = EpochLog("runs/x", tensorboard=True)  # doctest: +SKIP
        >>> log.write({"epoch": 0, "loss": 1.2}); log.close()  # doctest: +SKIP
    """

    def __init__(self, out_dir: str | Path, tensorboard: bool = False, keep: bool = False):
        self.jsonl = JsonlLog(Path(out_dir) / "metrics.jsonl", keep)
        self.tb = TensorBoardLog(Path(out_dir) / "tensorboard") if tensorboard else None

    @property
    def path(self) -> Path:
        return self.jsonl.path

    def write(self, record: dict[str, Any]) -> None:
        self.jsonl.write(record)
        if self.tb is not None:
            self.tb.write(record)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
            self.tb = None


def read_jsonl(path: str | Path) -> list[dict]:
    """All records of a JSONL file."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON, through a temporary file so a reader never sees half of it."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1))
    tmp.replace(path)


def memory_stats() -> dict[str, float]:
    """This process's memory now, in GiB, from /proc/self/status (Linux; {} elsewhere).

    ``rss_gb`` (resident now), ``anon_gb`` (its anonymous part: heap, tensors),
    ``file_gb`` (file-backed pages mapped and resident: libraries, memory-mapped files, which
    the kernel can drop and which processes share), ``peak_rss_gb`` (VmHWM, the high-water
    mark of rss since the process started).
    """
    keys = {"VmRSS": "rss_gb", "RssAnon": "anon_gb", "RssFile": "file_gb", "VmHWM": "peak_rss_gb"}
    out: dict[str, float] = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in keys:
                    out[keys[name]] = int(rest.split()[0]) / 2**20  # kB -> GiB
    except OSError:
        return {}
    return out


def peak_rss_bytes(pid: int | str = "self") -> int | None:
    """A process's peak resident memory (VmHWM, bytes) from /proc (None where unreadable)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class AnonPeak:
    """The highest anonymous resident memory (RssAnon, GiB) seen at the moments :meth:`sample` is called.

    The kernel keeps a high-water mark of the whole resident size (VmHWM) but not of its
    anonymous part; a process that maps big files (the layer-wise evaluation's embedding
    files) has a VmHWM inflated by shared, droppable page-cache pages, so the memory it
    really holds is sampled here at its phase boundaries (epochs, evaluation chunks).
    """

    def __init__(self):
        self.gb = 0.0

    def sample(self) -> float:
        self.gb = max(self.gb, memory_stats().get("anon_gb", 0.0))
        return self.gb


ANON_PEAK = AnonPeak()
"""This process's sampler (one per process: the trainer and its evaluator share it)."""


def median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


# ---------------------------------------------------------------------------------------
# Where an epoch goes
# ---------------------------------------------------------------------------------------

PHASES = ("sample", "gather", "forward", "backward", "allreduce", "optimizer")
"""The timed phases of a step, in order. What each figure means (seconds per epoch, one worker):

* ``sample``: drawing the batch's blocks (Grappa: DGL's NeighborSampler on the local graph;
  DistDGL: the loader's ``next()``, i.e. sampling, with its RPCs to other machines);
* ``gather``: reading the input feature rows (Grappa: local memory; DistDGL: from the end of
  ``next()`` to the model's forward, i.e. ``g.ndata["feat"][input_nodes]``, the KVStore pull);
* ``forward``: the model's forward pass and the loss;
* ``backward``: zero_grad and autograd until DDP hands the *last* gradient bucket to the
  communication hook (the collectives of earlier buckets run meanwhile: overlapped time is
  counted here). DistDGL (plain DDP, no hook to time): the whole backward, all-reduce included;
* ``allreduce``: from that last bucket to the end of ``backward()``: the hook's own work, the
  collective's exposed latency and any wait for peers that are behind within the step
  (0 for DistDGL, whose all-reduce is inside ``backward``);
* ``optimizer``: ``optimizer.step()``.

``other_s`` is the rest of the worker's own epoch time (loop overhead, logging, Python), and
``wait_s`` the time between its end and the end of the slowest worker (the epoch clock's
MAX). ``overlap_s`` is the time two phases ran at once (``train.prefetch``: the next batch's
sampling and gather during this step's backward and all-reduce; 0 otherwise). For the
record's worker (rank 0), phases - overlap + other + wait add up to ``epoch_time_s``.
``allreduce_inflight_s`` (Grappa) is the seconds the collectives were in flight, summed over
buckets, from the hook's entry to their completion: it overlaps ``backward``.
"""
PHASE_KEYS = tuple(f"{p}_s" for p in PHASES) + ("other_s", "wait_s", "overlap_s")


class PhaseTimes:
    """Seconds per phase of one worker's epoch: ``perf_counter`` around each phase, always on.

    Example:
        >>> t = PhaseTimes(); t.add("sample", 0.5); t.add("forward", 0.25)
        >>> t.breakdown(worker_s=1.0, epoch_s=1.25)["other_s"], t.breakdown(1.0, 1.25)["wait_s"]
        (0.25, 0.25)
    """

    __slots__ = ("s", "overlap")

    def __init__(self):
        self.s = dict.fromkeys(PHASES, 0.0)
        self.overlap = 0.0  # seconds two phases ran at once (counted in both)

    def add(self, phase: str, seconds: float) -> None:
        self.s[phase] += seconds

    def breakdown(self, worker_s: float, epoch_s: float) -> dict[str, float]:
        """The epoch's record fields: ``<phase>_s`` for :data:`PHASES`, ``other_s``, ``wait_s``, ``overlap_s``.

        Args:
            worker_s: this worker's own epoch time (the phases were timed inside it).
            epoch_s: the epoch's time (its slowest worker).
        """
        out = {f"{k}_s": v for k, v in self.s.items()}
        out["other_s"] = max(0.0, worker_s - (sum(self.s.values()) - self.overlap))
        out["wait_s"] = max(0.0, epoch_s - worker_s)
        out["overlap_s"] = self.overlap
        return out


def phase_summary(records: list[dict]) -> dict[str, float] | None:
    """Median over epochs of every phase figure (``PHASE_KEYS``) found in the records, or None."""
    keys = [k for k in PHASE_KEYS if any(k in r for r in records)]
    if not keys:
        return None
    return {k: median([r[k] for r in records if k in r]) for k in keys}


# ---------------------------------------------------------------------------------------
# Epoch time
# ---------------------------------------------------------------------------------------


class EpochClock:
    """The epoch clock of every system: from a barrier at the epoch's start to its slowest worker's end.

    Every worker calls :meth:`start` (a barrier, then the clock starts), runs its steps,
    calls :meth:`stop` (its own seconds) and then :meth:`slowest` (one MAX all-reduce of
    that float, after the timed region; it also marks the point where every worker has
    finished its steps, so a wire window closed after it holds all of the epoch's traffic).

    Args:
        group: process group (None = the default one; without a process group the
            barrier and the all-reduce are skipped).

    Example:
        >>> clock.start(); ...train...; mine = clock.stop(); epoch_s = clock.slowest(mine)  # doctest: +SKIP
    """

    def __init__(self, group=None):
        self.group = group
        self._t0: float | None = None

    def _distributed(self) -> bool:
        dist = _dist()
        return dist.is_available() and dist.is_initialized()

    def start(self) -> None:
        """Barrier, then start this worker's clock."""
        if self._distributed():
            _dist().barrier(group=self.group)
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        """Seconds since :meth:`start` on this worker (call right after its last step)."""
        if self._t0 is None:
            raise RuntimeError("EpochClock.stop() without start()")
        t, self._t0 = time.perf_counter() - self._t0, None
        return t

    def slowest(self, mine: float, *others: float) -> float | tuple[float, ...]:
        """The epoch's time: the maximum of every worker's :meth:`stop` (a collective).

        With ``others`` (more per-worker figures, e.g. memory), their maxima too, in the same
        all-reduce: ``(time, *maxima)``.
        """
        if not self._distributed():
            return (mine, *others) if others else mine
        import torch

        dist = _dist()
        t = torch.tensor([mine, *others], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.group)
        return tuple(float(v) for v in t) if others else float(t[0])


def epoch_summary(records: list[dict], metric: Metric = ACCURACY) -> dict:
    """The summary fields every system derives from its epoch records, by one rule.

    Args:
        records: one per epoch, in order, each with ``epoch_time_s`` (the epoch's slowest
            worker, :class:`EpochClock`), ``worker_epoch_time_s`` (rank 0's own), and
            after an evaluation its figures (``val_acc`` / ``test_acc``) and ``eval_time_s``. Records of
            several jobs (restart segments) are simply concatenated.
        metric: how the run's kind of job is graded (:class:`~dgl_grappa.runtime.grading.Metric`: which
            figures of the last evaluation the summary keeps, which way the best is).

    Returns:
        ``epochs``; ``epoch_time_s`` (median over epochs of the per-epoch maxima);
        ``epoch_time_s_rank0`` (median of rank 0's own); ``cpu_time_s_rank0`` (median of the
        CPU seconds rank 0's process used in its epochs, None where not recorded); ``train_time_s`` (sum of the
        per-epoch maxima); ``eval_time_s`` (sum); the metric's figures of the last evaluation (``val_acc`` /
        ``test_acc``; link prediction: ``val_mrr``, ``val_hits``, ``test_mrr``, ``test_hits``) and its best
        validation figure (``best_val_acc``, ``best_val_mrr``; None each when no epoch was evaluated);
        ``wire_bytes_per_epoch`` (median of the measured epochs, or None).
    """
    return {
        "epochs": len(records),
        "epoch_time_s": median([r["epoch_time_s"] for r in records]),
        "epoch_time_s_rank0": median([r["worker_epoch_time_s"] for r in records]),
        "cpu_time_s_rank0": median(cpu)
        if (cpu := [r["worker_cpu_s"] for r in records if r.get("worker_cpu_s") is not None])
        else None,
        "train_time_s": sum(r["epoch_time_s"] for r in records),
        "eval_time_s": sum(r.get("eval_time_s", 0.0) for r in records),
        **metric.summary(records),
        "wire_bytes_per_epoch": wire_per_epoch(records),
        "phases": phase_summary(records),
    }


def time_to_target(
    records: list[dict] | None, target: float, key: str = "val_acc", setup_s: float = 0.0, metric: Metric = ACCURACY
) -> float | None:
    """Training seconds (evaluation excluded) until ``key`` first reached ``target``, plus ``setup_s``; or None.

    Args:
        records: epoch records in epoch order (``epoch_time_s`` and, where evaluated, ``key``).
        target: the validation figure to reach.
        key: the validation figure (``val_mrr`` for link prediction).
        setup_s: one-time seconds counted before the first epoch (Grappa: the slowest worker's partition
            and halo load, which a DistDGL trainer does not have).
        metric: which way is better (an error reaches its target from above).

    Returns:
        None when no evaluation reaches the target.

    Example:
        >>> recs = [{"epoch": 0, "epoch_time_s": 2.0, "val_acc": 0.5},
        ...         {"epoch": 1, "epoch_time_s": 3.0, "val_acc": 0.8}]
        >>> time_to_target(recs, 0.75, setup_s=1.0)
        6.0
    """
    elapsed = setup_s
    for r in records or []:
        elapsed += r["epoch_time_s"]
        if metric.reached(r.get(key), target):
            return elapsed
    return None


# ---------------------------------------------------------------------------------------
# Bytes on the wire
# ---------------------------------------------------------------------------------------


def lo_bytes() -> tuple[int, int]:
    """(rx_bytes, tx_bytes) of ``lo`` in the calling process's network namespace.

    Returns:
        Two ints. On loopback every packet is counted once as tx and once as rx, so tx
        alone is the number of bytes put on the wire (IP + TCP headers included).
    """
    with open("/proc/self/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                fields = rest.split()
                return int(fields[0]), int(fields[8])
    raise RuntimeError("no 'lo' interface in /proc/self/net/dev")


class WireMeter:
    """Loopback tx bytes over an interval, or None outside a private network namespace.

    Example:
        >>> m = WireMeter(main=rank == 0); m.start(); ...; nbytes = m.stop()   # doctest: +SKIP

    Args:
        main: this process is the one that reads (rank 0); others get None.
        enabled: force on / off (default: ``main`` and inside a private namespace).
    """

    def __init__(self, main: bool = True, enabled: bool | None = None):
        self.enabled = (main and in_private_netns()) if enabled is None else enabled
        self._t0: int | None = None

    def start(self) -> None:
        """Remember the counter now (rank 0, before the epoch's starting barrier: nobody sends before it)."""
        self._t0 = lo_bytes()[1] if self.enabled else None

    def stop(self) -> int | None:
        """Bytes sent since :meth:`start` (all processes of the namespace), or None."""
        if not self.enabled or self._t0 is None:
            return None
        n = lo_bytes()[1] - self._t0
        self._t0 = None
        return n


"""Set to "nic" by the multi-host launchers (and by hand under torchrun / Slurm) for every
worker of a job: one worker per host (local rank 0) then counts that host's network
interfaces over every epoch (:class:`HostWireMeter`)."""


def nic_bytes() -> tuple[int, int]:
    """(rx_bytes, tx_bytes) summed over every interface except ``lo`` of the caller's network namespace.

    On a test host that is its one veth end (``eth0``), i.e. exactly its link; on a real
    machine it is every NIC, other jobs' traffic included.
    """
    rx = tx = 0
    with open("/proc/self/net/dev") as f:
        for line in f:
            name, sep, rest = line.partition(":")
            if not sep or name.strip() == "lo":
                continue
            fields = rest.split()
            if len(fields) >= 9 and fields[0].isdigit():
                rx += int(fields[0])
                tx += int(fields[8])
    return rx, tx


class HostWireMeter:
    """Bytes in and out of this host's network interfaces over an interval (multi-host jobs).

    Enabled when ``DGL_GRAPPA_WIRE=nic`` is set (the same on every worker, so every worker
    takes part in :meth:`gather`); then the worker with local rank 0 reads its host's
    counters (:func:`nic_bytes`), the others read nothing.

    Args:
        host_index: this worker's host (torchrun's GROUP_RANK).
        local_rank: its rank on the host.
        enabled: force on / off (default: from the environment).

    Example:
        >>> m = HostWireMeter(ident.host_index, ident.local_rank); m.start(); ...    # doctest: +SKIP
        >>> hosts = m.gather(m.stop())   # every rank: [{"host", "tx_bytes", "rx_bytes"}, ...]  # doctest: +SKIP
    """

    def __init__(self, host_index: int = 0, local_rank: int = 0, enabled: bool | None = None):
        self.enabled = os.environ.get(ENV_WIRE) == "nic" if enabled is None else enabled
        self.reader = self.enabled and local_rank == 0
        self.host_index = host_index
        self._t0: tuple[int, int] | None = None

    def start(self) -> None:
        """Remember the counters now (before the epoch's starting barrier)."""
        self._t0 = nic_bytes() if self.reader else None

    def stop(self) -> tuple[int, int] | None:
        """(rx, tx) bytes of this host since :meth:`start` (the reader only), else None."""
        if self._t0 is None:
            return None
        rx, tx = nic_bytes()
        out = (rx - self._t0[0], tx - self._t0[1])
        self._t0 = None
        return out

    def gather(self, reading: tuple[int, int] | None, group=None) -> list[dict] | None:
        """Every host's reading, on every rank (a collective when enabled; None otherwise).

        Returns:
            ``[{"host", "hostname", "tx_bytes", "rx_bytes"}, ...]`` sorted by host.
        """
        if not self.enabled:
            return None
        mine = (
            None
            if reading is None
            else {
                "host": self.host_index,
                "hostname": socket.gethostname(),
                "rx_bytes": reading[0],
                "tx_bytes": reading[1],
            }
        )
        dist = _dist()
        if not (dist.is_available() and dist.is_initialized()):
            return [mine] if mine else []
        everyone: list = [None] * dist.get_world_size(group)
        dist.all_gather_object(everyone, mine, group=group)
        return sorted((e for e in everyone if e is not None), key=lambda e: e["host"])


def hosts_wire_summary(records: list[dict]) -> list[dict] | None:
    """summary.json's ``wire_hosts``: each host's interface bytes over the training epochs.

    Args:
        records: epoch records with ``wire_hosts`` (from :meth:`HostWireMeter.gather`).

    Returns:
        Per host: ``host``, ``hostname``, ``tx_bytes`` / ``rx_bytes`` (sums over the epochs),
        ``tx_bytes_per_epoch`` / ``rx_bytes_per_epoch`` (medians); None without readings.
    """
    per: dict[int, list[dict]] = {}
    for r in records:
        for h in r.get("wire_hosts") or []:
            per.setdefault(h["host"], []).append(h)
    if not per:
        return None
    return [
        {
            "host": h,
            "hostname": xs[-1]["hostname"],
            "tx_bytes": sum(x["tx_bytes"] for x in xs),
            "rx_bytes": sum(x["rx_bytes"] for x in xs),
            "tx_bytes_per_epoch": median([x["tx_bytes"] for x in xs]),
            "rx_bytes_per_epoch": median([x["rx_bytes"] for x in xs]),
            "epochs": len(xs),
        }
        for h, xs in sorted(per.items())
    ]


def wire_per_epoch(records: list[dict], key: str = "wire_bytes") -> float | None:
    """Median over epochs of ``key`` (None when no epoch has a measurement)."""
    xs = [r[key] for r in records if r.get(key) is not None]
    return median(xs) if xs else None


def ring_allreduce_wire_bytes(payload_per_worker: list[float]) -> float:
    """Bytes a gloo all-reduce puts on the wire, all workers together, for given payloads.

    gloo all-reduces with a ring (reduce-scatter, then all-gather): each of W workers
    sends 2 (W - 1) / W times its buffer (measured here: 1.00x the summed payload for
    W = 2, 1.51x for W = 4). This turns the bytes a DDP hook hands to the all-reduce into
    the application's expectation of the wire bytes.

    Args:
        payload_per_worker: bytes each worker handed to all-reduces (same count on all).

    Returns:
        Expected wire bytes (payload only, no TCP/IP headers).
    """
    w = len(payload_per_worker)
    if w <= 1:
        return 0.0
    return float(sum(payload_per_worker)) * 2.0 * (w - 1) / w


def format_bytes(n: float | None) -> str:
    """A byte count for people: "812 B", "14.85 MB" (decimal units); None gives "-"."""
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1000
    return f"{n:.2f} GB"
