"""Command line: ``python -m dgl_grappa {partition,train,compare} --config C [--section.key=value ...]``.

A user error (bad key, bad value, missing file) prints one line naming the problem and
the fix, and exits with status 2; nothing in the output folder is touched before the
whole config has been validated and the data loaded.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from .compare import cmd_compare
from .config import Config, ConfigError, load_config
from .launch import free_port, setup_logging, spawn_workers
from .procs import JobFailed

log = logging.getLogger("dgl_grappa")


def cmd_partition(cfg: Config) -> int:
    from .partition import ensure_partitions, format_stats

    stats, _ = ensure_partitions(cfg)
    print(format_stats(stats))
    print(f"partition config: {stats['part_config']}")
    return 0


def cmd_train(cfg: Config) -> int:
    from .data import load_dataset, num_classes
    from .metrics import format_bytes
    from .netns import in_private_netns
    from .partition import ensure_partitions, format_stats
    from .procs import rerun_isolated
    from .trainer import train_worker

    if (cfg.network.bandwidth or cfg.network.isolate) and not in_private_netns():
        return rerun_isolated("train", cfg)  # the whole job in a private (shaped) network namespace
    out = Path(cfg.run.output_dir)
    builder = None
    if cfg.partition.prebuilt:
        # Parts made beforehand (e.g. by bigpart): the whole graph is never loaded here.
        from .partition import prebuilt_num_classes, prebuilt_stats

        stats, g = prebuilt_stats(cfg), None
        n_classes = prebuilt_num_classes(cfg, stats)
        out.mkdir(parents=True, exist_ok=True)
    else:
        g = load_dataset(cfg.data)
        n_classes = num_classes(g)
        out.mkdir(parents=True, exist_ok=True)
        if cfg.schedule.k > 0:
            from .repartition import start_builder
            from .scheduler import prepare_schedule  # partitionings: <output>/partitions/<j>

            # Started first: its seconds of imports overlap partitioning 0 and the workers' start.
            builder = start_builder(cfg)
            stats = prepare_schedule(cfg, g)
        else:
            stats, g = ensure_partitions(cfg, g)
    del g  # the workers load their own parts; rank 0 reloads the graph for evaluation
    print(format_stats(stats) if stats.get("edge_cut") is not None else
          f"prebuilt partitioning: {stats['num_parts']} parts ({stats['part_config']})", flush=True)
    t0 = time.perf_counter()
    extra = (builder.channel,) if builder is not None else ()  # rank 0 drives the builder
    try:
        spawn_workers(train_worker, cfg.partition.num_parts,
                      (cfg, stats["part_config"], n_classes, free_port(), str(out), *extra),
                      timeout_s=cfg.run.timeout_s)
    finally:
        if builder is not None:
            builder.close()
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary["edge_cut"] = stats["edge_cut"]
    summary["job_wall_s"] = time.perf_counter() - t0
    summary_path.write_text(json.dumps(summary, indent=1))
    print(f"{cfg.name}: {summary['model']} x{summary['num_layers']} on {summary['dataset']}, "
          f"{summary['num_parts']} workers, {summary['mode']}, correction={summary['correction']}\n"
          f"  val acc {summary['val_acc']:.4f}  test acc {summary['test_acc']:.4f}  "
          f"epoch {summary['epoch_time_s']:.3f} s  ({summary['steps_per_epoch']} steps)\n"
          f"  per worker per epoch: gradients {format_bytes(summary['grad_bytes_per_epoch'])}, "
          f"remote features {format_bytes(summary['feature_bytes_per_epoch'])}\n"
          f"  wrote {out / 'metrics.jsonl'} and {summary_path}")
    if "schedule" in summary:
        sch = summary["schedule"]
        print(f"  repartitioning ({sch['method']}, k={sch['k']}): {len(summary['switches'])} switches, "
              f"stall {sch['stall_s_total']:.2f} s = {sch['stall_fraction']:.2%} of training time")
    return 0


COMMANDS = {"partition": cmd_partition, "train": cmd_train, "compare": cmd_compare}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dgl_grappa", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=sorted(COMMANDS), help="what to do")
    parser.add_argument("--config", default=None, help="YAML config (default: built-in defaults)")
    args, rest = parser.parse_known_args(argv)
    setup_logging(None)
    try:
        cfg = load_config(args.config, rest)
        return COMMANDS[args.command](cfg)
    except ConfigError as exc:
        print(f"dgl_grappa: error: {exc}", file=sys.stderr)
        return 2
    except JobFailed as exc:
        print(f"dgl_grappa: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("dgl_grappa: interrupted", file=sys.stderr)
        return 130
