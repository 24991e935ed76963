"""A generated heterogeneous graph in the shape of ogbn-mag: papers, authors, fields of study.

No file and no download: a pure function of ``data.hetsynth`` (the seed included), vectorised
numpy, seconds for 10^5 nodes.

Model
-----
* Every node has a class in ``[0, num_classes)``: a paper its label (balanced, at random
  places), an author a home class, a field ``field % num_classes``.
* **writes / written_by**: author a writes ``1 + Poisson(papers_per_author - 1)`` papers; each is
  drawn from the papers of a's home class with probability ``homophily``, else from all papers.
* **cites / cited_by**: paper p cites ``Poisson(citations)`` papers, of p's class with probability
  ``homophily``, else of any class, popular papers (Pareto propensities) more often; no self-citation.
* **has_topic / topic_of**: paper p is tagged with ``fields_per_paper`` distinct fields, of p's class
  with probability ``homophily``, else any.
* Every relation has its reverse, so messages flow both ways; duplicates are dropped.
* **Features** on the types of ``feat_types`` (default papers only): ``mu[class] + noise * N(0, I)``,
  the class means of norm 8 (as the homogeneous generator's), scaled to about unit variance.
* **Labels and splits** on papers only (``label``, ``train_mask``, ``val_mask``, ``test_mask``).

Two hops through an author or a field land on a paper of the same class with probability
about ``homophily^2`` (plus chance), so a relational model beats the features alone.

Example:
    >>> g = hetsynth_graph(HetSynthConfig(num_papers=200, num_authors=100, num_fields=10))
    >>> sorted(g.ntypes), len(g.canonical_etypes)
    (['author', 'field', 'paper'], 6)
"""

from __future__ import annotations

import dgl
import numpy as np
import torch

from ..config import HETSYNTH_ETYPES, HETSYNTH_NTYPES, HetSynthConfig
from .synthetic import CLASS_MEAN_NORM


def _members(cls: np.ndarray, c: int) -> list[np.ndarray]:
    """The ids of each class, for draws inside a class."""
    order = np.argsort(cls, kind="stable")
    counts = np.bincount(cls, minlength=c)
    return np.split(order, np.cumsum(counts)[:-1])


def _draw(
    rng: np.random.Generator,
    want: np.ndarray,
    members: list[np.ndarray],
    n: int,
    homophily: float,
    weight: np.ndarray | None = None,
) -> np.ndarray:
    """One node per entry of ``want`` (a class): from that class with probability ``homophily``, else from all
    ``n`` nodes; in proportion to ``weight`` when given (else uniform)."""
    out = np.empty(want.shape[0], dtype=np.int64)
    stay = rng.random(want.shape[0]) < homophily
    anywhere = ~stay
    out[anywhere] = _pick(rng, np.arange(n), int(anywhere.sum()), weight)
    for k, ids in enumerate(members):
        sel = stay & (want == k)
        if sel.any():
            out[sel] = _pick(rng, ids, int(sel.sum()), None if weight is None else weight[ids])
    return out


def _pick(rng: np.random.Generator, ids: np.ndarray, m: int, weight: np.ndarray | None) -> np.ndarray:
    if m == 0:
        return np.empty(0, dtype=np.int64)
    if weight is None:
        return ids[rng.integers(0, ids.shape[0], m)]
    cum = np.cumsum(weight, dtype=np.float64)
    idx = np.minimum(np.searchsorted(cum, rng.random(m) * cum[-1], side="right"), ids.shape[0] - 1)
    return ids[idx]


def _unique_pairs(src: np.ndarray, dst: np.ndarray, n_dst: int) -> tuple[np.ndarray, np.ndarray]:
    keys = np.unique(src.astype(np.int64) * n_dst + dst)
    return keys // n_dst, keys % n_dst


def generate_hetsynth(cfg: HetSynthConfig) -> dict:
    """The graph's arrays (numpy): ``edges`` {canonical relation: (src, dst)}, ``num_nodes``, ``classes``
    and ``feat`` {node type: ...}, and the papers' ``label`` and masks. The same ``cfg`` gives the same arrays.

    Args:
        cfg: the generator's settings (assumed validated, ``config.validate``).
    """
    rng = np.random.default_rng(cfg.seed)
    c = int(cfg.num_classes)
    n = {"paper": int(cfg.num_papers), "author": int(cfg.num_authors), "field": int(cfg.num_fields)}
    cls = {
        "paper": rng.permutation(np.arange(n["paper"], dtype=np.int64) % c),
        "author": rng.integers(0, c, n["author"]).astype(np.int64),
        "field": np.arange(n["field"], dtype=np.int64) % c,
    }
    paper_members = _members(cls["paper"], c)
    h = float(cfg.homophily)

    # authors write papers mostly of their home class
    k = 1 + rng.poisson(max(cfg.papers_per_author - 1.0, 0.0), n["author"])
    a = np.repeat(np.arange(n["author"], dtype=np.int64), k)
    p = _draw(rng, cls["author"][a], paper_members, n["paper"], h)
    a, p = _unique_pairs(a, p, n["paper"])

    # citations towards popular papers, mostly of the citing paper's class
    popularity = 1.0 + rng.pareto(2.0, n["paper"])
    refs = rng.poisson(cfg.citations, n["paper"])
    cs = np.repeat(np.arange(n["paper"], dtype=np.int64), refs)
    cd = _draw(rng, cls["paper"][cs], paper_members, n["paper"], h, popularity)
    keep = cs != cd
    cs, cd = _unique_pairs(cs[keep], cd[keep], n["paper"])

    # fields of study: distinct per paper, mostly of the paper's class
    fp = np.repeat(np.arange(n["paper"], dtype=np.int64), cfg.fields_per_paper)
    ff = _draw(rng, cls["paper"][fp], _members(cls["field"], c), n["field"], h)
    fp, ff = _unique_pairs(fp, ff, n["field"])

    edges = {
        ("author", "writes", "paper"): (a, p),
        ("paper", "written_by", "author"): (p, a),
        ("paper", "cites", "paper"): (cs, cd),
        ("paper", "cited_by", "paper"): (cd, cs),
        ("paper", "has_topic", "field"): (fp, ff),
        ("field", "topic_of", "paper"): (ff, fp),
    }
    assert list(edges) == [tuple(e) for e in HETSYNTH_ETYPES]

    # class-mean features (one set of means for every type: a class looks alike wherever it is)
    f = int(cfg.feat_dim)
    mu = rng.standard_normal((c, f))
    mu *= CLASS_MEAN_NORM / np.maximum(np.linalg.norm(mu, axis=1, keepdims=True), 1e-12)
    scale = np.float32(1.0 / np.sqrt(cfg.noise**2 + CLASS_MEAN_NORM**2 / f))
    feat = {}
    for t in HETSYNTH_NTYPES:  # drawn for every type, so that feat_types does not change the random stream
        x = rng.standard_normal((n[t], f), dtype=np.float32) * np.float32(cfg.noise) + mu.astype(np.float32)[cls[t]]
        if t in cfg.feat_types:
            feat[t] = x * scale

    perm = rng.permutation(n["paper"])
    n_train = max(1, min(int(round(cfg.train_frac * n["paper"])), n["paper"] - 1))
    n_val = max(0, min(int(round(cfg.val_frac * n["paper"])), n["paper"] - n_train - 1))
    split = np.full(n["paper"], 2, dtype=np.int8)
    split[perm[:n_train]] = 0
    split[perm[n_train : n_train + n_val]] = 1
    return {
        "edges": edges,
        "num_nodes": n,
        "classes": cls,
        "feat": feat,
        "label": cls["paper"],
        "train_mask": split == 0,
        "val_mask": split == 1,
        "test_mask": split == 2,
    }


def hetsynth_graph(cfg: HetSynthConfig) -> dgl.DGLGraph:
    """The generated heterogeneous graph as a DGLGraph (idtype int64).

    Args:
        cfg: the generator's settings.

    Returns:
        A heterograph of node types author, field, paper and the six relations of
        :data:`~dgl_grappa.config.HETSYNTH_ETYPES`; ``feat`` (float32) on the types of
        ``cfg.feat_types``; on papers ``label`` (int64) and ``train_mask`` / ``val_mask`` /
        ``test_mask`` (bool).
    """
    a = generate_hetsynth(cfg)
    g = dgl.heterograph(
        {e: (torch.from_numpy(s), torch.from_numpy(d)) for e, (s, d) in a["edges"].items()},
        num_nodes_dict=a["num_nodes"],
        idtype=torch.int64,
    )
    for t, x in a["feat"].items():
        g.nodes[t].data["feat"] = torch.from_numpy(x).contiguous()
    g.nodes["paper"].data["label"] = torch.from_numpy(a["label"]).to(torch.int64)
    for k in ("train_mask", "val_mask", "test_mask"):
        g.nodes["paper"].data[k] = torch.from_numpy(a[k]).to(torch.bool)
    return g


__all__ = ["generate_hetsynth", "hetsynth_graph"]
