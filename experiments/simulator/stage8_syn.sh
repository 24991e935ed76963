#!/bin/bash
# syn20k continued: LDG seed 0 first, then random seed 2, then LDG seeds 1-2.
# Usage (inside the project's environment): bash experiments/simulator/stage8_syn.sh [LDG_FIRST [RANDOM [LDG_MORE]]]
#   defaults: 0, 2, "1 2".
set -u
cd "$(dirname "$0")/../.."
LDG_FIRST=${1:-0}
RANDOM_SEEDS=${2:-2}
LDG_MORE=${3:-1 2}
D=experiments/simulator
export DGLBACKEND=pytorch
V='distdgl;grappa:est=batch;grappa:fhc=1,empty=self,fhcdrop=0;grappa:halo=keep,fhc=1,fhcdrop=0'
go() { timeout 10000 nice -n 10 python -W ignore $D/sim.py --dataset syn20k --models sage,gcn --layers 3,2 --parts 4 --variants "$V" "$@"; }
for seed in $LDG_FIRST; do go --partitions ldg --seeds $seed; done
for seed in $RANDOM_SEEDS; do go --partitions random --seeds $seed; done
for seed in $LDG_MORE; do go --partitions ldg --seeds $seed; done
