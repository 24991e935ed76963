"""Inside a trainer: byte counters, the epoch meter, evaluation and the summary."""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from dgl.distributed import rpc

from ..cluster.hosts import worker_identity
from ..kinds import resolve
from ..kinds.embeddings import EMBED_NAME
from ..method.models import gradient_bytes
from ..runtime.evaluation import GlobalEvaluator
from ..runtime.meter import EpochMeter, all_workers, run_summary
from ..runtime.metrics import (
    format_bytes,
    median,
    ring_allreduce_wire_bytes,
    wire_per_epoch,
    write_json,
)
from .machine_id import ENV_MACHINE_ID


class TrafficView:
    """One reader of a :class:`TrafficCounter`: the counts since its own last :meth:`take`."""

    def __init__(self, counter: "TrafficCounter"):
        self.counter, self._last = counter, counter.totals()

    def take(self) -> dict:
        """The counts since this reader's last call (or since it was made), as a dict."""
        now = self.counter.totals()
        d = {k: now[k] - self._last[k] for k in now}
        self._last = now
        return {
            "pull_rows": d["pull_rows"],
            "remote_rows": d["remote_rows"],
            "feature_bytes": d["feature_bytes"],
            "embed_pull_bytes": d["embed_pull_bytes"],
            "embed_grad_bytes": d["embed_grad_bytes"],
            "embed_bytes": d["embed_pull_bytes"] + d["embed_grad_bytes"],
            "other_pull_bytes": d["other_pull_bytes"],
            "rpc_bytes": d["rpc_sent"] + d["rpc_recv"],
            "rpc_sent": d["rpc_sent"],
            "rpc_recv": d["rpc_recv"],
            "fetch_s": d["fetch_s"],
        }


class TrafficCounter:
    """Application-level bytes of one DistDGL client process (installed by patching ``rpc``), read through
    :meth:`view` (each reader its own differences).

    Counts:

    * KVStore pulls through ``rpc.fast_pull``: ids asked for, ids owned by another machine
      (``remote_rows``), and their bytes (row bytes + the 8-byte id), split into the
      feature tensor (name ending in ``feat``, or in ``features`` as DGL's examples name it), the
      learnable embedding (``model.embed``: ``embed_pull_bytes``) and everything else;
    * the embedding's gradients (``embed_grad_bytes``): DGL's sparse optimizer sends every row
      pulled with autograd on back to its owner at its step, as a gradient row and its id,
      over the trainers' process group (not RPC), so they are counted at the pull;
    * Python RPC payloads: pickled bytes + tensor bytes of every request sent
      (``serialize_to_payload``) and response received (``deserialize_from_payload``),
      which in a training epoch is neighbour sampling on other machines;
    * seconds spent in pulls (``fetch_s``).
    """

    _installed: "TrafficCounter | None" = None

    FIELDS = (
        "pull_rows",
        "remote_rows",
        "feature_bytes",
        "embed_pull_bytes",
        "embed_grad_bytes",
        "other_pull_bytes",
        "rpc_sent",
        "rpc_recv",
        "fetch_s",
    )
    """The running totals (never reset: each reader takes its own differences, :meth:`view`)."""

    def __init__(self):
        for k in self.FIELDS:
            setattr(self, k, 0.0 if k == "fetch_s" else 0)

    def totals(self) -> dict:
        """The running totals."""
        return {k: getattr(self, k) for k in self.FIELDS}

    def view(self) -> "TrafficView":
        """A reader of its own: its :meth:`TrafficView.take` gives the counts since that reader's last take, whatever
        other readers (the launcher's loader meter, the package's trainer meter) take meanwhile."""
        return TrafficView(self)

    @classmethod
    def install(cls) -> "TrafficCounter":
        """Patch ``dgl.distributed.rpc`` once per process and return the counter."""
        if cls._installed is not None:
            return cls._installed

        counter = cls()
        fast_pull, ser, deser = rpc.fast_pull, rpc.serialize_to_payload, rpc.deserialize_from_payload

        def counted_fast_pull(
            name, id_tensor, part_id, service_id, machine_count, group_count, machine_id, client_id, local_data, policy
        ):
            t = time.perf_counter()
            remote = int((part_id != machine_id).sum())
            row_bytes = (
                (local_data.numel() // max(local_data.shape[0], 1)) * local_data.element_size()
                if local_data.dim()
                else local_data.element_size()
            )
            out = fast_pull(
                name,
                id_tensor,
                part_id,
                service_id,
                machine_count,
                group_count,
                machine_id,
                client_id,
                local_data,
                policy,
            )
            counter.pull_rows += int(id_tensor.numel())
            counter.remote_rows += remote
            nbytes = remote * (row_bytes + 8)
            if EMBED_NAME in str(name):  # the embedding and its optimizer's state (read by the owner: local)
                counter.embed_pull_bytes += nbytes
                if torch.is_grad_enabled():  # a traced pull: these rows' gradients go back to their owners
                    counter.embed_grad_bytes += nbytes
            elif str(name).endswith(("feat", "features")):
                counter.feature_bytes += nbytes
            else:
                counter.other_pull_bytes += nbytes
            counter.fetch_s += time.perf_counter() - t
            return out

        def counted_ser(serializable):
            data, tensors = ser(serializable)
            counter.rpc_sent += len(data) + sum(t.numel() * t.element_size() for t in tensors)
            return data, tensors

        def counted_deser(c, data, tensors):
            counter.rpc_recv += len(data) + sum(t.numel() * t.element_size() for t in tensors)
            return deser(c, data, tensors)

        rpc.fast_pull = counted_fast_pull
        rpc.serialize_to_payload = counted_ser
        rpc.deserialize_from_payload = counted_deser
        cls._installed = counter
        return counter


class TrainerMeter:
    """Everything a DistDGL trainer script needs besides training itself.

    Per epoch: training time by the same meter as Grappa's trainer
    (:class:`dgl_grappa.runtime.meter.EpochMeter`: from a barrier at the start to the end of the
    slowest rank's last step), where it went (the phases of :data:`dgl_grappa.runtime.metrics.PHASES`:
    ``sample`` = the loader's ``next()``, ``gather`` = from there to the model's forward, i.e.
    the script's ``g.ndata["feat"][input_nodes]`` KVStore pull, ``forward``, ``backward`` =
    from the end of the forward to ``optimizer.step()``, i.e. loss, zero_grad and backward
    with DDP's all-reduce inside, ``optimizer``; found by forward hooks on ``model`` and step
    hooks on ``optimizer`` when given, and counted as ``other`` otherwise), the gradient, feature and RPC bytes
    of this rank, and on rank 0 the loopback bytes of the whole job (read before the
    starting barrier and after every rank has finished, evaluation excluded). Rank 0 also
    evaluates the model on the whole graph (:class:`dgl_grappa.runtime.evaluation.GlobalEvaluator`,
    timed apart) and writes ``metrics.jsonl`` and ``summary.json``.

    Args:
        cfg: the Config (model, train, data, grappa sections).
        g: the DistGraph.
        out_dir: output folder (rank 0 writes there).
        correction: the Grappa correction whose hook counts gradient bytes, or None for
            plain DDP (then bytes = steps x parameter bytes, which is what DDP all-reduces).
        system: "distdgl" or "distdgl-grappa" (the summary's ``system``).
        mode: what the script trains ("minibatch"), for the summary.
        halo: where the neighbours of a batch come from, for the summary: "remote"
            (DistDGL pulls them from their owners) or the drop-in loader's ``halo``.
        model, optimizer: the script's DDP model and optimizer, to time the forward pass and
            the optimizer step (hooks that only read the clock); optional.
        held: node tables the trainer holds itself besides its machine's KVStore shard (the
            drop-in's aggregates and kept halo rows), anything with ``nbytes``; counted in its memory.
        one_time_bytes: what the trainer read once before training (the drop-in's halo rows).

    Example (the loop of :mod:`dgl_grappa.distdgl.train`):
        >>> for epoch in range(cfg.train.epochs):                      # doctest: +SKIP
        ...     for input_nodes, seeds, blocks in meter.epoch(loader, epoch):
        ...         ...; meter.step(loss)
        ...     meter.end_epoch(epoch, model.module)
        >>> meter.finish(model.module)                                 # doctest: +SKIP
    """

    def __init__(
        self,
        cfg,
        g,
        out_dir: str | Path,
        correction=None,
        system: str = "distdgl",
        *,
        mode: str = "minibatch",
        halo: str = "remote",
        model=None,
        optimizer=None,
        held=None,
        one_time_bytes: int = 0,
    ):
        self.cfg, self.g, self.out = cfg, g, Path(out_dir)
        self.correction = correction
        self.system, self.mode, self.halo = system, mode, halo
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.traffic = TrafficCounter.install().view()
        self._cur: dict = {}
        self._losses: list[float] = []
        self.kind = resolve(cfg)
        self.evaluator = GlobalEvaluator(cfg, self.rank == 0, self.kind.scorer(cfg))
        # Across hosts (DGL_GRAPPA_WIRE=nic) its host's interface bytes are read by the host's local rank 0.
        who = worker_identity(os.environ)
        self.epoch_meter = EpochMeter(self.rank == 0, who.host_index, who.local_rank, self.out, cfg.run.tensorboard)
        # what this machine holds: its KVStore shard, its partition and (the drop-in) the loader's own tables
        self.epoch_meter.holding(**self.kind.machine_holding(cfg, g, held))
        self.one_time_bytes = int(one_time_bytes)
        self.held = held  # the drop-in's loader (link prediction: its usable-edge counts)
        # Clock marks of the current step, set by hooks: forward start/end, optimizer start/end.
        self._marks = [0.0, 0.0, 0.0, 0.0]
        self._times = None
        if model is not None:
            model.register_forward_pre_hook(lambda *a: self._mark(0))
            model.register_forward_hook(lambda *a: self._mark(1))
        if optimizer is not None:
            optimizer.register_step_pre_hook(lambda *a: self._mark(2))
            optimizer.register_step_post_hook(lambda *a: self._mark(3))

    def _mark(self, i: int) -> None:
        self._marks[i] = time.perf_counter()

    def _close_step(self, fetched: float) -> None:
        """Phases of the step whose batch was handed over at ``fetched`` (marks from the hooks)."""
        f0, f1, o0, o1 = self._marks
        t = self._times
        if fetched < f0 <= f1:
            t.add("gather", f0 - fetched)
            t.add("forward", f1 - f0)
            if f1 <= o0 <= o1:
                t.add("backward", o0 - f1)
                t.add("optimizer", o1 - o0)
        self._marks = [0.0, 0.0, 0.0, 0.0]

    @property
    def records(self) -> list[dict]:
        """This job's epoch records so far (with those taken over by :meth:`preload`)."""
        return self.epoch_meter.records

    def preload(self, records: list[dict]) -> None:
        """Take the records of epochs trained before a restart (from a checkpoint) as this job's own."""
        self.epoch_meter.preload(records)

    def epoch(self, loader, epoch: int, cap: int = 0):
        """Iterate over ``loader`` for one epoch, measuring it (a generator of its batches).

        ``train.steps_per_epoch`` caps the epoch at its first ``cap`` batches, as in the native
        trainer (the loaders shuffle per epoch, so successive epochs see different seeds);
        ``cap`` caps it too (the smaller of the two).
        """
        cap = min(c for c in (self.cfg.train.steps_per_epoch, cap, 1 << 62) if c > 0)
        self._times = times = self.epoch_meter.start()  # the barrier
        self.traffic.take()  # drop whatever happened between epochs
        if self.correction is not None:
            self.correction.take_bytes()
        self._losses = []
        steps = 0
        self.epoch_started = time.time()  # wall clock (restart accounting across processes)
        it = iter(loader)
        while not (cap and steps >= cap):
            ts = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            fetched = time.perf_counter()
            times.add("sample", fetched - ts)
            steps += 1
            yield batch
            self._close_step(fetched)
        t = self.epoch_meter.stop()
        traffic = self.traffic.take()
        self._cur = {"epoch": epoch, "worker_epoch_time_s": t, "steps": steps, **traffic}

    def step(self, loss) -> None:
        """Record one step's loss (optional)."""
        self._losses.append(float(loss))

    def end_epoch(self, epoch: int, model, inputs=None, embed_bytes: int = 0) -> dict:
        """Close the epoch: wire bytes, gathered counts, evaluation when due. Returns the record.

        ``inputs``: with learnable embeddings, the evaluation's input rows (see
        :meth:`GlobalEvaluator.after_epoch <dgl_grappa.runtime.evaluation.GlobalEvaluator.after_epoch>`).
        ``embed_bytes``: this trainer's bytes of learnable rows received outside the KVStore (the drop-in's sync).
        """
        cur = self._cur
        cur["embed_bytes"] += int(embed_bytes)
        cur["grad_bytes"] = (
            self.correction.take_bytes() if self.correction is not None else cur["steps"] * gradient_bytes(model)
        )
        cur["loss"] = sum(self._losses) / len(self._losses) if self._losses else float("nan")
        # Also the point where every rank has finished its steps (uneven ones included).
        rec = dict(cur, **self.epoch_meter.end())
        everyone = all_workers(cur)
        for k in (
            "feature_bytes",
            "other_pull_bytes",
            "rpc_bytes",
            "remote_rows",
            "pull_rows",
            "grad_bytes",
            "embed_bytes",
        ):
            rec[f"{k}_all"] = sum(w[k] for w in everyone)
        rec["app_bytes"] = (
            rec["feature_bytes_all"]
            + rec["other_pull_bytes_all"]
            + rec["rpc_bytes_all"]
            + rec["embed_bytes_all"]
            + ring_allreduce_wire_bytes([w["grad_bytes"] for w in everyone])
        )
        rec.update(self.evaluator.after_epoch(model, epoch, inputs))
        self.epoch_meter.record(rec)
        if self.rank == 0:
            figures = self.kind.metric.line(rec, sep=" ", context=self.kind.run_summary(self.cfg, None))
            acc = f" {figures}" if figures else ""
            emb = f", embedding rows {format_bytes(rec['embed_bytes_all'])}" if self.cfg.model.embed else ""
            print(
                f"epoch {epoch}: {rec['epoch_time_s']:.2f} s, loss {rec['loss']:.3f}, remote features "
                f"{format_bytes(rec['feature_bytes_all'])}{emb}, wire {format_bytes(rec['wire_bytes'])}{acc}",
                flush=True,
            )
        return rec

    def finish(self, model, extra: dict | None = None) -> dict | None:
        """Write summary.json (rank 0, with ``extra`` merged in) and return it; None on other ranks."""
        recs = self.records
        # Which DGL machine this trainer is, and whether the one-host override chose it.
        mine = {
            "rank": self.rank,
            "machine_id": rpc.get_machine_id(),
            "hostname": os.uname().nodename,
            "machine_id_override": os.environ.get(ENV_MACHINE_ID),
            **self.epoch_meter.worker_figures(),
            "rpc_bytes_per_epoch": median([r["rpc_bytes"] for r in recs]),
            "remote_rows_total": sum(r["remote_rows"] for r in recs),
            "pull_rows_total": sum(r["pull_rows"] for r in recs),
            "embed_bytes_per_epoch": median([r.get("embed_bytes", 0) for r in recs]),
            "steps_per_epoch": median([r["steps"] for r in recs]),
            "one_time_bytes": self.one_time_bytes,
            "link_edges": getattr(self.held, "edges", None),
        }
        per_worker = all_workers(mine)
        if self.rank != 0:
            return None
        c = self.cfg
        own = {
            "rpc_bytes_per_epoch": max(w["rpc_bytes_per_epoch"] for w in per_worker),
            "remote_rows_total": sum(w["remote_rows_total"] for w in per_worker),
            "pull_rows_total": sum(w["pull_rows_total"] for w in per_worker),
            "embed": c.model.embed,
            # learnable rows pulled and their gradients sent back, per epoch, all workers (model.embed)
            "embed_bytes_per_epoch": sum(w["embed_bytes_per_epoch"] for w in per_worker),
            "app_bytes_per_epoch": wire_per_epoch(recs, "app_bytes"),
            "one_time_bytes_total": sum(w["one_time_bytes"] for w in per_worker),
            "one_time_bytes_per_epoch": sum(w["one_time_bytes"] for w in per_worker) / max(len(recs), 1),
            "network_bandwidth": c.network.bandwidth or None,
            **(extra or {}),
        }
        own.update(self.kind.run_summary(c, per_worker))
        summary = run_summary(
            c,
            recs,
            per_worker,
            system=self.system,
            num_parts=self.world,
            mode=self.mode,
            halo=self.halo,
            correction=c.grappa.correction if self.correction is not None else "none (DDP)",
            steps_per_epoch=max(w["steps_per_epoch"] for w in per_worker),
            model_grad_bytes=gradient_bytes(model),
            own=own,
            metric=self.kind.metric,
        )
        write_json(self.out / "summary.json", summary)
        self.epoch_meter.close()
        return summary
