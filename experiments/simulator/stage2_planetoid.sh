#!/bin/bash
# Stage 2 on Cora and CiteSeer: 3 seeds x {random, ldg} x 4 parts x {sage, gcn} x {2, 3} layers,
# with the gradient study and the partitioner table after seed 0.
cd "$(dirname "$0")"
# run inside the project's environment (scripts/test.sh makes .venv)
export PYTHONPATH=$PWD/..:$PWD DGLBACKEND=pytorch
V='distdgl;grappa:est=batch;grappa:fhc=1,empty=self;grappa:halo=keep,fhc=1;grappa:halo=keep,fhc=1,empty=self'
run() { timeout 5000 nice -n 10 python -W ignore sim.py --models sage,gcn --layers 2,3 --parts 4 --partitions random,ldg --variants "$V" "$@"; }
run --dataset cora --seeds 0
run --dataset citeseer --seeds 0
timeout 1800 nice -n 10 python -W ignore grad_study.py --dataset cora --models sage,gcn --layers 3 --R 20 > logs/grad_cora.log 2>&1
timeout 900 nice -n 10 python -W ignore part_bench.py --datasets cora,citeseer,syn20k,syn100k --parts 4,8 --methods random,ldg1,ldg,fennel,metis --seeds 0 > logs/part_bench.log 2>&1
for seed in 1 2; do
  run --dataset cora --seeds $seed
  run --dataset citeseer --seeds $seed
done
