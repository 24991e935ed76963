#!/usr/bin/env bash
# The main job on the embedded default config (a generated graph: no data to fetch): DistDGL
# and Grappa trained side by side on the same partitions, with a table, report.md and plots
# under runs/default/. Extra arguments are passed on, e.g. scripts/run.sh --train.epochs=5
source "$(dirname "${BASH_SOURCE[0]}")/_bootstrap.sh"
if [ "$(id -u)" != 0 ]; then
  # Two DistDGL "machines" on one host need private mount/network namespaces (root).
  echo "[run] not root: running Grappa alone (python -m dgl_grappa train); the DistDGL comparison needs root" >&2
  exec python -m dgl_grappa train --config configs/default.yaml "$@"
fi
exec python -m dgl_grappa compare --config configs/default.yaml "$@"
