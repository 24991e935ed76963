"""run.device=cuda end to end (marker ``gpu``; scripts/test.sh deselects it where no GPU exists).

The full path needs DGL's CUDA build (``dgl_grappa.cluster.launch.DGL_CUDA_WHEEL``): the package
registry's dgl 2.1.0 is CPU-only. On a GPU machine with that CPU-only DGL the job must
refuse in one line that names the CUDA wheel; with a CUDA DGL it must train on the GPU
(blocks, features and the model there, NCCL all-reducing the gradients) and evaluate.
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


def test_train_on_cuda_or_a_one_line_refusal(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch (scripts/test.sh deselects -m gpu where nvidia-smi finds none)")
    workers = min(2, torch.cuda.device_count())
    p = subprocess.run([sys.executable, "-m", "dgl_grappa", "train", "--config", "configs/default.yaml",
                        "--data.synthetic.num_nodes=4000", "--train.epochs=2", f"--partition.num_parts={workers}",
                        "--run.device=cuda", f"--run.output_dir={tmp_path}", "--run.progress=false"],
                       cwd=ROOT, env=dict(os.environ, DGLBACKEND="pytorch"), capture_output=True, text=True,
                       timeout=600)
    if _dgl_has_cuda():
        assert p.returncode == 0, p.stderr[-3000:]
        s = json.loads((tmp_path / "summary.json").read_text())
        assert s["device"] == "cuda:0" and s["val_acc"] > 0.1
    else:
        assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr[-3000:]
        assert "needs a CUDA build of DGL" in p.stderr and "data.dgl.ai/wheels" in p.stderr
