#!/bin/bash
# 20k hard synthetic graph: 3 seeds x {random, ldg} x 4 parts x {sage, gcn} x {2, 3} layers,
# then the partitioner table for the synthetic graphs and the 100k check.
cd "$(dirname "$0")"
# run inside the project's environment (scripts/test.sh makes .venv)
export PYTHONPATH=$PWD/..:$PWD DGLBACKEND=pytorch
V='distdgl;grappa:est=batch;grappa:fhc=1,empty=self,fhcdrop=0;grappa:halo=keep,fhc=1,fhcdrop=0'
timeout 10000 nice -n 10 python -W ignore sim.py --dataset syn20k --models sage,gcn --layers 3 --parts 4 --partitions random --seeds 0 --variants "$V"
timeout 10000 nice -n 10 python -W ignore sim.py --dataset syn20k --models sage,gcn --layers 2 --parts 4 --partitions random --seeds 0 --variants "$V"
timeout 900 nice -n 10 python -W ignore part_bench.py --datasets syn20k,syn100k --parts 4,8 --methods random,ldg1,ldg,fennel,metis --seeds 0 > logs/part_bench_syn.log 2>&1
for seed in 1 2; do
  timeout 10000 nice -n 10 python -W ignore sim.py --dataset syn20k --models sage,gcn --layers 3,2 --parts 4 --partitions random --seeds $seed --variants "$V"
done
for seed in 0 1 2; do
  timeout 10000 nice -n 10 python -W ignore sim.py --dataset syn20k --models sage,gcn --layers 3,2 --parts 4 --partitions ldg --seeds $seed --variants "$V"
done
