#!/bin/bash
# Stage 2 on Cora and CiteSeer: 3 seeds x {random, ldg} x 4 parts x {sage, gcn} x {2, 3} layers,
# with the gradient study and the partitioner table after the first seed.
# Usage (inside the project's environment): bash experiments/simulator/stage2_planetoid.sh [FIRST [MORE]]
#   FIRST: the seed run first (and of the partitioner table), default 0; MORE: the other seeds, default "1 2".
set -u
cd "$(dirname "$0")/../.."
FIRST=${1:-0}
MORE=${2:-1 2}
D=experiments/simulator
mkdir -p $D/logs
export DGLBACKEND=pytorch
V='distdgl;grappa:est=batch;grappa:fhc=1,empty=self;grappa:halo=keep,fhc=1;grappa:halo=keep,fhc=1,empty=self'
run() { timeout 5000 nice -n 10 python -W ignore $D/sim.py --models sage,gcn --layers 2,3 --parts 4 --partitions random,ldg --variants "$V" "$@"; }
run --dataset cora --seeds $FIRST
run --dataset citeseer --seeds $FIRST
timeout 1800 nice -n 10 python -W ignore $D/grad_study.py --dataset cora --models sage,gcn --layers 3 --R 20 > $D/logs/grad_cora.log 2>&1
timeout 900 nice -n 10 python -W ignore $D/part_bench.py --datasets cora,citeseer,syn20k,syn100k --parts 4,8 --methods random,ldg1,ldg,fennel,metis --seeds $FIRST > $D/logs/part_bench.log 2>&1
for seed in $MORE; do
  run --dataset cora --seeds $seed
  run --dataset citeseer --seeds $seed
done
