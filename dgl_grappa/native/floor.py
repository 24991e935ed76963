"""The floor of an epoch (``run.floor``): what the epoch cannot beat, measured in the same run.

After every real epoch, :class:`FloorProbe` times two more passes by the same epoch clock,
neither of which changes the training:

1. the same steps (same batches, same model, loss and optimizer) with the no-op hook: local
   compute on this worker's part without any communication (model, optimizer and RNG state
   are restored afterwards, so the run's trajectory is bit-identical with and without the
   floor);
2. the all-reduce alone (:func:`allreduce_only_epoch`): the same number of steps, each
   all-reducing buffers of the sizes the hook all-reduced in the real epoch's last step
   (same count, same bytes), nothing else.

:func:`floor_summary` turns the per-epoch figures into summary.json's floor fields.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
import torch.distributed as dist

from ..runtime.metrics import EpochClock, median


class FloorProbe:
    """The floor passes after each epoch of one worker (see the module docstring).

    Args:
        model: the trained module (its state is saved and restored around pass 1).
        optimizer: its optimizer (likewise).
        comm: the timed hook (:class:`~dgl_grappa.method.reducers.TimedComm`): its ``noop``
            switch and the last step's bucket sizes.
        correction: the correction under the hook (its byte counter and process group).
        clock: the epoch clock of the trainer.

    Example:
        >>> probe = FloorProbe(model, optimizer, comm, correction, meter.clock)   # doctest: +SKIP
        >>> rec.update(probe.measure(lambda: run_epoch(epoch), steps))           # doctest: +SKIP
    """

    def __init__(self, model, optimizer, comm, correction, clock: EpochClock):
        self.model, self.optimizer, self.comm, self.correction, self.clock = model, optimizer, comm, correction, clock

    def measure(self, run_epoch: Callable[[], dict], steps: int) -> dict:
        """Both passes, right after a real epoch.

        Args:
            run_epoch: trains the epoch again and returns its record (with the hook a no-op).
            steps: the epoch's step count.

        Returns:
            ``floor_epoch_time_s`` (1), ``allreduce_only_s`` (2), ``floor_grad_bytes`` (bytes
            the hook handed to collectives during (1): 0, but for the shrinkage-to-mean
            scalar all-reduced before each backward), ``floor_wire_bytes`` (rank 0, in a
            private network namespace: the loopback bytes of (1)), and pass (1)'s phases
            as ``floor_<phase>_s``.
        """
        payload = list(self.comm.step_payload)
        # DGL's sampling RNG needs no saving: every epoch's batches reseed it (LocalBatches.epoch).
        snap = (
            copy.deepcopy(self.model.state_dict()),
            copy.deepcopy(self.optimizer.state_dict()),
            torch.get_rng_state(),
        )
        self.correction.take_bytes()
        self.comm.noop = True
        try:
            floor = run_epoch()
        finally:
            self.comm.noop = False
            self.model.load_state_dict(snap[0])
            self.optimizer.load_state_dict(snap[1])
            torch.set_rng_state(snap[2])
        out = {
            "floor_epoch_time_s": floor["epoch_time_s"],
            "floor_grad_bytes": floor["grad_bytes"],
            "floor_wire_bytes": floor["wire_bytes"],
        }
        out.update(
            {
                f"floor_{k}": floor[k]
                for k in floor
                if k.endswith("_s") and k not in ("epoch_time_s", "worker_epoch_time_s", "allreduce_inflight_s")
            }
        )
        out["allreduce_only_s"] = allreduce_only_epoch(self.clock, self.correction.state.group, steps, payload)
        return out


def allreduce_only_epoch(clock: EpochClock, group, steps: int, payload_bytes: list[int]) -> float:
    """The epoch clock around ``steps`` x one all-reduce per bucket of ``payload_bytes`` (float32).

    Buckets are launched asynchronously and then waited for, as DDP does at the end of
    backward.

    Args:
        clock: the epoch clock (a barrier at the start, the slowest worker at the end).
        group: the process group of the hook's collectives.
        steps: how many steps.
        payload_bytes: bytes of each bucket of one step.

    Example:
        >>> allreduce_only_epoch(EpochClock(), None, steps=4, payload_bytes=[63_488])   # doctest: +SKIP
        0.0021
    """
    bufs = [torch.zeros(max(1, b // 4), dtype=torch.float32) for b in payload_bytes]
    clock.start()
    for _ in range(steps):
        works = [dist.all_reduce(b, group=group, async_op=True) for b in bufs]
        for w in works:
            w.wait()
    return clock.slowest(clock.stop())


def floor_summary(records: list[dict]) -> dict:
    """The floor's summary fields (``run.floor``; all None when it was not measured).

    ``floor_epoch_s``: median over epochs of the no-op-reducer epoch (local compute only);
    ``allreduce_only_s``: median of the all-reduce-alone epoch; ``floor_s``: their sum, the
    time an epoch cannot beat; ``epoch_over_floor``: ``epoch_time_s / floor_s`` (medians of
    epochs measured in the same run, interleaved epoch by epoch); ``floor_grad_bytes_per_epoch``.

    Example:
        >>> floor_summary([{"epoch_time_s": 1.0}])["floor_s"] is None
        True
    """
    fl = [r for r in records if "floor_epoch_time_s" in r]
    if not fl:
        return {"floor_epoch_s": None, "allreduce_only_s": None, "floor_s": None, "epoch_over_floor": None}
    f = median([r["floor_epoch_time_s"] for r in fl])
    a = median([r["allreduce_only_s"] for r in fl])
    e = median([r["epoch_time_s"] for r in fl])
    return {
        "floor_epoch_s": f,
        "allreduce_only_s": a,
        "floor_s": f + a,
        "epoch_over_floor": e / (f + a),
        "floor_grad_bytes_per_epoch": median([r["floor_grad_bytes"] for r in fl]),
        "floor_phases": {
            k[len("floor_") :]: median([r[k] for r in fl])
            for k in fl[0]
            if k.startswith("floor_") and k.endswith("_s") and k != "floor_epoch_time_s"
        },
    }
