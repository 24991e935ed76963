import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path

os.environ.setdefault("DGLBACKEND", "pytorch")
# No test reaches the web: a dataset download that a test did not arrange meets a closed loopback port
# (connection refused at once) instead of waiting on a network these machines do not have.
os.environ.setdefault("DGL_GRAPPA_PLANETOID_URL", "http://127.0.0.1:9/planetoid")
os.environ.setdefault("DGL_GRAPPA_OGB_URL", "http://127.0.0.1:9/ogb")

import pytest  # noqa: E402
from datafiles import SUFFIXES, real_planetoid  # noqa: E402

_DATA_ROOT: list[Path] = []


def pytest_configure(config):
    """``data.root``'s default, for this session and every process it starts: a folder of its own (no test
    reads or downloads into the user's cache), whose ``planetoid/raw`` links the real Cora and CiteSeer
    files where they are found (:func:`datafiles.real_planetoid`: beside the checkout, as on CI)."""
    root = Path(tempfile.mkdtemp(prefix="dgl_grappa-test-data-"))
    _DATA_ROOT.append(root)
    os.environ["DGL_GRAPPA_DATA"] = str(root)
    real = real_planetoid()
    if real is not None:
        raw = root / "planetoid" / "raw"
        raw.mkdir(parents=True)
        for name in ("cora", "citeseer"):
            for s in SUFFIXES:
                (raw / f"ind.{name}.{s}").symlink_to(real / f"ind.{name}.{s}")


def pytest_unconfigure(config):
    for root in _DATA_ROOT:
        shutil.rmtree(root, ignore_errors=True)


def pytest_report_header(config):
    real = real_planetoid()
    return (
        f"real Cora/CiteSeer files: {real}"
        if real is not None
        else "real Cora/CiteSeer files: not found (no ../shared/datasets/planetoid, no $DGL_GRAPPA_PLANETOID): the "
        "tests marked planetoid are left out (deselected)" + (", and fail under CI=true" if _ci() else "")
    )


def _ci() -> bool:
    return os.environ.get("CI") == "true"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Without the real Planetoid files the tests that read them are deselected (visibly: the summary counts
    them, the header says why), except under CI=true, where they run and fail."""
    if real_planetoid() is not None or _ci():
        return
    out = [i for i in items if i.get_closest_marker("planetoid") is not None]
    if out:
        config.hook.pytest_deselected(items=out)
        items[:] = [i for i in items if i.get_closest_marker("planetoid") is None]
        _LEFT_OUT.extend(i.nodeid for i in out)


_LEFT_OUT: list[str] = []


def pytest_terminal_summary(terminalreporter):
    """Said at the end too (``-q`` hides the header): which tests were left out, and why."""
    if _LEFT_OUT:
        terminalreporter.write_line(
            f"{len(_LEFT_OUT)} tests marked planetoid deselected: the real Cora/CiteSeer "
            "files are not here (no ../shared/datasets/planetoid, no $DGL_GRAPPA_PLANETOID)"
        )


@pytest.fixture(scope="session", autouse=True)
def kinds_installed():
    """The kinds of job's registry, imported as every entry point imports it: it installs what a run holds out,
    which the partitioning and checkpoint fingerprints below it ask (a test may call those first)."""
    import dgl_grappa.kinds  # noqa: F401


@pytest.fixture(scope="session")
def small_graph():
    """A 3k-node hard synthetic graph (standard ndata), shared by the partition/sampler tests."""
    from dgl_grappa.config import DataConfig, SyntheticConfig
    from dgl_grappa.data import load_dataset

    return load_dataset(DataConfig(name="synthetic", synthetic=SyntheticConfig(num_nodes=3000, seed=3)))


@pytest.fixture(scope="session")
def small_parts(small_graph, tmp_path_factory):
    """small_graph cut into 2 METIS parts on disk; returns (graph, stats)."""
    from dgl_grappa.config import PartitionConfig
    from dgl_grappa.partition.store import partition

    out = tmp_path_factory.mktemp("parts")
    return small_graph, partition(small_graph, PartitionConfig(num_parts=2, method="metis"), out)


@pytest.fixture(scope="session")
def namespaces_missing():
    """Why a job cannot get private namespaces here (a network namespace, its own /dev/shm), or None if it can."""
    from dgl_grappa.cluster.netns import check_isolation

    return check_isolation(net=True, shm="64m")


COMPARED_SYSTEMS = ("distdgl", "grappa-none", "distdgl-grappa")


@pytest.fixture(scope="module")
def compare_run(request, tmp_path_factory, namespaces_missing):
    """One ``compare`` (DistDGL, grappa-none and the drop-in on the same partitions) of the requesting
    module's ``COMPARE``, a config template with ``{parts}`` and ``{out}``; skipped without private namespaces.

    Returns:
        (its output folder, compare.json's content, {system: its summary.json} for :data:`COMPARED_SYSTEMS`).
    """
    if namespaces_missing is not None:
        pytest.skip(f"private namespaces unavailable: {namespaces_missing}")
    from dgl_grappa import cli
    from dgl_grappa.cluster.procs import ENV_JOB

    template = getattr(request.module, "COMPARE", None)
    assert template is not None, f"{request.module.__name__} uses compare_run but defines no COMPARE config"
    work = tmp_path_factory.mktemp(f"{request.module.__name__.removeprefix('test_')}-compare")
    cfg = work / "cmp.yaml"
    cfg.write_text(template.format(parts=work / "parts", out=work / "cmp"))
    os.environ[ENV_JOB] = uuid.uuid4().hex
    try:
        rc = cli.main(["compare", "--config", str(cfg)])
    finally:
        del os.environ[ENV_JOB]
    assert rc == 0
    out = work / "cmp"
    return (
        out,
        json.loads((out / "compare.json").read_text()),
        {n: json.loads((out / n / "summary.json").read_text()) for n in COMPARED_SYSTEMS},
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true a skip is a failure: CI runs as root on the reference machine, with the
    Planetoid files beside the checkout, so a skip there would hide a broken set-up."""
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and os.environ.get("CI") == "true" and not hasattr(rep, "wasxfail"):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"skipped under CI=true (CI must be able to run every test): {reason}"
