#!/bin/bash
# Stage 1 screen on the 20k hard synthetic graph: random 4 parts, 3 layers, seed 0.
cd "$(dirname "$0")"
# run inside the project's environment (scripts/test.sh makes .venv)
export PYTHONPATH=$PWD/..:$PWD DGLBACKEND=pytorch
V='distdgl;grappa;grappa:fhc=1;grappa:halo=keep;grappa:halo=keep,fhc=1;grappa:halo=keep,hist=1;grappa:halo=keep,fhc=1,hist=1;grappa:sampler=foldback;grappa:empty=self'
timeout 5000 nice -n 10 python -W ignore sim.py --dataset syn20k --models sage --layers 3 --parts 4 --partitions random --seeds 0 --variants "$V"
VG='distdgl;grappa;grappa:norm=ht;grappa:halo=keep,fhc=1;grappa:halo=keep,fhc=1,hist=1'
timeout 5000 nice -n 10 python -W ignore sim.py --dataset syn20k --models gcn --layers 3 --parts 4 --partitions random --seeds 0 --variants "$VG"
