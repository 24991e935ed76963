"""The one place tests run a DistDGL script of DGL's kind as a user does, and read what it printed.

:func:`run_script` is the user's command, ``python -m dgl_grappa.distdgl --script SCRIPT --script-args "..."``
on a partitioning made by ``dgl.distributed.partition_graph``: the package's launcher runs the script, with its
own argument list, in every trainer and (``DGL_ROLE=server``) every server, as DGL's ``tools/launch.py`` does.
Nothing is added to the script or its arguments.

What the tests observe besides the script's own output: every complete pass over a DGL distributed loader or a
drop-in loader prints one line to the trainer's log, ``loader traffic <class> <json counts>`` (the application
bytes of :class:`dgl_grappa.distdgl.TrafficCounter`: rows read from another machine, sampling requests). The
job's processes start with a ``sitecustomize`` module (Python's own start-up hook) that calls
:func:`meter_loaders` in the trainers; the script does not know it is there.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import dgl
import numpy as np
import torch

from dgl_grappa.cluster.ptree import kill_tree
from dgl_grappa.config import DataConfig, SyntheticConfig, load_config
from dgl_grappa.data import load_dataset
from dgl_grappa.distdgl import TrafficCounter
from dgl_grappa.method.dropin import GrappaEdgeLoader, GrappaHeteroLoader, GrappaLoader
from dgl_grappa.partition.aggregates import prepare

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TRAFFIC = re.compile(r"^loader traffic (\w+) (\{.*\})$", re.M)
# Python imports it at the start of every process of the job; only a trainer (and its sampler processes,
# DGL_ROLE=client) meters its loaders.
SITECUSTOMIZE = """import os
if os.environ.get("DGLSCRIPT_SEED"):
    import dglscript
    dglscript.seed_process(int(os.environ["DGLSCRIPT_SEED"]))
if os.environ.get("DGL_ROLE") == "client":
    import dglscript
    dglscript.meter_loaders()
"""


def run_script(
    script: Path, args: str, part_config: Path, out: Path, *, timeout_s: int = 600, seed: int | None = None
) -> list[str]:
    """``python -m dgl_grappa.distdgl --script script --script-args=args`` on the partitioning ``part_config``
    (one machine per part, each with a private /dev/shm); return each trainer's log.

    Args:
        script: the script, run as it is.
        args: its own arguments, with the launcher's placeholders (``{ip_config}``, ``{part_config}``,
            ``{graph_name}``, ``{out_dir}``, ...).
        part_config: the partition json that DGL's ``partition_graph`` wrote.
        out: the job's output folder (``run.output_dir``: logs, ``job.json``).
        timeout_s: the job's bound past its start (``run.timeout_s``) and on the start itself.
        seed: seeds Python's, NumPy's, PyTorch's and DGL's generators in every process of the job before the script
            starts (:func:`seed_process`; DGL's scripts seed nothing), so that two jobs with the same seed start
            from the same model and draw alike where their code does; None: unseeded.

    Raises:
        AssertionError: the command failed or outlived its bound (the message has its output's tail).
    """
    n = int(json.loads(Path(part_config).read_text())["num_parts"])
    hook = out.parent / f"{out.name}.meter"
    hook.mkdir(parents=True, exist_ok=True)
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    argv = [
        sys.executable,
        "-m",
        "dgl_grappa.distdgl",
        "--script",
        str(script),
        f"--script-args={args}",
        f"--partition.prebuilt={part_config}",
        f"--partition.num_parts={n}",
        f"--run.output_dir={out}",
        f"--run.timeout_s={timeout_s}",
        f"--distdgl.startup_timeout_s={timeout_s}",
        "--run.progress=false",
    ]
    env = dict(
        os.environ,
        DGLBACKEND="pytorch",
        PYTHONPATH=os.pathsep.join([str(hook), str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    if seed is not None:
        env["DGLSCRIPT_SEED"] = str(seed)
    # The launcher bounds the job itself (startup + run + shutdown); this bound only backs it up.
    bound = 2 * timeout_s + 300
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid, group=True)
        output, _ = proc.communicate(timeout=30)
        raise AssertionError(f"{' '.join(argv)} ran past {bound} s; it ended:\n{output[-4000:]}") from None
    assert proc.returncode == 0, f"{' '.join(argv)} exited {proc.returncode}:\n{output[-6000:]}"
    return [(out / "logs" / f"trainer{i}.log").read_text() for i in range(n)]


def seed_process(seed: int) -> None:
    """Seed this process's generators (Python, NumPy, PyTorch, DGL's) with ``seed``."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    dgl.seed(seed)


def meter_loaders() -> None:
    """In this process, print the traffic of every complete pass over a DGL distributed or drop-in loader."""
    counter = TrafficCounter.install().view()
    for cls in (
        dgl.dataloading.DistNodeDataLoader,
        dgl.dataloading.DistEdgeDataLoader,
        GrappaLoader,
        GrappaEdgeLoader,
        GrappaHeteroLoader,
    ):
        _meter(cls, counter)


def _meter(cls, counter) -> None:
    inner = cls.__iter__

    def metered(self):
        counter.take()  # what came before this pass is not its
        it = inner(self)  # DGL's loaders return themselves: `yield from` would call this again
        while True:
            try:
                item = next(it)
            except StopIteration:
                break
            yield item
        print(f"loader traffic {cls.__name__} {json.dumps(counter.take())}", flush=True)

    cls.__iter__ = metered


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


def _partition(g, name: str, num_parts: int, folder: str, method: str, balance) -> None:
    torch.set_num_threads(1)  # DGL's random draw depends on the thread count too (1 and 2 draw alike, 4 not)
    dgl.seed(0)
    dgl.distributed.partition_graph(g, name, num_parts, folder, part_method=method, balance_ntypes=balance)


def partition_afresh(g, name: str, num_parts: int, folder: Path, method: str, balance, timeout: float = 600) -> None:
    """``dgl.distributed.partition_graph`` in a fresh process, seeded: the same parts whichever tests ran before.

    DGL's random partitioning draws from DGL's own generator, and ``dgl.seed`` does not bring that back to the same
    state in a process that has already sampled (DGL 2.1): in the test process the parts would change with the
    tests that ran first, and a single-pair accuracy check would see another graph alone than in the whole suite.
    The child draws on one thread, so a machine with more cores makes the same parts as a 2-core one.
    """
    proc = multiprocessing.get_context("spawn").Process(
        target=_partition, args=(g, name, num_parts, str(folder), method, balance)
    )
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.kill()
        proc.join(10)
        raise TimeoutError(f"partitioning {name} into {folder} took over {timeout:.0f} s")
    if proc.exitcode != 0:
        raise RuntimeError(f"partitioning {name} into {folder} failed (exit code {proc.exitcode}); its output is above")


def dgl_homogeneous_parts(
    folder: Path, name: str, num_parts: int = 2, num_nodes: int = 2000, feat_dim: int = 64, method: str = "metis"
) -> Path:
    """A learnable synthetic graph (16 classes, ``feat_dim`` features) partitioned as DGL's examples'
    partition_graph.py does (``method``: metis or random), under the graph name ``name``, with their key names
    (``features``, ``labels``, ``train_mask``, ``val_mask``, ``test_mask``), then prepared (``python -m
    dgl_grappa prepare``: the drop-in's first hop). Returns the partition json."""
    g = load_dataset(
        DataConfig(
            name="synthetic", synthetic=SyntheticConfig(num_nodes=num_nodes, avg_degree=10, feat_dim=feat_dim, seed=2)
        )
    )
    g.ndata["features"] = g.ndata.pop("feat")
    g.ndata["labels"] = g.ndata.pop("label")
    g.ndata["train_mask"] = even(g.ndata["train_mask"])
    partition_afresh(g, name, num_parts, folder, method, g.ndata["train_mask"])
    prepare(folder / f"{name}.json")
    return folder / f"{name}.json"


def het_sizes(num_papers: int) -> dict[str, int]:
    """Nodes of each type of :func:`dgl_heterogeneous_parts`'s graph with ``num_papers`` papers.

    Example:
        >>> het_sizes(1500)
        {'paper': 1500, 'author': 800, 'field': 50}
    """
    return {"paper": num_papers, "author": num_papers // 2 + 50, "field": max(50, num_papers // 40)}


def dgl_heterogeneous_parts(
    folder: Path, name: str, num_parts: int = 2, feat_dim: int = 32, method: str = "metis", num_papers: int = 1500
) -> Path:
    """The package's synthetic academic graph (``num_papers`` papers with ``feat_dim`` features and 8 classes, half
    as many featureless authors, fields) partitioned as DGL's RGCN example's partition_graph.py does (``method``:
    metis or random), under the graph name ``name`` (``feat``, ``labels`` and the masks on ``paper``). Returns the
    partition json."""
    sizes = het_sizes(num_papers)
    cfg = load_config(
        None,
        [
            "--data.name=hetsynth",
            "--model.name=rgcn",
            "--model.embed=true",
            *(f"--data.hetsynth.num_{t}s={n}" for t, n in sizes.items()),
            f"--data.hetsynth.feat_dim={feat_dim}",
        ],
    )
    g = load_dataset(cfg.data)
    paper = g.nodes["paper"].data
    paper["labels"] = paper.pop("label")
    for key in ("train_mask", "val_mask", "test_mask"):
        paper[key] = even(paper[key])
    partition_afresh(g, name, num_parts, folder, method, {"paper": paper["train_mask"]})
    return folder / f"{name}.json"
