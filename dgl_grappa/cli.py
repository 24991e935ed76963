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
import dataclasses
import logging
import signal
import sys
from pathlib import Path

from . import __version__
from .cluster.procs import JobFailed
from .cluster.signals import Stopped
from .config import Config, ConfigError, load_config, uses_hosts

# The commands' own modules (torch, DGL) are imported when a command runs, so that --help and --version
# answer at once.
log = logging.getLogger("dgl_grappa")


def cmd_partition(cfg: Config) -> int:
    from .native.run import removed_on_user_error
    from .partition.store import ensure_partitions, format_stats, partition_dir
    from .runtime.folders import check_output_dir

    check_output_dir(partition_dir(cfg), "partition.out_dir" if cfg.partition.out_dir else "run.output_dir")
    with removed_on_user_error(Path(cfg.run.output_dir)):
        stats, _ = ensure_partitions(cfg)
    print(format_stats(stats))
    print(f"partition config: {stats['part_config']}")
    return 0


def cmd_train(cfg: Config) -> int:
    from .cluster.launch import select_device
    from .cluster.netns import in_private_netns
    from .cluster.procs import rerun_isolated
    from .native.run import check_inputs, run_native
    from .native.worker import train_on_hosts

    if uses_hosts(cfg):  # workers on ssh machines or test hosts, each host its own link and counters
        summary = train_on_hosts(cfg)
        print_train_summary(cfg, summary, Path(cfg.run.output_dir))
        return 0
    if cfg.run.device == "cuda":  # one machine: every worker's GPU is here; say so before anything starts
        select_device("cuda")  # a GPU at all (workers beyond the GPU count share them: each worker says so)
    if (cfg.network.bandwidth or cfg.network.isolate) and not in_private_netns():
        check_inputs(cfg)  # one-line errors here, not from inside the namespace
        return rerun_isolated("train", cfg)  # the whole job in a private (shaped) network namespace
    summary, _ = run_native(cfg)  # checks, partitions, workers, restarts from checkpoints
    out = Path(cfg.run.output_dir)
    print_train_summary(cfg, summary, out)
    return 0


def print_train_summary(cfg: Config, summary: dict, out: Path) -> None:
    """The terminal summary of a ``train`` run (and where its files are)."""
    from .kinds import kind_of
    from .runtime.metrics import format_bytes

    summary_path = out / "summary.json"
    kind = kind_of(cfg)
    quality = kind.metric.line(summary)  # the kind's figures: accuracies, MRR and hits@k, ...
    print(
        f"{cfg.name}: {summary['model']} x{summary['num_layers']} on {summary['dataset']}, "
        f"{summary['num_parts']} workers, {summary['mode']}, correction={summary['correction']}\n"
        f"  {quality}  "
        f"epoch {summary['epoch_time_s']:.3f} s  ({summary['steps_per_epoch']} steps)\n"
        f"  per worker per epoch: gradients {format_bytes(summary['grad_bytes_per_epoch'])}, "
        f"remote features {format_bytes(summary['feature_bytes_per_epoch'])}\n"
        f"  wrote {out / 'metrics.jsonl'} and {summary_path}"
    )
    for line in kind.summary_lines(summary):
        print(f"  {line}")
    for r in summary.get("restarts", []):
        print(
            f"  restart {r['restart']}: {r['reason']}; resumed from "
            f"{r['resumed_from'] or 'the beginning'} (epoch {r['epoch']})"
        )
    if "schedule" in summary:
        sch = summary["schedule"]
        print(
            f"  repartitioning ({sch['method']}, k={sch['k']}): {len(summary['switches'])} switches, "
            f"stall {sch['stall_s_total']:.2f} s = {sch['stall_fraction']:.2%} of training time"
        )
    if summary.get("wire_hosts"):
        c = summary.get("cluster", {})
        print(
            f"  across {len(summary['wire_hosts'])} hosts ({c.get('remote', '?')}"
            + (f", link {c['link']['mode']} {c['link']['bandwidth'] or 'unshaped'}" if c.get("link") else "")
            + ")"
            + (
                f", time dilation {c['network_dilation']:.3g} (times are dilated)"
                if (c.get("network_dilation") or 1) != 1
                else ""
            )
            + f": wire {format_bytes(summary['wire_bytes_per_epoch'])}/epoch; per host tx/rx per epoch "
            + ", ".join(
                f"h{h['host']} {format_bytes(h['tx_bytes_per_epoch'])}/{format_bytes(h['rx_bytes_per_epoch'])}"
                for h in summary["wire_hosts"]
            )
        )


def cmd_worker(cfg: Config, args: argparse.Namespace) -> int:
    from .native.worker import run_started_worker

    return run_started_worker(cfg, args.part_config, args.num_classes, resume=None if args.no_resume else "auto")


def cmd_prepare(args: argparse.Namespace) -> int:
    from .partition.aggregates import prepare

    rec = prepare(args.part_config, args.feat_key, gcn=args.gcn, force=args.force)
    for part in rec["parts"]:
        print(
            f"part {part['part']}: {part['rows']} nodes x {part['width']}, {part['in_edges']} in-edges, "
            f"{part['remote_pairs']} partial sums from other parts"
        )
    print(f"wrote the aggregates next to {rec['part_config']} ({rec['seconds']:.1f} s; a second run is a no-op)")
    return 0


COMMANDS = {
    "partition": "cut the configured graph into parts in DGL's layout (and nothing else)",
    "prepare": "add first-hop aggregates and in-degrees to a DGL partition folder another tool wrote",
    "train": "train with Grappa: partition, start the workers, write metrics and summary.json",
    "compare": "run DistDGL and Grappa on the same partitions and write the comparison's report",
    "bench": "run the benchmark matrix of a bench config (resumable) and write its report",
    "project": "project both systems' epoch times to larger clusters from measured compare runs",
    "worker": "one worker of a job that torchrun, srun or the multi-host launcher started",
}
"""Each command and its one line in ``python -m dgl_grappa --help``."""
_SECTION = {"partition": "partition", "train": "train", "compare": "compare", "bench": "bench", "worker": "train"}
"""The config section each command that reads the config tree is mostly about (its help lists its keys)."""


def _overrides_help(command: str) -> str:
    section = _SECTION[command]
    keys = ", ".join(f.name for f in dataclasses.fields(getattr(Config(), section)))
    return (
        f"Config overrides: --<section>.<key>=<value>, any key of the config tree (docs/configuration.md), "
        f"e.g. --{section}.<key>=<value> with <key> one of: {keys}."
    )


class _Verbatim(argparse.Action):
    """Keeps an option as written, in command-line order, for a command that reads its own options
    (``project``: its flags and ``--project.<key>`` spellings, last one wins)."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.verbatim = [*getattr(namespace, "verbatim", []), option_string, *values]


def _prog() -> str:
    """How the user called the command line: the installed ``dgl-grappa``, or ``python -m dgl_grappa``."""
    return "dgl-grappa" if Path(sys.argv[0]).name == "dgl-grappa" else "python -m dgl_grappa"


def build_parser(project: bool = True) -> argparse.ArgumentParser:
    """The command line's parser: one sub-parser per command, each with its own ``--help``.

    Args:
        project: give ``project`` its options (they import its module, which imports torch: a command line
            without ``project`` in it leaves them out, so that ``--help`` answers at once).

    Example:
        >>> build_parser().parse_known_args(["train", "--config", "c.yaml", "--train.epochs=3"])[1]
        ['--train.epochs=3']
    """
    prog = _prog()
    parser = argparse.ArgumentParser(
        prog=prog,
        allow_abbrev=False,
        description="Grappa's gradient-only communication for distributed GNN training on DGL: DistDGL's "
        "partitions, each worker trained on its own, only gradients on the network.",
        epilog=f"{prog} COMMAND --help shows a command's own options; the guide: docs/README.md.",
    )
    parser.add_argument("--version", action="version", version=f"dgl_grappa {__version__}")
    # Before the command too, as this command line always took them (python -m dgl_grappa --config C train).
    parser.add_argument("--config", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--resume", nargs="?", const="auto", default=None, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    cmds = {}
    for name, line in COMMANDS.items():
        # An override (--a.b=v) is no option of the parser: it passes through to load_config, so the help
        # names the form in its epilog instead of listing every key.
        cmds[name] = sub.add_parser(
            name,
            help=line,
            description=line,
            allow_abbrev=False,
            epilog=_overrides_help(name) if name in _SECTION else None,
        )
        if name != "prepare":
            # SUPPRESS: given only before the command, the top-level value stands.
            cmds[name].add_argument(
                "--config",
                default=argparse.SUPPRESS,
                metavar="PATH",
                help={
                    "project": "YAML file with a project: section",
                    "bench": "the bench config (required), e.g. benchmarks/accuracy/config.yaml",
                }.get(name, "YAML config (default: the built-in defaults)"),
            )
        cmds[name].add_argument(
            "--resume",
            nargs="?",
            const="auto",
            default=argparse.SUPPRESS,
            metavar="PATH|auto",
            help=(
                "continue from a checkpoint file, or (no value, or auto) from the newest intact checkpoint in "
                "checkpoint.dir; same as --checkpoint.resume=..."
            )
            if name == "train"
            else argparse.SUPPRESS,
        )
    p = cmds["prepare"]
    p.add_argument("--part-config", required=True, help="the partition json (DGL's <graph>.json) or its folder")
    p.add_argument(
        "--feat-key",
        default="auto",
        help="node data key of the features (default: auto, the one 2-D float node tensor: DGL's "
        "examples' features, the package's feat)",
    )
    p.add_argument(
        "--gcn",
        action="store_true",
        help="also the GraphConv(norm='both') aggregate, for the drop-in's first_hop='block'",
    )
    p.add_argument("--force", action="store_true", help="compute again even when the folder is prepared")
    w = cmds["worker"]
    w.add_argument("--part-config", default=None, help="first partitioning's json (set by the launcher)")
    w.add_argument("--num-classes", type=int, default=None, help="number of classes (set by the launcher)")
    w.add_argument("--no-resume", action="store_true", help="start at epoch 0 even if a checkpoint exists")
    pr = cmds["project"]
    pr.set_defaults(verbatim=[])
    if not project:
        return parser
    from .bench.project.command import USAGE as PROJECT_USAGE
    from .bench.project.command import project_options

    pr.epilog = f"usage in short: {PROJECT_USAGE}"
    for flag, key, text in project_options():
        # nargs="*": a flag without a value reaches the command's own one-line error, not argparse's usage.
        pr.add_argument(flag, f"--project.{key}", action=_Verbatim, nargs="*", metavar=key.upper(), help=text)
    return parser


def _exit_on_signal(signum, frame):
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    args, rest = build_parser(project="project" in words).parse_known_args(argv)
    from .cluster.launch import setup_logging

    setup_logging(None)
    if args.command in ("bench", "compare"):
        # These wait on job processes in sessions of their own: a SIGTERM or SIGHUP must unwind
        # through the waits' cleanup (which kills the running job) instead of leaving it orphaned.
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _exit_on_signal)
    try:
        if args.resume is not None and args.command != "train":
            raise ConfigError(f"--resume applies to train, not {args.command}; drop it")
        if args.command == "prepare":
            if rest:
                raise ConfigError(f"prepare takes --part-config PATH [--feat-key K] [--gcn] [--force], not {rest[0]}")
            return cmd_prepare(args)
        if args.command == "bench":
            from .bench.matrix import cmd_bench

            return cmd_bench(args.config, rest)
        if args.command == "project":
            from .bench.project import cmd_project

            return cmd_project(args.config, args.verbatim + rest)
        if args.resume is not None:
            rest = rest + [f"--checkpoint.resume={args.resume}"]
        cfg = load_config(args.config, rest)
        from .kinds import resolve

        resolve(cfg)  # the kind of job's own rules, before anything runs
        if args.command == "worker":
            return cmd_worker(cfg, args)
        if args.command == "compare":
            from .bench.compare import cmd_compare

            return cmd_compare(cfg)
        return {"partition": cmd_partition, "train": cmd_train}[args.command](cfg)
    except ConfigError as exc:
        print(f"dgl_grappa: error: {exc}", file=sys.stderr)
        return 2
    except Stopped as exc:  # a scheduler's SIGTERM, a hang-up, Ctrl-C (train, worker): the usual exit status
        print(f"dgl_grappa: {exc}", file=sys.stderr)
        return 128 + exc.signum
    except JobFailed as exc:
        print(f"dgl_grappa: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("dgl_grappa: interrupted", file=sys.stderr)
        return 130
