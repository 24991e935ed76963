"""DGL's kinds of distributed script, unconverted (DistDGL) and converted by the docs' diff (the drop-in), on
generated graphs with wide features partitioned by DGL's ``partition_graph``: one run a call.

    python benchmarks/dgl_scripts/run.py --kind link --method random --parts 4 --system base --args "--num_epochs 3"
    python benchmarks/dgl_scripts/run.py --kind link ... --system dropin --loader-kwargs 'memory_budget="2.0"'
    python benchmarks/dgl_scripts/report.py          # the table of every run so far

A run is ``python -m dgl_grappa.distdgl --script`` on a copy of ``examples/dgl_style/`` (the diff applied for
``dropin``; ``--loader-kwargs`` appended to the loader's call for the ablations), one DistDGL machine per part on
this host. It appends one JSON line to ``$DROPIN_OUT/results.jsonl`` (default ``runs/dropin-exp``): the accuracy
the script printed, trainer 0's epoch times and the loader's budget line; the job folder stays beside it.
Partitions are made once per (graph, method, parts) under ``$DROPIN_OUT/parts``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

import dgl  # noqa: E402
import torch  # noqa: E402
from dglscript import even, run_script  # noqa: E402

from dgl_grappa.config import DataConfig, SyntheticConfig, load_config  # noqa: E402
from dgl_grappa.data import load_dataset  # noqa: E402
from dgl_grappa.partition.aggregates import prepare  # noqa: E402

STYLE = ROOT / "examples" / "dgl_style"
OUT = Path(os.environ.get("DROPIN_OUT", ROOT / "runs" / "dropin-exp"))
SCRIPTS = {
    "node": "node_classification.py",
    "link": "train_dist_unsupervised.py",
    "transductive": "train_dist_transductive.py",
    "rgcn": "entity_classify_dist.py",
}
ACC = {
    "node": r"Test Acc (\d\.\d+)",
    "link": r"test acc (\d\.\d+)",
    "transductive": r"Test Acc (\d\.\d+)",
    "rgcn": r"Test Acc (\d\.\d+)",
}
LOADER_CALL = re.compile(r"(Grappa(?:Edge|Hetero)?Loader\(g, )")


def homogeneous(a) -> Path:
    name = f"syn{a.nodes}d{a.degree}f{a.feat_dim}-{a.method}{a.parts}"
    folder = OUT / "parts" / name
    if (folder / "g.json").exists():
        return folder / "g.json"
    syn = SyntheticConfig(num_nodes=a.nodes, avg_degree=a.degree, feat_dim=a.feat_dim, seed=2)
    g = load_dataset(DataConfig(name="synthetic", synthetic=syn))
    g.ndata["features"] = g.ndata.pop("feat")
    g.ndata["labels"] = g.ndata.pop("label")
    g.ndata["train_mask"] = even(g.ndata["train_mask"])
    dgl.seed(0)
    dgl.distributed.partition_graph(
        g, "g", a.parts, str(folder), part_method=a.method, balance_ntypes=g.ndata["train_mask"]
    )
    prepare(folder / "g.json")
    return folder / "g.json"


def heterogeneous(a) -> Path:
    name = f"het{a.papers}f{a.feat_dim}-{a.method}{a.parts}"
    folder = OUT / "parts" / name
    if (folder / "g.json").exists():
        return folder / "g.json"
    cfg = load_config(
        None,
        [
            "--data.name=hetsynth",
            "--model.name=rgcn",
            "--model.embed=true",
            f"--data.hetsynth.num_papers={a.papers}",
            f"--data.hetsynth.num_authors={a.papers // 2}",
            f"--data.hetsynth.num_fields={max(20, a.papers // 40)}",
            f"--data.hetsynth.feat_dim={a.feat_dim}",
        ],
    )
    g = load_dataset(cfg.data)
    paper = g.nodes["paper"].data
    paper["labels"] = paper.pop("label")
    for key in ("train_mask", "val_mask", "test_mask"):
        paper[key] = even(paper[key])
    dgl.seed(0)
    dgl.distributed.partition_graph(
        g, "g", a.parts, str(folder), part_method=a.method, balance_ntypes={"paper": paper["train_mask"]}
    )
    return folder / "g.json"


def script_copy(a, run_dir: Path) -> Path:
    folder = run_dir / "scripts"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(STYLE, folder)
    script = folder / SCRIPTS[a.kind]
    if a.system == "dropin":
        diff = STYLE / SCRIPTS[a.kind].replace(".py", ".diff")
        done = subprocess.run(
            ["patch", "-p1", "--forward", "-d", str(folder), "-i", str(diff)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        if a.loader_kwargs:
            text = script.read_text()
            m = LOADER_CALL.search(text)
            depth, i = 1, m.end()
            while depth:  # the call's closing parenthesis
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            script.write_text(text[: i - 1] + ", " + a.loader_kwargs + text[i - 1 :])
    return script


def _commit() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=sorted(SCRIPTS), required=True)
    ap.add_argument("--system", choices=["base", "dropin"], required=True)
    ap.add_argument("--method", default="random")
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=20000)
    ap.add_argument("--degree", type=float, default=10)
    ap.add_argument("--papers", type=int, default=8000)
    ap.add_argument("--feat-dim", type=int, default=512)
    ap.add_argument("--args", default="", help="the script's own arguments besides the launcher's")
    ap.add_argument("--loader-kwargs", default="", help="keywords added to the drop-in loader's call")
    ap.add_argument("--seed", type=int, default=None, help="seeds every process of the job (tests/dglscript.py)")
    ap.add_argument("--tag", default="")
    ap.add_argument("--label", default="", help="names the variant in the report (e.g. the code it ran)")
    a = ap.parse_args()
    part_config = heterogeneous(a) if a.kind == "rgcn" else homogeneous(a)
    tag = a.tag or f"{a.kind}-{a.system}-{part_config.parent.name}-{int(time.time())}"
    run_dir = OUT / "runs" / tag
    script = script_copy(a, run_dir)
    if a.kind == "rgcn":
        launch = "--graph-name {graph_name} --ip-config {ip_config} --conf-path {part_config} "
    else:
        launch = "--graph_name {graph_name} --ip_config {ip_config} --part_config {part_config} "
    t0 = time.time()
    logs = run_script(script, launch + a.args, part_config, run_dir / "out", timeout_s=5400, seed=a.seed)
    wall = time.time() - t0
    text = "\n".join(logs)
    acc = re.findall(ACC[a.kind], text)
    budget = re.findall(r"drop-in loader, part \d+.*", (run_dir / "out" / "logs" / "trainer0.log").read_text())
    epoch_times = [float(x) for x in re.findall(r"Epoch Time\(s\): ([\d.]+)", logs[0])]
    row = {
        "tag": tag,
        "seed": a.seed,
        "kind": a.kind,
        "system": a.system,
        "parts": part_config.parent.name,
        "args": a.args,
        "loader_kwargs": a.loader_kwargs,
        "label": a.label,
        "commit": _commit(),
        "acc": float(acc[-1]) if acc else None,
        "acc_lines": re.findall(r".*(?:Val|Test|test|eval) [Aa]cc.*", text)[-6:],
        "budget": budget[:1],
        "epoch_times_t0": epoch_times,
        "wall_s": round(wall, 1),
    }
    with open(OUT / "results.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row, indent=1))


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
