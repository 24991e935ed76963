#!/bin/bash
# Stage 2 on the 20k hard synthetic graph: DistDGL, old default (batch correction), candidates.
cd "$(dirname "$0")"
# run inside the project's environment (scripts/test.sh makes .venv)
export PYTHONPATH=$PWD/..:$PWD DGLBACKEND=pytorch
# first: fhc without dropout on the precomputed aggregate (fhcdrop=0), quick check on SAGE-3
timeout 3000 nice -n 10 python -W ignore sim.py --dataset syn20k --models sage --layers 3 --parts 4 --partitions random --seeds 0 --variants 'grappa:halo=keep,fhc=1,fhcdrop=0;grappa:fhc=1,empty=self,fhcdrop=0'
timeout 3000 nice -n 10 python -W ignore sim.py --dataset cora --models sage,gcn --layers 3 --parts 4 --partitions random --seeds 0 --variants 'grappa:halo=keep,fhc=1,fhcdrop=0;grappa:fhc=1,empty=self,fhcdrop=0'
timeout 3000 nice -n 10 python -W ignore sim.py --dataset citeseer --models sage,gcn --layers 3 --parts 4 --partitions random --seeds 0 --variants 'grappa:halo=keep,fhc=1,fhcdrop=0;grappa:fhc=1,empty=self,fhcdrop=0'
V='distdgl;grappa:est=batch;grappa:halo=keep,fhc=1'
timeout 10000 nice -n 10 python -W ignore sim.py --dataset syn20k --models sage,gcn --layers 2,3 --parts 4 --partitions random,ldg --seeds ${SEEDS:-0,1,2} --variants "$V"
