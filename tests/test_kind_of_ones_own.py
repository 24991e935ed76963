"""A kind of job the package does not have, defined in this module and registered with one call.

Node regression: a float target per node (here the node's class as a number: the generated graph's
labels are its only per-node target, so the regression is of the class index), a mean squared error
loss, and an RMSE metric, lower is better. Everything below is the kind; nothing in the package knows
it. The test trains it through the native runtime, the DistDGL trainer (the baseline) and ``compare``
(which starts both, each in processes of their own that import this file through
``train.kind_module``), and finds its figures in summary.json, the terminal lines and the report.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from dgl_grappa.kinds import Metric, register
from dgl_grappa.kinds.node import NodeDistJob, NodeKind, NodeRuntime
from dgl_grappa.runtime.evaluation import Scorer

RMSE = Metric(name="regress", val_key="val_rmse", test_key="test_rmse", words="RMSE", higher_is_better=False)
"""How the kind is graded: the root mean squared error of the val and test nodes, lower is better."""


class RegressionRuntime(NodeRuntime):
    """Node classification's batches, scored by the squared error of one output per seed."""

    def losses(self, out: Tensor, batch, device: torch.device) -> tuple[Tensor, Tensor]:
        seeds, rows = batch.target, batch.rows
        out = out[rows] if rows is not None else out[: seeds.numel()]
        y = self.lp.label[seeds].to(device=device, dtype=torch.float32)
        return (out.squeeze(-1) - y) ** 2, self.weights[seeds].to(device)


class RegressionScorer(Scorer):
    """RMSE of the val and test nodes of the whole graph, full neighbourhoods."""

    @torch.no_grad()
    def score(self, model, g, x=None) -> dict[str, float]:
        was_training = model.training
        model.eval()
        pred = model(g, g.ndata["feat"]).squeeze(-1)
        model.train(was_training)
        err = (pred - g.ndata["label"].float()) ** 2
        return {f"{k}_rmse": float(err[g.ndata[f"{k}_mask"]].mean().sqrt()) for k in ("val", "test")}


class RegressionDistJob(NodeDistJob):
    """In a DistDGL trainer: DGL's node loader, a float target, the mean squared error."""

    def out_dim(self) -> int:
        return 1

    def step_inputs(self, batch):
        blocks, x, extra, y = super().step_inputs(batch)
        return blocks, x, extra, y.float()

    def loss(self, out: Tensor, target) -> Tensor:
        return F.mse_loss(out.squeeze(-1), target)


class RegressionKind(NodeKind):
    """Node regression on a homogeneous graph."""

    name = "regress"
    task = "regress"
    metric = RMSE

    def scorer(self, cfg):
        return RegressionScorer()

    def out_dim(self, cfg, num_classes: int) -> int:
        return 1

    def make_runtime(self, cfg, ident, lp) -> RegressionRuntime:
        return RegressionRuntime(cfg, ident, lp)

    def dist_job(self, cfg, g, grappa: bool, device: torch.device, part_config: str) -> RegressionDistJob:
        return RegressionDistJob(cfg, g, grappa, device, part_config)


register(RegressionKind())


SMALL = [
    "--data.synthetic.num_nodes=1500",
    "--data.synthetic.avg_degree=8",
    "--partition.num_parts=2",
    "--partition.method=random",
    "--model.hidden=16",
    "--train.epochs=2",
    "--train.batch_size=300",
    "--train.fanouts=[5,5]",
    "--train.eval_every=1",
    "--compare.variants=[none]",
    "--compare.dropin=false",
    "--run.timeout_s=300",
    "--run.progress=false",
]


def test_a_kind_of_ones_own_trains_through_both_runtimes_and_compare(tmp_path, namespaces_missing):
    if namespaces_missing is not None:
        pytest.skip(f"private namespaces unavailable: {namespaces_missing}")
    from dgl_grappa import cli
    from dgl_grappa.bench.compare import compare_table
    from dgl_grappa.cluster.procs import ENV_JOB
    from dgl_grappa.distdgl.cli import summary_line

    out = tmp_path / "cmp"
    os.environ[ENV_JOB] = uuid.uuid4().hex
    try:  # the kind by its task, and the file that registers it in every process of the job
        assert (
            cli.main(
                [
                    "compare",
                    *SMALL,
                    "--train.task=regress",
                    f"--train.kind_module={Path(__file__).resolve()}",
                    f"--partition.out_dir={tmp_path / 'parts'}",
                    f"--run.output_dir={out}",
                ]
            )
            == 0
        )
    finally:
        del os.environ[ENV_JOB]
    result = json.loads((out / "compare.json").read_text())
    for system in ("distdgl", "grappa-none"):  # the DistDGL trainer, the native runtime
        s = json.loads((out / system / "summary.json").read_text())
        assert s["task"] == "regress" and s["epochs"] == 2 and "val_acc" not in s, system
        assert 0 < s["best_val_rmse"] <= s["val_rmse"] and s["test_rmse"] > 0, system  # lower is better
    grappa = json.loads((out / "grappa-none" / "summary.json").read_text())
    distdgl = json.loads((out / "distdgl" / "summary.json").read_text())
    # the terminal lines: the train command's (in its log) and the DistDGL job's, and compare's table
    assert (
        f"val RMSE {grappa['val_rmse']:.4f}  test RMSE {grappa['test_rmse']:.4f}"
        in (out / "grappa-none" / "run.log").read_text()
    )
    assert summary_line(distdgl, out / "distdgl").startswith(
        f"distdgl: val RMSE {distdgl['val_rmse']:.4f} test RMSE {distdgl['test_rmse']:.4f} epoch"
    )
    assert "test RMSE" in compare_table(result) and "below it" in compare_table(result)
    # compare targets a validation RMSE: the baseline's best over 0.98, reached from above
    assert result["target_acc"] == round(distdgl["best_val_rmse"] / 0.98, 4)
    best = distdgl["best_val_rmse"]
    assert result["target_rule"] == f"0.98 x the target is DistDGL's best validation RMSE, {best:.4f}"
    report = (out / "report.md").read_text()
    assert "| val RMSE | test RMSE |" in report and "Validation RMSE of the whole graph" in report
