#!/usr/bin/env bash
# Run the test suite (installs everything first on a fresh machine). Extra arguments go to pytest.
# `bash scripts/test.sh -m unit` runs the fast subset: in-process tests that need no root (pytest.ini).
source "$(dirname "${BASH_SOURCE[0]}")/_bootstrap.sh"
# The gpu tests need CUDA; where there is no GPU they are deselected (not skipped: under
# CI=true a skip fails, and that rule stays for every other test). A -m of your own is kept
# and combined with it: `-m unit` becomes `-m "(unit) and not gpu"` (pytest honours only the
# last -m, so passing both would drop one of them).
if ! nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
  echo "[test] no GPU found (nvidia-smi -L): deselecting the gpu tests (not gpu)" >&2
  args=() user_m=""
  while [ $# -gt 0 ]; do
    case "$1" in
      -m) [ $# -ge 2 ] || { echo "[test] -m needs an expression" >&2; exit 2; }
          user_m="$2"; shift 2 ;;
      -m*) user_m="${1#-m}"; shift ;;
      *) args+=("$1"); shift ;;
    esac
  done
  set -- -m "${user_m:+($user_m) and }not gpu" ${args[@]+"${args[@]}"}
fi
# The linter and the formatter's check first (about a second), for the fast subset too: findings end the run.
if ! ruff check --quiet .; then
  echo "[test] ruff found the problems above; \`ruff check --fix .\` repairs most of them (import order too)" >&2
  exit 1
fi
if ! ruff format --check --quiet .; then
  echo "[test] the files above are not formatted; run \`ruff format .\`" >&2
  exit 1
fi
exec python -m pytest -q "$@"
