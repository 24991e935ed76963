"""Distributed node classification on DistDGL, with a drop-in ``--grappa`` flag: the DistDGL trainer.

Run as ``python -m dgl_grappa.distdgl.train`` (it ships inside the package, so an installed
dgl_grappa runs the baseline too; ``scripts/distdgl_train.py`` is a thin entry for users
who copy a script).

The flow is the one of DGL's distributed GraphSAGE example: initialize -> process group
-> DistGraph -> node_split -> DistNodeDataLoader -> DDP, features pulled through the
KVStore (``g.ndata["feat"][input_nodes]``). ``--grappa`` changes two things:

1. the loader: ``dgl_grappa.method.dropin.GrappaLoader`` samples only inside this machine's
   partition, so every feature row the loop asks for is local (no remote pull);
2. the DDP model gets Grappa's coverage-corrected communication hook.

(with first-hop completion, ``train.first_hop=exact``, the loop also reads the partition's
precomputed first-hop aggregates and in-degrees of the input nodes, all local, and passes
them to the model), and, because the loader gives every trainer the same number of steps, the loop runs
without ``model.join()`` (a joined rank would run the hook on zero buckets with stale
state); the step count is checked instead. Everything else (model, optimizer, loss) is
untouched. The reducer's settings come from the config's ``grappa`` section and can be
overridden on the command line, e.g. ``--grappa --grappa.correction=shrinkage --grappa.lam=0.3``.

Link prediction (``train.task: link``) follows DGL's ``train_dist_unsupervised.py``: every edge of
the (training) graph split evenly over the trainers (``edge_split``), ``DistEdgeDataLoader`` with a
negative sampler (DGL's ``Uniform(k)`` over every node, or in-degree^0.75 over every node), the
model's output rows scored by dot products, binary cross-entropy
(:func:`dgl_grappa.method.link.link_loss`). Under ``--grappa`` the loader is
``GrappaEdgeLoader``: this machine's positive edges, negatives from the nodes it holds.

Learnable node embeddings (``model.embed``, a graph without features) follow DGL's
``train_dist_transductive.py``: a ``DistEmbedding`` over every node in the KVStore, ``x =
emb(input_nodes)`` (a pull), ``dgl.distributed.optim.SparseAdam`` stepped after the backward
pass (every pulled row's gradient goes back to its owner), the dense weights through DDP
(:mod:`dgl_grappa.distdgl.embedding`). Under ``--grappa`` the DistEmbedding becomes
``loader.embedding(dim)``: this machine's rows, updated locally (PyTorch's SparseAdam), with the
halo's frozen initial rows; no row or gradient of the embedding crosses the network.

The trainer is started by the launcher (a server and a trainer per partition), which adds
``--ip_config``, ``--part_config`` and ``--out_dir``:

    python -m dgl_grappa.distdgl --config configs/default.yaml            # DistDGL
    python -m dgl_grappa.distdgl --config configs/default.yaml --grappa   # drop-in Grappa

Checkpoints and restarts: with ``--checkpoint_dir DIR`` rank 0 writes a checkpoint
(:mod:`dgl_grappa.runtime.checkpoint`: atomic, loaded with ``weights_only=True``; model, optimizer,
next epoch, every rank's RNG states and records) every ``checkpoint.every`` epochs and after
the job's last epoch; ``--resume PATH`` makes every rank load it before training. The
launcher uses both to restart a job whose trainer died (``launch.max_restarts``) and, with
repartitioning (``schedule.k > 0``: DGL servers cannot reload partitions), to run one job
per partitioning with ``--start_epoch/--stop_epoch`` (epochs [start, stop)). With either
flag, summary.json gets a ``restart`` entry: wall-clock marks of the start-up phases,
checkpoint save/load seconds and parameter checksums at save and after load. What a resume
reproduces: model, optimizer and the trainers' RNG streams (shuffling, dropout); not the
servers' sampling RNG, so a resumed DistDGL run is another sample of the same training,
not a bitwise copy.

A heterogeneous graph (``data.name: hetsynth``, ``model.name: rgcn``) follows DGL's
``examples/pytorch/rgcn/experimental/entity_classify_dist.py``: ``node_split`` of the target
type's training nodes, ``DistNodeDataLoader(g, {target: train_nid}, sampler)``, every input row
pulled per node type (features through the KVStore, a ``DistEmbedding`` per featureless type with
DGL's distributed ``SparseAdam``), the package's RGCN (:mod:`dgl_grappa.distdgl.hetero`).

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
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

# Importing the package dgl_grappa.distdgl (done before this module runs) gave this trainer
# its machine id on a one-host cluster; a copied script must import it before DGL starts.
import dgl_grappa.distdgl as gd
from dgl_grappa.cluster import faults
from dgl_grappa.cluster.hosts import worker_identity
from dgl_grappa.cluster.launch import backend_for, select_device
from dgl_grappa.cluster.procs import process_start_time
from dgl_grappa.config import load_config
from dgl_grappa.distdgl import embedding as ge
from dgl_grappa.distdgl import hetero as gh
from dgl_grappa.method.dropin import GrappaEdgeLoader, GrappaHeteroLoader, GrappaLoader
from dgl_grappa.method.link import LocalNegativeSampler, link_loss
from dgl_grappa.method.local_part import first_hop_table
from dgl_grappa.method.models import build_model
from dgl_grappa.method.rgcn import build_rgcn
from dgl_grappa.method.reducers import make_correction
from dgl_grappa.partition.layout import GRAPH_NAME
from dgl_grappa.runtime.checkpoint import checkpoint_due


def param_checksum(model):
    """Sum of all parameters (float64): equal on both sides of a checkpoint round trip."""
    return float(sum(p.detach().double().sum() for p in model.state_dict().values() if p.is_floating_point()))


def save_checkpoint(store, cfg, model, optimizer, next_epoch, records, meter, shard=None):
    """Rank 0 writes model, optimizer, next epoch, every rank's RNG states, records and ``shard``
    (``model.embed``: its machine's embedding rows and sparse optimizer state) (a collective).

    The others wait for the outcome on the evaluation group (bounded by run.eval_timeout_s);
    a write that fails (disk full, ...) raises CheckpointError on every rank
    (:func:`dgl_grappa.runtime.agreement.save_on_rank0`, the protocol of Grappa's trainer).
    """
    from dgl_grappa.partition.schedule import partitioning_index
    from dgl_grappa.runtime.agreement import save_on_rank0
    from dgl_grappa.runtime.checkpoint import fingerprint

    def state(ranks):
        return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "ranks": ranks,
                "records": records, "checksum": param_checksum(model),
                "schedule": {"k": cfg.schedule.k, "next": partitioning_index(next_epoch, cfg.schedule.k)}}

    return save_on_rank0(store, state, records, next_epoch, fingerprint(cfg), sum(r.get("steps", 0) for r in records),
                         meter.evaluator.wait_for_rank0, shard=shard)


def load_checkpoint(path, cfg, model, optimizer):
    """Every rank loads the same file (identical model and optimizer) and its own RNG states; never runs code from it.

    A rank that cannot read the file gets its bytes from rank 0
    (:func:`dgl_grappa.runtime.agreement.load_everywhere`, a collective).
    """
    from dgl_grappa.runtime.agreement import load_everywhere
    from dgl_grappa.runtime.checkpoint import fingerprint, set_rng_state

    ck = load_everywhere(path, fingerprint(cfg))
    model.load_state_dict(ck["model"])
    optimizer.load_state_dict(ck["optimizer"])
    ranks = ck["ranks"]
    mine = ranks[min(th.distributed.get_rank(), len(ranks) - 1)]
    set_rng_state(mine["rng"])
    ck["my_records"] = list(mine["records"])
    ck["my_shard"] = mine.get("shard") or {}
    return ck


def _embedding_shard(g, emb, emb_optimizer, args) -> dict:
    """This trainer's embedding rows and sparse optimizer state, for its checkpoint shard."""
    if isinstance(emb, dict):  # a heterogeneous graph: a DistEmbedding per featureless type
        return {"embedding": gh.shard_state(g, emb, emb_optimizer)}
    if args.grappa:
        return {"embedding": emb.shard_state(emb_optimizer)}
    return {"embedding": ge.shard_state(g, emb, emb_optimizer)}


def _load_embedding(g, emb, emb_optimizer, ck, args) -> None:
    """Restore this trainer's embedding shard from checkpoint ``ck`` (a collective for the DistEmbedding)."""
    from dgl_grappa.runtime.checkpoint import CheckpointError

    state = ck["my_shard"].get("embedding")
    if state is None:
        raise CheckpointError(f"checkpoint {args.resume} holds no embedding rows for this trainer; resume from a "
                              "checkpoint of this run, or start afresh")
    if isinstance(emb, dict):
        gh.load_shard(g, emb, emb_optimizer, state)
    elif args.grappa:
        emb.load_shard(state, emb_optimizer)
    else:
        ge.load_shard(g, emb, emb_optimizer, state)


def _common_steps(mine: int, cfg) -> int:
    """The steps every trainer takes per epoch with a DistEmbedding: the fewest of any trainer (one all-reduce).

    DGL's sparse optimizer exchanges gradients with every trainer at every step, and
    ``model.join()`` cannot stand in for a finished trainer there: a trainer with one batch
    more (``node_split`` evens the seeds, not always the batches) would wait for ever, so it
    leaves that last batch out.
    """
    from dgl_grappa.config import ConfigError

    n = th.tensor([-mine, mine], dtype=th.int64)
    th.distributed.all_reduce(n, op=th.distributed.ReduceOp.MAX)
    common, most = -int(n[0]), int(n[1])
    if common < most and cfg.distdgl.num_samplers:  # on every trainer: they stop on the same error
        raise ConfigError(f"model.embed=true: the trainers' loaders have {common} to {most} batches per epoch and "
                          "DGL's sparse optimizer needs every trainer at every step, so some would stop early, which "
                          "sampler processes do not allow; set --distdgl.num_samplers=0")
    if common < mine:
        print(f"trainer {th.distributed.get_rank()}: {mine} batches per epoch, the fewest of any trainer "
              f"is {common}: DGL's sparse optimizer steps with every trainer, so it takes {common}", flush=True)
    return common


def _eval_inputs(g, emb, args):
    """The evaluation's input rows (every node's, rank 0, the graph's node order): a callable for the meter."""
    if isinstance(emb, dict):  # a heterogeneous graph: every featureless type's rows, pulled
        return lambda: gh.eval_rows(g, emb, args.part_config)
    if args.grappa and hasattr(emb, "gather_rows"):  # the heterogeneous drop-in: every trainer's own rows per type
        return lambda: emb.gather_rows(args.part_config)
    if args.grappa:  # every trainer's own rows, gathered to rank 0
        from dgl_grappa.method.embedding import gather_rows
        from dgl_grappa.partition.layout import to_original_order

        def rows():
            table = gather_rows(emb.global_ids[: emb.num_inner], emb.own.weight)
            return to_original_order(table, args.part_config) if table is not None else None
        return rows
    return lambda: ge.eval_rows(g, emb, args.part_config)


def _global_negatives(g, cfg):
    """The baseline's negative sampler and what it read once: DGL's uniform draw over every node (the
    example's), or in proportion to in-degree^0.75 over every node (every node's in-degree pulled once)."""
    k = cfg.link.negatives
    if cfg.link.negative_dist == "uniform":
        return dgl.dataloading.negative_sampler.Uniform(k), 0
    n = g.num_nodes()
    every = th.arange(n)
    degree = g.ndata["in_degree"][every]
    pb = g.get_partition_book()
    remote = int((pb.nid2partid(every) != pb.partid).sum())
    sampler = LocalNegativeSampler(k, "degree", degree, seed=cfg.train.seed * 1000 + th.distributed.get_rank())
    return sampler, remote * (8 + 8)  # a row and its id per remote in-degree


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
    parser.add_argument("--checkpoint_dir", default=None,
                        help="rank 0 writes checkpoints here every checkpoint.every epochs and after the last one")
    parser.add_argument("--resume", default=None, help="load this checkpoint before training")
    parser.add_argument("--segment_start", type=int, default=None,
                        help="first epoch this job's metrics and summary cover (default: --start_epoch); a job "
                             "resumed inside its segment takes the records since then from the checkpoint")
    args, overrides = parser.parse_known_args()
    # Restart accounting (wall clock): the process start includes the interpreter and every import.
    restart = {"process_start": process_start_time(), "imports_done": time.time()}
    cfg = load_config(args.config, overrides)  # e.g. --grappa.correction=shrinkage
    th.manual_seed(cfg.train.seed)
    th.set_num_threads(1)

    # run.device=cuda: the GPU of LOCAL_RANK; NCCL for the gradient all-reduce, gloo for the rest.
    device = select_device(cfg.run.device, worker_identity(os.environ).local_rank)
    dgl.distributed.initialize(args.ip_config)
    th.distributed.init_process_group(backend=backend_for(cfg.run.device),
                                      timeout=datetime.timedelta(seconds=cfg.run.collective_timeout_s))
    restart["connected"] = time.time()
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    restart["graph_ready"] = time.time()

    sampler = dgl.dataloading.NeighborSampler(cfg.train.fanouts)
    correction = None
    exact = False
    embed = cfg.model.embed  # learnable input rows instead of features (cfg.first_hop is then sampled)
    link = cfg.train.task == "link"  # link prediction (train_dist_unsupervised.py): edges, negatives, dot products
    hetero = cfg.hetero  # a heterogeneous graph (entity_classify_dist.py): RGCN, seeds of the target type
    target = gh.target_of(g, cfg) if hetero else None
    if hetero:
        embed = any("feat" not in g.nodes[t].data for t in g.ntypes)  # learnable rows for the featureless types
    read_once = 0  # what the baseline reads before training (degree-weighted negatives: every in-degree)
    if args.grappa and hetero:
        # Grappa: this machine's own training nodes of the target type, sampled inside its local heterograph
        correction = make_correction(cfg.grappa.correction, cfg.grappa.lam, cfg.grappa.shrink_target)
        loader = GrappaHeteroLoader(g, sampler, cfg.train.batch_size, correction, target=target, halo=cfg.train.halo,
                                    seed=cfg.train.seed)
        if cfg.first_hop == "exact" and th.distributed.get_rank() == 0:
            print("the drop-in samples the first hop of every relation (the per-relation first-hop aggregates of "
                  "train.first_hop=exact are the native runtime's)", flush=True)
    elif args.grappa:
        # Grappa change 1 of 2: sample only inside this machine's partition (and, with
        # first-hop completion, only layers 1..L-1: layer 0 reads the precomputed aggregates).
        correction = make_correction(cfg.grappa.correction, cfg.grappa.lam, cfg.grappa.shrink_target)
        exact = cfg.first_hop == "exact"
        kw = dict(hops=cfg.hops, w_min=cfg.grappa.w_min, self_loops=cfg.grappa.self_loops, seed=cfg.train.seed,
                  halo=cfg.train.halo, first_hop=cfg.first_hop, part_config=args.part_config,
                  memory_budget=cfg.train.memory_budget, storage=cfg.train.storage,
                  aggregate="gcn" if first_hop_table(cfg.model) == "gcn" else "mean",
                  feat_key=None if embed else "feat")
        if link:  # this machine's positive edges; negatives from the nodes it holds
            negatives = LocalNegativeSampler(cfg.link.negatives, cfg.link.negative_dist)
            loader = GrappaEdgeLoader(g, sampler, cfg.train.batch_size, correction, negative_sampler=negatives, **kw)
        else:
            loader = GrappaLoader(g, sampler, cfg.train.batch_size, correction, **kw)
    elif link:
        # DGL's example: every edge, split evenly over the trainers; negatives from every node
        train_eids = dgl.distributed.edge_split(th.ones((g.num_edges(),), dtype=th.bool), g.get_partition_book(),
                                                force_even=True)
        negatives, read_once = _global_negatives(g, cfg)
        loader = dgl.dataloading.DistEdgeDataLoader(g, train_eids, sampler, negative_sampler=negatives,
                                                    batch_size=cfg.train.batch_size, shuffle=True, drop_last=False)
    elif hetero:
        # DGL's RGCN example: this trainer's share of the target type's training nodes, sampled over every relation
        train_nid = dgl.distributed.node_split(g.nodes[target].data["train_mask"], g.get_partition_book(),
                                               ntype=target, force_even=True)
        loader = dgl.dataloading.DistNodeDataLoader(g, {target: train_nid}, sampler, batch_size=cfg.train.batch_size,
                                                    shuffle=True, drop_last=False)
    else:
        train_nid = dgl.distributed.node_split(g.ndata["train_mask"], g.get_partition_book(), force_even=True)
        loader = dgl.dataloading.DistNodeDataLoader(g, train_nid, sampler, batch_size=cfg.train.batch_size,
                                                    shuffle=True, drop_last=False)

    if hetero:  # the package's RGCN: a GraphConv per relation, summed (the example's RelGraphConvLayer)
        model = build_rgcn(cfg.model, gh.input_dims(g, cfg.model.embed_dim), gh.num_classes(g, target),
                           g.canonical_etypes, target).to(device)
        model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    else:
        in_dim = cfg.model.embed_dim if embed else g.ndata["feat"].shape[1]
        out_dim = cfg.model.hidden if link else gd.num_classes(g)  # link: the encoder's rows, scored by dot products
        model = build_model(cfg.model, in_dim, out_dim).to(device)
        model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    emb = emb_optimizer = None
    if hetero and embed and args.grappa:
        # Grappa: the featureless types' own rows (and the halo's frozen ones), trained here: replaces the DistEmbeddings
        emb = loader.embedding(cfg.model.embed_dim, seed=cfg.train.seed)
        emb_optimizer = emb.optimizer(cfg.model.embed_lr)
    elif hetero and embed:
        # DGL's RGCN example (--dgl-sparse): a DistEmbedding per featureless type and DGL's distributed SparseAdam
        emb = gh.dist_embeddings(g, cfg.model.embed_dim, seed=cfg.train.seed)
        emb_optimizer = dgl.distributed.optim.SparseAdam(list(emb.values()), lr=cfg.model.embed_lr)
    elif embed and args.grappa:
        # Grappa: this machine's rows (and the halo's frozen ones), trained here: replaces the DistEmbedding.
        emb = loader.embedding(cfg.model.embed_dim, seed=cfg.train.seed)
        emb_optimizer = emb.optimizer(cfg.model.embed_lr)
    elif embed:
        # DGL's example: a DistEmbedding in the KVStore and DGL's distributed sparse optimizer.
        emb = ge.dist_embedding(g, cfg.model.embed_dim, seed=cfg.train.seed)
        emb_optimizer = dgl.distributed.optim.SparseAdam([emb], lr=cfg.model.embed_lr)
    if args.grappa:
        # Grappa change 2 of 2: coverage-corrected gradient aggregation in DDP's all-reduce.
        correction.register(model, cfg.grappa.grad_dtype)
    opt_cls = th.optim.Adam if cfg.train.optimizer == "adam" else th.optim.SGD
    optimizer = opt_cls(model.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)

    stop = cfg.train.epochs if args.stop_epoch is None else min(args.stop_epoch, cfg.train.epochs)
    seg_start = args.start_epoch if args.segment_start is None else args.segment_start
    prior = []  # this rank's records before this job's segment (from a checkpoint)
    meter = gd.TrainerMeter(cfg, g, args.out_dir, correction, "distdgl-grappa" if args.grappa else "distdgl",
                            mode="minibatch", halo=getattr(loader, "halo", "remote"), model=model,
                            optimizer=optimizer, held=loader if args.grappa else None,
                            one_time_bytes=getattr(loader, "one_time_bytes", read_once))
    if args.resume:
        t = time.perf_counter()
        ck = load_checkpoint(args.resume, cfg, model.module, optimizer)
        if embed:
            _load_embedding(g, emb, emb_optimizer, ck, args)
        restart.update(load_s=time.perf_counter() - t, checksum_checkpoint=ck["checksum"],
                       checksum_loaded=param_checksum(model.module), resumed_epoch=ck["epoch"], resumed_from=args.resume)
        if ck["epoch"] != args.start_epoch:
            raise SystemExit(f"checkpoint {args.resume} is at epoch {ck['epoch']}, not --start_epoch={args.start_epoch}")
        prior = [r for r in ck["my_records"] if r["epoch"] < seg_start]
        meter.preload([r for r in ck["my_records"] if seg_start <= r["epoch"] < ck["epoch"]])
        k = cfg.schedule.k
        if k > 0 and args.start_epoch > 0 and args.start_epoch % k == 0:
            # tests: a trainer dies in the middle of a repartition switch (the restarted segment's start)
            faults.hit("switch", rank=th.distributed.get_rank(), epoch=args.start_epoch)
    common = 0
    if embed and not args.grappa:
        common = _common_steps(-(-len(train_nid) // cfg.train.batch_size), cfg)  # its batches (no drop_last)
    store = None
    if args.checkpoint_dir:
        from dgl_grappa.runtime.checkpoint import CheckpointStore

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
            for batch in meter.epoch(loader, epoch, cap=common):
                faults.hit("step", rank=th.distributed.get_rank(), epoch=epoch, step=steps)  # tests: a trainer dies
                if link:
                    input_nodes, pair_graph, neg_pair_graph, blocks = batch
                else:
                    input_nodes, seeds, blocks = batch
                if hetero:  # per node type: DistDGL pulls features and DistEmbedding rows; Grappa reads local memory
                    seeds = seeds[target]
                    x = ({**loader.features(input_nodes), **(emb(input_nodes) if emb is not None else {})}
                         if args.grappa else gh.batch_inputs(g, input_nodes, emb or {}))
                    x = {t: v.to(device) for t, v in x.items()}
                # Grappa: every input row from this machine's memory (own rows, the kept halo's)
                elif embed:
                    x = emb(input_nodes).to(device)  # DistDGL: a KVStore pull; Grappa: local rows
                else:
                    x = (loader.features(input_nodes) if args.grappa else g.ndata["feat"][input_nodes]).to(device)
                if not link:
                    y = (g.nodes[target].data["label"] if hetero else g.ndata["label"])[seeds].long().to(device)
                if device.type != "cpu":
                    blocks = [b.to(device) for b in blocks]
                if args.grappa and not hetero:
                    # Grappa: full-graph in-degrees (GraphSAGE's empty-neighbourhood rule) and, with
                    # first-hop completion, the precomputed aggregates; every row is local.
                    extra = {"deg": loader.degrees(input_nodes).to(device)}
                    if exact:
                        extra["agg"] = loader.aggregates(input_nodes).to(device)
                    out = model(blocks, x, **extra)
                else:
                    out = model(blocks, x)
                if link:  # the example's CrossEntropyLoss: dot-product scores, positives 1, negatives 0
                    loss = link_loss(out, pair_graph.to(device), neg_pair_graph.to(device))
                else:
                    loss = F.cross_entropy(out, y)
                if emb_optimizer is not None:
                    emb_optimizer.zero_grad()
                optimizer.zero_grad()
                loss.backward()
                if emb_optimizer is not None:
                    emb_optimizer.step()  # DistDGL: the rows' gradients go to their owners; Grappa: local
                optimizer.step()
                meter.step(loss)
                steps += 1
        if args.grappa:
            cap = cfg.train.steps_per_epoch
            want = min(len(loader), cap) if cap else len(loader)
            if steps != want:
                raise RuntimeError(f"epoch {epoch}: {steps} steps, but every trainer must take {want}")
        meter.end_epoch(epoch, model.module, _eval_inputs(g, emb, args) if embed else None)
        restart.setdefault("first_epoch_start", meter.epoch_started)
        restart["last_epoch_end"] = time.time()
        if store is not None and checkpoint_due(cfg, epoch, last=stop):
            t = time.perf_counter()
            shard = _embedding_shard(g, emb, emb_optimizer, args) if embed else None
            save_checkpoint(store, cfg, model.module, optimizer, epoch + 1, prior + meter.records, meter, shard)
            restart.update(save_s=time.perf_counter() - t, checksum_saved=param_checksum(model.module))
    if store is not None and args.start_epoch >= stop:  # nothing left to train: the checkpoint stands as it is
        restart.update(save_s=0.0, checksum_saved=param_checksum(model.module))
    restart.setdefault("first_epoch_start", restart["init_done"])
    restart.setdefault("last_epoch_end", time.time())
    meter.finish(model.module, extra={"restart": restart} if (args.resume or store is not None) else None)


def main():
    """Run the trainer; a user error (e.g. a checkpoint that cannot be written) is one line and EXIT_USER_ERROR."""
    from dgl_grappa.cluster.procs import EXIT_USER_ERROR
    from dgl_grappa.config import ConfigError

    try:
        train()
    except ConfigError as exc:
        print(f"dgl_grappa.distdgl.train: error: {exc}", flush=True)
        os._exit(EXIT_USER_ERROR)  # no atexit client barrier: the other trainers stop on the same error


if __name__ == "__main__":
    main()
