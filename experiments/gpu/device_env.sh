# Sourced at the start of a run on this workplace's GPU machine (lab use; users install with pip).
# That machine's python3 holds torch 2.11 (CUDA 13) and no DGL, and reaches no package index: the wheels
# are carried in .whl (dgl 2.1.0 for CPython 3.12, torchdata 0.7.1, pydantic and its three needs, made with
# `pip download --no-deps --python-version 3.12 ...`), and ip/tc in .devtools where the image lacks them.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site DGLBACKEND=pytorch PYTHONUNBUFFERED=1
# dgl 2.1.0's GraphBolt ships libraries for torch 2.0-2.2.1 only and `import dgl` loads it; neither runtime
# uses GraphBolt, so on this torch a missing GraphBolt library is passed over in silence. (PyPI's torch 2.2.1, which
# setup.py asks for, is a CUDA build that DGL's GraphBolt supports: a user's machine needs none of this.)
sed -i 's/^load_graphbolt()$/try:\n    load_graphbolt()\nexcept (FileNotFoundError, ImportError):\n    pass/' /tmp/site/dgl/graphbolt/__init__.py
python3 -m compileall -q /tmp/site/dgl >/dev/null 2>&1  # compiled once here: its SyntaxWarnings would reach stderr
command -v tc >/dev/null 2>&1 || export PATH="$PWD/.devtools/bin:$PATH"
python3 -c "import torch, dgl, numpy; print('device env: torch', torch.__version__, 'dgl', dgl.__version__, 'numpy', numpy.__version__, 'cuda', torch.cuda.is_available())" 2>&1 | grep -v Warn
