"""Command line: ``python -m dgl_grappa.distdgl`` (and its internal ``_launch`` / ``_server``)."""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from ..cluster.procs import EXIT_USER_ERROR, JobFailed
from .launcher import FAILURE_FILE, _server_main, launch
from .run import run_distdgl


def main(argv: list[str] | None = None) -> int:
    """``python -m dgl_grappa.distdgl --config C [--grappa] [--section.key=value ...]``.

    Runs the DistDGL job (servers + trainers, ``python -m dgl_grappa.distdgl.train``) on the config's
    partitions and prints its summary line. ``_launch`` and ``_server`` are internal.
    """
    from ..cluster.launch import setup_logging
    from ..cluster.netns import IsolationError
    from ..config import ConfigError, load_config
    from ..partition.layout import part_config_path
    from ..runtime.metrics import format_bytes

    argv = list(sys.argv[1:] if argv is None else argv)
    setup_logging(None)
    if argv[:1] == ["_server"]:
        _server_main()
        return 0
    if argv[:1] == ["_launch"]:
        i = argv.index("--")
        ap = argparse.ArgumentParser(prog="python -m dgl_grappa.distdgl _launch")
        ap.add_argument("--config", required=True)
        ap.add_argument("--out", required=True)
        a = ap.parse_args(argv[1:i])
        cfg = load_config(a.config)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanup in launch()
        try:
            launch(cfg, str(part_config_path(cfg.partition.out_dir)), a.out, argv[i + 1:])
        except JobFailed as exc:
            print(f"dgl_grappa.distdgl: error: {exc}", file=sys.stderr, flush=True)
            # Its first line, for the caller's restart log (the launcher's output may go to a terminal).
            (Path(a.out) / FAILURE_FILE).write_text(str(exc).splitlines()[0] + "\n")
            return EXIT_USER_ERROR if exc.user_error else 1
        return 0
    ap = argparse.ArgumentParser(prog="python -m dgl_grappa.distdgl",
                                 description="run the DistDGL job (servers + trainers) on the config's partitions")
    ap.add_argument("--config", default=None, help="YAML config")
    ap.add_argument("--grappa", action="store_true", help="drop-in Grappa: local-only loader + corrected hook")
    ap.add_argument("--script", default=None, help="trainer script of your own (default: compare.script, else python -m dgl_grappa.distdgl.train)")
    a, rest = ap.parse_known_args(argv)
    try:
        cfg = load_config(a.config, rest)
        s = run_distdgl(cfg, grappa=a.grappa, script=a.script)
    except (ConfigError, IsolationError, JobFailed) as exc:
        print(f"dgl_grappa.distdgl: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ConfigError) else 1
    print(f"{s['system']}: val acc {s['val_acc']:.4f} test acc {s['test_acc']:.4f} epoch {s['epoch_time_s']:.3f} s; "
          f"per epoch: wire {format_bytes(s.get('wire_bytes_per_epoch'))}, app "
          f"{format_bytes(s['app_bytes_per_epoch'])}, remote features/worker {format_bytes(s['feature_bytes_per_epoch'])}; "
          + (f"{len(s['switches'])} restarts {s['restart_s_total']:.1f} s "
             f"({s['restart_fraction_of_train']:.2f}x training time); " if s.get("switches") else "")
          + f"wrote {Path(cfg.run.output_dir) / 'summary.json'}")
    return 0

