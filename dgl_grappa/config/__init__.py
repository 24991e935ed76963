"""One config tree of dataclasses, loaded from YAML, validated, overridable from the CLI.

Precedence: ``--section.key=value`` on the command line > the YAML file > field defaults.
Unknown keys are rejected by name, and every user error is raised as :class:`ConfigError`
whose message is one line naming the key, the bad value and the fix; the CLI prints it
and exits non-zero without a traceback.

The modules: :mod:`.loader` (YAML, coercion, overrides, :func:`load_config`), the sections by
subsystem, each dataclass with a ``check`` method for the rules of its own fields (:mod:`.data`,
:mod:`.partition`, :mod:`.training`, :mod:`.launch`, :mod:`.bench`, :mod:`.run`), the tree
(:mod:`.tree`) and the rules that span sections (:mod:`.rules`). The rules of a kind of job (what
link prediction or a heterogeneous graph cannot run with) are the kind's own
(:meth:`dgl_grappa.kinds.JobKind.check`, checked by :func:`dgl_grappa.kinds.resolve`). Everything
is imported from here.

Example:
    >>> cfg = load_config(None, ["--train.epochs=3", "--partition.num_parts=2"])
    >>> cfg.train.epochs, cfg.partition.num_parts
    (3, 2)
"""

from __future__ import annotations

from .bench import PAIR, BenchConfig, CompareConfig, parse_pairs
from .data import (
    HETERO_DATASETS,
    HETSYNTH_ETYPES,
    HETSYNTH_LABELLED,
    HETSYNTH_NTYPES,
    OGB_DATASETS,
    OGBN_MAG_ETYPES,
    OGBN_MAG_NTYPES,
    DataConfig,
    HetSynthConfig,
    SyntheticConfig,
    cache_root,
    default_data_root,
    hetero_schema,
    select_etypes,
)
from .errors import ConfigError, require
from .launch import TC_RATE, DistDGLConfig, LaunchConfig, NetworkConfig
from .loader import coerce, config_changes, load_config, parse_overrides, write_resolved_config
from .partition import PartitionConfig, ScheduleConfig
from .rules import validate
from .run import CheckpointConfig, RunConfig
from .training import GrappaConfig, LinkConfig, ModelConfig, TrainConfig, dropin_problem, parse_budget
from .tree import Config, to_dict, uses_hosts

__all__ = [
    "HETERO_DATASETS",
    "HETSYNTH_ETYPES",
    "HETSYNTH_LABELLED",
    "HETSYNTH_NTYPES",
    "OGBN_MAG_ETYPES",
    "OGBN_MAG_NTYPES",
    "OGB_DATASETS",
    "PAIR",
    "TC_RATE",
    "BenchConfig",
    "CheckpointConfig",
    "CompareConfig",
    "Config",
    "ConfigError",
    "DataConfig",
    "DistDGLConfig",
    "GrappaConfig",
    "HetSynthConfig",
    "LaunchConfig",
    "LinkConfig",
    "ModelConfig",
    "NetworkConfig",
    "PartitionConfig",
    "RunConfig",
    "ScheduleConfig",
    "SyntheticConfig",
    "TrainConfig",
    "cache_root",
    "coerce",
    "config_changes",
    "default_data_root",
    "dropin_problem",
    "hetero_schema",
    "load_config",
    "parse_budget",
    "parse_overrides",
    "parse_pairs",
    "require",
    "select_etypes",
    "to_dict",
    "uses_hosts",
    "validate",
    "write_resolved_config",
]
