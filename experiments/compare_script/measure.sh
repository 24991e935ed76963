#!/bin/bash
# compare on DGL-style scripts, unmodified against converted by the docs' diffs, on make_graph.py's graph.
# Run from the repository root: bash experiments/compare_script/measure.sh
set -e
W=runs/compare_script
python experiments/compare_script/make_graph.py $W/wide
rm -rf $W/converted && cp -r examples/dgl_style $W/converted
for s in node_classification train_dist_unsupervised; do
    patch -s -p1 -d $W/converted -i "$PWD/examples/dgl_style/$s.diff"
done
A="--graph_name {graph_name} --ip_config {ip_config} --part_config {part_config}"
python -m dgl_grappa compare --partition.prebuilt=$W/wide/wide.json --partition.num_parts=2 \
    --compare.script=examples/dgl_style/node_classification.py \
    --compare.dropin_script=$W/converted/node_classification.py \
    "--compare.script_args=$A" --run.output_dir=$W/node_classification --run.timeout_s=3000
python -m dgl_grappa compare --partition.prebuilt=$W/wide/wide.json --partition.num_parts=2 \
    --compare.script=examples/dgl_style/train_dist_unsupervised.py \
    --compare.dropin_script=$W/converted/train_dist_unsupervised.py \
    "--compare.script_args=$A --num_epochs 3" --run.output_dir=$W/train_dist_unsupervised --run.timeout_s=3000
