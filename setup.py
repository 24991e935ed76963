"""dgl_grappa: gradient-only communication for distributed GNN training, as a DGL plugin."""

from setuptools import find_packages, setup

setup(
    name="dgl_grappa",
    version="0.1.0",
    description="Grappa (gradient-only communication) for DistDGL: local-only sampling, "
    "periodic repartitioning and coverage-corrected gradient aggregation",
    # What is declared is what dgl 2.1.0's wheels and this code allow; what was tested is narrower
    # (README, Install): Python 3.11, torch 2.2.1, dgl 2.1.0, the versions scripts/constraints.txt pins.
    # dgl 2.1.0 has Linux x86_64 wheels for CPython 3.8-3.12; the package needs 3.10 (dataclass kw_only).
    python_requires=">=3.10,<3.13",
    packages=find_packages(include=["dgl_grappa", "dgl_grappa.*"]),
    # `dgl-grappa COMMAND ...` is `python -m dgl_grappa COMMAND ...` (bash scripts/run.sh installs it into .venv/bin)
    entry_points={"console_scripts": ["dgl-grappa=dgl_grappa.cli:main"]},
    install_requires=[
        # dgl 2.1.0's GraphBolt ships libraries for torch 2.0.0-2.2.1 only, and `import dgl` loads it;
        # 2.1.0 is the newest DGL on PyPI for Linux.
        "torch>=2.0.0,<=2.2.1",
        "dgl==2.1.0",
        "numpy<2",
        # setuptools>=70 removes setuptools.extern, which dgl 2.1.0 imports.
        "setuptools<70",
        # torchdata>=0.8 breaks GraphBolt.
        "torchdata==0.7.1",
        # dgl imports these without declaring them.
        "pandas<3.1",
        "pydantic>=2",
        "pyyaml",
        "scipy",
        "psutil",
        "tqdm",
        "matplotlib",
        # run.tensorboard (torch.utils.tensorboard); protobuf 5+ is untested with torch 2.2's writer.
        "tensorboard>=2.14,<2.20",
        "protobuf>=3.20,<5",
    ],
    # ruff pinned: a newer one may add findings to a tree that was clean (tests/test_style.py runs it)
    extras_require={"test": ["pytest", "pytest-timeout", "ruff==0.17.6"]},
)
