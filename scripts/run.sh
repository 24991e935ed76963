#!/usr/bin/env bash
# The main job on the embedded default config (a generated graph: no data to fetch): DistDGL
# and Grappa trained side by side on the same partitions, with a table, report.md and plots
# under runs/default/. Extra arguments are passed on, e.g. scripts/run.sh --train.epochs=5
source "$(dirname "${BASH_SOURCE[0]}")/_bootstrap.sh"
# How a new shell reaches what was installed: the environment's own programs (or `source .../activate`).
bin="$VENV/bin"
case "$bin" in "$ROOT"/*) bin="${bin#"$ROOT"/}" ;; esac
echo "[run] every other command, in any shell: $bin/dgl-grappa --help (or: source $bin/activate; dgl-grappa --help)" >&2
if [ "$(id -u)" != 0 ]; then
  # Two DistDGL "machines" on one host need private mount/network namespaces (root).
  echo "[run] not root: training Grappa alone (dgl-grappa train); the DistDGL comparison needs root" >&2
  exec dgl-grappa train --config configs/default.yaml "$@"
fi
echo "[run] DistDGL and Grappa on one machine, 2 workers, the loopback as network: Grappa's epoch is about" \
     "1.3-3x shorter here on an otherwise idle machine, and other jobs on it can even the two out; the README's" \
     "4.7x is 4 machines with a 1 Gbit link each (configs/headline.yaml)" >&2
exec dgl-grappa compare --config configs/default.yaml "$@"
