"""The drop-in's batches against what DistDGL's own loaders yield on the same partition, in a real DistDGL job.

tests/dropin_probe.py, run by the package's launcher as a user runs a script of their own (tests/dglscript.py), runs
in every trainer: one batch of ``DistNodeDataLoader`` / ``DistEdgeDataLoader`` next to
one of ``GrappaLoader`` / ``GrappaEdgeLoader`` (homogeneous, DGL's key names), or of ``DistNodeDataLoader`` on a
heterograph next to ``GrappaHeteroLoader``. A script written for DistDGL reads these fields, so both must carry the
same ones, in the same id spaces (the graph's global ids, checked against the DistGraph itself).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch as th
from dglscript import dgl_heterogeneous_parts, dgl_homogeneous_parts, run_script

from dgl_grappa.cluster.netns import check_isolation
from dgl_grappa.config import ConfigError
from dgl_grappa.method.local_part import Keep, choose_kept
from dgl_grappa.method.storage import row_bytes

HERE = Path(__file__).resolve().parent
WHY_NOT = check_isolation(net=True, shm="64m")


def _probe(tmp_path: Path, part_config: Path, kind: str) -> tuple[list[dict], list[str]]:
    out = tmp_path / "out"
    logs = run_script(
        HERE / "dropin_probe.py",
        "--graph_name {graph_name} --ip_config {ip_config} "
        f"--part_config {{part_config}} --out {{out_dir}} --kind {kind}",
        part_config,
        out,
    )
    return [json.loads((out / f"probe{r}.json").read_text()) for r in range(len(logs))], logs


@pytest.mark.skipif(WHY_NOT is not None, reason=f"private namespaces unavailable: {WHY_NOT}")
def test_homogeneous_batches_carry_what_distdgls_loaders_put_on_them(tmp_path):
    recs, logs = _probe(tmp_path, dgl_homogeneous_parts(tmp_path / "parts", "probegraph"), "homogeneous")
    for rec, log in zip(recs, logs):
        assert rec["feat_key"] == "features"  # "auto": DGL's examples' name found
        for kind in ("node", "edge"):
            ours, theirs = rec[f"grappa_{kind}"], rec[f"dgl_{kind}"]
            # the same fields on every block (the virtual first-hop block included), global ids everywhere
            assert ours["blocks"] == theirs["blocks"]
            assert theirs["ids"] == {**{k: True for k in theirs["ids"]}, "dtype": "torch.int64"}
            assert ours["ids"] == {**{k: True for k in ours["ids"]}, "dtype": "torch.int64"}
            assert ours["ids"]["virtual"]  # block 0: virtual ids num_nodes + v, edge ids -1
        assert rec["grappa_edge"]["pairs"] == rec["dgl_edge"]["pairs"]
        # with the defaults (pool_fanout=halo_fanout=10) every other machine's node held has min(10, its in-edges from
        # other machines' nodes) of them
        held = rec["grappa_edge"]["remote_in_edges"]
        assert held == {**held, "real": True, "from_other_machines": True, "once": True, "counts": True}
        assert held["edges"] > 0
        assert rec["grappa_edge"]["pairs"]["pos"]["e"] == ["_ID"] and rec["grappa_edge"]["pairs"]["pos_edges"]
        # serve(g): the loader's rows during an epoch, the DistTensor's outside; other keys are DGL's own
        assert rec["served_in_epoch"] and rec["served_outside"] and rec["labels_not_served"] == "DistTensor"
        # what a small budget cost is a warning a script without logging set-up sees (stderr)
        small = rec["small_budget"]
        assert small["precision"] != "fp32" or small["halo_kept"] < small["halo_reach"]
        assert "memory_budget=1.25:" in log and f"tables in {small['precision']}" in log
        # a budget below the server's own features: the one-line error names the loader's argument
        assert rec["too_small_budget"].startswith("memory_budget cannot hold part ")
        assert "; use memory_budget=" in rec["too_small_budget"] and "train." not in rec["too_small_budget"]


@pytest.mark.skipif(WHY_NOT is not None, reason=f"private namespaces unavailable: {WHY_NOT}")
def test_heterogeneous_batches_carry_what_distdgls_loader_puts_on_them(tmp_path):
    recs, logs = _probe(tmp_path, dgl_heterogeneous_parts(tmp_path / "parts", "probehet"), "heterogeneous")
    for rec, log in zip(recs, logs):
        ours, theirs = rec["grappa"], rec["dgl"]
        assert rec["feat_key"] == "feat"
        # dicts of every node type in, the target alone out; per-type global node ids and per-relation edge ids
        assert ours["input"] == theirs["input"] == ["author", "field", "paper"]
        assert ours["seeds"] == theirs["seeds"] == ["paper"]
        assert ours["input_is_block0"] and theirs["input_is_block0"] and ours["edges"] and theirs["edges"]
        # each block holds the relations it sampled an edge of, as DistDGL's frontiers: the last block's point
        # into the target, so a HeteroGraphConv over it outputs the target alone (DGL's `assert len(logits) == 1`)
        for b in ours["blocks"] + theirs["blocks"]:
            assert b["empty_relations"] == 0
        assert ours["output_types"] == theirs["output_types"] == ["paper"]
        # every halo node of the part holds all its in-edges, over every relation (asked once from the servers);
        # the part's own edges alone leave some short
        assert rec["halo_in_edges"] == {**rec["halo_in_edges"], "complete": True, "real": True, "short": 0}
        assert rec["halo_in_edges"]["checked"] > 0
        assert rec["halo_in_edges_part"]["real"] and rec["halo_in_edges_part"]["short"] > 0
        assert [b["src"] for b in ours["blocks"]] == [b["src"] for b in theirs["blocks"]]
        # a served DistEmbedding: own rows from this machine's shard, traced for DGL's SparseAdam, which trains
        # them in place; the kept halo's rows read once and frozen; outside an epoch, DGL's own reads
        assert rec["embedding_rows"] and rec["embedding_traced"] and rec["traced_only_own"]
        assert rec["own_rows_trained"] and rec["frozen_in_epoch"] and rec["outside_epoch_is_dgl"]
        # the next epoch reads the halo's rows again: their owners' trained rows (every machine trained its own)
        assert rec["halo_refreshed"] and rec["halo_moved"]
        assert rec["served_once_bytes"] > 0
        # the kept halo's feature rows within what the budget leaves beside the server's own fp32 rows
        for name in ("default_budget", "small_budget"):
            b = rec[name]
            assert b["halo_bytes"] <= (b["budget"] - 1) * b["own_fp32"] + 1e-6, (name, b)
        small, default = rec["small_budget"], rec["default_budget"]
        assert small["precision"] != "fp32" or small["halo_kept"] < small["halo_reach"]
        assert small["steps"] == default["steps"]  # every training node kept
        assert "drop-in loader (heterogeneous)" in log and "memory_budget=1.05:" in log
        assert rec["too_small_budget"].startswith("memory_budget cannot hold part ")


@pytest.mark.unit
def test_a_budget_too_small_names_the_setting_its_caller_has():
    """The native runtime's user sets --train.memory_budget; the drop-in's passes memory_budget= to the loader
    (whose budget already holds the server's features: ``fixed``)."""
    n, width = 10, 8
    own = n * width * 4
    need = n * row_bytes(width, "int4") / own  # the part's own rows in the last precision, in own fp32 rows

    def error(budget: float, fixed: int) -> str:
        with pytest.raises(ConfigError) as info:
            choose_kept(
                th.arange(n - 1),
                th.arange(1, n),
                n,
                n,
                th.arange(n),
                Keep(storage="auto", budget=budget),
                width,
                inner_tables=1,
                halo_tables=1,
                part_id=3,
                top=1.0,
                fixed=fixed,
            )
        return str(info.value)

    native = error(0.01, 0)
    assert native.startswith("train.memory_budget cannot hold part 3's own reachable rows")
    assert native.endswith(f"; use --train.memory_budget={need:g} or more")
    dropin = error(1.0, own)
    assert dropin.startswith("memory_budget cannot hold part 3's own reachable rows")
    assert dropin.endswith(f"; use memory_budget={1 + need:g} or more") and "train." not in dropin
