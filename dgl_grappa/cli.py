"""Command line: ``python -m dgl_grappa {partition,prepare,train,compare,bench,project,worker} \
--config C [--section.key=value ...]``.

``prepare --part-config PATH`` adds what the method needs (first-hop aggregates, full-graph
in-degrees) to a partition folder in DGL's layout that another tool wrote, part by part,
next to its files (:func:`dgl_grappa.partition.aggregates.prepare`).

``project --runs RUN_DIR`` projects both systems' epoch time to clusters this machine cannot
emulate, calibrated on compare runs (:mod:`dgl_grappa.bench.project`); its options are the
``project:`` section of ``--config`` and ``--project.<key>=<value>`` overrides, or short flags.

``worker`` is one worker of a job started by torchrun, srun or the multi-host launcher
(its identity from the environment, see :mod:`dgl_grappa.native.worker`); ``train`` with
``launch.remote: ssh | netns`` starts such workers on the hosts itself.

A user error (bad key, bad value, missing file) prints one line naming the problem and
the fix, and exits with status 2; nothing in the output folder is touched before the
whole config has been validated and the data loaded.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

from .bench.compare import cmd_compare
from .bench.matrix import cmd_bench
from .bench.project import cmd_project
from .cluster.launch import select_device, setup_logging
from .cluster.netns import in_private_netns
from .cluster.procs import JobFailed, rerun_isolated
from .cluster.signals import Stopped
from .config import Config, ConfigError, load_config, uses_hosts
from .kinds import resolve
from .native.run import check_inputs, removed_on_user_error, run_native
from .native.worker import run_started_worker
from .native.worker import train_on_hosts
from .partition.aggregates import prepare
from .partition.store import ensure_partitions, format_stats, partition_dir
from .runtime.folders import check_output_dir
from .runtime.metrics import format_bytes

log = logging.getLogger("dgl_grappa")


def cmd_partition(cfg: Config) -> int:
    check_output_dir(partition_dir(cfg), "partition.out_dir" if cfg.partition.out_dir else "run.output_dir")
    with removed_on_user_error(Path(cfg.run.output_dir)):
        stats, _ = ensure_partitions(cfg)
    print(format_stats(stats))
    print(f"partition config: {stats['part_config']}")
    return 0


def cmd_train(cfg: Config) -> int:
    try:
        return _train(cfg)
    except Stopped as exc:  # a scheduler's SIGTERM, a hang-up, Ctrl-C: not an error, the usual exit status
        print(f"dgl_grappa: {exc}", file=sys.stderr)
        return 128 + exc.signum


def _train(cfg: Config) -> int:
    if uses_hosts(cfg):  # workers on ssh machines or test hosts, each host its own link and counters

        summary = train_on_hosts(cfg)
        print_train_summary(cfg, summary, Path(cfg.run.output_dir))
        return 0
    if cfg.run.device == "cuda":  # one machine: every worker's GPU is here; say so before anything starts

        select_device("cuda", cfg.partition.num_parts - 1)
    if (cfg.network.bandwidth or cfg.network.isolate) and not in_private_netns():
        check_inputs(cfg)  # one-line errors here, not from inside the namespace
        return rerun_isolated("train", cfg)  # the whole job in a private (shaped) network namespace
    summary, _ = run_native(cfg)  # checks, partitions, workers, restarts from checkpoints
    out = Path(cfg.run.output_dir)
    print_train_summary(cfg, summary, out)
    return 0


def print_train_summary(cfg: Config, summary: dict, out: Path) -> None:
    """The terminal summary of a ``train`` run (and where its files are)."""
    summary_path = out / "summary.json"
    if summary.get("task") == "link":
        quality = (f"val MRR {summary['val_mrr']:.4f}  test MRR {summary['test_mrr']:.4f}  test hits@"
                   f"{summary['hits_k']} {summary['test_hits']:.4f}")
    else:
        quality = f"val acc {summary['val_acc']:.4f}  test acc {summary['test_acc']:.4f}"
    print(f"{cfg.name}: {summary['model']} x{summary['num_layers']} on {summary['dataset']}, "
          f"{summary['num_parts']} workers, {summary['mode']}, correction={summary['correction']}\n"
          f"  {quality}  "
          f"epoch {summary['epoch_time_s']:.3f} s  ({summary['steps_per_epoch']} steps)\n"
          f"  per worker per epoch: gradients {format_bytes(summary['grad_bytes_per_epoch'])}, "
          f"remote features {format_bytes(summary['feature_bytes_per_epoch'])}\n"
          f"  wrote {out / 'metrics.jsonl'} and {summary_path}")
    if summary.get("task") == "link":
        print(f"  edges trained on: {summary['usable_edge_fraction']:.1%} of the training graph's "
              f"(halo {summary['halo']}; {summary['usable_edge_fraction_halo_drop']:.1%} with the halo dropped)")
    for r in summary.get("restarts", []):
        print(f"  restart {r['restart']}: {r['reason']}; resumed from "
              f"{r['resumed_from'] or 'the beginning'} (epoch {r['epoch']})")
    if "schedule" in summary:
        sch = summary["schedule"]
        print(f"  repartitioning ({sch['method']}, k={sch['k']}): {len(summary['switches'])} switches, "
              f"stall {sch['stall_s_total']:.2f} s = {sch['stall_fraction']:.2%} of training time")
    if summary.get("wire_hosts"):
        c = summary.get("cluster", {})
        print(f"  across {len(summary['wire_hosts'])} hosts ({c.get('remote', '?')}"
              + (f", link {c['link']['mode']} {c['link']['bandwidth'] or 'unshaped'}" if c.get("link") else "")
              + ")" + (f", time dilation {c['network_dilation']:.3g} (times are dilated)"
                       if (c.get("network_dilation") or 1) != 1 else "")
              + f": wire {format_bytes(summary['wire_bytes_per_epoch'])}/epoch; per host tx/rx per epoch "
              + ", ".join(f"h{h['host']} {format_bytes(h['tx_bytes_per_epoch'])}/"
                          f"{format_bytes(h['rx_bytes_per_epoch'])}" for h in summary["wire_hosts"]))


def cmd_worker(cfg: Config, extra: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dgl_grappa worker")
    ap.add_argument("--part-config", default=None, help="first partitioning's json (set by the launcher)")
    ap.add_argument("--num-classes", type=int, default=None, help="number of classes (set by the launcher)")
    ap.add_argument("--no-resume", action="store_true", help="start at epoch 0 even if a checkpoint exists")
    a = ap.parse_args(extra or [])
    return run_started_worker(cfg, a.part_config, a.num_classes, resume=None if a.no_resume else "auto")


def cmd_prepare(extra: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m dgl_grappa prepare",
                                 description="add first-hop aggregates and in-degrees to a DGL partition folder")
    ap.add_argument("--part-config", required=True, help="the partition json (DGL's <graph>.json) or its folder")
    ap.add_argument("--feat-key", default="auto",
                    help="node data key of the features (default: auto, the one 2-D float node tensor: DGL's "
                         "examples' features, the package's feat)")
    ap.add_argument("--gcn", action="store_true",
                    help="also the GraphConv(norm='both') aggregate, for the drop-in's first_hop='block'")
    ap.add_argument("--force", action="store_true", help="compute again even when the folder is prepared")
    a = ap.parse_args(extra)
    rec = prepare(a.part_config, a.feat_key, gcn=a.gcn, force=a.force)
    for part in rec["parts"]:
        print(f"part {part['part']}: {part['rows']} nodes x {part['width']}, {part['in_edges']} in-edges, "
              f"{part['remote_pairs']} partial sums from other parts")
    print(f"wrote the aggregates next to {rec['part_config']} ({rec['seconds']:.1f} s; a second run is a no-op)")
    return 0


COMMANDS = {"partition": cmd_partition, "prepare": None, "train": cmd_train, "compare": cmd_compare,
            "worker": cmd_worker, "bench": None, "project": None}
"""``bench`` and ``project`` take the config path and the raw overrides and route them themselves
(dgl_grappa.bench.matrix.cmd_bench, dgl_grappa.bench.project.cmd_project)."""
_OWN_FLAGS = {"worker": ("--part-config", "--num-classes", "--no-resume"),
              "prepare": ("--part-config", "--feat-key", "--gcn", "--force")}


def _exit_on_signal(signum, frame):
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dgl_grappa", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=sorted(COMMANDS), help="what to do")
    parser.add_argument("--config", default=None, help="YAML config (default: built-in defaults)")
    parser.add_argument("--resume", nargs="?", const="auto", default=None, metavar="PATH|auto",
                        help="train: continue from a checkpoint file, or (no value, or auto) from the newest intact "
                             "checkpoint in checkpoint.dir; same as --checkpoint.resume=...")
    args, rest = parser.parse_known_args(argv)
    setup_logging(None)
    own: list[str] = []
    flags = _OWN_FLAGS.get(args.command, ())
    i = 0
    while i < len(rest):  # the command's own flags, apart from the config overrides
        name = rest[i].split("=", 1)[0]
        if name in flags:
            takes = name not in ("--no-resume", "--force", "--gcn") and "=" not in rest[i]
            own += rest[i:i + 1 + takes]
            del rest[i:i + 1 + takes]
        else:
            i += 1
    if args.command in ("bench", "compare"):
        # These wait on job processes in sessions of their own: a SIGTERM or SIGHUP must unwind
        # through the waits' cleanup (which kills the running job) instead of leaving it orphaned.
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _exit_on_signal)
    try:
        if args.command == "prepare":
            if rest:
                raise ConfigError(f"prepare takes --part-config PATH [--feat-key K] [--gcn] [--force], not {rest[0]}")
            return cmd_prepare(own)
        if args.command == "bench":
            return cmd_bench(args.config, rest)
        if args.command == "project":
            if args.resume is not None:
                raise ConfigError("--resume applies to train, not project; drop it")
            return cmd_project(args.config, rest)
        if args.resume is not None:
            if args.command != "train":
                raise ConfigError(f"--resume applies to train, not {args.command}; drop it")
            rest = rest + [f"--checkpoint.resume={args.resume}"]
        cfg = load_config(args.config, rest)
        resolve(cfg)  # the kind of job's own rules, before anything runs
        if args.command == "worker":
            return cmd_worker(cfg, own)
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
