"""Node classification on a heterogeneous graph (``data.name: hetsynth``, ``model.name: rgcn``).

DGL's RGCN example (``examples/pytorch/rgcn/experimental/entity_classify_dist.py``) as a kind of
job: the seeds are training nodes of the target type (``data.target``), sampled per relation; the
featured types' inputs are their features, the featureless types' learnable rows; the model is
:class:`~dgl_grappa.method.rgcn.RGCN`. A worker's part is its local heterograph
(:mod:`dgl_grappa.method.hetero`); the gradients are averaged plainly. In a DistDGL trainer:
``DistNodeDataLoader`` on the target type with a ``DistEmbedding`` per featureless type (the
baseline), or the drop-in :class:`~dgl_grappa.method.dropin.GrappaHeteroLoader`.

Example:
    >>> from dgl_grappa.kinds import kind_of
    >>> from dgl_grappa.config import load_config
    >>> kind_of(load_config(None, ["--data.name=hetsynth", "--model.name=rgcn", "--model.embed=true"])).name
    'hetero'
"""

from __future__ import annotations

import dgl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config import Config, hetero_schema, require, select_etypes
from ..method.dropin import GrappaHeteroLoader
from ..method.embedding import NoEmbedding
from ..method.hetero import HeteroEmbedding, HeteroFeatures, HeteroLocalPartition, TargetSeeds, load_local_hetero
from ..method.hetero_halo import aggregate_rows
from ..method.kernels import build_rgcn_for, place_blocks, resolve_kernels
from ..method.reducers import make_correction
from ..method.sampler import LocalBatches
from .base import Batch, DistJob, JobKind, LocalRuntime
from .embeddings import common_steps, dist_embeddings, dist_num_classes, eval_rows, held_bytes, own_nodes
from .embeddings import load_shard as kv_load_shard
from .embeddings import shard_state as kv_shard_state
from .homogeneous import budget_keep, sampled_layers


class HeteroRuntime(LocalRuntime):
    """The data side of a heterogeneous graph on one worker: batches of its own training seeds of the target
    type, sampled inside its local heterograph, and the featured types' rows.

    A batch's ``inputs`` is a dict per node type: rows of a featured type, local ids of a featureless one (the
    trainer's :class:`~dgl_grappa.method.hetero.HeteroEmbedding` looks them up at the step); with first-hop
    completion ``extra`` is ``{"agg": {relation: aggregates of the first block's destinations}}``.

    Args:
        cfg: the run's config (batch size, fan-outs, seed).
        ident: this worker (its rank seeds the sampling).
        lp: the loaded part.
    """

    def __init__(self, cfg: Config, ident, lp: HeteroLocalPartition):
        super().__init__(cfg, lp)
        self.features = HeteroFeatures(lp.feat)
        n_seeds = lp.train_ids.numel()
        # plain averaging only (the config refuses the corrections): every seed weighs 1
        self.weights = torch.ones(lp.num_inner_by_type[lp.target])
        full = self.agree_steps(
            cfg,
            n_seeds,
            f"no partition holds a training node of type {lp.target} (its "
            "train_mask is empty); give the graph training nodes",
        )
        # first-hop completion: the relations with aggregates are not sampled in the first block (fan-out 0), the
        # model reads their precomputed means instead; the others (from featureless types) are
        self.exact = [e for e in lp.graph.canonical_etypes if e in lp.agg] if cfg.first_hop == "exact" else []
        fanouts: list = list(cfg.train.fanouts)
        if self.exact:
            fanouts[0] = {e: 0 if e in lp.agg else fanouts[0] for e in lp.graph.canonical_etypes}
        # DGL 2.1's fused CPU sampling (taken with more than one thread) breaks the block convention (destinations
        # first among the sources) for a node type all of whose relations have fan-out 0: not fused then
        sampler = TargetSeeds(dgl.dataloading.NeighborSampler(fanouts, fused=not self.exact), lp.target)
        self.batches = LocalBatches(
            lp.graph, lp.train_ids, sampler, full, seed=cfg.train.seed * 1000 + ident.rank, limit=self.steps
        )

    def assemble(self, sample) -> Batch:
        input_nodes, seeds, blocks = sample
        x = self.features.gather(input_nodes)
        extra = {}
        if self.exact:  # the first block's destinations are the first source nodes of each type
            lp, b0 = self.lp, blocks[0]
            extra["agg"] = {
                e: aggregate_rows(lp.agg[e], input_nodes[e[2]][: b0.num_dst_nodes(e[2])]) for e in self.exact
            }
        return Batch(blocks, seeds, x, None, extra)

    def epoch_start(self, epoch: int, embedding) -> None:
        """``model.embed_halo_sync``: when a sync is due, the featureless types' rows that several workers hold are
        averaged (:meth:`HeteroEmbedding.sync_halo <dgl_grappa.method.hetero.HeteroEmbedding.sync_halo>`, a
        collective; its bytes are the epoch's ``embed_bytes``)."""
        embedding.sync_halo(epoch)

    def train_coverage(self) -> Tensor:
        """Coverage is not computed on a heterogeneous graph (no correction reads it): every seed counts 1."""
        return self.weights[self.lp.train_ids]


class HeteroKind(JobKind):
    """Node classification on a heterogeneous graph (RGCN, learnable rows for the featureless types)."""

    name = "hetero"
    task = "node"
    heterogeneous = True

    def check(self, cfg: Config) -> None:
        """The model, the featureless types, and the settings the heterogeneous runtime does not serve (the
        graph's own types and relations are the ``data`` section's rules)."""
        d, m, t = cfg.data, cfg.model, cfg.train
        schema = hetero_schema(d)
        target = d.target or schema["labelled"][0]
        kept = select_etypes(d.etypes, schema["etypes"])
        used = {target} | {e[0] for e in kept} | {e[2] for e in kept}  # the node types the kept relations touch
        require(
            m.name == "rgcn",
            f"data.name={d.name} is a heterogeneous graph, which model.name={m.name} cannot "
            "train; use --model.name=rgcn (a GraphConv per relation, summed)",
        )
        bare = [n for n in schema["ntypes"] if n in used and n not in schema["featured"]]
        require(
            not bare or m.embed,
            f"node types {', '.join(bare)} of data.name={d.name} have no features, so model.embed=false leaves "
            "them without input; set --model.embed=true (a learnable row per node of those types)",
        )
        refused = [
            (t.mode == "minibatch", f"train.mode={t.mode}", "--train.mode=minibatch"),
            (cfg.grappa.correction == "none", f"grappa.correction={cfg.grappa.correction}", "--grappa.correction=none"),
            (
                set(cfg.compare.variants) <= {"none"},
                f"compare.variants=[{','.join(cfg.compare.variants)}]",
                "--compare.variants=[none]",
            ),
            (cfg.schedule.k == 0, f"schedule.k={cfg.schedule.k}", "--schedule.k=0"),
            (
                not cfg.partition.prebuilt and t.eval_mode != "layerwise",
                "layer-wise evaluation (train.eval_mode=layerwise, partition.prebuilt)",
                "--train.eval_mode=whole without partition.prebuilt",
            ),
            (not cfg.run.floor, "run.floor=true", "--run.floor=false"),
            (t.sampler != "torch", "train.sampler=torch", "--train.sampler=dgl (or auto: DGL samples it)"),
        ]
        for ok, what, fix in refused:
            require(
                ok,
                f"data.name={d.name} (a heterogeneous graph) is not trained with {what}: the heterogeneous "
                f"runtime trains node classification on minibatches with plain gradient averaging; use {fix}",
            )

    def load_part(self, cfg: Config, part_config: str, part: int) -> HeteroLocalPartition:
        # the budget holds the featured types' tables; the featureless types' learnable rows stay outside it
        return load_local_hetero(
            part_config,
            part,
            cfg.train.halo,
            cfg.data.target,
            cfg.first_hop,
            keep=budget_keep(cfg, sampled_layers(cfg)),
            halo_in_edges=cfg.train.halo_in_edges,
        )

    def make_runtime(self, cfg: Config, ident, lp) -> HeteroRuntime:
        return HeteroRuntime(cfg, ident, lp)

    def make_embedding(self, cfg: Config, lp) -> HeteroEmbedding | NoEmbedding:
        # the featureless types' rows, per type: own rows trained here; the halo's copies trained here too and
        # synced every model.embed_halo_sync epochs (0: frozen, no byte moves)
        return (
            HeteroEmbedding(lp, cfg.model.embed_dim, seed=cfg.train.seed, sync_every=cfg.model.embed_halo_sync)
            if lp.bare_types
            else NoEmbedding()
        )

    def build_model(self, cfg: Config, lp, num_classes: int) -> nn.Module:
        # a GraphConv per relation, each type's input at its own width
        return build_rgcn_for(
            cfg.model,
            lp.input_dims(cfg.model.embed_dim),
            num_classes,
            lp.etypes,
            lp.target,
            resolve_kernels(cfg.train.kernels, cfg.run.device),
        )

    def holding(self, cfg: Config, lp, embedding) -> dict:
        # every table: the featured types' rows (inner and halo) and aggregates, under train.memory_budget against
        # the own featured rows in fp32 (budgeted_bytes, budget_unit_bytes), and outside it the featureless types'
        # learnable rows, their SparseAdam moments, halo rows (and with the sync the halo copies' moments and the
        # rows at the last sync); the unit of the ratio is the own input
        # rows of every type in fp32
        resident, own = lp.resident_bytes, lp.own_fp32_bytes
        memory = {**lp.memory, "budgeted_bytes": int(lp.resident_bytes), "budget_unit_bytes": int(own)}
        if embedding.learnable:
            m = embedding.memory()
            resident += m["embed"]
            memory = {**memory, **m, "resident": lp.memory.get("resident", 0) + m["embed"]}
            own += m["embed_inner"]
        return {
            "resident_bytes": resident,
            "resident_other_bytes": lp.resident_other_bytes,
            "own_fp32_bytes": own,
            "memory": memory,
            "keep": lp.keep,
        }

    def worker_summary(self, lp) -> dict:
        """What summary.json says of the heterogeneous graph: node types, relations, target, featured and
        featureless types, and this worker's inner and halo nodes per type."""
        return {
            "hetero": {
                "target": lp.target,
                "ntypes": lp.ntypes,
                "etypes": [":".join(e) for e in lp.etypes],
                "featured": sorted(lp.feat),
                "featureless": lp.bare_types,
                "inner_by_type": dict(lp.part_inner_by_type or lp.num_inner_by_type),
                "inner_kept_by_type": dict(lp.num_inner_by_type),
                "halo_by_type": dict(lp.keep["halo_by_type"]),
                **({"halo_in_edges": lp.keep["halo_in_edges"]} if "halo_in_edges" in lp.keep else {}),
            }
        }

    def run_summary(self, cfg: Config, per_worker: list[dict] | None) -> dict:
        if not per_worker or "hetero" not in per_worker[0]:
            return {}
        h = per_worker[0]["hetero"]
        out = {k: h[k] for k in ("target", "ntypes", "etypes", "featured", "featureless")}
        # train.memory_budget's own figure: the featured types' tables over their own rows in fp32 (the largest
        # worker's); resident_ratio_max adds the learnable rows, which the budget does not hold
        ratios = [
            w["memory"]["budgeted_bytes"] / w["memory"]["budget_unit_bytes"]
            for w in per_worker
            if (w.get("memory") or {}).get("budget_unit_bytes")
        ]
        out["budgeted_ratio_max"] = max(ratios) if ratios else None
        return {"hetero": out}

    def machine_holding(self, cfg: Config, g, held=None) -> dict:
        """What a DistDGL machine holds of a heterogeneous graph: every type's feature rows in its KVStore shard
        (``resident_bytes``), the other node tensors and the partition's structure (``resident_other_bytes``),
        ``held`` (the drop-in's own tables) and, without a drop-in loader, its shard of every featureless type's
        DistEmbedding and of DGL's SparseAdam state. The unit ``own_fp32_bytes`` is the own input rows of every
        type (features' width, or ``model.embed_dim``) in fp32."""
        embed_dim = cfg.model.embed_dim
        resident = other = own = 0
        for t in g.ntypes:
            n_own = int(own_nodes(g, t).numel())
            for name in g.nodes[t].data.keys():
                local = g.nodes[t].data[name].local_partition
                nbytes = local.numel() * local.element_size()
                if name == "feat":
                    resident += nbytes
                else:
                    other += nbytes
            if "feat" in g.nodes[t].data:
                own += n_own * int(g.nodes[t].data["feat"].shape[1]) * 4
            else:
                own += n_own * embed_dim * 4
                if held is None:
                    resident += held_bytes(n_own, embed_dim)
        part = g.local_partition
        if part is not None:
            other += part.num_nodes() * 8 * 4 + part.num_edges() * 8 * 4  # ids, types, flags; src, dst, ids, types
        if held is not None:
            resident += int(held.nbytes)
        return {"resident_bytes": resident, "resident_other_bytes": other, "own_fp32_bytes": own}

    def dist_job(self, cfg: Config, g, grappa: bool, device: torch.device, part_config: str) -> "HeteroDistJob":
        return HeteroDistJob(cfg, g, grappa, device, part_config)


def target_of(g, cfg: Config) -> str:
    """The node type trained on: ``data.target``, else the one type whose node data has ``label``."""
    if cfg.data.target:
        return cfg.data.target
    return next(t for t in g.ntypes if "label" in g.nodes[t].data)


class HeteroDistJob(DistJob):
    """A heterogeneous graph in a DistDGL trainer: DGL's RGCN example flow, or the drop-in's loader.

    The baseline: ``node_split`` of the target type's training nodes, ``DistNodeDataLoader(g, {target:
    train_nid}, sampler)`` (DGL samples every relation on the machines that own the nodes), a batch's inputs
    per node type pulled through the KVStore (``g.nodes[t].data["feat"][ids]``, a ``DistEmbedding`` per
    featureless type) and DGL's distributed ``SparseAdam``. The drop-in: :class:`GrappaHeteroLoader`, every
    input row from this machine's memory.
    """

    def __init__(self, cfg: Config, g, grappa: bool, device: torch.device, part_config: str):
        super().__init__(cfg, g, grappa, device, part_config)
        self.target = target_of(g, cfg)
        sampler = dgl.dataloading.NeighborSampler(cfg.train.fanouts)
        if grappa:
            # Grappa: this machine's own training nodes of the target type, sampled inside its local heterograph
            self.correction = make_correction(cfg.grappa.correction, cfg.grappa.lam, cfg.grappa.shrink_target)
            self.loader = GrappaHeteroLoader(
                g,
                sampler,
                cfg.train.batch_size,
                self.correction,
                target=self.target,
                # the drop-in samples every relation's first hop: its completion is every relation's in-edges
                halo_in_edges="part" if cfg.train.halo_in_edges == "part" else "all",
                halo=cfg.train.halo,
                seed=cfg.train.seed,
                memory_budget=cfg.train.memory_budget,
                storage=cfg.train.storage,
            )
            if cfg.first_hop == "exact" and torch.distributed.get_rank() == 0:
                print(
                    "the drop-in samples the first hop of every relation (the per-relation first-hop aggregates of "
                    "train.first_hop=exact are the native runtime's)",
                    flush=True,
                )
        else:
            # DGL's RGCN example: this trainer's share of the target type's training nodes, sampled over every relation
            train_nid = dgl.distributed.node_split(
                g.nodes[self.target].data["train_mask"], g.get_partition_book(), ntype=self.target, force_even=True
            )
            self.loader = dgl.dataloading.DistNodeDataLoader(
                g, {self.target: train_nid}, sampler, batch_size=cfg.train.batch_size, shuffle=True, drop_last=False
            )
        # the package's RGCN: a GraphConv per relation, summed (the example's RelGraphConvLayer)
        dims = {
            t: int(g.nodes[t].data["feat"].shape[1]) if "feat" in g.nodes[t].data else int(cfg.model.embed_dim)
            for t in g.ntypes
        }
        self.model = build_rgcn_for(
            cfg.model, dims, dist_num_classes(g, self.target), g.canonical_etypes, self.target, self.kernels
        )
        self.bare = [t for t in g.ntypes if "feat" not in g.nodes[t].data]  # learnable rows for these types
        if self.bare and grappa:
            # Grappa: the featureless types' own rows and the halo's copies, trained here and synced every
            # model.embed_halo_sync epochs: replaces the DistEmbeddings
            self.embedding = self.loader.embedding(
                cfg.model.embed_dim, seed=cfg.train.seed, halo_sync=cfg.model.embed_halo_sync
            )
            self.emb_optimizer = self.embedding.optimizer(cfg.model.embed_lr)
        elif self.bare:
            # DGL's RGCN example (--dgl-sparse): a DistEmbedding per featureless type and DGL's distributed SparseAdam
            self.embedding = dist_embeddings(g, self.bare, cfg.model.embed_dim, seed=cfg.train.seed)
            self.emb_optimizer = dgl.distributed.optim.SparseAdam(list(self.embedding.values()), lr=cfg.model.embed_lr)
            self.common_steps = common_steps(-(-len(train_nid) // cfg.train.batch_size), cfg)

    def step_inputs(self, batch):
        input_nodes, seeds, blocks = batch
        seeds = seeds[self.target]
        # per node type: DistDGL pulls features and DistEmbedding rows; Grappa reads local memory
        if self.grappa:
            x = {**self.loader.features(input_nodes), **(self.embedding(input_nodes) if self.bare else {})}
        else:
            embs = self.embedding or {}
            x = {t: embs[t](ids) if t in embs else self.g.nodes[t].data["feat"][ids] for t, ids in input_nodes.items()}
        x = {t: v.to(self.device) for t, v in x.items()}
        y = self.g.nodes[self.target].data["label"][seeds].long().to(self.device)
        return place_blocks(blocks, self.device, self.kernels, hetero=True), x, {}, y

    def loss(self, out: Tensor, target) -> Tensor:
        return F.cross_entropy(out, target)

    def eval_inputs(self):
        if not self.bare:
            return None
        if self.grappa:  # the heterogeneous drop-in: every trainer's own rows per type
            return lambda: self.embedding.gather_rows(self.part_config)
        return lambda: eval_rows(self.g, self.embedding, self.part_config)

    def shard_state(self) -> dict | None:
        if not self.bare:
            return None
        if self.grappa:
            return self.embedding.shard_state(self.emb_optimizer)
        return kv_shard_state(self.g, self.embedding, self.emb_optimizer)

    def take_bytes(self) -> int:
        return self.loader.take_bytes() if self.grappa else 0

    def load_shard(self, shard: dict) -> None:
        if self.grappa:
            self.embedding.load_shard(shard, self.emb_optimizer)
        else:
            kv_load_shard(self.g, self.embedding, self.emb_optimizer, shard)
