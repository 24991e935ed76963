#!/usr/bin/env bash
# The device check for a machine with one GPU (sized for 16 cores, 128 GB; at most 8 minutes):
#   1. the gpu-marked tests: the torch kernels on the GPU equal the CPU ones, a whole native training run on
#      the GPU (and DGL's own layers refused in one line, or trained with DGL's CUDA build), the DDP hooks
#      under NCCL;
#   2. DistDGL against Grappa with --run.device=cuda on the 100k synthetic graph (METIS, 4 parts,
#      GraphSAGE, 2 layers, 3 epochs): one table, and its JSON in runs/gpu_check/compare/compare.json.
# Without a GPU it says so in one line and exits 0.
#   bash scripts/gpu_check.sh [output folder]
set -euo pipefail
if [ "${CUDA_VISIBLE_DEVICES-unset}" = "" ] || ! nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
  echo "gpu_check: no GPU here (nvidia-smi -L lists none, or CUDA_VISIBLE_DEVICES is empty); nothing to check"
  exit 0
fi
source "$(dirname "${BASH_SOURCE[0]}")/_bootstrap.sh"
OUT="${1:-runs/gpu_check}"
if ! python -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "gpu_check: nvidia-smi lists a GPU but torch sees none (driver and torch's CUDA do not match)" >&2
  exit 1
fi
nvidia-smi -L
rm -rf "$OUT/compare"
mkdir -p "$OUT"
echo "[gpu_check] 1/2: the gpu tests" >&2
timeout 210 python -m pytest -q -m gpu tests/test_kernels.py tests/test_cuda_path.py tests/test_reducers_cuda.py \
  -p no:cacheprovider
echo "[gpu_check] 2/2: DistDGL vs Grappa on the GPU (100k synthetic, METIS-4, GraphSAGE-2, 3 epochs)" >&2
timeout 240 python -m dgl_grappa compare --config configs/bench/synth100k.yaml \
  --partition.num_parts=4 --partition.method=metis --model.name=sage --model.num_layers=2 \
  --train.fanouts=[10,25] --train.epochs=3 --train.eval_every=0 --run.device=cuda --run.timeout_s=200 \
  --compare.variants=[none] --compare.dropin=false --run.progress=false --run.output_dir="$OUT/compare"
echo "[gpu_check] done: $OUT/compare/compare.json" >&2
