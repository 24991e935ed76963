#!/bin/bash
# Stage 1 screen: every mechanism alone (and a few pairs), random 4 parts, 3 layers, one seed.
# Usage (inside the project's environment): bash experiments/simulator/screen.sh [SEED]
#   SEED: default 0; the datasets: DATASETS="cora citeseer" (the default).
set -u
cd "$(dirname "$0")/../.."
SEED=${1:-0}
D=experiments/simulator
export DGLBACKEND=pytorch
V='distdgl;grappa;grappa:sampler=foldback;grappa:empty=self;grappa:halo=keep;grappa:fhc=1;grappa:halo=keep,hist=1;grappa:halo=keep,fhc=1;grappa:halo=keep,fhc=1,hist=1;grappa:est=batch;grappa:est=node;grappa:repart=1'
VG='grappa:norm=ht;grappa:norm=gdeg;grappa:norm=ht,empty=self;distdgl:norm=ht'
for ds in ${DATASETS:-cora citeseer}; do
  timeout 3000 nice -n 10 python -W ignore $D/sim.py --dataset $ds --models sage,gcn --layers 3 --parts 4 --partitions random --seeds $SEED --variants "$V"
  timeout 3000 nice -n 10 python -W ignore $D/sim.py --dataset $ds --models gcn --layers 3 --parts 4 --partitions random --seeds $SEED --variants "$VG"
done
