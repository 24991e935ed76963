"""``compare`` on a DistDGL script of the user's own: the script unmodified against its converted copy, on the same
partitions, with the same table, report and plots as for the package's trainer.

The script is examples/dgl_style/node_classification.py (DGL's example's arguments, output and flow), converted by
exactly the diff docs/dropin.md shows; its partitions are made by ``dgl.distributed.partition_graph`` under DGL's key
names (tests/dglscript.py). Each job is a real DistDGL job (servers, trainers, one machine per part with a private
/dev/shm, its own network namespace); the launcher measures the script's loader passes, and the script's accuracy is
read from what its trainers printed. What the tests check against: the trainers' own logs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import dgl
import pytest
from dglscript import dgl_homogeneous_parts

from dgl_grappa.bench.compare import compare_table
from dgl_grappa.cluster.netns import check_isolation
from dgl_grappa.cluster.ptree import kill_tree
from dgl_grappa.config import ConfigError, DataConfig, SyntheticConfig
from dgl_grappa.data import load_dataset
from dgl_grappa.distdgl.cli import script_line
from dgl_grappa.distdgl.loader_meter import records_path
from dgl_grappa.distdgl.prepare_check import check_prepared, first_hop_calls
from dgl_grappa.distdgl.script_summary import script_summary
from dgl_grappa.partition.aggregates import prepare

ROOT = Path(__file__).resolve().parent.parent
STYLE = ROOT / "examples" / "dgl_style"
WHY_NOT = check_isolation(net=True, shm="64m")
ARGS = (
    "--graph_name {graph_name} --ip_config {ip_config} --part_config {part_config} --num_hidden 16 "
    "--fan_out 5,10 --num_epochs 2 --batch_size 300 --lr 0.03 --eval_every 2 --log_every 100"
)
ACC = re.compile(r"Test Acc (\d\.\d+)")


def converted(tmp: Path) -> Path:
    """examples/dgl_style/node_classification.py with its diff from docs/dropin.md applied, in a folder of its own."""
    folder = tmp / "converted"
    shutil.copytree(STYLE, folder)
    done = subprocess.run(
        [
            "patch",
            "-p1",
            "--forward",
            "--no-backup-if-mismatch",
            "-d",
            str(folder),
            "-i",
            str(STYLE / "node_classification.diff"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return folder / "node_classification.py"


def compare(out: Path, *overrides: str, timeout_s: int = 600) -> subprocess.CompletedProcess:
    """``python -m dgl_grappa compare`` with ``overrides``, bounded (its process tree killed past the bound)."""
    argv = [
        sys.executable,
        "-m",
        "dgl_grappa",
        "compare",
        f"--run.output_dir={out}",
        f"--run.timeout_s={timeout_s}",
        f"--distdgl.startup_timeout_s={timeout_s}",
        *overrides,
    ]
    env = dict(
        os.environ, DGLBACKEND="pytorch", PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=3 * timeout_s)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid, group=True)
        stdout, stderr = proc.communicate(timeout=30)
        raise AssertionError(f"compare ran past its bound; it ended:\n{stdout[-3000:]}\n{stderr[-3000:]}") from None
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def printed_accuracy(run: Path) -> float:
    """The mean over trainers of each one's last "Test Acc" line, read from the job's logs here."""
    last = [float(ACC.findall((run / "logs" / f"trainer{i}.log").read_text())[-1]) for i in range(2)]
    return sum(last) / len(last)


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """A 3000-node graph of 16 classes in 2 METIS parts by DGL's partition_graph, DGL's key names, prepared."""
    return dgl_homogeneous_parts(tmp_path_factory.mktemp("cmp_parts"), "synth16", num_nodes=3000)


@pytest.mark.skipif(WHY_NOT is not None, reason=f"private namespaces unavailable: {WHY_NOT}")
def test_compare_runs_a_dgl_style_script_unmodified_and_converted(tmp_path, parts):
    out = tmp_path / "cmp"
    p = compare(
        out,
        f"--partition.prebuilt={parts}",
        "--partition.num_parts=2",
        f"--compare.script={STYLE / 'node_classification.py'}",
        f"--compare.dropin_script={converted(tmp_path)}",
        f"--compare.script_args={ARGS}",
    )
    assert p.returncode == 0, p.stderr[-5000:]
    res = json.loads((out / "compare.json").read_text())
    rows = {r["system"]: r for r in res["rows"]}
    assert list(rows) == ["distdgl", "distdgl-grappa"]
    table = p.stdout[p.stdout.index("system ") :]
    for name, label in (("distdgl", "DistDGL "), ("distdgl-grappa", "DistDGL+drop-in ")):
        r = rows[name]
        assert r["epochs"] == 2 and r["epoch_time_s"] > 0 and r["steps_per_epoch"] >= 1
        # the accuracy in the table is the trainers' own lines, as the test reads them from their logs
        assert r["metric"] == pytest.approx(printed_accuracy(out / name), abs=1e-6)
        line = next(ln for ln in table.splitlines() if ln.startswith(label))
        assert f"{r['epoch_time_s']:.3f} s" in line and f"{r['metric']:.4f}" in line
        assert re.search(r"\d+(\.\d+)? [KMG]?B", line), line  # its bytes per epoch
        assert len(r["machines"]) == 2 and all(m["peak_rss_bytes"] for m in r["machines"])
    assert "Test Acc" in table.splitlines()[0]
    base, dropin = rows["distdgl"], rows["distdgl-grappa"]
    # DistDGL pulls its remote neighbours' rows and samples on their owners every epoch; the drop-in reads its
    # halo once and then sends only gradients
    assert base["wire_bytes_per_epoch"] > dropin["wire_bytes_per_epoch"] > 0
    assert base["app_bytes_per_epoch"] > dropin["app_bytes_per_epoch"]
    assert dropin["one_time_bytes_per_epoch"] > 0 and not base["one_time_bytes_per_epoch"]
    assert {m["loader"] for m in dropin["machines"]} == {"GrappaLoader"}
    assert {m["loader"] for m in base["machines"]} == {"DistNodeDataLoader"}
    report = (out / "report.md").read_text()
    assert "| distdgl-grappa | 2 |" in report and "## Each machine" in report
    assert all((out / f).stat().st_size > 10_000 for f in ("accuracy_vs_time.png", "bytes_per_epoch.png"))


def test_forgetting_prepare_is_one_line_naming_the_command_before_any_server_starts(tmp_path):
    g = load_dataset(DataConfig(name="synthetic", synthetic=SyntheticConfig(num_nodes=600, avg_degree=5, seed=1)))
    g.ndata["features"] = g.ndata.pop("feat")
    g.ndata["labels"] = g.ndata.pop("label")
    dgl.distributed.partition_graph(g, "bare", 2, str(tmp_path / "bare"), part_method="random")
    part_config = tmp_path / "bare" / "bare.json"
    out = tmp_path / "cmp"
    p = compare(
        out,
        f"--partition.prebuilt={part_config}",
        "--partition.num_parts=2",
        f"--compare.script={STYLE / 'node_classification.py'}",
        f"--compare.dropin_script={converted(tmp_path)}",
        f"--compare.script_args={ARGS}",
        timeout_s=120,
    )
    assert p.returncode == 2, p.stderr
    errors = [ln for ln in p.stderr.splitlines() if "error" in ln]
    assert len(errors) == 1 and f"python -m dgl_grappa prepare --part-config {part_config}`" in errors[0], p.stderr
    assert re.search(r"node_classification.py:\d+ makes GrappaLoader\(first_hop=\"block\"\)", errors[0])
    # nothing ran: no job's folder, no server's log
    assert not (out / "distdgl").exists() and not (out / "distdgl-grappa").exists()


@pytest.mark.unit
def test_the_prepare_check_reads_the_loader_calls_written_with_a_first_hop_mode(tmp_path):
    calls = first_hop_calls(
        "a = GrappaLoader(g, s, 8)\n"
        "b = dgl_grappa.GrappaEdgeLoader(g, s, 8, negative_sampler=n, first_hop='exact', "
        "aggregate='gcn', feat_key='x')\n"
        "c = GrappaLoader(g, s, 8, first_hop=args.first_hop)\n"
    )
    assert [(c.line, c.call, c.gcn, c.feat_key) for c in calls] == [
        (2, 'GrappaEdgeLoader(first_hop="exact")', True, "x")
    ]
    script = tmp_path / "train.py"
    script.write_text("from dgl_grappa import GrappaLoader\nloader = GrappaLoader(g, s, 8, first_hop='block')\n")
    (tmp_path / "g.json").write_text("{}")  # a folder that prepare never saw
    with pytest.raises(
        ConfigError,
        match=r"train.py:2 makes GrappaLoader\(first_hop=\"block\"\).*run "
        rf"`python -m dgl_grappa prepare --part-config {tmp_path / 'g.json'}`",
    ):
        check_prepared(tmp_path / "g.json", str(script))
    check_prepared(tmp_path / "g.json", str(script.with_name("plain.py")))  # no such script: the launcher says so
    script.write_text("loader = GrappaLoader(g, s, 8)\n")  # the first hop sampled: nothing to prepare
    check_prepared(tmp_path / "g.json", str(script))


def _write_passes(out: Path, rank: int, passes: list[dict], log: str) -> None:
    path = records_path(out / "epochs", rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in passes))
    (out / "logs").mkdir(exist_ok=True)
    (out / "logs" / f"trainer{rank}.log").write_text(log)


def _pass(i, t, *, train=True, offset=None, wire=None):
    return {
        "pass": i,
        "loader": "DistNodeDataLoader",
        "loader_id": 0 if train else 1,
        "train": train,
        "complete": True,
        "time_s": t,
        "steps": 4,
        "feature_bytes": 1000,
        "other_pull_bytes": 0,
        "rpc_bytes": 100,
        "embed_bytes": 0,
        "remote_rows": 10,
        "pull_rows": 40,
        "grad_bytes": 400,
        "wire_bytes": wire,
        "one_time_bytes": 0,
        "peak_rss_bytes": 5000,
        "log_offset": offset,
    }


@pytest.mark.unit
def test_a_script_summary_makes_epochs_of_the_training_passes_and_places_the_printed_metric(tmp_path):
    log0 = "start\nTest Acc 0.5000\n" + "x" * 40 + "\nTest Acc 0.7000\n"
    first, second = log0.index("Test Acc 0.5"), log0.index("Test Acc 0.7")
    _write_passes(
        tmp_path,
        0,
        [
            _pass(0, 1.0, offset=first, wire=9000),
            _pass(1, 0.1, train=False, offset=first + 5),
            _pass(2, 2.0, offset=second, wire=7000),
            {"exit": True, "peak_rss_bytes": 8000},
        ],
        log0,
    )
    _write_passes(tmp_path, 1, [_pass(0, 1.5, offset=0), _pass(1, 1.0, offset=0)], "no accuracy printed\n")
    s = script_summary(tmp_path, 2, "distdgl", "node_classification.py", r"Test Acc (\d\.\d+)")
    assert s["epochs"] == 2 and [r["epoch_time_s"] for r in s["records"]] == [1.5, 2.0]
    assert s["train_time_s"] == 3.5 and s["steps_per_epoch"] == 4 and s["wire_bytes_per_epoch"] == 8000
    # both trainers' rows and RPC, and each one's gradient payload x 2(W-1)/W
    assert s["records"][0]["app_bytes"] == 2 * 1100 + 2 * 400
    assert [r["metric"] for r in s["records"]] == [0.5, 0.7]  # each printed after its epoch's pass
    assert s["metric"] == 0.7 and s["metric_per_trainer"] == [0.7, None] and s["metric_label"] == "Test Acc"
    assert s["peak_rss_bytes_max"] == 8000 and s["workers"][0]["eval_passes"] == 1
    assert "Test Acc 0.7000 (mean of 1 trainers)" in script_line(s, tmp_path)
    nothing = script_summary(tmp_path, 2, "distdgl", "mine.py", r"Validation loss (\d+)")
    assert nothing["metric"] is None and "no line of the trainers' output matched" in script_line(nothing, tmp_path)
    assert script_summary(tmp_path / "none", 2, "distdgl", "mine.py", None) is None  # no pass recorded: no epochs


@pytest.mark.unit
def test_the_script_table_fits_the_terminal_and_says_when_no_metric_was_found():
    rows = [
        {
            "system": s,
            "epoch_time_s": t,
            "epoch_time_s_ratio": t / 9.999,
            "steps_per_epoch": 12345,
            "wire_bytes_per_epoch": w,
            "wire_bytes_per_epoch_ratio": w / 999.99e6,
            "one_time_bytes_per_epoch": o,
            "metric": None,
            "peak_rss_bytes_max": 999.99e6,
            "machines": [],
        }
        for s, t, w, o in (("distdgl", 9.999, 999.99e6, None), ("distdgl-grappa", 0.0456, 999.99e3, 999.99e3))
    ]
    res = {
        "rows": rows,
        "baseline": "distdgl",
        "script": {
            "script": "s.py",
            "dropin_script": None,
            "script_args": "",
            "metric_label": "Test Acc",
            "metric_pattern": r"Test Acc (\d+)",
            "metric_found": False,
        },
    }
    table = compare_table(res)
    assert max(len(ln) for ln in table.splitlines()) <= 100, table
    assert "no metric found" in table and "DistDGL+drop-in" in table


@pytest.mark.unit
def test_the_docs_partition_example_makes_a_partition_the_dropin_reads_and_its_missing_prepare_line(
    tmp_path, monkeypatch
):
    """docs/dropin.md's partition example, run as a user copies it: DGL's key names, every part with training nodes;
    before ``prepare`` the launcher's line is the one the docs show, after it the folder is prepared."""
    docs = (ROOT / "docs" / "dropin.md").read_text()
    section = docs[docs.index("## Before the first run") : docs.index("## Node classification")]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    shown = re.search(r"```\n(dgl_grappa\.distdgl: error: .*?)\n```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet, "docs/dropin.md", "exec"), {})
    part_config = Path("data/mygraph.json")
    for p in range(2):
        feats = dgl.distributed.load_partition(str(part_config), p)[1]
        assert {"_N/features", "_N/labels", "_N/train_mask", "_N/val_mask", "_N/test_mask"} <= set(feats)
        assert feats["_N/features"].shape[1] == 128 and int(feats["_N/train_mask"].sum()) > 0
    script = tmp_path / "node_classification.py"  # the loader call on the line the docs' example names
    script.write_text("\n" * 80 + 'dataloader = GrappaLoader(g, sampler, 1000, first_hop="block", part_config=p)\n')
    with pytest.raises(ConfigError) as err:
        check_prepared(part_config, str(script))
    assert f"dgl_grappa.distdgl: error: {err.value}" == shown
    assert prepare(part_config)["feat_key"] == "features"
    check_prepared(part_config, str(script))  # prepared: nothing to say


@pytest.mark.skipif(WHY_NOT is not None, reason=f"private namespaces unavailable: {WHY_NOT}")
def test_a_script_printing_no_matching_line_gets_its_times_and_bytes_and_no_folder_is_written_over_unsaid(
    tmp_path, parts
):
    """``python -m dgl_grappa.distdgl --script`` on a folder an earlier job wrote. Refused before it starts (the
    converted script on a folder without aggregates), it replaces nothing and says nothing of replacing; run, it says
    what it replaces first, and with a metric pattern that nothing matches still ends with its times and bytes."""
    out = tmp_path / "job"
    out.mkdir()
    (out / "summary.json").write_text('{"earlier": true}')
    bare = tmp_path / "bare"
    shutil.copytree(parts.parent, bare, ignore=shutil.ignore_patterns("grappa*"))  # the same parts, not prepared
    env = dict(
        os.environ, DGLBACKEND="pytorch", PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )

    script = converted(tmp_path)

    def job(part_config: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "dgl_grappa.distdgl",
                "--script",
                str(script),
                f"--script-args={ARGS}",
                "--compare.metric=Accuracy of nothing: (\\d+)",
                f"--partition.prebuilt={part_config}",
                "--partition.num_parts=2",
                f"--run.output_dir={out}",
                "--run.timeout_s=600",
                "--distdgl.startup_timeout_s=600",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )

    refused = job(bare / parts.name)
    assert refused.returncode == 2 and "python -m dgl_grappa prepare" in refused.stderr
    assert "replacing" not in refused.stderr and json.loads((out / "summary.json").read_text()) == {"earlier": True}
    p = job(parts)
    assert p.returncode == 0, p.stderr[-5000:]
    assert f"replacing the earlier run's summary.json in {out}" in p.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["metric"] is None and s["epochs"] == 2 and s["epoch_time_s"] > 0 and s["steps_per_epoch"] >= 1
    assert s["wire_bytes_per_epoch"] > 0 and s["one_time_bytes_total"] > 0
    line = p.stdout.strip().splitlines()[-1]
    assert f"epoch {s['epoch_time_s']:.3f} s" in line and "wire " in line
    assert "no line of the trainers' output matched the metric pattern" in line
