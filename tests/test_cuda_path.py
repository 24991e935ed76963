"""run.device=cuda end to end (marker ``gpu``; scripts/test.sh deselects it where no GPU exists).

With the wheels pip gives (PyPI's dgl 2.1.0 is CPU-only, its torch a CUDA build) a GPU run uses the
torch kernels (``train.kernels: auto``): it must train on the GPU (blocks as plain tensors, features and
the model there, the gradients all-reduced on the GPU: NCCL, or gloo where the workers share one GPU) and
evaluate. DGL's own layers on a GPU (``train.kernels: dgl``) need DGL's CUDA build
(``dgl_grappa.cluster.launch.DGL_CUDA_WHEEL``): with a CPU-only DGL the job refuses in one line naming
that wheel; with a CUDA DGL it trains too.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent


def _dgl_has_cuda() -> bool:
    import dgl

    try:
        dgl.graph(([0], [0])).to("cuda:0")
        return True
    except Exception:  # noqa: BLE001
        return False


def _train(tmp_path, *extra):
    if not torch.cuda.is_available():
        pytest.fail("no CUDA device visible to torch (scripts/test.sh deselects -m gpu where nvidia-smi finds none)")
    # the easy preset, so that 3 epochs learn it (on the CPU: val acc 0.90, the majority class 0.075)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "dgl_grappa",
            "train",
            "--config",
            "configs/default.yaml",
            "--data.synthetic.num_nodes=4000",
            "--data.synthetic.preset=easy",
            "--train.epochs=3",
            "--partition.num_parts=2",
            "--run.device=cuda",
            f"--run.output_dir={tmp_path}",
            "--run.progress=false",
            *extra,
        ],
        cwd=ROOT,
        env=dict(os.environ, DGLBACKEND="pytorch"),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_train_on_cuda_with_the_torch_kernels(tmp_path):
    p = _train(tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["device"] == "cuda:0" and s["kernels"] == "torch" and s["val_acc"] > 0.5, s["val_acc"]


def test_dgl_kernels_on_cuda_train_or_refuse_in_one_line(tmp_path):
    p = _train(tmp_path, "--train.kernels=dgl")
    if _dgl_has_cuda():
        assert p.returncode == 0, p.stderr[-3000:]
        s = json.loads((tmp_path / "summary.json").read_text())
        assert s["device"] == "cuda:0" and s["kernels"] == "dgl" and s["val_acc"] > 0.5, s["val_acc"]
    else:
        assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr[-3000:]
        assert "needs a CUDA build of DGL" in p.stderr and "data.dgl.ai/wheels" in p.stderr
