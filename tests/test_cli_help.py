"""Every command's ``--help`` is its own (its options, not the global help), and the global help lists
the commands, each with one line."""

from __future__ import annotations

import pytest

from dgl_grappa.cli import COMMANDS, main

# An option (or config section) that only this command's help names.
OWN = {
    "partition": "--partition.<key>",
    "prepare": "--feat-key",
    "train": "--resume",
    "compare": "--compare.<key>",
    "bench": "--bench.<key>",
    "project": "--latency-us",
    "worker": "--num-classes",
}


def _help(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0
    return capsys.readouterr().out


@pytest.mark.unit
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_command_help_shows_its_own_options(command, capsys):
    text = _help([command, "--help"], capsys)
    assert text.startswith(f"usage: python -m dgl_grappa {command} ")
    assert OWN[command] in text
    others = [c for c in OWN if c != command and OWN[c] in text]
    assert others == [], f"{command} --help names other commands' options: {others}"


@pytest.mark.unit
def test_the_global_help_lists_every_command_with_its_line(capsys):
    text = " ".join(_help(["--help"], capsys).split())  # argparse wraps lines: compare words
    assert set(OWN) == set(COMMANDS)
    for command, line in COMMANDS.items():
        assert f"{command} {line}" in text, command


@pytest.mark.unit
def test_project_options_keep_their_order_and_options_before_the_command_still_count():
    from dgl_grappa.cli import build_parser

    args, rest = build_parser().parse_known_args(
        ["project", "--gbit", "1", "--project.gbit=10", "--runs", "a", "b", "--project.nope=1"]
    )
    assert args.verbatim == ["--gbit", "1", "--project.gbit", "10", "--runs", "a", "b"]
    assert rest == ["--project.nope=1"]  # the command's own check names it
    args, rest = build_parser().parse_known_args(["--config", "c.yaml", "train", "--train.epochs=3", "--resume"])
    assert (args.config, args.resume, rest) == ("c.yaml", "auto", ["--train.epochs=3"])


@pytest.mark.unit
def test_version(capsys):
    from dgl_grappa import __version__

    assert _help(["--version"], capsys).strip() == f"dgl_grappa {__version__}"


def test_help_and_version_load_neither_torch_nor_dgl():
    """They answer at once: the commands' modules (torch, DGL) are imported when a command runs."""
    import subprocess
    import sys

    code = (
        "import sys; from dgl_grappa.cli import main\n"
        "for argv in (['--help'], ['--version'], ['train', '--help']):\n"
        "    try: main(argv)\n"
        "    except SystemExit: pass\n"
        "print(sorted(m for m in ('torch', 'dgl') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_a_python_without_the_dependencies_gets_one_line_naming_the_environment():
    """`python -m dgl_grappa` from a shell that has not activated .venv: one line, no traceback."""
    import subprocess
    import sys

    code = "import runpy, sys; sys.modules['yaml'] = None; runpy.run_module('dgl_grappa', run_name='__main__')"
    p = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.count("\n") == 1 and "lacks the package's dependencies (no module 'yaml'); use " in p.stderr
