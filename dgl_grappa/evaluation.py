"""Global evaluation, the same for every system: rank 0's model on the whole graph, timed apart.

Evaluation is not training: it reads the whole graph with full neighbourhoods (no
sampling, no partitions), runs on rank 0 only while the other workers wait at a barrier,
and its seconds are reported next to the epoch time, never inside it. That barrier is on a
gloo group of its own, bounded by ``run.eval_timeout_s`` (a whole-graph evaluation may take
longer than ``run.collective_timeout_s``, the bound of the training collectives); the
trainers wait on the same group while rank 0 writes a checkpoint. Grappa's trainer and
the DistDGL trainer use this one module, so their accuracies are measured alike.
"""
from __future__ import annotations

import copy
import datetime
import time

import torch
import torch.distributed as dist

from .config import Config


@torch.no_grad()
def evaluate(model: torch.nn.Module, g) -> dict[str, float]:
    """Accuracy on the val and test masks of the whole graph, full neighbourhoods.

    Args:
        model: the GNN (called as ``model(g, feat)``); its train/eval mode is restored.
        g: the whole graph with ndata feat, label, val_mask, test_mask.

    Returns:
        ``{"val": accuracy, "test": accuracy}``.
    """
    param = next(model.parameters(), None)
    if param is not None and param.device != g.device:
        # A worker training on a GPU: the whole graph stays in host memory, a copy of the model goes there.
        model = copy.deepcopy(model).to(g.device)
    was_training = model.training
    model.eval()
    pred = model(g, g.ndata["feat"]).argmax(-1)
    model.train(was_training)
    correct = pred == g.ndata["label"]
    return {k: float(correct[g.ndata[f"{k}_mask"]].float().mean()) for k in ("val", "test")}


def eval_due(cfg: Config, epoch: int) -> bool:
    """Whether epoch ``epoch`` ends with a global evaluation (every ``train.eval_every``, and the last)."""
    last = epoch == cfg.train.epochs - 1
    return last or (cfg.train.eval_every > 0 and (epoch + 1) % cfg.train.eval_every == 0)


class GlobalEvaluator:
    """Rank 0 evaluates on the whole graph when an evaluation is due; the others wait for it.

    Args:
        cfg: the run's config (``data`` says which graph, ``train.eval_every`` when).
        is_main: this process is rank 0 (the only one that loads the whole graph).

    Example:
        >>> ev = GlobalEvaluator(cfg, rank == 0)           # doctest: +SKIP
        >>> rec.update(ev.after_epoch(model, epoch))       # doctest: +SKIP
    """

    def __init__(self, cfg: Config, is_main: bool):
        self.cfg = cfg
        self.graph = None
        self.group = None
        if dist.is_available() and dist.is_initialized():
            # A collective: every rank constructs its evaluator at the same point.
            self.group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=cfg.run.eval_timeout_s))
        if is_main:
            from .data import load_dataset  # only rank 0 needs the whole graph

            self.graph = load_dataset(cfg.data)

    def wait_for_rank0(self, obj=None):
        """Every rank: wait (at most ``run.eval_timeout_s``) until rank 0 is done with work of its own.

        Args:
            obj: rank 0's outcome to hand to everyone (ignored on the other ranks).

        Returns:
            Rank 0's ``obj``.
        """
        if self.group is None:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]

    def after_epoch(self, model: torch.nn.Module, epoch: int) -> dict:
        """Evaluate after ``epoch`` if due (a collective: every worker must call it).

        Returns:
            ``{}`` when not due; else ``eval_time_s`` (all ranks) and, on rank 0,
            ``val_acc`` and ``test_acc``.
        """
        if not eval_due(self.cfg, epoch):
            return {}
        t0 = time.perf_counter()
        out = {}
        if self.graph is not None:
            out = {f"{k}_acc": v for k, v in evaluate(model, self.graph).items()}
        if self.group is not None:
            dist.barrier(group=self.group)  # the others wait (bounded by run.eval_timeout_s) while rank 0 evaluates
        out["eval_time_s"] = time.perf_counter() - t0
        return out
