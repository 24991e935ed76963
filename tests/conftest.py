import os

os.environ.setdefault("DGLBACKEND", "pytorch")

import pytest  # noqa: E402


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
