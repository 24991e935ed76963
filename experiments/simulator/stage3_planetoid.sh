#!/bin/bash
# Cora and CiteSeer: 3 seeds x {random, ldg} x 4 parts x {sage, gcn} x {2, 3} layers, then the
# gradient study, the partitioner table, and 8 parts / 4 layers for the winners.
# Usage (inside the project's environment): bash experiments/simulator/stage3_planetoid.sh [FIRST [MORE [DEEP]]]
#   FIRST: the seed run first (and of the partitioner table), default 0; MORE: the other seeds at 4 parts,
#   default "1 2"; DEEP: the seeds of the 8-part and 4-layer runs, default "0 1 2".
set -u
cd "$(dirname "$0")/../.."
FIRST=${1:-0}
MORE=${2:-1 2}
DEEP=${3:-0 1 2}
D=experiments/simulator
mkdir -p $D/logs
export DGLBACKEND=pytorch
V='distdgl;grappa:est=batch;grappa:fhc=1,empty=self,fhcdrop=0;grappa:halo=keep,fhc=1,fhcdrop=0'
run() { timeout 5000 nice -n 10 python -W ignore $D/sim.py --variants "$V" "$@"; }
for ds in cora citeseer; do run --dataset $ds --seeds $FIRST --models sage,gcn --layers 2,3 --parts 4 --partitions random,ldg; done
timeout 1800 nice -n 10 python -W ignore $D/grad_study.py --dataset cora --models sage,gcn --layers 3 --R 20 > $D/logs/grad_cora.log 2>&1
timeout 900 nice -n 10 python -W ignore $D/part_bench.py --datasets cora,citeseer,syn20k,syn100k --parts 4,8 --methods random,ldg1,ldg,fennel,metis --seeds $FIRST > $D/logs/part_bench.log 2>&1
for seed in $MORE; do
  for ds in cora citeseer; do run --dataset $ds --seeds $seed --models sage,gcn --layers 2,3 --parts 4 --partitions random,ldg; done
done
for seed in $DEEP; do
  for ds in cora citeseer; do
    run --dataset $ds --seeds $seed --models sage,gcn --layers 3 --parts 8 --partitions random,ldg
    run --dataset $ds --seeds $seed --models sage,gcn --layers 4 --parts 4 --partitions random,ldg
  done
done
