"""The ``partition`` and ``schedule`` sections: how the graph is cut, and how often it is cut again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .errors import require


@dataclass
class PartitionConfig:
    """How the graph is cut (dgl.distributed.partition_graph)."""

    num_parts: int = 2
    """Number of partitions = number of workers."""
    method: Literal["metis", "random", "ldg"] = "metis"
    """metis or random: dgl.distributed.partition_graph's own; ldg: restreaming linear
    deterministic greedy (``partition.ldg_assignment``: linear time, ``ldg_passes`` passes,
    caps of ``1 + ldg_slack`` times the mean part on nodes and on train nodes), written by
    partition_graph as well. METIS needs the whole graph in memory and hours at 10^8 nodes;
    at scale use ldg (or random)."""
    balance_edges: bool = False
    """Ask METIS to balance edges as well as nodes."""
    balance_train: bool = False
    """Ask METIS to balance the training nodes across parts."""
    out_dir: str = ""
    """Where ``partition`` writes; empty = ``<run.output_dir>/partitions/0``."""
    ldg_passes: int = 3
    """ldg: streaming passes (1 = one-pass LDG; 3 restreams twice)."""
    ldg_slack: float = 0.05
    """ldg: allowed imbalance; every part holds at most (1 + slack) x N / P nodes and
    (1 + slack) x N_train / P train nodes."""
    seed: int = 0
    """Seed of the partitioner's random draws. ``random`` draws every node's part with DGL's
    own RNG (``dgl.random.choice`` inside ``partition_graph``), which ``dgl.seed(seed)``
    seeds right before the call (ldg: its stream order and tie-breaks): the same seed gives the same
    parts for a given DGL build and thread count (DGL seeds each thread's pcg32 stream by thread order). METIS ignores
    it (DGL's METIS is deterministic: the same input gives the same cut), so it is not part
    of a METIS partitioning's fingerprint and METIS partitionings are shared across seeds."""
    prebuilt: str = ""
    """A partition folder in DGL's layout made beforehand (e.g. by dgl_grappa.partition.bigpart for a
    graph that does not fit one process, or by ``partition``): workers load their parts from
    it (int32 CSC, halo features never loaded with halo=drop) and nothing is partitioned;
    the whole graph is never loaded (evaluation is layer-wise over the parts, see
    ``train.eval_mode``). ``num_parts`` must match it; no repartitioning (schedule.k = 0)."""

    def check(self) -> None:
        """Worker count and LDG's settings."""
        require(self.num_parts >= 1, f"partition.num_parts={self.num_parts} must be >= 1")
        require(self.num_parts <= 64, f"partition.num_parts={self.num_parts} is more than 64 local workers; use <= 64")
        require(self.ldg_passes >= 1, f"partition.ldg_passes={self.ldg_passes} must be >= 1")
        require(0.0 <= self.ldg_slack <= 1.0, f"partition.ldg_slack={self.ldg_slack} must be in [0, 1]")


@dataclass
class ScheduleConfig:
    """Periodic repartitioning (see dgl_grappa/partition/schedule.py)."""

    k: int = 0
    """Use partitioning j for epochs [j*k, (j+1)*k); 0 = never repartition."""
    method: Literal["metis-perm", "metis-subsample", "metis-weights", "random", "chunk-rotation", "ldg"] = "metis-perm"
    """How successive partitionings are made to differ (METIS alone would return the same cut
    again, up to rare tie-breaking flips, so its input is perturbed)."""
    keep_last: int = 2
    """Partition folders kept on disk (older ones are removed once no worker uses them)."""
    seed: int = 0
    """Seed of the perturbations."""

    def check(self) -> None:
        """The period and the folders kept."""
        require(self.k >= 0, f"schedule.k={self.k} must be >= 0 (0 = fixed partitions)")
        require(self.keep_last >= 1, f"schedule.keep_last={self.keep_last} must be >= 1")
