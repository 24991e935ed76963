"""The commands the README and the user guide show work as written, in a new shell after the two set-up
commands.

A ```bash block right after ``<!-- runnable -->`` in README.md or docs/*.md is run here as it stands, in
a new ``bash`` at the repository's root (``set -e``: every line must succeed). Its ``.venv/bin/`` is the
environment running this test (``scripts/_bootstrap.sh``'s: ``.venv``, or ``$DGL_GRAPPA_VENV``). Those
blocks are the cheap commands; every other ```bash block of README.md says why it is not run here
(``<!-- by hand: ... -->``: it trains, installs or needs a cluster), so that no command of the README is
left unaccounted for.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARK = re.compile(r"<!--\s*(runnable|by hand:[^>]*?)\s*-->")


def blocks(page: Path) -> list[tuple[int, str | None, str]]:
    """Every ```bash block of ``page``: (its first line's number, the marker before it or None, its text)."""
    lines = page.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "```bash":
            j = i - 1
            while j >= 0 and not lines[j].strip():
                j -= 1
            m = MARK.fullmatch(lines[j].strip()) if j >= 0 else None
            end = next(k for k in range(i + 1, len(lines)) if lines[k].strip() == "```")
            out.append((i + 1, m.group(1).strip() if m else None, "\n".join(lines[i + 1 : end])))
            i = end
        i += 1
    return out


RUNNABLE = [
    pytest.param(text, id=f"{page.relative_to(ROOT)}:{line}")
    for page in PAGES
    for line, mark, text in blocks(page)
    if mark == "runnable"
]


@pytest.mark.unit
def test_every_readme_command_is_run_here_or_says_why_not():
    unmarked = [line for line, mark, _ in blocks(ROOT / "README.md") if mark is None]
    assert unmarked == [], (
        f"README.md's ```bash blocks at lines {unmarked} have neither <!-- runnable --> nor <!-- by hand: why -->"
    )
    assert len(RUNNABLE) >= 3  # README.md, docs/install.md and docs/configuration.md have some


@pytest.mark.parametrize("text", RUNNABLE)
def test_a_runnable_block_runs_as_written(text):
    venv = Path(sys.prefix)
    if not (venv / "bin" / "dgl-grappa").is_file():
        pytest.fail(
            f"{venv} has no dgl-grappa entry point: reinstall the package there (bash scripts/test.sh does "
            "when setup.py changed; by hand: pip install -e .)"
        )
    script = text.replace(".venv/bin/", f"{venv}/bin/")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "DGLBACKEND")}  # a new shell
    env["PATH"] = os.pathsep.join(["/usr/local/bin", "/usr/bin", "/bin"])
    p = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, f"exit {p.returncode}\n--- stdout\n{p.stdout[-2000:]}\n--- stderr\n{p.stderr[-3000:]}"
