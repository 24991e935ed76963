"""The graph of the hand-measured `compare` runs: 20k nodes, 512-dim features, 16 classes, 2 random parts cut by
DGL's partition_graph under DGL's key names, prepared. Run from the repository root:

    python experiments/compare_script/make_graph.py runs/compare_script/wide
"""

import sys
from pathlib import Path

import dgl

from dgl_grappa.config import DataConfig, SyntheticConfig
from dgl_grappa.data import load_dataset
from dgl_grappa.partition.aggregates import prepare

out = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/compare_script/wide")
g = load_dataset(
    DataConfig(name="synthetic", synthetic=SyntheticConfig(num_nodes=20000, avg_degree=10, feat_dim=512, seed=5))
)
g.ndata["features"] = g.ndata.pop("feat")
g.ndata["labels"] = g.ndata.pop("label")
train = g.ndata["train_mask"].clone()
if int(train.sum()) % 2:  # an even count: DGL's node_split(force_even=True) then gives both trainers as many
    train[train.nonzero()[0]] = False
g.ndata["train_mask"] = train
dgl.seed(0)
dgl.distributed.partition_graph(g, "wide", 2, str(out), part_method="random", balance_ntypes=train)
prepare(out / "wide.json")
print(out / "wide.json")
