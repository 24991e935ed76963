#!/bin/bash
# The second queue after stage 3: control variate, repartitioning, synthetic gradient study,
# then the remaining 8-part / 4-layer seeds.
cd "$(dirname "$0")"
./stage4_cv.sh
./stage6_repart.sh
./stage7_grad_syn.sh
# run inside the project's environment (scripts/test.sh makes .venv)
export PYTHONPATH=$PWD/..:$PWD DGLBACKEND=pytorch
V='distdgl;grappa:est=batch;grappa:fhc=1,empty=self,fhcdrop=0;grappa:halo=keep,fhc=1,fhcdrop=0'
for seed in 1 2; do
  for ds in cora citeseer; do
    timeout 5000 nice -n 10 python -W ignore sim.py --variants "$V" --dataset $ds --seeds $seed --models sage,gcn --layers 3 --parts 8 --partitions random,ldg
    timeout 5000 nice -n 10 python -W ignore sim.py --variants "$V" --dataset $ds --seeds $seed --models sage,gcn --layers 4 --parts 4 --partitions random,ldg
  done
done
