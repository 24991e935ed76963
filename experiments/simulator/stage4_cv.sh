#!/bin/bash
# The control-variate reducer (est=cv, refreshed every epoch) in training, Cora and CiteSeer.
# Usage (inside the project's environment): bash experiments/simulator/stage4_cv.sh [SEEDS]   (default "0 1 2")
set -u
cd "$(dirname "$0")/../.."
SEEDS=${1:-0 1 2}
D=experiments/simulator
export DGLBACKEND=pytorch
V='grappa:est=cv;grappa:halo=keep,fhc=1,fhcdrop=0,est=cv'
for seed in $SEEDS; do
  for ds in cora citeseer; do
    timeout 3000 nice -n 10 python -W ignore $D/sim.py --variants "$V" --dataset $ds --seeds $seed --models sage,gcn --layers 3 --parts 4 --partitions random
  done
done
