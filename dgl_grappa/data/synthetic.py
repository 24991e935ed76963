"""Power-law degree-corrected stochastic block model with noisy class-mean features.

The generator is fully vectorised numpy (no Python loop over nodes or edges) so that a
graph of 1M nodes / 10M directed edges builds in seconds and a few hundred MB.

Model
-----
* Node ``i`` gets a block ``b_i`` in ``[0, num_communities)`` (balanced, randomly placed)
  and the label ``b_i % num_classes``.
* Degree propensities ``theta_i ~ Pareto(degree_exponent)`` (scale 1), capped at
  ``sqrt(N) * mean`` so one hub cannot swallow the whole edge budget.
* ``E = N * avg_degree / 2`` undirected edges: the source is drawn proportional to
  ``theta``; with probability ``homophily`` the destination is drawn proportional to
  ``theta`` inside the source's block, otherwise proportional to ``theta`` over all nodes.
* Self-loops and duplicates are dropped and the graph is symmetrised (both directions
  stored). Edges lost to de-duplication are topped up in a few vectorised rounds so that
  the mean in-degree stays close to ``avg_degree``.
* Features are ``mu[label] + noise * N(0, I)``; the class means ``mu`` are Gaussian, fixed
  by the seed, and rescaled to norm :data:`CLASS_MEAN_NORM` (independent of ``feat_dim``,
  so the difficulty is set by ``noise`` alone).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import dgl
import numpy as np
import torch

from ..config import SyntheticConfig
from .common import make_graph

#: Norm of every class-mean vector. With the nearest-class-mean classifier the pairwise
#: margin over the noise std is ~ CLASS_MEAN_NORM / (sqrt(2) * noise); 8 (= sqrt(64), the
#: default feat_dim) makes noise 2 nearly separable and noise 8 weak for features alone
#: while 2-hop mean aggregation over a 0.9-homophilous graph recovers most of the signal.
CLASS_MEAN_NORM = 8.0

#: Feature noise of the named presets (``custom`` uses ``SyntheticConfig.noise``).
PRESET_NOISE = {"easy": 2.0, "hard": 8.0}

# Top-up rounds for edges lost to de-duplication; the deficit shrinks geometrically, and
# after the last round we accept whatever is left (only reachable on tiny, saturated graphs).
_MAX_TOPUP_ROUNDS = 8


@dataclass
class SBMArrays:
    """The raw arrays of a generated graph (numpy), before they become a DGLGraph.

    Attributes:
        src, dst: int64 [M] directed edges, both directions of every undirected edge.
        block: int64 [N] planted block of each node.
        label: int64 [N] class of each node (``block % num_classes``).
        feat: float32 [N, F] node features.
        train_mask, val_mask, test_mask: bool [N], disjoint and covering all nodes.
    """

    src: np.ndarray
    dst: np.ndarray
    block: np.ndarray
    label: np.ndarray
    feat: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.label.shape[0])


def effective_noise(cfg: SyntheticConfig) -> float:
    """Feature noise std that ``cfg.preset`` implies.

    Args:
        cfg: the synthetic config.

    Returns:
        2.0 for ``easy``, 8.0 for ``hard``, ``cfg.noise`` for ``custom``.
    """
    return PRESET_NOISE.get(cfg.preset, cfg.noise)


def _sample_cdf(cum: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF sampling: index ``i`` with ``cum[i-1] <= u < cum[i]``."""
    idx = np.searchsorted(cum, u, side="right")
    # u is < cum[-1] in exact arithmetic; guard against rounding at the top end.
    np.minimum(idx, cum.shape[0] - 1, out=idx)
    return idx


def _draw_edges(rng: np.random.Generator, m: int, ctx: dict) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``m`` (source, destination) pairs of the DC-SBM, both as node ids."""
    cum, order, blk_lo, blk_hi, blk_start, blk_end = (
        ctx["cum"],
        ctx["order"],
        ctx["blk_lo"],
        ctx["blk_hi"],
        ctx["blk_start"],
        ctx["blk_end"],
    )
    total = cum[-1]
    # Positions index the nodes sorted by block, so a block is a contiguous slice of
    # ``cum`` and a within-block draw is just a uniform draw inside that slice's range.
    src_pos = _sample_cdf(cum, rng.random(m) * total)
    stay = rng.random(m) < ctx["homophily"]
    u = rng.random(m)
    b = ctx["block_sorted"][src_pos]
    lo = np.where(stay, blk_lo[b], 0.0)
    width = np.where(stay, blk_hi[b] - blk_lo[b], total)
    dst_pos = _sample_cdf(cum, lo + u * width)
    # Rounding at a block boundary could step into the neighbouring block; clamp back.
    dst_pos = np.where(stay, np.clip(dst_pos, blk_start[b], blk_end[b] - 1), dst_pos)
    return order[src_pos], order[dst_pos]


def generate_sbm(cfg: SyntheticConfig) -> SBMArrays:
    """Generate the DC-SBM graph, features, labels and splits as numpy arrays.

    Args:
        cfg: synthetic options (sizes, homophily, noise / preset, degree exponent,
            split fractions, seed). Assumed validated (see ``config.validate``).

    Returns:
        :class:`SBMArrays`; the same ``cfg`` (seed included) always gives identical arrays.
    """
    n = int(cfg.num_nodes)
    k = int(cfg.num_communities)
    c = int(cfg.num_classes)
    rng = np.random.default_rng(cfg.seed)

    # Balanced blocks at random places: every block has floor/ceil(N/K) nodes, so every
    # class has nodes as long as N >= num_classes.
    block = rng.permutation(np.arange(n, dtype=np.int64) % k)
    label = block % c

    # Pareto (type I, scale 1) propensities: 1 + Lomax. Cap at sqrt(N) * mean.
    alpha = float(cfg.degree_exponent)
    theta = 1.0 + rng.pareto(alpha, size=n)
    mean = alpha / (alpha - 1.0)
    np.minimum(theta, np.sqrt(n) * mean, out=theta)

    # Sort nodes by block: block b then occupies positions [blk_start[b], blk_end[b]).
    order = np.argsort(block, kind="stable")
    block_sorted = block[order]
    cum = np.cumsum(theta[order])
    counts = np.bincount(block, minlength=k)
    blk_end = np.cumsum(counts)
    blk_start = blk_end - counts
    cum0 = np.concatenate(([0.0], cum))
    ctx = {
        "cum": cum,
        "order": order,
        "block_sorted": block_sorted,
        "blk_lo": cum0[blk_start],
        "blk_hi": cum0[blk_end],
        "blk_start": blk_start,
        "blk_end": blk_end,
        "homophily": float(cfg.homophily),
    }

    target = int(round(n * float(cfg.avg_degree) / 2.0))
    max_pairs = n * (n - 1) // 2
    target = min(target, max_pairs)
    keys = np.empty(0, dtype=np.int64)  # undirected edge u < v encoded as u * n + v
    need = target
    for _ in range(_MAX_TOPUP_ROUNDS):
        if need <= 0:
            break
        s, d = _draw_edges(rng, need, ctx)
        keep = s != d
        s, d = s[keep], d[keep]
        lo_id = np.minimum(s, d)
        hi_id = np.maximum(s, d)
        new = lo_id * n + hi_id
        del s, d, lo_id, hi_id, keep
        keys = np.unique(np.concatenate((keys, new)))
        del new
        # Draw a little more than the deficit next time: part of it will be duplicates.
        deficit = target - keys.shape[0]
        need = int(deficit * 1.25) + 16 if deficit > 0 else 0
    if keys.shape[0] < 0.85 * target:
        # Blocks too small for the requested degree (e.g. homophily 1 with a few nodes per
        # block): say so rather than silently returning a sparser graph.
        warnings.warn(
            f"synthetic graph reached mean degree {2 * keys.shape[0] / n:.2f} instead of "
            f"{cfg.avg_degree}: the blocks (~{n / k:.0f} nodes) saturate; lower "
            f"num_communities, homophily or avg_degree",
            RuntimeWarning,
            stacklevel=2,
        )
    if keys.shape[0] > target:
        # The last top-up overshot: drop a random subset (keeps the model's distribution).
        drop = rng.choice(keys.shape[0], size=keys.shape[0] - target, replace=False)
        keys = np.delete(keys, drop)
    u = keys // n
    v = keys - u * n
    del keys
    src = np.concatenate((u, v))
    dst = np.concatenate((v, u))
    del u, v

    # Class means: Gaussian directions, rescaled to a fixed norm (see CLASS_MEAN_NORM).
    f = int(cfg.feat_dim)
    mu = rng.standard_normal((c, f))
    mu *= CLASS_MEAN_NORM / np.maximum(np.linalg.norm(mu, axis=1, keepdims=True), 1e-12)
    noise = effective_noise(cfg)
    # Draw the noise directly in float32 (halves the peak memory at 1M x 64).
    feat = rng.standard_normal((n, f), dtype=np.float32)
    feat *= np.float32(noise)
    feat += mu.astype(np.float32)[label]
    # Scale to about unit variance per dimension: accuracy is unchanged (a global scale), but
    # GNN training with the usual learning rates starts from sane logits.
    feat *= np.float32(1.0 / np.sqrt(noise**2 + CLASS_MEAN_NORM**2 / f))

    # Random split by fraction; the remainder after train and val is test.
    perm = rng.permutation(n)
    n_train = int(round(cfg.train_frac * n))
    n_val = int(round(cfg.val_frac * n))
    n_train = max(1, min(n_train, n - 1))
    n_val = max(0, min(n_val, n - n_train - 1))
    split = np.full(n, 2, dtype=np.int8)
    split[perm[:n_train]] = 0
    split[perm[n_train : n_train + n_val]] = 1

    return SBMArrays(
        src=src,
        dst=dst,
        block=block,
        label=label,
        feat=feat,
        train_mask=split == 0,
        val_mask=split == 1,
        test_mask=split == 2,
    )


def synthetic_graph(cfg: SyntheticConfig) -> dgl.DGLGraph:
    """Build the synthetic graph as a DGLGraph with the standard ndata.

    Args:
        cfg: synthetic options (see :class:`~dgl_grappa.config.SyntheticConfig`).

    Returns:
        A homogeneous int64 DGLGraph with ndata ``feat``, ``label``, ``train_mask``,
        ``val_mask`` and ``test_mask``; both directions of every edge, no self-loops. With
        ``cfg.featureless`` there is no ``feat`` (the rest is the same graph: the generator
        draws the features all the same, so its random stream, and the splits, do not change).
    """
    a = generate_sbm(cfg)
    return make_graph(
        torch.from_numpy(a.src),
        torch.from_numpy(a.dst),
        a.num_nodes,
        feat=None if cfg.featureless else torch.from_numpy(a.feat),
        label=torch.from_numpy(a.label),
        train_mask=torch.from_numpy(a.train_mask),
        val_mask=torch.from_numpy(a.val_mask),
        test_mask=torch.from_numpy(a.test_mask),
    )


__all__ = ["CLASS_MEAN_NORM", "PRESET_NOISE", "SBMArrays", "effective_noise", "generate_sbm", "synthetic_graph"]
