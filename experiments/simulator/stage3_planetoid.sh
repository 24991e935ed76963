#!/bin/bash
# Cora and CiteSeer: 3 seeds x {random, ldg} x 4 parts x {sage, gcn} x {2, 3} layers, then the
# gradient study, the partitioner table, and 8 parts / 4 layers for the winners.
cd "$(dirname "$0")"
# run inside the project's environment (scripts/test.sh makes .venv)
export PYTHONPATH=$PWD/..:$PWD DGLBACKEND=pytorch
V='distdgl;grappa:est=batch;grappa:fhc=1,empty=self,fhcdrop=0;grappa:halo=keep,fhc=1,fhcdrop=0'
run() { timeout 5000 nice -n 10 python -W ignore sim.py --variants "$V" "$@"; }
for ds in cora citeseer; do run --dataset $ds --seeds 0 --models sage,gcn --layers 2,3 --parts 4 --partitions random,ldg; done
timeout 1800 nice -n 10 python -W ignore grad_study.py --dataset cora --models sage,gcn --layers 3 --R 20 > logs/grad_cora.log 2>&1
timeout 900 nice -n 10 python -W ignore part_bench.py --datasets cora,citeseer,syn20k,syn100k --parts 4,8 --methods random,ldg1,ldg,fennel,metis --seeds 0 > logs/part_bench.log 2>&1
for seed in 1 2; do
  for ds in cora citeseer; do run --dataset $ds --seeds $seed --models sage,gcn --layers 2,3 --parts 4 --partitions random,ldg; done
done
for seed in 0 1 2; do
  for ds in cora citeseer; do
    run --dataset $ds --seeds $seed --models sage,gcn --layers 3 --parts 8 --partitions random,ldg
    run --dataset $ds --seeds $seed --models sage,gcn --layers 4 --parts 4 --partitions random,ldg
  done
done
