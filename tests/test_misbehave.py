"""A cluster that misbehaves: two jobs on one folder, a scheduler's signals, a launcher killed, a stalled worker.

Real runs of ``python -m dgl_grappa train`` (tiny graph, 2 workers), started the way a batch
script starts them (``cmd &`` from a non-interactive ``bash -c``: SIGINT is ignored there),
each in a session of its own, so that every process the job ever started is found by its
process group.
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

import psutil
import pytest

from dgl_grappa.cli import main
from dgl_grappa.config import ConfigError, load_config
from dgl_grappa.runtime.folders import LOCK_NAME, FolderLock, lock_job_folders

ROOT = Path(__file__).resolve().parent.parent

TINY = [
    "--data.synthetic.num_nodes=300",
    "--data.synthetic.num_communities=16",
    "--partition.num_parts=2",
    "--train.batch_size=100",
    "--model.hidden=8",
    "--train.fanouts=[3,3]",
    "--train.eval_every=0",
    "--run.progress=false",
    "--run.timeout_s=240",
]


def _start(tmp: Path, args: list[str], env_extra: dict | None = None) -> tuple[subprocess.Popen, Path]:
    """``python -m dgl_grappa train ARGS &`` inside a non-interactive ``bash -c`` in a new session; (bash, log)."""
    log = tmp / "job.log"
    cmd = " ".join([sys.executable, "-m", "dgl_grappa", "train", *[f"'{a}'" for a in args]])
    script = f"{cmd} > {log} 2>&1 & echo $! > {tmp / 'pid'}; wait $!; echo $? > {tmp / 'rc'}"
    env = dict(os.environ, DGLBACKEND="pytorch", PYTHONPATH=str(ROOT), **(env_extra or {}))
    bash = subprocess.Popen(["bash", "-c", script], cwd=tmp, env=env, start_new_session=True)
    return bash, log


def _wait_for(pred, timeout_s: float, what: str, log: Path | None = None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.2)
    tail = log.read_text()[-3000:] if log is not None and log.exists() else ""
    raise AssertionError(f"{what} did not happen within {timeout_s:.0f} s\n{tail}")


def _worker_pids(log: Path) -> dict[int, int] | None:
    m = re.search(r"workers started: (.+)", log.read_text()) if log.exists() else None
    return {int(r): int(p) for r, p in re.findall(r"rank (\d+) pid (\d+)", m.group(1))} if m else None


def _group(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    left = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                left.append(p.pid)
        except (ProcessLookupError, psutil.Error):
            pass
    return left


def _kill_group(pgid: int) -> None:
    for pid in _group(pgid):  # the test's own processes only: its session
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_second_job_refused_and_sigterm_stops_the_whole_job_with_a_checkpoint(tmp_path, capfd):
    run = tmp_path / "run"
    args = [*TINY, "--train.epochs=100000", f"--run.output_dir={run}"]
    bash, log = _start(tmp_path, args)
    try:
        ck = run / "checkpoints"
        _wait_for(lambda: len(list(ck.glob("ckpt-*.pt"))) >= 2, 120, "two checkpoints", log)
        launcher = int((tmp_path / "pid").read_text())
        workers = _worker_pids(log)
        assert workers and len(workers) == 2

        # A second job on the same folder: refused in one line naming the first, nothing of it touched.
        capfd.readouterr()
        assert main(["train", *TINY, "--train.epochs=2", f"--run.output_dir={run}"]) == 2
        err = capfd.readouterr().err
        assert re.search(
            rf"dgl_grappa: error: run.output_dir={run} is in use by another job \(pid {launcher} on "
            r"host \S+, since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)",
            err,
        ), err
        assert "removed" not in err and "Traceback" not in err
        assert json.loads((run / LOCK_NAME).read_text())["pid"] == launcher
        assert psutil.pid_exists(launcher) and all(psutil.pid_exists(p) for p in workers.values())

        # The scheduler's SIGTERM to the top-level command only.
        os.kill(launcher, signal.SIGTERM)
        bash.wait(timeout=30)
        _wait_for(lambda: not _group(bash.pid), 5, "every process of the job gone")
        assert int((tmp_path / "rc").read_text()) == 128 + signal.SIGTERM
        text = log.read_text()
        assert "Traceback" not in text, text[-3000:]
        m = re.search(
            r"dgl_grappa: stopped by SIGTERM: every worker has ended; the newest checkpoint is (\S+) "
            r"\(epoch (\d+)\); continue with --resume",
            text,
        )
        assert m, text[-2000:]
        assert re.search(r"stopped on request after epoch \d+", text)
    finally:
        _kill_group(bash.pid)
        bash.wait(timeout=10)

    # --resume auto continues from that checkpoint, and every epoch is in metrics.jsonl once.
    stopped_at = int(m.group(2))
    assert main(["train", *TINY, f"--train.epochs={stopped_at + 2}", f"--run.output_dir={run}", "--resume"]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resumed_from"]["epoch"] == stopped_at and summary["epochs"] == stopped_at + 2
    epochs = [json.loads(ln)["epoch"] for ln in (run / "metrics.jsonl").read_text().splitlines()]
    assert epochs == list(range(stopped_at + 2))


def test_a_launcher_killed_by_sigkill_leaves_no_worker(tmp_path):
    bash, log = _start(tmp_path, [*TINY, "--train.epochs=100000", f"--run.output_dir={tmp_path / 'run'}"])
    try:
        workers = _wait_for(lambda: _worker_pids(log), 120, "the workers' start", log)
        _wait_for(lambda: (tmp_path / "run" / "metrics.jsonl").exists(), 120, "training", log)
        os.kill(int((tmp_path / "pid").read_text()), signal.SIGKILL)
        bash.wait(timeout=30)
        _wait_for(
            lambda: (
                not any(
                    psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                    for p in workers.values()
                )
            ),
            10,
            "the workers' death",
        )
        _wait_for(lambda: not _group(bash.pid), 10, "every process of the job gone")
    finally:
        _kill_group(bash.pid)
        bash.wait(timeout=10)


def test_a_stopped_worker_is_named_within_peer_timeout(tmp_path):
    fault = {"point": "step", "rank": 1, "epoch": 3, "step": 0, "signal": "SIGSTOP"}
    bash, log = _start(
        tmp_path,
        [*TINY, "--train.epochs=50", "--run.peer_timeout_s=3", f"--run.output_dir={tmp_path / 'run'}"],
        {"DGL_GRAPPA_FAULT": json.dumps(fault)},
    )
    try:
        workers = _wait_for(lambda: _worker_pids(log), 120, "the workers' start", log)
        _wait_for(lambda: "fault injection: SIGSTOP" in log.read_text(), 120, "the stop", log)
        t_stop = time.monotonic()
        bash.wait(timeout=3 + 10)
        assert time.monotonic() - t_stop < 3 + 10
        text = log.read_text()
        errors = [ln for ln in text.splitlines() if ln.startswith("dgl_grappa: error:")]
        assert len(errors) == 1 and re.fullmatch(
            r"dgl_grappa: error: worker 1 \(rank 1 on host \S+\) stopped answering: no heartbeat for \d+ s "
            r"\(run.peer_timeout_s=3\); every worker was killed and the job stopped",
            errors[0],
        ), text[-2000:]
        assert "Traceback" not in text, text[-3000:]
        assert int((tmp_path / "rc").read_text()) == 1
        _wait_for(lambda: not psutil.pid_exists(workers[1]), 5, "the stopped worker's death")
    finally:
        _kill_group(bash.pid)
        bash.wait(timeout=10)


@pytest.mark.unit
def test_folder_lock_refuses_a_second_holder_and_takes_over_a_dead_ones(tmp_path):
    first = FolderLock(tmp_path / "out", "run.output_dir").acquire()
    with pytest.raises(
        ConfigError,
        match=rf"run.output_dir={tmp_path / 'out'} is in use by another job \(pid "
        rf"{os.getpid()} on host \S+, since .+ UTC\); wait for it to end",
    ):
        FolderLock(tmp_path / "out", "run.output_dir").acquire()
    first.release()
    # a lock file left by a job that is gone (the kernel dropped its lock): taken over
    (tmp_path / "out" / LOCK_NAME).write_text('{"pid": 999999, "host": "h", "since": "then"}\n')
    again = FolderLock(tmp_path / "out", "run.output_dir").acquire()
    assert json.loads((tmp_path / "out" / LOCK_NAME).read_text())["pid"] == os.getpid()
    again.release()


@pytest.mark.unit
def test_a_shared_checkpoint_folder_is_locked_too(tmp_path):
    held = lock_job_folders(tmp_path / "a", tmp_path / "ck")
    assert [lk.key for lk in held] == ["run.output_dir", "checkpoint.dir"]
    with pytest.raises(ConfigError, match=r"^checkpoint.dir=.+ is in use by another job"):
        lock_job_folders(tmp_path / "b", tmp_path / "ck")
    assert not FolderLock(tmp_path / "b", "x").acquire().release()  # the output folder's lock was let go again
    for lk in held:
        lk.release()


@pytest.mark.unit
@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
def test_peer_timeout_bad_values_are_one_line(value):
    with pytest.raises(ConfigError, match=rf"^run.peer_timeout_s={value}(\.0)? must be a number of seconds >= 1"):
        load_config(None, [f"--run.peer_timeout_s={value}"])


def test_sigterm_inside_an_epoch_stops_at_a_step_and_resume_goes_on_from_it(tmp_path):
    # Epochs of 48 steps; the scheduler's SIGTERM reaches the launcher at step 3 of epoch 1 (sent by worker 0 to
    # its parent, which then waits for the launcher's request to come back): the workers stop at step 16.
    run = tmp_path / "run"
    args = [*TINY, "--train.batch_size=2", "--train.epochs=100000"]
    fault = {
        "point": "step",
        "rank": 0,
        "epoch": 1,
        "step": 3,
        "signal": "SIGTERM",
        "target": "parent",
        "wait": True,
        "once": str(tmp_path / "fired"),
    }
    bash, log = _start(tmp_path, [*args, f"--run.output_dir={run}"], {"DGL_GRAPPA_FAULT": json.dumps(fault)})
    try:
        bash.wait(timeout=180)
        _wait_for(lambda: not _group(bash.pid), 5, "every process of the job gone")
    finally:
        _kill_group(bash.pid)
        bash.wait(timeout=10)
    text = log.read_text()
    assert int((tmp_path / "rc").read_text()) == 128 + signal.SIGTERM, text[-3000:]
    m = re.search(r"stopped on request in epoch (\d+) after step (\d+) of (\d+); checkpoint (\S+)", text)
    assert m, text[-3000:]
    epoch, steps, per_epoch = int(m.group(1)), int(m.group(2)), int(m.group(3))
    assert epoch == 1 and steps == 16 < per_epoch  # at the first agreed step after the request, inside the epoch
    meta = json.loads(Path(m.group(4)).with_suffix(".json").read_text())
    assert meta["epoch"] == epoch and meta["step"] == epoch * per_epoch + steps
    assert "Traceback" not in text

    assert main(["train", *args[:-1], f"--train.epochs={epoch + 2}", f"--run.output_dir={run}", "--resume"]) == 0
    recs = [json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in recs] == list(range(epoch + 2))
    assert recs[epoch].get("resumed_at_step") == steps and "resumed_at_step" not in recs[epoch + 1]
    assert json.loads((run / "summary.json").read_text())["epochs"] == epoch + 2
    # the same run without the stop: the same batches, dropout and updates, so the same losses
    assert main(["train", *args[:-1], f"--train.epochs={epoch + 2}", f"--run.output_dir={tmp_path / 'straight'}"]) == 0
    straight = [json.loads(ln) for ln in (tmp_path / "straight" / "metrics.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in recs] == pytest.approx([r["loss"] for r in straight], abs=1e-6)
