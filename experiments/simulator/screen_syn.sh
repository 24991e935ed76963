#!/bin/bash
# Stage 1 screen on the 20k hard synthetic graph: random 4 parts, 3 layers, one seed.
# Usage (inside the project's environment): bash experiments/simulator/screen_syn.sh [SEED]   (default 0)
set -u
cd "$(dirname "$0")/../.."
SEED=${1:-0}
D=experiments/simulator
export DGLBACKEND=pytorch
V='distdgl;grappa;grappa:fhc=1;grappa:halo=keep;grappa:halo=keep,fhc=1;grappa:halo=keep,hist=1;grappa:halo=keep,fhc=1,hist=1;grappa:sampler=foldback;grappa:empty=self'
timeout 5000 nice -n 10 python -W ignore $D/sim.py --dataset syn20k --models sage --layers 3 --parts 4 --partitions random --seeds $SEED --variants "$V"
VG='distdgl;grappa;grappa:norm=ht;grappa:halo=keep,fhc=1;grappa:halo=keep,fhc=1,hist=1'
timeout 5000 nice -n 10 python -W ignore $D/sim.py --dataset syn20k --models gcn --layers 3 --parts 4 --partitions random --seeds $SEED --variants "$VG"
