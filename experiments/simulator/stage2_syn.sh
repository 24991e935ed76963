#!/bin/bash
# Stage 2 on the 20k hard synthetic graph: DistDGL, old default (batch correction), candidates.
# Usage (inside the project's environment): bash experiments/simulator/stage2_syn.sh [CHECK [SEEDS]]
#   CHECK: the seed of the quick fhcdrop=0 checks, default 0; SEEDS: of the main runs, default 0,1,2.
set -u
cd "$(dirname "$0")/../.."
CHECK=${1:-0}
SEEDS=${2:-0,1,2}
D=experiments/simulator
export DGLBACKEND=pytorch
# first: fhc without dropout on the precomputed aggregate (fhcdrop=0), quick check on SAGE-3
timeout 3000 nice -n 10 python -W ignore $D/sim.py --dataset syn20k --models sage --layers 3 --parts 4 --partitions random --seeds $CHECK --variants 'grappa:halo=keep,fhc=1,fhcdrop=0;grappa:fhc=1,empty=self,fhcdrop=0'
timeout 3000 nice -n 10 python -W ignore $D/sim.py --dataset cora --models sage,gcn --layers 3 --parts 4 --partitions random --seeds $CHECK --variants 'grappa:halo=keep,fhc=1,fhcdrop=0;grappa:fhc=1,empty=self,fhcdrop=0'
timeout 3000 nice -n 10 python -W ignore $D/sim.py --dataset citeseer --models sage,gcn --layers 3 --parts 4 --partitions random --seeds $CHECK --variants 'grappa:halo=keep,fhc=1,fhcdrop=0;grappa:fhc=1,empty=self,fhcdrop=0'
V='distdgl;grappa:est=batch;grappa:halo=keep,fhc=1'
timeout 10000 nice -n 10 python -W ignore $D/sim.py --dataset syn20k --models sage,gcn --layers 2,3 --parts 4 --partitions random,ldg --seeds $SEEDS --variants "$V"
