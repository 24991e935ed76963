"""The rules that span sections, and :func:`validate`, which runs every rule of the tree in order.

A section's rules about its own fields are its ``check`` method; here are the ones that read two
sections or more, each taking the sections it reads. The rules of a kind of job are the kind's
(:mod:`dgl_grappa.kinds`).
"""

from __future__ import annotations

from .errors import require
from .launch import DistDGLConfig, LaunchConfig, NetworkConfig
from .partition import PartitionConfig, ScheduleConfig
from .training import ModelConfig, TrainConfig
from .tree import Config


def prebuilt_is_fixed(partition: PartitionConfig, schedule: ScheduleConfig) -> None:
    """A prebuilt partitioning is the only one: it cannot be repartitioned."""
    require(
        not partition.prebuilt or schedule.k == 0,
        f"partition.prebuilt is set and schedule.k={schedule.k}; a prebuilt partitioning cannot be "
        "repartitioned here: use --schedule.k=0",
    )


def layerwise_is_fixed(train: TrainConfig, schedule: ScheduleConfig) -> None:
    """Layer-wise evaluation reads the first partitioning's files, so it needs fixed partitions."""
    require(
        train.eval_mode != "layerwise" or schedule.k == 0,
        f"train.eval_mode=layerwise with schedule.k={schedule.k}: layer-wise evaluation reads the first "
        "partitioning's files, which repartitioning removes; use --train.eval_mode=whole",
    )


def learnable_rows(cfg: Config) -> None:
    """``model.embed`` and the featureless graph: what they need and what they cannot run with."""
    m = cfg.model
    require(
        not (cfg.data.name == "synthetic" and cfg.data.synthetic.featureless and not m.embed),
        "data.synthetic.featureless=true gives the nodes no features, so model.embed=false leaves the model "
        "without input; set --model.embed=true (a learnable row per node)",
    )
    if not m.embed:
        return
    # A worker owns the rows of its part's nodes: a new partitioning would have to move them.
    require(
        cfg.schedule.k == 0,
        f"model.embed=true with schedule.k={cfg.schedule.k}: the embedding rows live with "
        "their part's worker and do not move to a new partitioning; use --schedule.k=0",
    )
    require(
        not cfg.partition.prebuilt and cfg.train.eval_mode != "layerwise",
        "model.embed=true evaluates on the whole graph with every worker's rows gathered; layer-wise evaluation "
        "(train.eval_mode=layerwise, partition.prebuilt) is not available with it: use --train.eval_mode=whole "
        "without partition.prebuilt",
    )
    require(
        not cfg.run.floor,
        "model.embed=true with run.floor=true: the floor's replayed epoch would update the "
        "embedding rows; set --run.floor=false",
    )


def fanout_per_layer(train: TrainConfig, model: ModelConfig) -> None:
    """One fan-out per message-passing layer."""
    require(
        len(train.fanouts) == model.num_layers,
        f"train.fanouts has {len(train.fanouts)} entries but model.num_layers={model.num_layers}; "
        f"give one fan-out per layer, e.g. --train.fanouts=[{','.join(['10'] * model.num_layers)}]",
    )


def capped_epochs_without_samplers(train: TrainConfig, distdgl: DistDGLConfig) -> None:
    """A capped DistDGL epoch stops its loader early; sampler processes would still hold the batches it had
    requested ahead, and the next epoch would receive them."""
    require(
        not (train.steps_per_epoch and distdgl.num_samplers),
        f"train.steps_per_epoch={train.steps_per_epoch} cannot be combined with distdgl.num_samplers="
        f"{distdgl.num_samplers} (a capped DistDGL epoch would leave prefetched batches behind); "
        "set --distdgl.num_samplers=0 or --train.steps_per_epoch=0",
    )


def emulated_links(launch: LaunchConfig, network: NetworkConfig) -> None:
    """Delays, CPU shares and time dilation emulate a cluster on test hosts; ssh machines use their real network."""
    if launch.remote == "ssh":
        require(
            not network.bandwidth and network.latency_ms == 0,
            "network.bandwidth/latency_ms emulate links with test hosts; with launch.remote=ssh the machines' "
            "real network is used: leave them empty",
        )
    require(
        network.latency_ms == 0 or launch.remote == "netns",
        f"network.latency_ms={network.latency_ms} needs test hosts (launch.remote=netns); the job's loopback "
        "cannot delay traffic",
    )
    require(
        launch.remote == "netns" or not network.tunes_cpu_shares(),
        (f"network.host_cpus={network.host_cpus}" if network.host_cpus else f"network.dilation={network.dilation}")
        + f" shares out the CPUs of test hosts (launch.remote=netns); with launch.remote={launch.remote} leave "
        "network.dilation at auto and network.host_cpus empty",
    )


def workers_fit_hosts(launch: LaunchConfig, partition: PartitionConfig) -> None:
    """The listed hosts hold every worker, and every host gets one."""
    if not launch.hosts:
        return
    n_hosts = len(launch.hosts)
    wph = launch.workers_per_host or -(-partition.num_parts // n_hosts)
    require(
        partition.num_parts <= n_hosts * wph,
        f"partition.num_parts={partition.num_parts} workers do not fit on {n_hosts} hosts x "
        f"launch.workers_per_host={wph}; add hosts or raise workers_per_host",
    )
    used = -(-partition.num_parts // wph)
    require(
        used == n_hosts,
        f"launch.hosts lists {n_hosts} machines but {partition.num_parts} workers at "
        f"{wph} per host use only {used}; drop the idle hosts or change "
        "partition.num_parts / launch.workers_per_host",
    )


def elastic_continuation(cfg: Config) -> None:
    """``launch.on_failure: continue`` keeps state that every worker holds alike; what a lost worker held alone
    (learnable rows) or a partitioning that moves (repartitioning) would be lost with it."""
    if cfg.launch.on_failure != "continue":
        return
    require(
        cfg.schedule.k == 0,
        f"launch.on_failure=continue with schedule.k={cfg.schedule.k}: a take-over loads "
        "the lost part of one fixed partitioning; use --schedule.k=0 or "
        "--launch.on_failure=restart",
    )
    require(
        not cfg.model.embed,
        "launch.on_failure=continue with model.embed=true: a lost worker's embedding rows "
        "were held by it alone; use --launch.on_failure=restart (from the newest checkpoint)",
    )


def plain_name(name: str) -> None:
    """``name`` names the run's default folder (``runs/<name>``) and its logs: a plain name, never a path.

    Example:
        >>> plain_name("cora sage-2")
        >>> plain_name("../../x")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_grappa.config.errors.ConfigError: name='../../x' is not a plain name: it names the run's folder ...
    """
    require(
        name not in ("", ".", "..") and not any(c in name for c in "/\\\0"),
        f"name={name!r} is not a plain name: it names the run's folder runs/<name>; give a plain one such as "
        "my-run (a folder elsewhere: --run.output_dir=<folder>)",
    )


def validate(cfg: Config) -> None:
    """Check ranges and cross-field rules; raise ConfigError on the first problem.

    The order decides which message a config with several problems gets: the sections a job
    builds on first, then the rest. ``data.hetsynth`` is checked only when it is the graph, and
    ``link`` by link prediction's own rules (:meth:`dgl_grappa.kinds.JobKind.check`).

    Example:
        >>> validate(Config())
    """
    plain_name(cfg.name)
    cfg.data.check()
    prebuilt_is_fixed(cfg.partition, cfg.schedule)
    cfg.train.check()
    layerwise_is_fixed(cfg.train, cfg.schedule)
    cfg.partition.check()
    cfg.model.check()
    learnable_rows(cfg)
    fanout_per_layer(cfg.train, cfg.model)
    cfg.grappa.check()
    cfg.schedule.check()
    cfg.network.check()
    cfg.distdgl.check()
    capped_epochs_without_samplers(cfg.train, cfg.distdgl)
    cfg.compare.check()
    cfg.bench.check()
    cfg.launch.check()
    emulated_links(cfg.launch, cfg.network)
    workers_fit_hosts(cfg.launch, cfg.partition)
    elastic_continuation(cfg)
    cfg.run.check()
    cfg.checkpoint.check()
