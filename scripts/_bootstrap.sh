# Sourced by run.sh and test.sh: make .venv (Python 3.11) and install dgl_grappa into it once.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DGL_GRAPPA_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x "$VENV/bin/python" ]; then
  echo "[bootstrap] creating $VENV with $PY" >&2
  "$PY" -m venv "$VENV"
fi
# network.bandwidth shapes loopback with tc (iproute2); as root with apt, install it once.
if ! command -v tc >/dev/null 2>&1 && [ ! -x /usr/sbin/tc ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "[bootstrap] installing iproute2 (tc) for bandwidth emulation" >&2
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iproute2; } >/dev/null 2>&1 \
    || echo "[bootstrap] could not install iproute2; network.bandwidth will report that tc is missing" >&2
fi
# Reinstall only when setup.py or the tested versions changed since the last install (the stamp holds
# their hash). The constraints pin the versions the suite was tested with inside setup.py's ranges.
STAMP="$VENV/.dgl_grappa_installed"
WANT="$(cat "$ROOT/setup.py" "$ROOT/scripts/constraints.txt" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "[bootstrap] installing dgl_grappa and its tested dependencies (first time: a few minutes)" >&2
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q -c "$ROOT/scripts/constraints.txt" -e "$ROOT[test]"
  echo "$WANT" > "$STAMP"
  echo "[bootstrap] installed into $VENV: a new shell reaches it as $VENV/bin/dgl-grappa (or after" \
       "source $VENV/bin/activate); the system's python does not have it" >&2
fi
export DGLBACKEND=pytorch
export PATH="$VENV/bin:$PATH"
cd "$ROOT"
