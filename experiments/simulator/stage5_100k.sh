#!/bin/bash
# The 100k hard synthetic graph, random 4 parts, SAGE-3: DistDGL, old default, candidate default.
# Usage (inside the project's environment): bash experiments/simulator/stage5_100k.sh [SEED]   (default 0)
set -u
cd "$(dirname "$0")/../.."
SEED=${1:-0}
D=experiments/simulator
export DGLBACKEND=pytorch
timeout 5000 nice -n 10 python -W ignore $D/sim.py --dataset syn100k --models sage --layers 3 --parts 4 --partitions random --seeds $SEED --epochs 12 --variants 'distdgl;grappa:est=batch;grappa:halo=keep,fhc=1,fhcdrop=0'
