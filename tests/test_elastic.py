"""A lost machine costs the step in flight, not a restart (``launch.on_failure: continue``).

Real workers on four namespace test hosts; a worker is SIGKILLed mid-epoch by the fault injection of
:mod:`dgl_grappa.cluster.faults`. The survivors form a new group without restarting, a new worker on
a surviving host loads the lost part and trains it, and ``summary.json`` records each change. Rank 0
(the writer of the metrics and the evaluator) is lost too, in a second generation. No assertion on time.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dgl_grappa.cluster.liveness import Watch
from dgl_grappa.cluster.membership import (
    Generation,
    clear_pending,
    fenced_by,
    folded_change,
    newer_generations,
    read_generation,
    wait_generation,
    write_generation,
    write_pending,
)
from dgl_grappa.cluster.procs import rc_text
from dgl_grappa.cluster.testhosts import check_hosts_possible
from dgl_grappa.config import ConfigError, load_config
from dgl_grappa.native.supervise import Placement, lost_signal

ROOT = Path(__file__).resolve().parent.parent
_WHY = check_hosts_possible()
needs_hosts = pytest.mark.skipif(_WHY is not None, reason=f"test hosts cannot be made here: {_WHY}")

JOB = """
name: elastic
data: {{name: synthetic, synthetic: {{preset: easy, num_nodes: 3000, avg_degree: 10}}}}
partition: {{num_parts: 4, method: metis}}
model: {{name: sage, num_layers: 2, hidden: 16}}
train: {{epochs: 5, batch_size: 64, fanouts: [5, 10], eval_every: 1, lr: 0.03}}
run: {{output_dir: {out}, timeout_s: 300, collective_timeout_s: 60, peer_timeout_s: 10, progress: false}}
launch: {{remote: netns, on_failure: continue}}
"""


@pytest.mark.unit
def test_the_exit_status_says_how_a_worker_was_lost():
    assert [lost_signal(rc) for rc in (-9, 137, 247, 143, 255)] == [
        "SIGKILL",
        "SIGKILL",
        "SIGKILL",
        "SIGTERM",
        "its host (connection lost)",
    ]
    assert lost_signal(1) is None and lost_signal(2) is None  # a worker's own error is not a loss
    # the words of every launcher's failure line: a signal is named whichever way it reached the launcher
    assert [rc_text(rc) for rc in (-9, 137, 247, 1)] == [
        "was killed by SIGKILL",
        "exited with status 137 (killed by SIGKILL)",
        "exited with status 247 (killed by SIGKILL)",
        "exited with status 1",
    ]


@pytest.mark.unit
def test_take_overs_go_to_the_least_loaded_host_that_lost_nothing():
    p = Placement([0, 1, 2, 3])
    assert p.take_over_host(2, 4) == 3  # the next host after the lost one
    p.host_of[2] = 3
    p.lost_hosts.add(2)
    assert p.take_over_host(0, 4) == 1  # host 2 lost a worker; host 3 holds two now
    assert Placement([0, 0], {0}).take_over_host(1, 1) == 0  # no other host: the same one
    assert Placement([0, 1, 2, 3]).take_over_host(1, 5) == 4  # a spare (host 4, idle) before any survivor
    assert Placement([0, 1], dead_hosts={0, 1}).take_over_host(1, 2) is None  # every host lost as a whole
    # a lost worker's place is free: the local ranks of a host's workers stay below the workers it runs
    q = Placement([0, 0, 2, 2], dead_hosts={0})
    q.host_of[0] = q.host_of[1] = q.host_of[3] = -1  # ranks 0, 1 (host 0, lost as a whole) and 3 (host 2) lost
    assert [q.take_over_host(r, 3, origin) for r, origin in ((0, 0), (1, 0), (3, 2))] == [1, 1, 1]
    assert q.workers_on(2) == 1


@pytest.mark.unit
def test_generations_are_read_newest_first_and_waited_for_with_a_bound(tmp_path):
    assert wait_generation(tmp_path, after=0, timeout_s=0.3) is None
    for g in (1, 2):
        write_generation(tmp_path, Generation(g, "10.0.0.1", 29500 + g, lost=[g], reason=f"loss {g}"))
    assert wait_generation(tmp_path, after=0, timeout_s=1).gen == 2  # a second loss already followed the first
    assert read_generation(tmp_path, 1).lost == [1] and read_generation(tmp_path, 3) is None
    assert not list(tmp_path.glob(".*.tmp"))


def _report(folder: Path, rank: int, pid: int, address: str, seen: dict, net_down: bool = False, n: int = 1) -> None:
    """A worker's liveness report, as its reporter writes it."""
    (folder / f"beat-{rank}.json").write_text(
        json.dumps(
            {"rank": rank, "n": n, "pid": pid, "address": address, "port": 1, "seen": seen, "net_down": net_down}
        )
    )


ADDRS = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]


@pytest.mark.unit
def test_a_host_no_peer_reaches_is_unreachable_while_the_others_reach_each_other(tmp_path):
    w = Watch(tmp_path, 3, timeout_s=10)
    # hosts 0 and 1 reach each other; neither reached rank 2 for 12 s; rank 2 reached nobody either
    _report(tmp_path, 0, 100, ADDRS[0], {"1": [101, 0.5], "2": [102, 12.0]})
    _report(tmp_path, 1, 101, ADDRS[1], {"0": [100, 0.5], "2": [102, 12.0]})
    _report(tmp_path, 2, 102, ADDRS[2], {"0": [100, 12.0], "1": [101, 12.0]})
    (v,) = w.judge([True] * 3, [0, 1, 2], ADDRS)
    assert (v.kind, v.ranks, v.host) == ("unreachable", [2], 2)
    assert v.line == (
        "host 2 (10.0.0.3) is unreachable: no worker on another host reached it for 10 s "
        "(run.peer_timeout_s); worker(s) 2 on it"
    )
    # a witness that knew only an earlier worker of rank 2 (another pid) cannot tell: no verdict yet
    _report(tmp_path, 2, 202, ADDRS[2], {"0": [100, 0.5], "1": [101, 0.5]}, n=2)
    assert w.judge([True] * 3, [0, 1, 2], ADDRS) == []


@pytest.mark.unit
def test_two_hosts_apart_name_the_one_whose_network_is_down_or_else_a_partition(tmp_path):
    w = Watch(tmp_path, 2, timeout_s=10)
    _report(tmp_path, 0, 100, ADDRS[0], {"1": [101, 11.0]})
    _report(tmp_path, 1, 101, ADDRS[1], {"0": [100, 11.0]}, net_down=True)
    (v,) = w.judge([True, True], [0, 1], ADDRS)
    assert (v.kind, v.host) == ("unreachable", 1) and "its own network is down" in v.line
    # neither side knows its own network is gone: no side can be told from the other
    _report(tmp_path, 1, 101, ADDRS[1], {"0": [100, 11.0]}, n=2)
    (v,) = w.judge([True, True], [0, 1], ADDRS)
    assert v.kind == "partition" and v.line.startswith("hosts 0 (10.0.0.1), 1 (10.0.0.2) cannot reach each other")


@pytest.mark.unit
def test_a_worker_that_stops_reporting_on_a_host_still_reached_is_stalled(tmp_path):
    w = Watch(tmp_path, 2, timeout_s=0.2)
    _report(tmp_path, 0, 100, ADDRS[0], {"1": [101, 0.1]})
    _report(tmp_path, 1, 101, ADDRS[1], {"0": [100, 0.1]})
    assert w.judge([True, True], [0, 1], ADDRS) == []
    time.sleep(0.3)  # rank 1's reports stop (its worker was stopped); rank 0 goes on reaching its host
    _report(tmp_path, 0, 100, ADDRS[0], {"1": [101, 0.1]}, n=2)
    (v,) = w.judge([True, True], [0, 1], ADDRS)
    assert (v.kind, v.ranks) == ("stalled", [1]) and "stopped answering: no heartbeat for" in v.line
    assert w.judge([True, False], [0, 1], ADDRS) == []  # a worker that exited is not judged


@pytest.mark.unit
def test_a_replaced_worker_is_fenced_by_the_generation_written_or_being_formed(tmp_path):
    assert fenced_by(tmp_path, 1, since=0) is None
    write_pending(tmp_path, 1, [1, 3])
    assert fenced_by(tmp_path, 1, since=0).gen == 1 and fenced_by(tmp_path, 2, since=0) is None
    write_generation(tmp_path, Generation(1, "h", 1, lost=[1, 3], joined=[{"rank": 1, "host": 2}]))
    clear_pending(tmp_path)
    assert fenced_by(tmp_path, 3, since=0).gen == 1
    assert fenced_by(tmp_path, 1, since=1) is None  # the worker started for generation 1 is its replacement
    # a generation given up while it formed is folded into the one that formed
    write_generation(tmp_path, Generation(2, "h", 2, lost=[1], joined=[{"rank": 1, "host": 0}], reason="again"))
    change = folded_change(newer_generations(tmp_path, 0))
    assert (change["gen"], change["lost"], change["folded"]) == (2, [1, 3], [1])
    assert change["joined"] == [{"rank": 1, "host": 0}]


@pytest.mark.unit
def test_continue_is_refused_where_it_cannot_hold(tmp_path):
    with pytest.raises(ConfigError, match="needs the workers on hosts"):
        load_config(None, ["--launch.on_failure=continue"])
    with pytest.raises(ConfigError, match="embedding rows were held by it alone"):
        load_config(None, ["--launch.on_failure=continue", "--launch.remote=netns", "--model.embed=true"])
    with pytest.raises(ConfigError, match="schedule.k"):
        load_config(None, ["--launch.on_failure=continue", "--launch.remote=netns", "--schedule.k=2"])
    with pytest.raises(ConfigError, match="on_failure"):
        load_config(None, ["--launch.on_failure=later"])
    with pytest.raises(ConfigError, match="spare_hosts=1 keeps hosts idle for take-overs"):
        load_config(None, ["--launch.remote=netns", "--launch.spare_hosts=1"])


@needs_hosts
def test_losses_together_are_one_generation_and_a_loss_while_one_forms_is_the_next(tmp_path):
    out = tmp_path / "run"
    cfg = tmp_path / "job.yaml"
    cfg.write_text(JOB.format(out=out))
    # epoch 1, step 2: ranks 1 and 3 (hosts 1 and 3) are SIGKILLed at the same step, milliseconds apart; the
    # worker that takes part 1 over dies as soon as it joined (a loss while the generation forms); epoch 3,
    # step 1: host 0, which then holds ranks 0 (the evaluator, the writer of metrics.jsonl), 1 and 3, loses all
    # three at once
    once = [str(tmp_path / f"f{i}") for i in range(6)]
    faults = [
        {"point": "step", "rank": 1, "epoch": 1, "step": 2, "once": once[0]},
        {"point": "step", "rank": 3, "epoch": 1, "step": 2, "once": once[1]},
        {"point": "join", "rank": 1, "gen": 1, "once": once[2]},
        *({"point": "step", "rank": r, "epoch": 3, "step": 1, "once": once[3 + i]} for i, r in enumerate((0, 1, 3))),
    ]
    env = dict(os.environ, DGLBACKEND="pytorch", PYTHONPATH=str(ROOT), DGL_GRAPPA_FAULT=json.dumps(faults))
    p = subprocess.run(
        [sys.executable, "-m", "dgl_grappa", "train", "--config", str(cfg)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    assert all(Path(f).exists() for f in once)  # every fault fired
    s = json.loads((out / "summary.json").read_text())
    assert s["restarts"] == [] and s["on_failure"] == "continue"
    # one generation per change, never one per loss: 1 (ranks 1 and 3), 2 (the new rank 1 lost as it joined), 3
    gens = [read_generation(out / "membership", g) for g in (1, 2, 3, 4)]
    assert [g.lost for g in gens[:3]] == [[1, 3], [1], [0, 1, 3]] and gens[3] is None
    assert gens[0].joined == [{"rank": 1, "host": 2}, {"rank": 3, "host": 0}]  # hosts 1 and 3 lost as a whole
    assert gens[2].joined == [{"rank": r, "host": 2} for r in (0, 1, 3)]
    # what the workers record: the generation given up while it formed is part of the change that formed
    first, second = s["membership"]
    assert (first["gen"], first["folded"], first["lost"], first["epoch"], first["step_in_epoch"]) == (
        2,
        [1],
        [1, 3],
        1,
        2,
    )
    assert first["joined"] == [{"rank": 1, "host": 0}, {"rank": 3, "host": 0}]
    assert (second["gen"], second["lost"], second["epoch"], second["step_in_epoch"]) == (3, [0, 1, 3], 3, 1)
    assert "folded" not in second and all(m["seconds"] > 0 for m in s["membership"])
    recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in recs] == list(range(5))  # every epoch once, by whichever worker was rank 0
    assert all("val_acc" in r for r in recs)
    assert [r.get("resumed_at_step") for r in recs] == [None, 2, None, 1, None]
    # the take-overs show in the records' wall time, not in the time of their steps
    assert recs[1]["wall_s"] > recs[1]["epoch_time_s"] and recs[3]["wall_s"] > recs[3]["epoch_time_s"]
    for name in ("worker3.1", "worker1.2", "worker0.1", "worker1.3", "worker3.2"):
        text = (out / "logs" / f"{name}.log").read_text()
        assert "over" in text and "Traceback" not in text, (name, text[-3000:])
    assert s["val_acc"] > 0.8  # the easy preset after 5 epochs: training went on from the trained model


def _wait_text(path: Path, needle: str, p: subprocess.Popen, bound_s: float = 300) -> str:
    """The text of ``path`` once it holds ``needle`` (bounded; fails if the job ended first)."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace") if path.exists() else ""
        if needle in text:
            return text
        assert p.poll() is None, f"the job ended before {needle!r} appeared in {path}"
        time.sleep(0.5)
    raise AssertionError(f"{needle!r} did not appear in {path} within {bound_s:.0f} s")


@needs_hosts
def test_a_host_whose_network_goes_down_is_named_taken_over_by_a_spare_and_fenced_when_it_returns(tmp_path):
    out = tmp_path / "run"
    cfg = tmp_path / "job.yaml"
    cfg.write_text(
        JOB.format(out=out)
        .replace("num_parts: 4", "num_parts: 3")
        .replace("epochs: 5", "epochs: 4")
        .replace("on_failure: continue", "on_failure: continue, spare_hosts: 1")
    )
    # host 1 takes its own link down at epoch 1, step 2: its worker runs on, its peers' collectives wait on it
    fault = {"point": "step", "rank": 1, "epoch": 1, "step": 2, "link": "down", "once": str(tmp_path / "f1")}
    env = dict(os.environ, DGLBACKEND="pytorch", PYTHONPATH=str(ROOT), DGL_GRAPPA_FAULT=json.dumps(fault))
    log = tmp_path / "job.log"
    with open(log, "w") as f:
        p = subprocess.Popen(
            [sys.executable, "-m", "dgl_grappa", "train", "--config", str(cfg)],
            cwd=ROOT,
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        said = _wait_text(out / "logs" / "worker1.log", "fault injection: link down", p)
        pid = int(re.search(r"link down at step .* \(pid (\d+)\)", said).group(1))
        ns = subprocess.run(
            ["ip", "netns", "identify", str(pid)], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        assert ns, "the cut-off worker's host was not found"
        _wait_text(log, "is unreachable", p)
        _wait_text(out / "logs" / "worker1.1.log", "joins generation 1", p)
        # the host comes back after its part was taken over: its stale worker must stop, writing nothing
        subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "up"], check=True, timeout=10)
        p.wait(timeout=400)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
    text = log.read_text()
    assert p.returncode == 0, text[-4000:]
    assert (
        "host 1 (10.77.0.2) is unreachable: its own network is down for 10 s (run.peer_timeout_s); worker(s) 1 on "
        "it; its part(s) are taken over"
    ) in text, text[-4000:]
    assert "stopped answering" not in text and "Traceback" not in text
    s = json.loads((out / "summary.json").read_text())
    assert [h["ranks"] for h in s["cluster"]["hosts"]] == [[0], [1], [2], []]  # host 3 idle until the loss
    (change,) = s["membership"]
    assert change["lost"] == [1] and change["joined"] == [{"rank": 1, "host": 3}]  # the spare took it
    assert change["unreachable"] == ["10.77.0.2"] and "host 1 (10.77.0.2) is unreachable" in change["reason"]
    stale = (out / "logs" / "worker1.log").read_text()
    assert "was replaced in generation 1" in stale and "this stale worker stops and writes nothing" in stale
    assert "Traceback" not in stale
    recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in recs] == list(range(4))
    assert recs[1]["resumed_at_step"] == 2 and recs[1]["wall_s"] > recs[1]["epoch_time_s"]  # the stall shows
