"""Ctrl-C on a real ``train`` run: exit status 130, one line (where to resume), and no semaphore left behind
(multiprocessing's resource tracker warns ``There appear to be N leaked semaphore objects`` when a process it
watched died holding one)."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TINY = [
    "--data.synthetic.num_nodes=300",
    "--data.synthetic.num_communities=16",
    "--partition.num_parts=2",
    "--train.batch_size=100",
    "--model.hidden=8",
    "--train.fanouts=[3,3]",
    "--train.eval_every=0",
    "--train.epochs=100000",
    "--run.timeout_s=300",
]


def test_ctrl_c_on_train_leaves_no_leaked_semaphore(tmp_path):
    # Its own session, signalled as a group: what a terminal's Ctrl-C does to its foreground job.
    p = subprocess.Popen(
        [sys.executable, "-m", "dgl_grappa", "train", *TINY, f"--run.output_dir={tmp_path / 'run'}"],
        cwd=ROOT,
        env=dict(os.environ, DGLBACKEND="pytorch"),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    err = b""
    try:
        sel = selectors.DefaultSelector()
        sel.register(p.stderr, selectors.EVENT_READ)
        deadline = time.monotonic() + 180
        while b"checkpoint after epoch" not in err:  # the workers are training
            assert time.monotonic() < deadline and p.poll() is None, err.decode()[-3000:]
            if sel.select(timeout=1):
                err += os.read(p.stderr.fileno(), 1 << 16)
        os.killpg(p.pid, signal.SIGINT)
        _, rest = p.communicate(timeout=120)
        err = (err + rest).decode(errors="replace")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
    assert p.returncode == 130, err[-3000:]
    last = err.rstrip().splitlines()[-1]
    assert last.startswith("dgl_grappa: stopped by SIGINT: every worker has ended;") and "--resume" in last, err[-3000:]
    assert "leaked semaphore" not in err, err[-3000:]
