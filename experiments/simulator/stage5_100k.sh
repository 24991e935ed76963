#!/bin/bash
# The 100k hard synthetic graph, random 4 parts, SAGE-3: DistDGL, old default, candidate default.
cd "$(dirname "$0")"
# run inside the project's environment (scripts/test.sh makes .venv)
export PYTHONPATH=$PWD/..:$PWD DGLBACKEND=pytorch
timeout 5000 nice -n 10 python -W ignore sim.py --dataset syn100k --models sage --layers 3 --parts 4 --partitions random --seeds 0 --epochs 12 --variants 'distdgl;grappa:est=batch;grappa:halo=keep,fhc=1,fhcdrop=0'
