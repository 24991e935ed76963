#!/bin/bash
# Gradient study on a small (5k) hard synthetic graph.
# Usage (inside the project's environment): bash experiments/simulator/stage7_grad_syn.sh
set -u
cd "$(dirname "$0")/../.."
D=experiments/simulator
mkdir -p $D/logs
export DGLBACKEND=pytorch
timeout 1800 nice -n 10 python -W ignore $D/grad_study.py --dataset syn5k --models sage,gcn --layers 3 --R 12 --train-epochs 15 \
  --specs 'distdgl;grappa;grappa:est=batch;grappa:est=node;grappa:est=shrinkage;grappa:sampler=foldback;grappa:empty=self;grappa:norm=ht;grappa:fhc=1;grappa:halo=keep;grappa:halo=keep,fhc=1;grappa:halo=keep,fhc=1,hist=1;grappa+cv;grappa+cvstale' > $D/logs/grad_syn5k.log 2>&1
