"""The one place tests run a script with its own argument list as a real DistDGL job (servers and trainers,
the package's launcher), and read what it printed.

The package's launcher passes a trainer script the package's arguments and runs bare DGL servers; until it
passes a script its own argument list and runs the servers with the script too (as DGL's ``tools/launch.py``
does), the trainer program is tests/script_runner.py, which hands the script its own arguments, and the
script's folder is on ``PYTHONPATH`` so that the servers can unpickle the initialisers a ``DistEmbedding``
sends them (examples/dgl_style/initializers.py). Switching to the launcher's own way is this module alone.
"""
from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from pathlib import Path

from dgl_grappa.cluster.procs import JobFailed, isolation_plan
from dgl_grappa.config import load_config
from dgl_grappa.distdgl.job import run_job

RUNNER = Path(__file__).resolve().with_name("script_runner.py")
TRAFFIC = re.compile(r"^loader traffic (\w+) (\{.*\})$", re.M)


@contextmanager
def _on_pythonpath(folder: Path):
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(folder)] + ([old] if old else []))
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def run_script(script: Path, args: str, part_config: Path, out: Path, *, timeout_s: int = 900) -> list[str]:
    """Run ``script`` with the argument string ``args`` (``{ip_config}``, ``{part_config}`` filled in) on every
    machine of the partitioning ``part_config``; return each trainer's log.

    Raises:
        JobFailed: a process failed or a bound passed (the message has the log's tail).
    """
    meta = json.loads(Path(part_config).read_text())
    n = int(meta["num_parts"])
    # the launcher reads the partition json as <folder>/grappa.json for now: the tests' graphs are named so
    assert Path(part_config).name == "grappa.json" and meta["graph_name"] == "grappa"
    out.mkdir(parents=True, exist_ok=True)
    cfg = load_config(None, [f"--partition.out_dir={Path(part_config).parent}", f"--partition.num_parts={n}",
                             f"--run.output_dir={out}", f"--run.timeout_s={timeout_s}",
                             f"--distdgl.startup_timeout_s={timeout_s}"])
    with _on_pythonpath(Path(script).resolve().parent):
        try:
            run_job(cfg, out, grappa=False, script=str(RUNNER),
                    extra_args=[f"--script={Path(script).resolve()}", f"--script-args={args}"],
                    in_ns=isolation_plan(cfg, None), quiet=True)
        except JobFailed as exc:
            # a script of DGL's writes no summary.json; every process exited 0 when this is the failure
            if "without writing" not in str(exc):
                raise
    return [(out / "logs" / f"trainer{i}.log").read_text() for i in range(n)]


def traffic(log: str) -> list[tuple[str, dict]]:
    """The ``(loader class, counts)`` of every complete pass over a loader, in the order the trainer made them."""
    return [(m.group(1), json.loads(m.group(2))) for m in TRAFFIC.finditer(log)]


def last_float(log: str, pattern: str) -> float:
    """The number in the last line matching ``pattern`` (one group)."""
    found = re.findall(pattern, log)
    assert found, f"no line matches {pattern!r}; the log ends:\n{log[-3000:]}"
    return float(found[-1])


# ---------------------------------------------------------------------------------------
# Partitions the way DGL's examples make them: dgl.distributed.partition_graph, DGL's key names
# ---------------------------------------------------------------------------------------

def even(mask):
    """The mask with one node dropped when it selects an odd number: DGL's ``node_split(force_even=True)`` then
    gives two trainers the same count, hence the same number of batches (DGL's scripts step their sparse
    optimizer and DDP without ``join`` in lockstep)."""
    mask = mask.clone()
    if int(mask.sum()) % 2:
        mask[mask.nonzero()[0]] = False
    return mask


def dgl_homogeneous_parts(folder: Path, num_parts: int = 2, num_nodes: int = 2000) -> Path:
    """A learnable synthetic graph (16 classes) partitioned as DGL's examples' partition_graph.py does, with
    their key names (``features``, ``labels``, ``train_mask``, ``val_mask``, ``test_mask``), then prepared
    (``python -m dgl_grappa prepare``: the drop-in's first hop). Returns the partition json."""
    import dgl

    from dgl_grappa.config import DataConfig, SyntheticConfig
    from dgl_grappa.data import load_dataset
    from dgl_grappa.partition.aggregates import prepare

    g = load_dataset(DataConfig(name="synthetic", synthetic=SyntheticConfig(num_nodes=num_nodes, avg_degree=10,
                                                                            seed=2)))
    g.ndata["features"] = g.ndata.pop("feat")
    g.ndata["labels"] = g.ndata.pop("label")
    g.ndata["train_mask"] = even(g.ndata["train_mask"])
    dgl.seed(0)
    dgl.distributed.partition_graph(g, "grappa", num_parts, str(folder), part_method="metis",
                                    balance_ntypes=g.ndata["train_mask"])
    prepare(folder / "grappa.json")
    return folder / "grappa.json"


def dgl_heterogeneous_parts(folder: Path, num_parts: int = 2) -> Path:
    """The package's synthetic academic graph (papers with features and 8 classes, featureless authors and
    fields) partitioned as DGL's RGCN example's partition_graph.py does (``feat``, ``labels`` and the masks on
    ``paper``). Returns the partition json."""
    import dgl

    from dgl_grappa.config import load_config
    from dgl_grappa.data import load_dataset

    cfg = load_config(None, ["--data.name=hetsynth", "--model.name=rgcn", "--model.embed=true",
                             "--data.hetsynth.num_papers=1500", "--data.hetsynth.num_authors=800",
                             "--data.hetsynth.num_fields=50"])
    g = load_dataset(cfg.data)
    paper = g.nodes["paper"].data
    paper["labels"] = paper.pop("label")
    for key in ("train_mask", "val_mask", "test_mask"):
        paper[key] = even(paper[key])
    dgl.seed(0)
    dgl.distributed.partition_graph(g, "grappa", num_parts, str(folder), part_method="metis",
                                    balance_ntypes={"paper": paper["train_mask"]})
    return folder / "grappa.json"
