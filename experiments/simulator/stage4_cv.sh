#!/bin/bash
# The control-variate reducer (est=cv, refreshed every epoch) in training, Cora and CiteSeer.
cd "$(dirname "$0")"
# run inside the project's environment (scripts/test.sh makes .venv)
export PYTHONPATH=$PWD/..:$PWD DGLBACKEND=pytorch
V='grappa:est=cv;grappa:halo=keep,fhc=1,fhcdrop=0,est=cv'
for seed in 0 1 2; do
  for ds in cora citeseer; do
    timeout 3000 nice -n 10 python -W ignore sim.py --variants "$V" --dataset $ds --seeds $seed --models sage,gcn --layers 3 --parts 4 --partitions random
  done
done
