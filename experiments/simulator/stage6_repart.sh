#!/bin/bash
# Repartitioning on top of the candidate default and the old default (Cora, CiteSeer, 3 layers).
cd "$(dirname "$0")"
# run inside the project's environment (scripts/test.sh makes .venv)
export PYTHONPATH=$PWD/..:$PWD DGLBACKEND=pytorch
V='grappa:est=batch,repart=1;grappa:halo=keep,fhc=1,fhcdrop=0,repart=1'
for seed in 0 1 2; do
  for ds in cora citeseer; do
    timeout 3000 nice -n 10 python -W ignore sim.py --variants "$V" --dataset $ds --seeds $seed --models sage,gcn --layers 3 --parts 4 --partitions random
  done
done
