import sys

try:
    from .cli import main
except ModuleNotFoundError as exc:  # a Python without the dependencies: say which one to use, in one line
    from pathlib import Path

    venv = Path(__file__).resolve().parent.parent / ".venv" / "bin"
    use = (
        f"{venv}/dgl-grappa, or `source {venv}/activate` first"
        if (venv / "dgl-grappa").is_file()
        else "`bash scripts/run.sh` first (it installs them into .venv), then .venv/bin/dgl-grappa"
    )
    sys.exit(
        f"dgl_grappa: this Python ({sys.executable}) lacks the package's dependencies (no module "
        f"{exc.name!r}); use {use}"
    )

if __name__ == "__main__":
    sys.exit(main())
