#!/bin/bash
# 20k hard synthetic graph: 3 seeds x {random, ldg} x 4 parts x {sage, gcn} x {2, 3} layers,
# then the partitioner table for the synthetic graphs and the 100k check.
# Usage (inside the project's environment): bash experiments/simulator/stage3_syn.sh [FIRST [MORE [LDG]]]
#   FIRST: the seed run first on random parts (and of the partitioner table), default 0; MORE: the other
#   random-part seeds, default "1 2"; LDG: the seeds on LDG parts, default "0 1 2".
set -u
cd "$(dirname "$0")/../.."
FIRST=${1:-0}
MORE=${2:-1 2}
LDG=${3:-0 1 2}
D=experiments/simulator
mkdir -p $D/logs
export DGLBACKEND=pytorch
V='distdgl;grappa:est=batch;grappa:fhc=1,empty=self,fhcdrop=0;grappa:halo=keep,fhc=1,fhcdrop=0'
timeout 10000 nice -n 10 python -W ignore $D/sim.py --dataset syn20k --models sage,gcn --layers 3 --parts 4 --partitions random --seeds $FIRST --variants "$V"
timeout 10000 nice -n 10 python -W ignore $D/sim.py --dataset syn20k --models sage,gcn --layers 2 --parts 4 --partitions random --seeds $FIRST --variants "$V"
timeout 900 nice -n 10 python -W ignore $D/part_bench.py --datasets syn20k,syn100k --parts 4,8 --methods random,ldg1,ldg,fennel,metis --seeds $FIRST > $D/logs/part_bench_syn.log 2>&1
for seed in $MORE; do
  timeout 10000 nice -n 10 python -W ignore $D/sim.py --dataset syn20k --models sage,gcn --layers 3,2 --parts 4 --partitions random --seeds $seed --variants "$V"
done
for seed in $LDG; do
  timeout 10000 nice -n 10 python -W ignore $D/sim.py --dataset syn20k --models sage,gcn --layers 3,2 --parts 4 --partitions ldg --seeds $seed --variants "$V"
done
