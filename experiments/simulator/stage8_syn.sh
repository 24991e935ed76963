#!/bin/bash
# syn20k continued: LDG seed 0 first, then random seed 2, then LDG seeds 1-2.
cd "$(dirname "$0")"
# run inside the project's environment (scripts/test.sh makes .venv)
export PYTHONPATH=$PWD/..:$PWD DGLBACKEND=pytorch
V='distdgl;grappa:est=batch;grappa:fhc=1,empty=self,fhcdrop=0;grappa:halo=keep,fhc=1,fhcdrop=0'
go() { timeout 10000 nice -n 10 python -W ignore sim.py --dataset syn20k --models sage,gcn --layers 3,2 --parts 4 --variants "$V" "$@"; }
go --partitions ldg --seeds 0
go --partitions random --seeds 2
go --partitions ldg --seeds 1
go --partitions ldg --seeds 2
