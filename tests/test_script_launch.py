"""A DistDGL script of DGL's own kind, run unmodified by the package's launcher.

The script below is written the way DGL's examples are: its own argparse (which rejects what it
does not know), ``dgl.distributed.initialize(args.ip_config)``, a ``DistEmbedding`` whose
initialiser is a function of the script (the servers must unpickle ``__main__.initializer``), a
``DistNodeDataLoader`` loop with a sampler process per trainer, a model from a sibling module,
and no ``import dgl_grappa``. Real partitions from ``dgl.distributed.partition_graph`` with DGL's
key names, real servers, trainers and sampler processes, one private /dev/shm per machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import dgl
import pytest
import torch as th

from dgl_grappa.cluster.netns import check_isolation
from dgl_grappa.config import ConfigError, load_config
from dgl_grappa.distdgl import run_distdgl
from dgl_grappa.distdgl.job import expand_script_args, job_command
from dgl_grappa.distdgl.launcher import server_command
from dgl_grappa.env import ENV_MACHINE_ID

ROOT = Path(__file__).resolve().parent.parent
WHY_NOT = check_isolation(net=True, shm="64m")
needs_ns = pytest.mark.skipif(WHY_NOT is not None, reason=f"private namespaces unavailable: {WHY_NOT}")

SCRIPT = '''
import argparse
import json
import os

import dgl
import torch as th
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from sagemodel import SAGE  # a module next to the script, as train_dist_transductive.py imports train_dist

EMB_DIM = 4


def initializer(shape, dtype):
    # Called by the servers, which hold the rows: each unpickles this function by its name.
    arr = th.empty(shape, dtype=dtype)
    arr[:] = th.arange(1, shape[1] + 1, dtype=dtype) / 8
    return arr


class NotingSampler(dgl.dataloading.NeighborSampler):
    """DGL's sampler; notes which process sampled each batch and the machine id DGL gave it."""

    def sample_blocks(self, g, seed_nodes, exclude_eids=None):
        input_nodes, output_nodes, blocks = super().sample_blocks(g, seed_nodes, exclude_eids)
        n = blocks[-1].num_dst_nodes()
        blocks[-1].dstdata["machine"] = th.full((n,), dgl.distributed.rpc.get_machine_id())
        blocks[-1].dstdata["pid"] = th.full((n,), os.getpid())
        return input_nodes, output_nodes, blocks


def main(args):
    dgl.distributed.initialize(args.ip_config)
    th.distributed.init_process_group(backend="gloo")
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    pb = g.get_partition_book()
    train_nid = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True)
    emb = dgl.distributed.DistEmbedding(g.num_nodes(), EMB_DIM, name="node_emb", init_func=initializer)
    sampler = NotingSampler([int(f) for f in args.fan_out.split(",")])
    loader = dgl.dataloading.DistNodeDataLoader(g, train_nid, sampler, batch_size=args.batch_size, shuffle=True,
                                                drop_last=False)
    model = DistributedDataParallel(SAGE(g.ndata["features"].shape[1] + EMB_DIM, 16, args.n_classes))
    opt = th.optim.Adam(model.parameters(), lr=0.01)
    seen = {"rank": g.rank(), "pid": os.getpid(), "machine_id": dgl.distributed.rpc.get_machine_id(),
            "partid": int(pb.partid), "steps": 0, "rows": [], "sampler_machines": [], "sampler_pids": []}
    for epoch in range(args.num_epochs):
        with model.join():
            for input_nodes, seeds, blocks in loader:
                with th.no_grad():
                    rows = emb(input_nodes)
                seen["rows"] += sorted({tuple(r) for r in rows.tolist()})
                x = th.cat([g.ndata["features"][input_nodes], rows], 1)
                loss = F.cross_entropy(model(blocks, x), g.ndata["labels"][seeds].long())
                opt.zero_grad()
                loss.backward()
                opt.step()
                seen["steps"] += 1
                seen["sampler_machines"] += blocks[-1].dstdata["machine"].unique().tolist()
                seen["sampler_pids"] += blocks[-1].dstdata["pid"].unique().tolist()
        print(f"Part {g.rank()} | Epoch {epoch:05d} | Loss {loss.item():.4f}")
    with open(os.path.join(args.result_dir, f"rank{g.rank()}.json"), "w") as f:
        json.dump(seen, f)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="A DistDGL script in the style of DGL's examples.")
    parser.add_argument("--graph_name", type=str)
    parser.add_argument("--ip_config", type=str)
    parser.add_argument("--part_config", type=str)
    parser.add_argument("--n_classes", type=int)
    parser.add_argument("--num_epochs", type=int, default=2)
    parser.add_argument("--fan_out", type=str, default="5,10")
    parser.add_argument("--batch_size", type=int, default=100)
    parser.add_argument("--result_dir", type=str)
    main(parser.parse_args())
'''

MODEL = """
import torch.nn as nn
import torch.nn.functional as F
from dgl.nn import SAGEConv


class SAGE(nn.Module):
    def __init__(self, in_feats, n_hidden, n_classes):
        super().__init__()
        self.layers = nn.ModuleList([SAGEConv(in_feats, n_hidden, "mean"), SAGEConv(n_hidden, n_classes, "mean")])

    def forward(self, blocks, x):
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i < len(self.layers) - 1:
                h = F.relu(h)
        return h
"""

ARGS = (
    "--graph_name {graph_name} --ip_config {ip_config} --part_config {part_config} --n_classes 4 "
    "--num_epochs 2 --result_dir "
)

YAML = """
name: dglscript
partition: {{num_parts: 2, prebuilt: {parts}}}
distdgl: {{num_samplers: 1, startup_timeout_s: 600}}
compare: {{script: {script}}}
run: {{output_dir: {out}, timeout_s: 240, progress: false}}
"""


@pytest.fixture(scope="module")
def dgl_job(tmp_path_factory):
    """A toy graph with DGL's key names, cut in 2 by DGL's partition_graph, and the script beside its model."""
    root = tmp_path_factory.mktemp("dglscript")
    th.manual_seed(0)
    g = dgl.rand_graph(2000, 16000)
    g.ndata["features"] = th.randn(2000, 8)
    g.ndata["labels"] = th.randint(0, 4, (2000,))
    g.ndata["train_mask"] = th.rand(2000) < 0.25
    g.ndata["val_mask"] = ~g.ndata["train_mask"] & (th.rand(2000) < 0.2)
    g.ndata["test_mask"] = ~(g.ndata["train_mask"] | g.ndata["val_mask"])
    dgl.distributed.partition_graph(
        g,
        "toygraph",
        2,
        str(root / "parts"),
        num_hops=1,
        part_method="metis",
        balance_ntypes=g.ndata["train_mask"],
        balance_edges=True,
    )
    (root / "script").mkdir()
    (root / "script" / "train_toy.py").write_text(SCRIPT)
    (root / "script" / "sagemodel.py").write_text(MODEL)
    return root


def _cfg(root: Path, out: Path, *overrides: str):
    p = root / f"{out.name}.yaml"
    p.write_text(YAML.format(parts=root / "parts", script=root / "script" / "train_toy.py", out=out))
    return load_config(str(p), list(overrides))


@needs_ns
def test_a_dgl_style_script_runs_unmodified_and_its_servers_unpickle_the_initialiser(dgl_job):
    out, results = dgl_job / "out", dgl_job / "results"
    results.mkdir()
    cfg = _cfg(dgl_job, out)
    cfg.compare.script_args = ARGS + str(results)

    s = run_distdgl(cfg, quiet=True)

    # The script writes no summary.json: what the launcher measured around its loader (each trainer's passes
    # over DistNodeDataLoader, whose batches a sampler process made), and the launcher's record of the job.
    rec = s["job"]
    assert s["measured"] == "loaders" and s["epochs"] == 2 and s["val_acc"] is None
    assert s["metric"] is None and s["metric_pattern"] is None  # a script of its own: no pattern known
    assert s["epoch_time_s"] > 0 and s["app_bytes_per_epoch"] > 0 and s["machine_peak_rss_bytes_max"] > 0
    assert [w["loader"] for w in s["workers"]] == ["DistNodeDataLoader"] * 2
    assert [t["exit_code"] for t in rec["trainers"]] == [0, 0]
    assert [sv["exit_code"] for sv in rec["servers"]] == [0, 0]
    assert rec["wall_time_s"] > 0 and all(Path(t["log"]).is_file() for t in rec["trainers"])
    assert json.loads((out / "job.json").read_text())["trainers"] == rec["trainers"]
    assert json.loads((out / "summary.json").read_text())["epochs"] == 2
    # Exactly its own arguments, the placeholders filled in: nothing of the package's was added.
    argv = rec["command"][rec["command"].index(str(dgl_job / "script" / "train_toy.py")) + 1 :]
    assert argv[:6] == [
        "--graph_name",
        "toygraph",
        "--ip_config",
        str(out / "ip_config.txt"),
        "--part_config",
        str(dgl_job / "parts" / "toygraph.json"),
    ]
    assert not {"--config", "--out_dir", "--start_epoch"} & set(argv)

    expected = [(i + 1) / 8 for i in range(4)]  # the script's initializer, row by row
    for rank in (0, 1):
        seen = json.loads((results / f"rank{rank}.json").read_text())
        # every embedding row the trainer pulled (its own machine's and the other's) is the initialiser's
        assert seen["steps"] >= 2 and seen["rows"] and all(r == expected for r in seen["rows"])
        # each trainer is its own machine, and so is its sampler process (which re-ran the script)
        assert seen["machine_id"] == seen["partid"] == rank
        assert set(seen["sampler_machines"]) == {rank}
        assert seen["sampler_pids"] and seen["pid"] not in seen["sampler_pids"]
        # the launcher counted the batches the script took
        assert s["workers"][rank]["steps_per_epoch"] * 2 == seen["steps"]


@needs_ns
def test_a_script_that_rejects_the_launchers_arguments_is_one_line_naming_script_args(dgl_job):
    # Without compare.script_args the launcher passes the package's arguments, which DGL's scripts reject.
    cfg = _cfg(dgl_job, dgl_job / "rejected", "--distdgl.num_samplers=0")
    with pytest.raises(ConfigError) as info:
        run_distdgl(cfg, quiet=True)
    msg = str(info.value)
    assert "unrecognized arguments: --config" in msg and "--script-args" in msg and "\n" not in msg


def test_script_args_that_cannot_run_are_refused_before_anything_starts(dgl_job):
    def refused(words: str, *overrides: str, grappa: bool = False, args: str = "--graph_name {graph_name}", **set_):
        cfg = _cfg(dgl_job, dgl_job / "refused", *overrides)
        cfg.compare.script_args = args
        for section_key, value in set_.items():  # past load_config's own checks, to reach run_distdgl's
            section, key = section_key.split("__")
            setattr(getattr(cfg, section), key, value)
        with pytest.raises(ConfigError, match=words):
            run_distdgl(cfg, grappa=grappa, quiet=True)
        assert not (dgl_job / "refused" / "logs").exists()  # nothing was started

    refused("no script is", "--compare.script=")
    refused("schedule.k=1", schedule__k=1)
    refused("checkpoint.resume", checkpoint__resume="auto")
    refused(r"names \{nope\}", args="--graph_name {graph_name} {nope}")
    refused(r"has no \{grappa\}", grappa=True)


@pytest.mark.unit
def test_script_args_are_split_as_a_shell_would_and_only_known_placeholders_are_filled():
    values = {
        "ip_config": "/o/ip config.txt",
        "part_config": "/p/g.json",
        "graph_name": "g",
        "out_dir": "/o",
        "config": "/o/c.yaml",
    }
    text = "--graph_name {graph_name} --ip_config {ip_config} --extra '{\"a\": 1}' --tag=x{graph_name} {grappa}"
    assert expand_script_args(text, values, grappa=False) == [
        "--graph_name",
        "g",
        "--ip_config",
        "/o/ip config.txt",
        "--extra",
        '{"a": 1}',
        "--tag=xg",
    ]
    assert expand_script_args(text, values, grappa=True)[-1] == "--grappa"
    for bad, words in [("--x {ip}", r"names \{ip\}"), ("--x={grappa}", "argument of its own"), ("'open", "quotes")]:
        with pytest.raises(ConfigError, match=words):
            expand_script_args(bad, values, grappa=False)


@pytest.mark.unit
def test_the_package_trainer_a_script_with_the_packages_arguments_and_one_with_its_own(tmp_path):
    (tmp_path / "g.json").write_text(json.dumps({"graph_name": "g", "num_parts": 2}))
    (tmp_path / "s.py").write_text("")
    out, part, resolved = tmp_path / "out", tmp_path / "g.json", tmp_path / "c.yaml"
    launcher_args = ["--ip_config", str(out / "ip_config.txt"), "--part_config", str(part), "--out_dir", str(out)]

    def cmds(*overrides: str, grappa: bool = False) -> tuple[list[str], list[str]]:
        return job_command(
            load_config(None, list(overrides)),
            out,
            part,
            resolved,
            grappa=grappa,
            script=None,
            extra_args=["--start_epoch", "0"],
        )

    trainer, server = cmds()
    assert (
        trainer
        == [sys.executable, "-m", "dgl_grappa.distdgl.train", "--config", str(resolved), "--start_epoch", "0"]
        + launcher_args
    )
    assert server == server_command()  # a bare DGL server
    run = [sys.executable, "-m", "dgl_grappa.distdgl.runscript", str(tmp_path / "s.py")]
    trainer, server = cmds(f"--compare.script={tmp_path / 's.py'}", grappa=True)
    assert trainer == run + ["--config", str(resolved), "--grappa", "--start_epoch", "0"] + launcher_args
    assert server == trainer  # the servers run the script, as DGL's tools/launch.py has them
    trainer, server = cmds(
        f"--compare.script={tmp_path / 's.py'}",
        "--compare.script_args=--graph_name {graph_name} --ip_config {ip_config} --n 3",
    )
    assert trainer == run + ["--graph_name", "g", "--ip_config", str(out / "ip_config.txt"), "--n", "3"]
    assert server == trainer


def test_runscript_is_python_script_with_the_machine_id_in_spawned_children_too(tmp_path):
    # No DGL job: the bootstrap alone. The child is started by multiprocessing's spawn (as DGL's
    # sampler pool is): it re-runs the script as __mp_main__ and unpickles __main__.work.
    (tmp_path / "helper.py").write_text("VALUE = 7\n")
    (tmp_path / "s.py").write_text(
        textwrap.dedent("""
        import multiprocessing as mp
        import sys

        import helper  # next to the script


        def work(q):
            import dgl.distributed.rpc_client as rc
            q.put((rc.get_local_machine_id({0: [0, "127.0.0.1", 1, 1]}), helper.VALUE))


        if __name__ == "__main__":
            import dgl.distributed.rpc_client as rc
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            p = ctx.Process(target=work, args=(q,))
            p.start()
            child = q.get(timeout=120)
            p.join(60)
            print("RESULT", sys.argv[1:], rc.get_local_machine_id({0: [0, "127.0.0.1", 1, 1]}), child[0], child[1])
            sys.exit(5)
    """)
    )
    env = dict(os.environ, DGLBACKEND="pytorch", **{ENV_MACHINE_ID: "3"})
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run(
        [sys.executable, "-m", "dgl_grappa.distdgl.runscript", str(tmp_path / "s.py"), "--a", "b c"],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 5, r.stderr  # the script's own exit status
    assert "RESULT ['--a', 'b c'] 3 3 7" in r.stdout, r.stdout + r.stderr
    # Without the variable DGL's own answer stands (the only ip_config line is this host: machine 0).
    del env[ENV_MACHINE_ID]
    r = subprocess.run(
        [sys.executable, "-m", "dgl_grappa.distdgl.runscript", str(tmp_path / "s.py")],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "RESULT [] 0 0 7" in r.stdout, r.stdout + r.stderr
