#!/usr/bin/env bash
# The device check for a machine with one GPU (sized for 16 cores, 128 GB; at most 8 minutes):
#   1. the gpu-marked tests: the torch kernels on the GPU equal the CPU ones, a whole native training run on
#      the GPU (and DGL's own layers refused in one line, or trained with DGL's CUDA build), the DDP hooks
#      under NCCL;
#   2. DistDGL against Grappa with --run.device=cuda on the 100k synthetic graph (METIS, 4 parts, GraphSAGE
#      of 2 and 3 layers, 8 epochs, one emulated host per part on its own 1 Gbit link where root and tc
#      allow): benchmarks/gpu/run.py's table, and its JSON in <output folder>/gpu.json.
# Without a GPU it says so in one line and exits 0. It makes .venv as scripts/test.sh does; on a machine
# whose Python already holds the dependencies (an image without network access), DGL_GRAPPA_BOOTSTRAP=0
# uses that Python (python3, or $PYTHON) as it is.
#   bash scripts/gpu_check.sh [output folder]
set -euo pipefail
if [ "${CUDA_VISIBLE_DEVICES-unset}" = "" ] || ! nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
  echo "gpu_check: no GPU here (nvidia-smi -L lists none, or CUDA_VISIBLE_DEVICES is empty); nothing to check"
  exit 0
fi
if [ "${DGL_GRAPPA_BOOTSTRAP:-1}" = 0 ]; then
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  export DGLBACKEND=pytorch PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  PY="${PYTHON:-python3}"
else
  source "$(dirname "${BASH_SOURCE[0]}")/_bootstrap.sh"
  PY=python
fi
OUT="${1:-runs/gpu_check}"
if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "gpu_check: nvidia-smi lists a GPU but torch sees none (driver and torch's CUDA do not match)" >&2
  exit 1
fi
nvidia-smi -L
mkdir -p "$OUT"
echo "[gpu_check] 1/2: the gpu tests" >&2
tests=0
timeout 150 "$PY" -m pytest -q -m gpu tests/test_kernels.py tests/test_cuda_path.py tests/test_reducers_cuda.py \
  -p no:cacheprovider || tests=$?
echo "[gpu_check] 2/2: DistDGL vs Grappa on the GPU (100k synthetic, METIS-4, GraphSAGE-2 and -3, 8 epochs)" >&2
timeout 330 "$PY" benchmarks/gpu/run.py --out "$OUT" --timeout 240
if [ "$tests" != 0 ]; then
  echo "gpu_check: the gpu tests failed (pytest exit $tests); the comparison ran: $OUT/gpu.json" >&2
  exit "$tests"
fi
echo "[gpu_check] done: $OUT/gpu.json" >&2
