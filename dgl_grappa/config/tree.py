"""The whole tree: one :class:`Config` of the sections, its plain-dict view, and whether it runs across hosts."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .bench import BenchConfig, CompareConfig
from .data import HETERO_DATASETS, DataConfig
from .launch import DistDGLConfig, LaunchConfig, NetworkConfig
from .partition import PartitionConfig, ScheduleConfig
from .run import CheckpointConfig, RunConfig
from .training import GrappaConfig, LinkConfig, ModelConfig, TrainConfig


@dataclass
class Config:
    """The whole configuration tree."""

    name: str = "default"
    """A name for the run (used in logs and the default output folder)."""
    data: DataConfig = field(default_factory=DataConfig)
    partition: PartitionConfig = field(default_factory=PartitionConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    link: LinkConfig = field(default_factory=LinkConfig)
    grappa: GrappaConfig = field(default_factory=GrappaConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    distdgl: DistDGLConfig = field(default_factory=DistDGLConfig)
    compare: CompareConfig = field(default_factory=CompareConfig)
    launch: LaunchConfig = field(default_factory=LaunchConfig)
    bench: BenchConfig = field(default_factory=BenchConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    run: RunConfig = field(default_factory=RunConfig)

    @property
    def hops(self) -> int:
        return self.grappa.hops or self.model.num_layers

    @property
    def hetero(self) -> bool:
        """Whether the graph is heterogeneous (``data.name`` in :data:`HETERO_DATASETS`)."""
        return self.data.name in HETERO_DATASETS

    @property
    def first_hop(self) -> str:
        """The first-hop mode a Grappa run uses: ``train.first_hop``, except sampled for GAT and for
        learnable embeddings (``model.embed``: aggregates of trainable rows would go stale). On a
        heterogeneous graph ``exact`` completes the relations from featured types (per-relation
        aggregates) and samples those from featureless ones."""
        if self.hetero:
            return self.train.first_hop
        return "sampled" if self.model.name == "gat" or self.model.embed else self.train.first_hop


def to_dict(cfg: Config) -> dict:
    """Plain-dict view of a config (for logs and summary files)."""
    return dataclasses.asdict(cfg)


def uses_hosts(cfg: Config) -> bool:
    """Whether the job runs across hosts (ssh machines or the project's test hosts).

    True when ``launch.remote`` is ssh or netns; the workers then start on their hosts
    through :func:`dgl_grappa.cluster.hosts.remote_argv`, and each host's own network interface
    carries (and counts) its traffic, instead of one private loopback for the whole job.
    """
    return cfg.launch.remote != "none"
