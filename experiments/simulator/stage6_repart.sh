#!/bin/bash
# Repartitioning on top of the candidate default and the old default (Cora, CiteSeer, 3 layers).
# Usage (inside the project's environment): bash experiments/simulator/stage6_repart.sh [SEEDS]   (default "0 1 2")
set -u
cd "$(dirname "$0")/../.."
SEEDS=${1:-0 1 2}
D=experiments/simulator
export DGLBACKEND=pytorch
V='grappa:est=batch,repart=1;grappa:halo=keep,fhc=1,fhcdrop=0,repart=1'
for seed in $SEEDS; do
  for ds in cora citeseer; do
    timeout 3000 nice -n 10 python -W ignore $D/sim.py --variants "$V" --dataset $ds --seeds $seed --models sage,gcn --layers 3 --parts 4 --partitions random
  done
done
