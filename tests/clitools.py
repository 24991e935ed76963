"""Run the real command line in a subprocess, with a bound on time."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str, timeout: float = 300.0) -> subprocess.CompletedProcess:
    env = dict(os.environ, DGLBACKEND="pytorch")
    return subprocess.run(
        [sys.executable, "-m", "dgl_grappa", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def train(out: Path, *overrides: str, config: str = "configs/default.yaml", timeout: float = 300.0) -> dict:
    """`python -m dgl_grappa train` into ``out``; returns summary.json (fails with the child's stderr)."""
    p = run_cli(
        "train", "--config", config, f"--run.output_dir={out}", "--run.progress=false", *overrides, timeout=timeout
    )
    assert p.returncode == 0, f"train failed ({p.returncode}):\n{p.stderr[-4000:]}"
    return json.loads((out / "summary.json").read_text())
