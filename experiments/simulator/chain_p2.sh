#!/bin/bash
# The second queue after stage 3: control variate, repartitioning, synthetic gradient study,
# then the remaining 8-part / 4-layer seeds.
# Usage (inside the project's environment): bash experiments/simulator/chain_p2.sh [SEEDS]   (default "1 2")
set -u
cd "$(dirname "$0")/../.."
SEEDS=${1:-1 2}
D=experiments/simulator
bash $D/stage4_cv.sh
bash $D/stage6_repart.sh
bash $D/stage7_grad_syn.sh
export DGLBACKEND=pytorch
V='distdgl;grappa:est=batch;grappa:fhc=1,empty=self,fhcdrop=0;grappa:halo=keep,fhc=1,fhcdrop=0'
for seed in $SEEDS; do
  for ds in cora citeseer; do
    timeout 5000 nice -n 10 python -W ignore $D/sim.py --variants "$V" --dataset $ds --seeds $seed --models sage,gcn --layers 3 --parts 8 --partitions random,ldg
    timeout 5000 nice -n 10 python -W ignore $D/sim.py --variants "$V" --dataset $ds --seeds $seed --models sage,gcn --layers 4 --parts 4 --partitions random,ldg
  done
done
