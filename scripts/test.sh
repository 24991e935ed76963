#!/usr/bin/env bash
# Run the test suite (installs everything first on a fresh machine). Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/_bootstrap.sh"
exec python -m pytest -q "$@"
