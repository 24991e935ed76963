"""Repartitioning with DistDGL: one job per partitioning (segment), resumed from a checkpoint; merged summary."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path

from ..cluster.procs import JobFailed
from ..data import load_dataset
from ..kinds import Metric, kind_of
from ..partition.schedule import (
    num_partitionings,
    partition_root,
    prepare_schedule,
    remove_old,
)
from ..runtime.checkpoint import CheckpointStore, checkpoint_dir, fingerprint
from ..runtime.metrics import (
    epoch_summary,
    hosts_wire_summary,
    median,
    read_jsonl,
    wire_per_epoch,
    write_json,
)
from ..runtime.repartition import BuildError, start_builder
from ..runtime.restarts import restart_budget
from .recovery import run_resumable_job

log = logging.getLogger("dgl_grappa")


def run_segments(
    cfg, out: Path, *, grappa: bool, script: str | None, extra_args: list[str] | None, in_ns: bool, quiet: bool
) -> dict:
    """Repartitioning with DistDGL: one job per partitioning, resumed from a checkpoint.

    DGL servers cannot reload partitions, so segment j (epochs [j*k, min((j+1)*k, epochs)))
    is a fresh job (servers + trainers) on partitioning j that resumes from the checkpoint
    segment j-1's rank 0 wrote at its end (model, optimizer, next epoch, RNG states), in the
    run's checkpoint folder. A segment whose trainer dies is restarted from the newest
    checkpoint (``launch.max_restarts`` in the whole run; listed in ``restarts``).
    Partitioning 0 is built synchronously; partitioning j+1 is built by a
    :class:`~dgl_grappa.runtime.repartition.BackgroundBuilder` process while segment j trains
    (it competes with the job for the CPUs). Each segment writes into ``out/segments/<j>``;
    the run's metrics.jsonl and summary.json merge them and add ``switches`` (restart
    cost and its parts per switch) and ``restart_s_total``.
    """
    k, epochs = cfg.schedule.k, cfg.train.epochs
    n_seg = num_partitionings(epochs, k)
    root = partition_root(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").unlink(missing_ok=True)
    stats = [prepare_schedule(cfg, load_dataset(cfg.data))]  # partitioning 0: synchronous
    # The segments' checkpoints (boundaries, every checkpoint.every epochs): one store for the run.
    store = CheckpointStore(checkpoint_dir(cfg, out), cfg.checkpoint.keep_last)
    store.clear()
    fp = fingerprint(cfg)
    budget = restart_budget(cfg.launch, "DistDGL job")
    builder = start_builder(cfg)
    segs: list[dict] = []

    def start_of(j: int) -> int:
        return j * k

    try:
        for j in range(n_seg):
            seg_out = out / "segments" / str(j)
            seg = {"index": j, "out": seg_out}
            if j > 0:
                t = time.time()
                try:
                    st = builder.wait(j, cfg.run.collective_timeout_s)
                except BuildError:
                    if budget.left <= 0 or builder.alive():
                        raise
                    # The builder process died: a new one builds partitioning j (counts as a restart).
                    budget.restart(
                        f"the partition builder (pid {builder.pid}) died",
                        None,
                        start_of(j),
                        segment=j,
                        action=f"building partitioning {j} again",
                    )
                    builder.close()
                    builder = start_builder(cfg)
                    builder.request(j)
                    st = builder.wait(j, cfg.run.collective_timeout_s)
                seg["build_wait_s"] = time.time() - t
                stats.append(st)
                remove_old(root, j, cfg.schedule.keep_last)
            if builder is not None and j + 1 < n_seg:
                builder.request(j + 1)  # built while segment j trains
            start, stop = j * k, min((j + 1) * k, epochs)
            resume = None
            if j > 0:  # the checkpoint segment j-1 wrote after its last epoch
                point = store.newest_valid(fp)
                if point is None or point.epoch != start:
                    raise JobFailed(f"DistDGL segment {j}: no intact checkpoint at epoch {start} in {store.root}")
                resume = point.path
            seg_cfg = dataclasses.replace(
                cfg,
                partition=dataclasses.replace(
                    cfg.partition, out_dir=str(Path(stats[j]["part_config"]).resolve().parent)
                ),
                run=dataclasses.replace(cfg.run, output_dir=str(seg_out)),
            )
            log.info("DistDGL segment %d/%d: epochs [%d, %d) on partitioning %d", j + 1, n_seg, start, stop, j)
            seg["summary"] = run_resumable_job(
                seg_cfg,
                seg_out,
                grappa=grappa,
                script=script,
                extra_args=extra_args,
                in_ns=in_ns,
                quiet=quiet,
                start=start,
                stop=stop,
                segment_start=start,
                resume=resume,
                budget=budget,
                ckdir=store.root,
                timing=seg,
                segment=j,
            )
            seg["records"] = read_jsonl(seg_out / "metrics.jsonl")
            segs.append(seg)
    finally:
        if builder is not None:
            builder.close()
    switches = []
    for j in range(1, n_seg):
        a, b = segs[j - 1], segs[j]
        ra, rb = a["summary"]["restart"], b["summary"]["restart"]
        st = stats[j]
        switches.append(
            {
                "epoch": j * k,
                "partitioning": j,
                # End of segment j-1's last epoch -> start of segment j's first epoch.
                "restart_s": rb["first_epoch_start"] - ra["last_epoch_end"],
                "checkpoint_save_s": ra["save_s"],
                "teardown_s": a["job_end"] - ra["last_epoch_end"],  # save + summary + trainer/server exit
                "between_jobs_s": b["job_start"] - a["job_end"],  # mostly waiting for the build
                "build_wait_s": b["build_wait_s"],
                "launch_s": rb["process_start"] - b["job_start"],  # launcher + namespaces until the trainer runs
                "trainer_init_s": rb["init_done"] - rb["process_start"],  # the next four together
                "imports_s": rb["imports_done"] - rb["process_start"],
                "connect_s": rb["connected"] - rb["imports_done"],  # servers up + RPC connect + process group
                "distgraph_s": rb["graph_ready"] - rb["connected"],
                "setup_s": rb["init_done"] - rb["graph_ready"],  # loader, model, checkpoint load, meter
                "checkpoint_load_s": rb["load_s"],
                "first_barrier_s": rb["first_epoch_start"] - rb["init_done"],
                "build_s": st["build_s"],
                "build_in_background": True,
                "overlap_prev": st.get("overlap_prev"),
                "edge_cut": st["edge_cut"],
                "checksum_saved": ra["checksum_saved"],
                "checksum_loaded": rb["checksum_loaded"],
            }
        )
    summary = _merge_segment_summaries(segs, kind_of(cfg).metric)
    train_s = summary["train_time_s"]
    total = sum(s["restart_s"] for s in switches)
    summary.update(
        {
            "edge_cut": sum(s["edge_cut"] for s in stats) / len(stats),
            "edge_cuts": [s["edge_cut"] for s in stats],
            "schedule": dataclasses.asdict(cfg.schedule),
            "segments": n_seg,
            "switches": switches,
            "restart_s_total": total,
            "restarts": budget.taken,
            "restart_fraction_of_train": total / train_s if train_s else None,
            "config": dataclasses.asdict(cfg),
        }
    )
    summary.pop("restart", None)
    with (out / "metrics.jsonl").open("w") as f:
        for seg in segs:
            for r in seg["records"]:
                f.write(json.dumps(dict(r, partitioning=seg["index"])) + "\n")
    write_json(out / "summary.json", summary)
    return summary


def _merge_segment_summaries(segs: list[dict], metric: Metric) -> dict:
    """One summary for a run made of segments (``metric``: how its kind of job is graded).

    Epoch times, accuracies and wire bytes follow the rule of every single run
    (:func:`dgl_grappa.runtime.metrics.epoch_summary` over the concatenated epoch records: the
    median of per-epoch maxima, not a median of the segments' medians); the per-worker byte
    figures, which the records do not hold for every worker, are the median over segments.
    """
    sums = [s["summary"] for s in segs]
    recs = [r for s in segs for r in s["records"]]
    merged = dict(sums[-1])  # last segment: names, model, settings
    for key in ("grad_bytes_per_epoch", "feature_bytes_per_epoch", "rpc_bytes_per_epoch"):
        merged[key] = median([s[key] for s in sums])
    for key in ("remote_rows_total", "pull_rows_total"):
        merged[key] = sum(s[key] for s in sums)
    merged["steps_per_epoch"] = max(s["steps_per_epoch"] for s in sums)
    merged.update(epoch_summary(recs, metric))
    merged["app_bytes_per_epoch"] = wire_per_epoch(recs, "app_bytes")
    if (wh := hosts_wire_summary(recs)) is not None:  # across hosts: every segment's epochs
        addresses = {h["host"]: h.get("address") for h in sums[-1].get("wire_hosts") or []}
        merged["wire_hosts"] = [dict(h, address=addresses.get(h["host"])) for h in wh]
    merged["workers"] = [s["workers"] for s in sums]  # per segment
    return merged
