"""Config tree: YAML + CLI overrides, unknown keys by name, one-line user errors."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from clitools import run_cli

from dgl_grappa.config import (
    CheckpointConfig,
    Config,
    ConfigError,
    DataConfig,
    DistDGLConfig,
    LaunchConfig,
    NetworkConfig,
    PartitionConfig,
    RunConfig,
    SyntheticConfig,
    TrainConfig,
    load_config,
)
from dgl_grappa.config.rules import workers_fit_hosts

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.unit
def test_precedence_cli_over_file_over_defaults(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("train:\n  epochs: 7\n  fanouts: [5, 6]\nmodel:\n  hidden: 32\n")
    cfg = load_config(f, ["--train.epochs=3", "--grappa.correction", "node"])
    assert cfg.train.epochs == 3  # CLI wins over the file
    assert cfg.model.hidden == 32  # file wins over the default
    assert cfg.train.fanouts == [5, 6]
    assert cfg.grappa.correction == "node"  # "--key value" form
    assert cfg.model.dropout == 0.5  # default
    assert cfg.name == "c" and cfg.run.output_dir == "runs/c"


@pytest.mark.unit
@pytest.mark.parametrize(
    "yaml_text,match",
    [
        ("trian:\n  epochs: 3\n", "unknown config key 'trian'"),
        ("train:\n  epochz: 3\n", "unknown config key 'train.epochz'"),
        ("train:\n  epochs: three\n", "train.epochs='three' is not an integer"),
        ("model:\n  name: transformer\n", "model.name='transformer' is not allowed; use one of sage, gcn, gat, gin"),
        ("model:\n  num_layers: 3\n", "train.fanouts has 2 entries but model.num_layers=3"),
        ("partition:\n  num_parts: 0\n", "partition.num_parts=0 must be >= 1"),
        ("grappa:\n  lam: 1.5\n", "grappa.lam=1.5 must be in"),
        ("train: [1, 2]\n", "train must be a mapping"),
        ("train:\n  epochs: [\n", "not valid YAML"),
    ],
)
def test_bad_yaml_is_one_line_error(tmp_path, yaml_text, match):
    f = tmp_path / "bad.yaml"
    f.write_text(yaml_text)
    with pytest.raises(ConfigError, match=match.replace("[", r"\[").replace("(", r"\(")) as e:
        load_config(f)
    assert "\n" not in str(e.value)


@pytest.mark.unit
@pytest.mark.parametrize(
    "override,match",
    [
        ("--train.epochz=1", "unknown config key 'train.epochz'"),
        ("--train=1", "'train' is a section"),
        ("--train.fanouts=[10,x]", "train.fanouts[1]='x' is not an integer"),
        ("--run.progress=maybe", "is not a boolean"),
        ("--train.epochs", "has no value"),
    ],
)
def test_bad_override(override, match):
    with pytest.raises(ConfigError, match=match.replace("[", r"\[")):
        load_config(None, [override])


@pytest.mark.unit
def test_capped_epochs_refuse_distdgl_sampler_processes():
    with pytest.raises(ConfigError, match="set --distdgl.num_samplers=0 or --train.steps_per_epoch=0"):
        load_config(None, ["--train.steps_per_epoch=5", "--distdgl.num_samplers=2"])
    assert load_config(None, ["--train.steps_per_epoch=5"]).train.steps_per_epoch == 5


@pytest.mark.unit
def test_every_shipped_config_loads():
    configs = sorted((ROOT / "configs").glob("*.yaml")) + sorted((ROOT / "benchmarks").glob("*/config.yaml"))
    assert configs, "no configs shipped"
    for f in configs:
        load_config(f)


@pytest.mark.unit
@pytest.mark.parametrize(
    "section,override",
    [
        (lambda: DataConfig(synthetic=SyntheticConfig(num_nodes=5)), "--data.synthetic.num_nodes=5"),
        (lambda: DataConfig(name="dgl"), "--data.name=dgl"),
        (lambda: PartitionConfig(num_parts=0), "--partition.num_parts=0"),
        (lambda: TrainConfig(memory_budget="lots"), "--train.memory_budget=lots"),
        (lambda: NetworkConfig(host_cpus="3-1"), "--network.host_cpus=3-1"),
        (lambda: DistDGLConfig(shm_size="big"), "--distdgl.shm_size=big"),
        (lambda: LaunchConfig(hosts=["a", "a"]), "--launch.hosts=[a,a]"),
        (lambda: RunConfig(timeout_s=0.0), "--run.timeout_s=0"),
        (lambda: CheckpointConfig(keep_last=0), "--checkpoint.keep_last=0"),
    ],
)
def test_a_section_checks_its_own_fields(section, override):
    """A section's check(), on its own, gives the one-line error that load_config gives for the same value."""
    with pytest.raises(ConfigError) as whole:
        load_config(None, [override])
    with pytest.raises(ConfigError) as alone:
        section().check()
    assert str(alone.value) == str(whole.value)


@pytest.mark.unit
def test_the_default_sections_pass_their_own_checks_and_a_cross_rule_reads_only_its_sections():
    cfg = Config()
    for name in (
        "data",
        "partition",
        "model",
        "train",
        "grappa",
        "schedule",
        "network",
        "distdgl",
        "compare",
        "bench",
        "launch",
        "run",
        "checkpoint",
    ):
        getattr(cfg, name).check()
    workers_fit_hosts(LaunchConfig(hosts=["a", "b"]), PartitionConfig(num_parts=4))
    with pytest.raises(ConfigError, match="do not fit on 2 hosts"):
        workers_fit_hosts(LaunchConfig(hosts=["a", "b"], workers_per_host=1), PartitionConfig(num_parts=4))


def test_cli_user_error_exits_2_with_one_line_and_touches_nothing(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps({"previous": True}))
    p = run_cli("train", "--config", "configs/default.yaml", f"--run.output_dir={out}", "--model.num_layers=9")
    assert p.returncode == 2
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "model.num_layers=9" in lines[0] and "Traceback" not in p.stderr
    assert json.loads((out / "summary.json").read_text()) == {"previous": True}
    assert sorted(x.name for x in out.iterdir()) == ["summary.json"]


def test_cli_missing_files(tmp_path, monkeypatch):
    monkeypatch.delenv("DGL_GRAPPA_PLANETOID", raising=False)  # a folder with the files would serve them
    p = run_cli("train", "--config", str(tmp_path / "nope.yaml"))
    assert p.returncode == 2 and "does not exist" in p.stderr and "Traceback" not in p.stderr
    p = run_cli("train", "--config", "configs/cora.yaml", f"--data.root={tmp_path}", f"--run.output_dir={tmp_path}/o")
    assert p.returncode == 2 and str(tmp_path) in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("setting,named", [("--grappa.correction=node", "grappa.correction=node")])
def test_dropin_settings_it_cannot_run_are_refused_before_any_run(tmp_path, setting, named):
    # compare with the drop-in, and the DistDGL job with --grappa: one line, status 2, nothing run.
    p = run_cli(
        "compare",
        "--config",
        "configs/default.yaml",
        f"--run.output_dir={tmp_path}/c",
        "--compare.dropin=true",
        setting,
    )
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2 and len(lines) == 1 and named in lines[0], p.stderr
    assert not (tmp_path / "c").exists()
    env = dict(os.environ, DGLBACKEND="pytorch")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "dgl_grappa.distdgl",
            "--config",
            "configs/default.yaml",
            "--grappa",
            f"--run.output_dir={tmp_path}/d",
            setting,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2 and len(lines) == 1 and named in lines[0], p.stderr
    assert not (tmp_path / "d").exists()
