"""What the kinds of job on a homogeneous graph share: a worker's part, its input rows, the DistDGL inputs.

Node classification (:mod:`.node`) and link prediction (:mod:`.link`) train on the same part
(:func:`~dgl_grappa.method.local_part.load_local`: inner nodes, the kept halo, features and
first-hop aggregates under the memory budget) with the same input rows: features, or with
``model.embed`` learnable rows (:class:`~dgl_grappa.method.embedding.LocalEmbedding`), and the
model's ``deg`` and ``agg`` inputs. They differ in what they sample and score; this module holds
the rest once:

* :class:`HomogeneousRuntime`: coverage, weights and the input rows of a batch;
* :class:`HomogeneousKind`: loading, learnable rows, the model's input width, what a worker holds;
* :class:`HomogeneousDistJob`: the same inside a DistDGL trainer (features pulled through the
  KVStore or served by the drop-in loader, a ``DistEmbedding`` or the loader's own rows).
"""

from __future__ import annotations

import dgl
import torch
from torch import Tensor, nn

from ..config import Config, parse_budget, require
from ..method import coverage as cov
from ..method.dropin import LoaderOptions
from ..method.embedding import LocalEmbedding, NoEmbedding
from ..method.kernels import build_model_for, place_blocks, resolve_kernels
from ..method.local_part import Keep, first_hop_table, load_local
from ..method.resident import nbytes, on, residence
from ..method.sampler import LocalFeatures, layer_sampler, resolve_sampler
from .base import Batch, DistJob, JobKind, LocalRuntime, node_losses
from .embeddings import HOMOGENEOUS, common_steps, dist_embeddings, dist_num_classes, eval_rows, held_bytes
from .embeddings import load_shard as kv_load_shard
from .embeddings import shard_state as kv_shard_state


def sampled_layers(cfg: Config) -> int:
    """The model's layers that sample neighbours (all but the first under first-hop completion)."""
    return cfg.model.num_layers - (1 if cfg.first_hop == "exact" else 0)


def budget_keep(cfg: Config, reach: int | None) -> Keep:
    """What a run keeps under ``train.memory_budget`` (:class:`~dgl_grappa.method.local_part.Keep`) when the
    seeds' trees reach ``reach`` hops (None: every node)."""
    mult, size = parse_budget(cfg.train.memory_budget)
    return Keep(reach=reach, storage=cfg.train.storage, budget=mult, budget_bytes=size, seed=cfg.train.seed)


def trainer_device(cfg: Config) -> torch.device:
    """The trainer's device: the CPU, or the GPU the worker made current (``select_device``)."""
    if cfg.run.device == "cuda" and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


class HomogeneousRuntime(LocalRuntime):
    """The input side of a homogeneous part: coverage and node weights, feature rows, first-hop aggregates.

    The tables a step reads (the features, aggregates, full-graph in-degrees, labels and weights, and the
    torch sampler's copy of the local graph's structure) are held where ``train.resident`` puts them
    (:mod:`~dgl_grappa.method.resident`): on a GPU trainer's device when they fit, so a step's sampling and
    gathers run there; ``where`` says which (``device`` or ``host``), ``device`` is where they are.

    Args:
        cfg: the run's config.
        lp: the loaded part (:class:`~dgl_grappa.method.local_part.LocalPartition`).
    """

    def __init__(self, cfg: Config, lp):
        super().__init__(cfg, lp)
        coverage, weights = cov.partition_weights(
            lp.src, lp.dst, lp.graph.num_nodes(), lp.in_degree, cfg.hops, cfg.grappa.self_loops, cfg.grappa.w_min
        )
        self.coverage = coverage
        # model.embed: the input rows are learnable (the trainer's LocalEmbedding); a batch yields the
        # input nodes' local ids, looked up at the step itself, after the previous step's update (so
        # train.prefetch, which draws the next batch during the backward pass, reads no stale row).
        self.embed = bool(cfg.model.embed)
        # First-hop completion: the precomputed aggregates are read like features (all local).
        if cfg.first_hop == "exact" and lp.agg is None:
            raise ValueError(
                "train.first_hop=exact needs the part loaded with its aggregates: load_local(..., first_hop='exact')"
            )
        agg = lp.agg if cfg.first_hop == "exact" else None
        self.kernels = resolve_kernels(cfg.train.kernels, cfg.run.device)
        self.sampler_kind = resolve_sampler(cfg.train.sampler, cfg.run.device, kernels=self.kernels)
        # the torch sampler's structure: CSC offsets and sources, and its node -> row scratch
        structure = 8 * (3 * lp.graph.num_nodes() + 1 + lp.graph.num_edges()) if self.sampler_kind == "torch" else 0
        need = nbytes(lp.feat, agg, lp.in_degree, lp.label, weights) + structure
        # learnable rows are looked up in host memory (the trainer's LocalEmbedding), so their ids stay there
        self.where = "host" if self.embed else residence(cfg.train.resident, trainer_device(cfg), need)
        self.device = trainer_device(cfg) if self.where == "device" else torch.device("cpu")
        # a GPU trainer whose tables stay on the host: each batch's rows in pinned memory, so that their copy to
        # the device (non-blocking, at the step) does not hold the host up
        self.pin = self.where == "host" and not self.embed and trainer_device(cfg).type == "cuda"
        self.resident_device_bytes = need if self.where == "device" else 0
        self.weights = on(self.device, weights)
        self.label = on(self.device, lp.label)
        self.in_degree = on(self.device, lp.in_degree)
        self.features = LocalFeatures(on(self.device, lp.feat))
        self.aggregates = LocalFeatures(on(self.device, agg)) if agg is not None else None

    def layer_sampler(self, cfg: Config):
        """The run's sampler of the sampled layers (``train.sampler``), drawing where the tables are, its blocks
        in the layout the layers read (``train.kernels``: DGL blocks or plain index tensors)."""
        layout = "plain" if self.kernels == "torch" else "dgl"
        return layer_sampler(cfg.train.fanouts, cfg.first_hop, self.sampler_kind, self.device, layout)

    def rows(self, input_nodes: Tensor) -> Tensor:
        """The input rows of ``input_nodes`` (local ids), or with learnable rows the ids themselves."""
        if self.embed:
            return input_nodes.to("cpu", torch.int64)
        x = self.features.gather(input_nodes)
        return x.pin_memory() if self.pin else x

    def extra(self, input_nodes: Tensor) -> dict:
        """The model's keyword inputs: ``deg`` (full-graph in-degrees) and, under first-hop completion, ``agg``."""
        extra = {"deg": self.in_degree.index_select(0, input_nodes.to(self.device, torch.int64))}
        if self.aggregates is not None:
            extra["agg"] = self.aggregates.gather(input_nodes)
        return {k: v.pin_memory() for k, v in extra.items()} if self.pin else extra

    def losses(self, out: Tensor, batch: Batch, device: torch.device) -> tuple[Tensor, Tensor]:
        return node_losses(out, batch.target, batch.rows, self.label, self.weights, device)

    def summary(self) -> dict:
        """Which sampler drew the batches, where the tables were held and their bytes on the device."""
        return {
            "sampler": self.sampler_kind,
            "resident": self.where,
            "resident_device_bytes": self.resident_device_bytes,
        }

    def describe(self) -> list[str]:
        if self.where != "device":
            return []
        return [
            f"part {self.lp.part_id}: its tables ({self.resident_device_bytes / 2**20:.1f} MiB) are held on "
            f"{self.device}, sampled there by the {self.sampler_kind} sampler"
        ]


class HomogeneousKind(JobKind):
    """The builders node classification and link prediction share (a homogeneous part, the same input rows)."""

    def check(self, cfg: Config) -> None:
        require(
            cfg.model.name != "rgcn",
            f"model.name=rgcn needs a heterogeneous graph, but data.name={cfg.data.name} "
            "is homogeneous; use --data.name=hetsynth, or --model.name=sage",
        )

    def reach(self, cfg: Config) -> int | None:
        """How far the seeds' trees reach (the hops :class:`~dgl_grappa.method.local_part.Keep` keeps)."""
        return sampled_layers(cfg)

    def keep(self, cfg: Config) -> Keep:
        """What a worker keeps of its part. With learnable rows every node (its row is the input, and there
        are no feature tables to budget: each own node has a trainable row, each halo node a frozen one)."""
        if cfg.model.embed:
            return Keep()
        return budget_keep(cfg, self.reach(cfg))

    def load_part(self, cfg: Config, part_config: str, part: int):
        # a prebuilt partitioning, possibly of a graph no process can hold, is read lean
        return load_local(
            part_config,
            part,
            cfg.train.halo,
            cfg.first_hop,
            lean=bool(cfg.partition.prebuilt),
            keep=self.keep(cfg),
            aggregate=first_hop_table(cfg.model),
            features=not cfg.model.embed,
        )

    def make_embedding(self, cfg: Config, lp) -> LocalEmbedding | NoEmbedding:
        # own rows trained here by a sparse optimizer, halo rows frozen initial ones: no byte moves
        if not cfg.model.embed:
            return NoEmbedding()
        return LocalEmbedding(lp.global_ids, lp.num_inner, cfg.model.embed_dim, seed=cfg.train.seed)

    def out_dim(self, cfg: Config, num_classes: int) -> int:
        """The model's output width."""
        return num_classes

    def build_model(self, cfg: Config, lp, num_classes: int) -> nn.Module:
        in_dim = cfg.model.embed_dim if cfg.model.embed else lp.feat.shape[1]
        return build_model_for(
            cfg.model, in_dim, self.out_dim(cfg, num_classes), resolve_kernels(cfg.train.kernels, cfg.run.device)
        )

    def holding(self, cfg: Config, lp, embedding) -> dict:
        # With learnable rows the node tables are the embedding's (own rows, their SparseAdam moments,
        # frozen halo rows), and the unit of the ratio is the own rows in fp32.
        resident, memory, own = lp.resident_bytes, lp.memory, lp.own_fp32_bytes
        if embedding.learnable:
            m = embedding.memory()
            resident += m["embed"]
            memory = {**lp.memory, **m, "resident": lp.memory.get("resident", 0) + m["embed"]}
            own = lp.part_inner * cfg.model.embed_dim * 4
        return {
            "resident_bytes": resident,
            "resident_other_bytes": lp.resident_other_bytes,
            "own_fp32_bytes": own,
            "memory": memory,
            "keep": lp.keep,
        }

    def machine_holding(self, cfg: Config, g, held=None) -> dict:
        """What a DistDGL machine holds of the graph: its KVStore shard (the server's node tensors, which the
        trainer maps from shared memory) and its partition's structure.

        ``resident_bytes`` counts the feature-width tables (2-D node tensors as wide as the features) plus
        ``held`` (the drop-in loader's own tables); ``resident_other_bytes`` the other node tensors (labels,
        masks, degrees) and the partition graph's arrays. With ``model.embed`` the unit ``own_fp32_bytes`` is
        the own rows of ``model.embed_dim``, and without a drop-in loader (the baseline's ``DistEmbedding``)
        the machine's shard of the embedding and of DGL's SparseAdam state is resident too (the drop-in's
        rows are in ``held``).
        """
        embed_dim = cfg.model.embed_dim if cfg.model.embed else 0
        part = g.local_partition
        width = embed_dim or (int(g.ndata["feat"].shape[1]) if "feat" in g.ndata else 0)
        resident = other = 0
        for name in g.ndata.keys():
            try:
                local = g.ndata[name].local_partition
            except Exception:  # a tensor this machine does not serve (none in DGL's layout)
                continue
            nbytes = local.numel() * local.element_size()
            if local.dim() == 2 and local.shape[1] == width:
                resident += nbytes
            else:
                other += nbytes
        if part is not None:
            other += part.num_nodes() * 8 * 3 + part.num_edges() * 8 * 3  # ids, inner flags, part ids; src, dst, ids
            n_inner = int(part.ndata["inner_node"].bool().sum())
        else:
            n_inner = 0
        if held is not None:
            resident += int(held.nbytes)
        if cfg.model.embed and held is None:
            resident += held_bytes(n_inner, embed_dim)
        return {"resident_bytes": resident, "resident_other_bytes": other, "own_fp32_bytes": n_inner * width * 4}


class HomogeneousDistJob(DistJob):
    """A homogeneous kind in a DistDGL trainer: its input rows, learnable rows and checkpoint shards.

    A subclass makes :attr:`loader` (:meth:`make_loader`) and reads its batches; the input rows come
    from here: DistDGL pulls ``g.ndata["feat"][input_nodes]`` (or a ``DistEmbedding``'s rows), the
    drop-in serves every row from this machine's memory (``loader.features``, ``loader.embedding``)
    and adds the model's ``deg`` and, under first-hop completion, ``agg`` inputs.
    """

    def __init__(self, cfg: Config, g, grappa: bool, device: torch.device, part_config: str):
        super().__init__(cfg, g, grappa, device, part_config)
        self.embed = cfg.model.embed  # learnable input rows instead of features (cfg.first_hop is then sampled)
        self.exact = grappa and cfg.first_hop == "exact"
        self.loader = self.make_loader(dgl.dataloading.NeighborSampler(cfg.train.fanouts))
        in_dim = cfg.model.embed_dim if self.embed else g.ndata["feat"].shape[1]
        self.model = build_model_for(cfg.model, in_dim, self.out_dim(), self.kernels)
        if self.embed and grappa:
            # Grappa: this machine's rows (and the halo's frozen ones), trained here: replaces the DistEmbedding.
            self.embedding = self.loader.embedding(cfg.model.embed_dim, seed=cfg.train.seed)
            self.emb_optimizer = self.embedding.optimizer(cfg.model.embed_lr)
        elif self.embed:
            # DGL's example: a DistEmbedding in the KVStore and DGL's distributed sparse optimizer.
            self.embedding = dist_embeddings(g, [HOMOGENEOUS], cfg.model.embed_dim, seed=cfg.train.seed)[HOMOGENEOUS]
            self.emb_optimizer = dgl.distributed.optim.SparseAdam([self.embedding], lr=cfg.model.embed_lr)
            self.common_steps = common_steps(self.baseline_batches(), cfg)

    def make_loader(self, sampler):
        """The kind's loader (the baseline's or, with ``grappa``, the drop-in's)."""
        raise NotImplementedError

    def baseline_batches(self) -> int:
        """The baseline loader's batches per epoch on this trainer (for :func:`~.embeddings.common_steps`)."""
        raise NotImplementedError

    def out_dim(self) -> int:
        """The model's output width."""
        return dist_num_classes(self.g)

    def dropin_options(self) -> LoaderOptions:
        """The drop-in loader's options, from the config (the native runtime's settings)."""
        cfg = self.cfg
        return LoaderOptions(
            hops=cfg.hops,
            w_min=cfg.grappa.w_min,
            self_loops=cfg.grappa.self_loops,
            seed=cfg.train.seed,
            halo=cfg.train.halo,
            first_hop=cfg.first_hop,
            part_config=self.part_config,
            memory_budget=cfg.train.memory_budget,
            storage=cfg.train.storage,
            aggregate="gcn" if first_hop_table(cfg.model) == "gcn" else "mean",
            feat_key=None if self.embed else "feat",
        )

    def inputs(self, input_nodes: Tensor) -> tuple[Tensor, dict]:
        """A batch's input rows and the model's keyword inputs, on the trainer's device."""
        dev = self.device
        if self.embed:
            x = self.embedding(input_nodes).to(dev)  # DistDGL: a KVStore pull; Grappa: local rows
        else:
            # Grappa: every input row from this machine's memory (own rows, the kept halo's)
            x = (self.loader.features(input_nodes) if self.grappa else self.g.ndata["feat"][input_nodes]).to(dev)
        extra = {}
        if self.grappa:
            # Grappa: full-graph in-degrees (GraphSAGE's empty-neighbourhood rule) and, with
            # first-hop completion, the precomputed aggregates; every row is local.
            extra["deg"] = self.loader.degrees(input_nodes).to(dev)
            if self.exact:
                extra["agg"] = self.loader.aggregates(input_nodes).to(dev)
        return x, extra

    def blocks(self, blocks: list) -> list:
        return place_blocks(blocks, self.device, self.kernels)

    def eval_inputs(self):
        if not self.embed:
            return None
        if self.grappa:  # every trainer's own rows, gathered to rank 0
            return lambda: self.embedding.gather_rows(self.part_config)
        return lambda: (eval_rows(self.g, {HOMOGENEOUS: self.embedding}, self.part_config) or {}).get(HOMOGENEOUS)

    def shard_state(self) -> dict | None:
        if not self.embed:
            return None
        if self.grappa:
            return self.embedding.shard_state(self.emb_optimizer)
        return kv_shard_state(self.g, {HOMOGENEOUS: self.embedding}, self.emb_optimizer)

    def load_shard(self, shard: dict) -> None:
        if self.grappa:
            self.embedding.load_shard(shard, self.emb_optimizer)
        else:
            kv_load_shard(self.g, {HOMOGENEOUS: self.embedding}, self.emb_optimizer, shard)
