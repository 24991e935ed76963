#!/usr/bin/env bash
# The device check for a machine with one GPU (sized for 16 cores, 128 GB; at most 8 minutes):
#   1. the gpu-marked tests: the torch kernels on the GPU equal the CPU ones, a whole native training run on
#      the GPU (and DGL's own layers refused in one line, or trained with DGL's CUDA build), the DDP hooks
#      under NCCL, the torch sampler on the device and a run whose tables and sampling are on the GPU;
#   2. DistDGL at its best against Grappa with --run.device=cuda on the 100k synthetic graph at the paper's
#      widths (128 features, hidden 128; METIS, 4 parts, one emulated host per part on its own 1 Gbit link
#      where root and tc allow): DistDGL's distdgl.num_samplers 0, 1 and 2 tried (2 epochs of GraphSAGE-3),
#      the fastest against Grappa's GPU pipeline (sampler and tables on the device, the next batch drawn
#      during the backward pass) at GraphSAGE-2 and -3 (8 epochs), a Grappa run with bfloat16 gradients,
#      and the floor (one batch's forward and backward on the device x the steps + the all-reduce alone):
#      benchmarks/gpu/run.py's tables (the phases beside the floor, the setting that won, the goals), and
#      its JSON in <output folder>/gpu.json.
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
timeout 120 "$PY" -m pytest -q -m gpu tests/test_kernels.py tests/test_cuda_path.py tests/test_reducers_cuda.py \
  tests/test_gpu_step.py -p no:cacheprovider || tests=$?
echo "[gpu_check] 2/2: DistDGL at its best vs Grappa on the GPU (100k synthetic at width 128, METIS-4)" >&2
timeout 345 "$PY" benchmarks/gpu/run.py --out "$OUT" --timeout 200 --probe-epochs 2 \
  -- --model.hidden=128 --data.synthetic.feat_dim=128
if [ "$tests" != 0 ]; then
  echo "gpu_check: the gpu tests failed (pytest exit $tests); the comparison ran: $OUT/gpu.json" >&2
  exit "$tests"
fi
echo "[gpu_check] done: $OUT/gpu.json" >&2
