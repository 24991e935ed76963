"""The project's linter (ruff, configured in ruff.toml) finds nothing, import order included, and every file is as
``ruff format`` writes it. It runs ruff, a process, so it is not in
the unit subset (which starts none); before a commit run `ruff check .` beside `scripts/test.sh -m unit`, or this
file alone (a second). `ruff check --fix` repairs most findings."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ruff() -> list[str]:
    # the ruff of this environment (setup.py's test extra installs it beside pytest)
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if exe is None:
        pytest.fail("ruff is not installed; `pip install -e .[test]` installs it (scripts/test.sh does)")
    return [exe]


def test_ruff_finds_nothing():
    p = subprocess.run(
        _ruff() + ["check", "--no-cache", "--output-format", "concise", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert p.returncode == 0, "ruff check found (fix them, most with `ruff check --fix`):\n" + p.stdout[-4000:]


def test_every_file_is_formatted():
    p = subprocess.run(
        _ruff() + ["format", "--check", "--no-cache", str(ROOT)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert p.returncode == 0, "not formatted (run `ruff format .`):\n" + p.stdout[-4000:]


def test_the_formatter_and_import_order_report_what_they_are_configured_for(tmp_path):
    """The checks above can fail: an unsorted import block is I001, and a badly spaced file is one to reformat."""
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nimport os\n\nx = [ 1,2 ]\nprint(os, sys, x)\n")
    conf = ["--config", str(ROOT / "ruff.toml")]
    p = subprocess.run(
        _ruff() + ["check", "--no-cache", *conf, "--output-format", "concise", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 1 and "I001" in p.stdout, p.stdout
    p = subprocess.run(
        _ruff() + ["format", "--check", "--no-cache", *conf, str(bad)], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 1 and "bad.py" in p.stdout, p.stdout


def test_the_linter_reports_a_finding_it_is_configured_for(tmp_path):
    """The check above can fail: ruff with the project's settings flags an unused import and a 121-column line."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n" + "x = '" + "a" * 115 + "'\n")
    p = subprocess.run(
        _ruff() + ["check", "--no-cache", "--config", str(ROOT / "ruff.toml"), "--output-format", "concise", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 1 and "F401" in p.stdout and "E501" in p.stdout, p.stdout
