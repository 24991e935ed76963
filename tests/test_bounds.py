"""Rank 0's whole-graph evaluation has a bound of its own (run.eval_timeout_s), apart from the collectives'.

The other ranks wait for it on a gloo group created with that timeout: an evaluation
longer than run.collective_timeout_s is fine, one longer than run.eval_timeout_s fails
on every rank, within that bound, instead of hanging.
"""

import time

import pytest

from dgl_grappa.cluster.launch import (
    WorkerFailed,
    free_port,
    init_distributed,
    shutdown_distributed,
    spawn_workers,
)


def _eval_worker(rank, port, eval_timeout_s, sleep_s):
    import torch

    import dgl_grappa.runtime.evaluation as ev
    from dgl_grappa.config import load_config

    init_distributed(rank, 2, port, timeout_s=2.0)  # collectives: 2 s
    cfg = load_config(
        None,
        [
            "--data.synthetic.num_nodes=200",
            "--data.synthetic.num_communities=16",
            f"--run.eval_timeout_s={eval_timeout_s}",
        ],
    )
    evaluator = ev.GlobalEvaluator(cfg, rank == 0, ev.AccuracyScorer())

    def slow_evaluate(model, g, *rest):  # the evaluation's signature, whatever rows it is given
        time.sleep(sleep_s)
        return {"val": 1.0, "test": 1.0}

    ev.evaluate = slow_evaluate
    t0 = time.perf_counter()
    out = evaluator.after_epoch(torch.nn.Linear(1, 1), cfg.train.epochs - 1)  # the last epoch: due
    assert time.perf_counter() - t0 >= sleep_s - 0.5 and "eval_time_s" in out
    shutdown_distributed(True)


def test_an_evaluation_longer_than_the_collective_timeout_is_waited_for():
    spawn_workers(_eval_worker, 2, (free_port(), 30.0, 5.0), timeout_s=120)


def test_an_evaluation_past_eval_timeout_fails_every_rank_within_the_bound():
    # Rank 1 gives up after 1 s at the evaluation barrier while rank 0 still evaluates (20 s):
    # had it waited longer, rank 0 would have arrived and nothing would fail.
    with pytest.raises(WorkerFailed, match="worker 1 failed") as e:
        spawn_workers(_eval_worker, 2, (free_port(), 1.0, 20.0), timeout_s=120)
    assert "imed out" in str(e.value) or "imeout" in str(e.value), str(e.value)[-2000:]
