"""The epoch meter of both runtimes: one worker's epochs measured, recorded and summarised.

Grappa's trainer (:mod:`dgl_grappa.native.trainer`) and the DistDGL trainer
(:class:`dgl_grappa.distdgl.TrainerMeter`) measure an epoch the same way, here:

* :meth:`EpochMeter.start` opens the window (the wire counters, then the barrier of the
  :class:`~dgl_grappa.runtime.metrics.EpochClock`) and hands out the epoch's
  :class:`~dgl_grappa.runtime.metrics.PhaseTimes`; :meth:`EpochMeter.stop` right after the
  last step gives this worker's own seconds;
* :meth:`EpochMeter.end` (a collective) gives the fields every epoch record has: the epoch's
  time (its slowest worker), this worker's, the phases, the wire bytes of the window;
* the runtime adds its own fields and hands the record to :meth:`EpochMeter.record` (kept
  for the summary and checkpoints; rank 0 writes it to metrics.jsonl).

After training, :meth:`EpochMeter.worker_figures` (one worker's line in summary.json's
``workers``), :func:`all_workers` (everybody's) and :func:`run_summary` (the fields every
system's summary.json has) turn the records into the summary.

A figure both runtimes report goes in one place: per epoch in :meth:`EpochMeter.end`, per
worker in :meth:`EpochMeter.worker_figures`, per run in :func:`run_summary`.

Memory is one of them: the runtime tells the meter what its worker holds
(:meth:`EpochMeter.holding`: the feature-width node tables, in their stored precision, and
everything else per node and edge), and every record and summary carries it with the peak
resident memory (VmHWM) of the process.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import torch
import torch.distributed as dist

from ..config import Config
from .grading import ACCURACY, Metric
from .metrics import (
    ANON_PEAK,
    EpochClock,
    EpochLog,
    HostWireMeter,
    PhaseTimes,
    WireMeter,
    epoch_summary,
    hosts_wire_summary,
    median,
    peak_rss_bytes,
)


class EpochMeter:
    """One worker's epochs: the clock, the phases, the wire meters, the records and their log.

    Args:
        is_main: this worker is rank 0 (it reads the loopback counter and writes the log).
        host_index: its host (torchrun's GROUP_RANK), for the per-host interface counters.
        local_rank: its rank on the host (local rank 0 reads the host's counters).
        out_dir: where rank 0 writes metrics.jsonl (None: no log).
        tensorboard: also write TensorBoard events (``run.tensorboard``).

    Example:
        >>> meter = EpochMeter(rank == 0, out_dir="runs/x")           # doctest: +SKIP
        >>> times = meter.start(); ...steps...; meter.stop()          # doctest: +SKIP
        >>> meter.record({"epoch": 0, **meter.end(), "loss": 1.2})    # doctest: +SKIP
    """

    def __init__(
        self,
        is_main: bool,
        host_index: int = 0,
        local_rank: int = 0,
        out_dir: str | Path | None = None,
        tensorboard: bool = False,
        keep_log: bool = False,
    ):
        self.clock = EpochClock()
        self.wire = WireMeter(main=is_main)  # loopback bytes of the job's private netns, training only
        self.host_wire = HostWireMeter(host_index, local_rank)  # across hosts: each host's NIC
        # keep_log: a new rank 0 in a running job goes on with the lost one's metrics.jsonl
        self.log = EpochLog(out_dir, tensorboard, keep_log) if is_main and out_dir is not None else None
        self.records: list[dict] = []
        self._times: PhaseTimes | None = None
        self._mine: float | None = None
        self._cpu0: float | None = None
        self._cpu: float | None = None
        self.memory: dict = {}

    def holding(
        self, resident_bytes: int, resident_other_bytes: int, own_fp32_bytes: int | None = None, **detail
    ) -> None:
        """What this worker holds now (after a load or a switch).

        Args:
            resident_bytes: the feature-width node tables (features, aggregates, halo rows),
                in their stored precision.
            resident_other_bytes: labels, ids, degrees, masks, the graph's arrays.
            own_fp32_bytes: its own nodes' feature rows in fp32 (the unit of the budget).
            detail: more to show in summary.json (tables, precision, what was kept).
        """
        self.memory = {
            "resident_bytes": int(resident_bytes),
            "resident_other_bytes": int(resident_other_bytes),
            "own_fp32_bytes": None if own_fp32_bytes is None else int(own_fp32_bytes),
            **detail,
        }

    def start(self) -> PhaseTimes:
        """Open the epoch: wire counters first (nobody sends before the barrier), then the barrier and the clock.

        Returns:
            The epoch's phase times, for the runtime to fill.
        """
        self.wire.start()
        self.host_wire.start()
        self.clock.start()
        self._cpu0 = time.process_time()
        self._times = PhaseTimes()
        return self._times

    def stop(self) -> float:
        """This worker's own seconds since :meth:`start` (call right after its last step)."""
        self._mine = self.clock.stop()
        # CPU seconds of this process (all its threads) over the same window: with the wall
        # time it says how CPU-bound the worker is, and what a CPU share or time-slicing costs.
        self._cpu = time.process_time() - self._cpu0
        return self._mine

    def end(self) -> dict:
        """Close the epoch (a collective: every worker calls it after :meth:`stop`).

        Returns:
            The fields every epoch record has: ``epoch_time_s`` (the slowest worker's),
            ``worker_epoch_time_s`` (this one's), ``worker_cpu_s`` (the CPU seconds this
            worker's process used in it, every thread), the phases (:meth:`PhaseTimes.breakdown`),
            ``wire_bytes`` (rank 0 in a private namespace, or every host's interfaces
            across hosts; else None), across hosts ``wire_hosts``, and the largest
            ``resident_bytes`` and ``peak_rss_bytes`` of any worker (``*_max``).
        """
        mine = self._mine
        ANON_PEAK.sample()  # after the timed region: /proc reads stay out of the epoch
        # Also the point where every worker has finished its steps: the wire window closes after it.
        slowest, resident, peak = self.clock.slowest(
            mine, float(self.memory.get("resident_bytes", -1)), float(peak_rss_bytes() or -1)
        )
        wire = self.wire.stop()
        hosts = self.host_wire.gather(self.host_wire.stop())  # across hosts only (a collective then)
        if hosts:
            wire = sum(h["tx_bytes"] for h in hosts)  # every byte leaves exactly one host's interface
        rec = {
            "epoch_time_s": slowest,
            "worker_epoch_time_s": mine,
            "worker_cpu_s": self._cpu,
            **self._times.breakdown(mine, slowest),
            "wire_bytes": wire,
            "resident_bytes_max": int(resident) if resident >= 0 else None,
            "peak_rss_bytes_max": int(peak) if peak >= 0 else None,
        }
        if hosts is not None:
            rec["wire_hosts"] = hosts
        return rec

    def record(self, rec: dict) -> None:
        """Keep an epoch's finished record; rank 0 writes it to metrics.jsonl."""
        self.records.append(rec)
        if self.log is not None:
            self.log.write(rec)

    def take_over(self, records: list[dict]) -> None:
        """A new member of a running job (``launch.on_failure: continue``): the records so far are the log's
        (rank 0's own, with its evaluations), then those of ``records`` (a survivor's) beyond them."""
        self.records = self.log.jsonl.read() if self.log is not None else []
        for rec in records[len(self.records) :]:
            self.record(dict(rec))

    def preload(self, records) -> None:
        """Take the records of epochs trained before a restart (from a checkpoint) as this run's own."""
        for rec in records:
            self.record(dict(rec))

    def worker_figures(self) -> dict:
        """This worker's figures in summary.json's ``workers`` that every runtime reports (medians over epochs)."""
        recs = self.records
        return {
            "epoch_time_s": median([r["worker_epoch_time_s"] for r in recs]),
            "grad_bytes_per_epoch": median([r["grad_bytes"] for r in recs]),
            "feature_bytes_per_epoch": median([r["feature_bytes"] for r in recs]),
            **self.memory,
            "peak_rss_bytes": peak_rss_bytes(),
            "gpu_peak_bytes": gpu_peak_bytes(),
        }

    def close(self) -> None:
        """Close the log (TensorBoard's writer); safe twice."""
        if self.log is not None:
            self.log.close()


def gpu_peak_bytes() -> int | None:
    """The most GPU memory this process's tensors held at once (torch's allocator; its cache excluded), or None
    where it never used a GPU. Each worker is its own process, so workers sharing one GPU count apart."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return int(torch.cuda.max_memory_allocated())


def all_workers(mine: dict) -> list[dict]:
    """Every worker's summary line, on every worker (a collective), in rank order."""
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    return everyone


def memory_summary(per_worker: list[dict]) -> dict:
    """The run's memory figures from its workers' (the largest worker's, and its ratio to its own fp32 rows).

    Example:
        >>> memory_summary([{"resident_bytes": 300, "own_fp32_bytes": 200, "peak_rss_bytes": 9},
        ...                 {"resident_bytes": 100, "own_fp32_bytes": 100, "peak_rss_bytes": 5}])["resident_ratio_max"]
        1.5
    """

    def top(key):
        vals = [w.get(key) for w in per_worker if w.get(key) is not None]
        return max(vals) if vals else None

    ratios = [
        w["resident_bytes"] / w["own_fp32_bytes"]
        for w in per_worker
        if w.get("resident_bytes") is not None and w.get("own_fp32_bytes")
    ]
    return {
        "resident_bytes_max": top("resident_bytes"),
        "resident_other_bytes_max": top("resident_other_bytes"),
        "resident_ratio_max": max(ratios) if ratios else None,
        "peak_rss_bytes_max": top("peak_rss_bytes"),
        "gpu_peak_bytes_max": top("gpu_peak_bytes"),
    }


def run_summary(
    cfg: Config,
    records: list[dict],
    per_worker: list[dict],
    *,
    system: str,
    num_parts: int,
    mode: str,
    halo: str,
    correction: str,
    steps_per_epoch: int,
    model_grad_bytes: int,
    own: dict | None = None,
    metric: Metric = ACCURACY,
) -> dict:
    """summary.json: the fields every system writes, then the system's ``own``, then workers and config.

    Args:
        cfg: the run's config.
        records: the epoch records (:attr:`EpochMeter.records` of rank 0).
        per_worker: :func:`all_workers` of :meth:`EpochMeter.worker_figures` (and each
            runtime's own per-worker figures).
        system, num_parts, mode, halo, correction, steps_per_epoch: what ran, as the system
            names it.
        model_grad_bytes: the model's gradient bytes (one all-reduce of every parameter).
        own: the system's own fields.
        metric: how the run's kind of job is graded (its figures in the summary, :func:`epoch_summary`).

    Example:
        >>> run_summary(cfg, meter.records, all_workers(mine), system="grappa", num_parts=2,   # doctest: +SKIP
        ...             mode="minibatch", halo="keep", correction="none", steps_per_epoch=4,
        ...             model_grad_bytes=63_488, own={"device": "cpu"})
    """
    out = {
        "system": system,
        "task": cfg.train.task,
        "name": cfg.name,
        "dataset": cfg.data.name,
        "model": cfg.model.name,
        "num_layers": cfg.model.num_layers,
        "num_parts": num_parts,
        "partition_method": cfg.partition.method,
        "mode": mode,
        "halo": halo,
        "correction": correction,
        "hops": cfg.hops,
        "steps_per_epoch": steps_per_epoch,
        # epochs, epoch/train/eval time (one clock and one rule for every system: the median
        # over epochs of each epoch's slowest worker), accuracies (None when a restart segment
        # ended before any evaluation was due) and wire bytes
        **epoch_summary(records, metric),
        "grad_bytes_per_epoch": max(w["grad_bytes_per_epoch"] for w in per_worker),
        "model_grad_bytes": model_grad_bytes,
        "feature_bytes_per_epoch": max(w["feature_bytes_per_epoch"] for w in per_worker),
    }
    if (wh := hosts_wire_summary(records)) is not None:
        out["wire_hosts"] = wh
    out.update(memory_summary(per_worker))
    out.update(own or {})
    out["workers"] = per_worker
    out["config"] = dataclasses.asdict(cfg)
    return out
