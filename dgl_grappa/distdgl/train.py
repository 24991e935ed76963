"""The DistDGL trainer: DGL's distributed example flow for every kind of job, with a drop-in ``--grappa`` flag.

Run as ``python -m dgl_grappa.distdgl.train`` (it ships inside the package, so an installed
dgl_grappa runs the baseline too; ``scripts/distdgl_train.py`` is a thin entry for users
who copy a script).

The flow is the one of DGL's distributed examples: initialize -> process group -> DistGraph ->
the kind's loader -> DDP, input rows pulled through the KVStore. What differs between the kinds of
job is the kind's :class:`~dgl_grappa.kinds.DistJob` (:mod:`dgl_grappa.kinds`): node classification
follows DGL's ``train_dist.py`` (``node_split``, ``DistNodeDataLoader``), link prediction its
``train_dist_unsupervised.py`` (``edge_split``, ``DistEdgeDataLoader`` with negatives from every node,
dot-product scores), a heterogeneous graph its RGCN example (``entity_classify_dist.py``: seeds of
the target type, inputs per node type); learnable node embeddings (``model.embed``) are a
``DistEmbedding`` in the KVStore with DGL's distributed ``SparseAdam``, as in
``train_dist_transductive.py``. ``--grappa`` changes two things:

1. the loader: the kind's drop-in loader (``GrappaLoader``, ``GrappaEdgeLoader``,
   ``GrappaHeteroLoader``) samples only inside this machine's partition, so every input row the
   loop asks for is local (no remote pull; learnable rows are this machine's own, trained here);
2. the DDP model gets Grappa's coverage-corrected communication hook.

(with first-hop completion, ``train.first_hop=exact``, the loop also reads the partition's
precomputed first-hop aggregates and in-degrees of the input nodes, all local, and passes
them to the model), and, because the loader gives every trainer the same number of steps, the loop runs
without ``model.join()`` (a joined rank would run the hook on zero buckets with stale
state); the step count is checked instead. Everything else (model, optimizer, loss) is
untouched. The reducer's settings come from the config's ``grappa`` section and can be
overridden on the command line, e.g. ``--grappa --grappa.correction=shrinkage --grappa.lam=0.3``.

The trainer is started by the launcher (a server and a trainer per partition), which adds
``--ip_config``, ``--part_config`` and ``--out_dir``:

    python -m dgl_grappa.distdgl --config configs/default.yaml            # DistDGL
    python -m dgl_grappa.distdgl --config configs/default.yaml --grappa   # drop-in Grappa

Checkpoints and restarts: with ``--checkpoint_dir DIR`` rank 0 writes a checkpoint
(:mod:`dgl_grappa.runtime.checkpoint`: atomic, loaded with ``weights_only=True``; model, optimizer,
next epoch, every rank's RNG states and records, and each trainer's learnable rows) every
``checkpoint.every`` epochs and after the job's last epoch; ``--resume PATH`` makes every rank load
it before training. The launcher uses both to restart a job whose trainer died
(``launch.max_restarts``) and, with repartitioning (``schedule.k > 0``: DGL servers cannot reload
partitions), to run one job per partitioning with ``--start_epoch/--stop_epoch`` (epochs [start,
stop)). With either flag, summary.json gets a ``restart`` entry: wall-clock marks of the start-up
phases, checkpoint save/load seconds and parameter checksums at save and after load. What a resume
reproduces: model, optimizer and the trainers' RNG streams (shuffling, dropout); not the
servers' sampling RNG, so a resumed DistDGL run is another sample of the same training,
not a bitwise copy.

``dgl_grappa.distdgl.TrainerMeter`` only measures (epoch time, bytes, wire bytes, global
evaluation on rank 0, metrics.jsonl, summary.json); drop it and the script still trains.
"""

import argparse
import contextlib
import datetime
import os
import time

import dgl
import torch as th
from torch.nn.parallel import DistributedDataParallel as DDP

from dgl_grappa.cluster import faults
from dgl_grappa.cluster.hosts import worker_identity
from dgl_grappa.cluster.launch import backend_for, gpu_place, gpus_shared, select_device
from dgl_grappa.cluster.procs import EXIT_USER_ERROR, process_start_time
from dgl_grappa.config import ConfigError, load_config

# Importing the package dgl_grappa.distdgl (done before this module runs) gave this trainer
# its machine id on a one-host cluster; a copied script must import it before DGL starts.
from dgl_grappa.distdgl import TrainerMeter
from dgl_grappa.env import ENV_MACHINE_ID
from dgl_grappa.kinds import resolve
from dgl_grappa.method.kernels import resolve_kernels
from dgl_grappa.partition.layout import GRAPH_NAME
from dgl_grappa.partition.schedule import partitioning_index
from dgl_grappa.runtime.agreement import load_everywhere, save_on_rank0
from dgl_grappa.runtime.checkpoint import (
    CheckpointStore,
    checkpoint_due,
    fingerprint,
    set_rng_state,
)


def param_checksum(model):
    """Sum of all parameters (float64): equal on both sides of a checkpoint round trip."""
    return float(sum(p.detach().double().sum() for p in model.state_dict().values() if p.is_floating_point()))


def save_trainer_checkpoint(store, cfg, model, optimizer, next_epoch, records, meter, shard=None):
    """Rank 0 writes model, optimizer, next epoch, every rank's RNG states, records and ``shard``
    (``model.embed``: its machine's embedding rows and sparse optimizer state) (a collective).

    The others wait for the outcome on the evaluation group (bounded by run.eval_timeout_s);
    a write that fails (disk full, ...) raises CheckpointError on every rank
    (:func:`dgl_grappa.runtime.agreement.save_on_rank0`, the protocol of Grappa's trainer).
    """

    def state(ranks):
        return {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "ranks": ranks,
            "records": records,
            "checksum": param_checksum(model),
            "schedule": {"k": cfg.schedule.k, "next": partitioning_index(next_epoch, cfg.schedule.k)},
        }

    return save_on_rank0(
        store,
        state,
        records,
        next_epoch,
        fingerprint(cfg),
        sum(r.get("steps", 0) for r in records),
        meter.evaluator.wait_for_rank0,
        shard=shard,
    )


def resume_trainer(path, cfg, model, optimizer):
    """Every rank loads the same file (identical model and optimizer) and its own RNG states; never runs code from it.

    A rank that cannot read the file gets its bytes from rank 0
    (:func:`dgl_grappa.runtime.agreement.load_everywhere`, a collective).
    """
    ck = load_everywhere(path, fingerprint(cfg))
    model.load_state_dict(ck["model"])
    optimizer.load_state_dict(ck["optimizer"])
    ranks = ck["ranks"]
    mine = ranks[min(th.distributed.get_rank(), len(ranks) - 1)]
    set_rng_state(mine["rng"])
    ck["my_records"] = list(mine["records"])
    ck["my_shard"] = mine.get("shard") or {}
    return ck


def train():
    parser = argparse.ArgumentParser(description="DistDGL node classification (optionally Grappa)")
    parser.add_argument("--config", required=True, help="dgl_grappa YAML: model, fan-outs, batch, optimizer")
    parser.add_argument("--graph_name", default=GRAPH_NAME, help="graph name in the partition config")
    parser.add_argument("--ip_config", required=True, help="DGL ip_config.txt (set by the launcher)")
    parser.add_argument("--part_config", required=True, help="partition json (set by the launcher)")
    parser.add_argument("--out_dir", required=True, help="metrics.jsonl and summary.json go here")
    parser.add_argument("--grappa", action="store_true", help="local-only loader + coverage-corrected hook")
    parser.add_argument("--start_epoch", type=int, default=0, help="first epoch to train")
    parser.add_argument("--stop_epoch", type=int, default=None, help="train epochs [start, stop) (default: all)")
    parser.add_argument(
        "--checkpoint_dir",
        default=None,
        help="rank 0 writes checkpoints here every checkpoint.every epochs and after the last one",
    )
    parser.add_argument("--resume", default=None, help="load this checkpoint before training")
    parser.add_argument(
        "--segment_start",
        type=int,
        default=None,
        help="first epoch this job's metrics and summary cover (default: --start_epoch); a job "
        "resumed inside its segment takes the records since then from the checkpoint",
    )
    args, overrides = parser.parse_known_args()
    # Restart accounting (wall clock): the process start includes the interpreter and every import.
    restart = {"process_start": process_start_time(), "imports_done": time.time()}
    cfg = load_config(args.config, overrides)  # e.g. --grappa.correction=shrinkage
    th.manual_seed(cfg.train.seed)
    th.set_num_threads(1)

    # run.device=cuda: the GPU of LOCAL_RANK; NCCL for the gradient all-reduce, gloo for the rest. Several
    # "machines" on one host (the machine-id override is set) are that host's workers, numbered by rank; where
    # they outnumber its GPUs they share them and gloo all-reduces (NCCL refuses two ranks on one GPU).
    # With the torch kernels (train.kernels: auto on a GPU) DGL only samples, on the CPU: no CUDA build of DGL needed.
    who = worker_identity(os.environ)
    one_host = ENV_MACHINE_ID in os.environ
    slot, sharing = (who.rank, who.world_size) if one_host else gpu_place(who, cfg.launch.remote)
    device = select_device(cfg.run.device, slot, check_dgl=resolve_kernels(cfg.train.kernels, cfg.run.device) == "dgl")
    shared = cfg.run.device == "cuda" and gpus_shared(sharing)
    dgl.distributed.initialize(args.ip_config)
    th.distributed.init_process_group(
        backend=backend_for(cfg.run.device, shared), timeout=datetime.timedelta(seconds=cfg.run.collective_timeout_s)
    )
    restart["connected"] = time.time()
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    restart["graph_ready"] = time.time()

    # What differs between the kinds of job (loader, model, inputs, loss, learnable rows): the kind's DistDGL job.
    job = resolve(cfg).dist_job(cfg, g, args.grappa, device, args.part_config)
    model = DDP(job.model.to(device), device_ids=[device.index] if device.type == "cuda" else None)
    loader, correction = job.loader, job.correction
    if args.grappa:
        # Grappa change 2 of 2: coverage-corrected gradient aggregation in DDP's all-reduce.
        correction.register(model, cfg.grappa.grad_dtype)
    opt_cls = th.optim.Adam if cfg.train.optimizer == "adam" else th.optim.SGD
    optimizer = opt_cls(model.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    emb_optimizer = job.emb_optimizer

    stop = cfg.train.epochs if args.stop_epoch is None else min(args.stop_epoch, cfg.train.epochs)
    seg_start = args.start_epoch if args.segment_start is None else args.segment_start
    prior = []  # this rank's records before this job's segment (from a checkpoint)
    meter = TrainerMeter(
        cfg,
        g,
        args.out_dir,
        correction,
        "distdgl-grappa" if args.grappa else "distdgl",
        mode="minibatch",
        halo=getattr(loader, "halo", "remote"),
        model=model,
        optimizer=optimizer,
        held=loader if args.grappa else None,
        one_time_bytes=getattr(loader, "one_time_bytes", job.read_once),
    )
    if args.resume:
        t = time.perf_counter()
        ck = resume_trainer(args.resume, cfg, model.module, optimizer)
        job.restore(ck["my_shard"].get("embedding"), args.resume)  # its learnable rows, if any
        restart.update(
            load_s=time.perf_counter() - t,
            checksum_checkpoint=ck["checksum"],
            checksum_loaded=param_checksum(model.module),
            resumed_epoch=ck["epoch"],
            resumed_from=args.resume,
        )
        if ck["epoch"] != args.start_epoch:
            raise SystemExit(
                f"checkpoint {args.resume} is at epoch {ck['epoch']}, not --start_epoch={args.start_epoch}"
            )
        prior = [r for r in ck["my_records"] if r["epoch"] < seg_start]
        meter.preload([r for r in ck["my_records"] if seg_start <= r["epoch"] < ck["epoch"]])
        k = cfg.schedule.k
        if k > 0 and args.start_epoch > 0 and args.start_epoch % k == 0:
            # tests: a trainer dies in the middle of a repartition switch (the restarted segment's start)
            faults.hit("switch", rank=th.distributed.get_rank(), epoch=args.start_epoch)
    store = None
    if args.checkpoint_dir:
        store = CheckpointStore(args.checkpoint_dir, cfg.checkpoint.keep_last)
    restart["init_done"] = time.time()
    for epoch in range(args.start_epoch, stop):
        model.train()
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)  # GrappaLoader draws its batches per epoch index (resume included)
        # DistNodeDataLoader may give one trainer one batch more: join() shadows its collectives.
        # GrappaLoader gives every trainer the same count, and under join() a finished rank
        # would run the coverage hook on zero buckets with stale state: no join, a check instead.
        steps = 0
        with contextlib.nullcontext() if args.grappa else model.join():
            for batch in meter.epoch(loader, epoch, cap=job.common_steps):
                faults.hit("step", rank=th.distributed.get_rank(), epoch=epoch, step=steps)  # tests: a trainer dies
                # DistDGL pulls the input rows through the KVStore; Grappa reads them from this machine's memory
                blocks, x, extra, target = job.step_inputs(batch)
                loss = job.loss(model(blocks, x, **extra), target)
                emb_optimizer.zero_grad()  # learnable rows' (none: a no-op)
                optimizer.zero_grad()
                loss.backward()
                emb_optimizer.step()  # DistDGL: the rows' gradients go to their owners; Grappa: local
                optimizer.step()
                meter.step(loss)
                steps += 1
        if args.grappa:
            cap = cfg.train.steps_per_epoch
            want = min(len(loader), cap) if cap else len(loader)
            if steps != want:
                raise RuntimeError(f"epoch {epoch}: {steps} steps, but every trainer must take {want}")
        meter.end_epoch(epoch, model.module, job.eval_inputs(), embed_bytes=job.take_bytes())
        restart.setdefault("first_epoch_start", meter.epoch_started)
        restart["last_epoch_end"] = time.time()
        if store is not None and checkpoint_due(cfg, epoch, last=stop):
            t = time.perf_counter()
            state = job.shard_state()
            shard = {"embedding": state} if state is not None else None
            save_trainer_checkpoint(store, cfg, model.module, optimizer, epoch + 1, prior + meter.records, meter, shard)
            restart.update(save_s=time.perf_counter() - t, checksum_saved=param_checksum(model.module))
    if store is not None and args.start_epoch >= stop:  # nothing left to train: the checkpoint stands as it is
        restart.update(save_s=0.0, checksum_saved=param_checksum(model.module))
    restart.setdefault("first_epoch_start", restart["init_done"])
    restart.setdefault("last_epoch_end", time.time())
    meter.finish(model.module, extra={"restart": restart} if (args.resume or store is not None) else None)


def main():
    """Run the trainer; a user error (e.g. a checkpoint that cannot be written) is one line and EXIT_USER_ERROR."""
    try:
        train()
    except ConfigError as exc:
        print(f"dgl_grappa.distdgl.train: error: {exc}", flush=True)
        os._exit(EXIT_USER_ERROR)  # no atexit client barrier: the other trainers stop on the same error


if __name__ == "__main__":
    main()
