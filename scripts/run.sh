#!/usr/bin/env bash
# Run the main job on the embedded default config (no data to fetch). Extra arguments are
# passed on, e.g. scripts/run.sh --train.epochs=3
source "$(dirname "${BASH_SOURCE[0]}")/_bootstrap.sh"
exec python -m dgl_grappa train --config configs/default.yaml "$@"
