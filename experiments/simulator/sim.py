"""Single-process simulator of synchronous data-parallel GNN training: DistDGL vs Grappa.

W workers are simulated in one process. For synchronous data-parallel SGD this is exact:
every step, each worker's batch loss is formed on its own (local) computation graph, the
losses are combined exactly as the gradient reducer combines the gradients (the combination
is linear, so one backward of the combined scalar gives the all-reduced gradient), and one
optimizer step follows.

Systems (``Variant.system``):
* ``distdgl``: each trainer's seeds are its own part's train nodes, neighbours are sampled
  uniformly without replacement on the FULL graph (what DistDGL computes); gradients averaged.
* ``grappa``: seeds and neighbours only from the worker's local graph, with the mechanism
  options of :class:`Variant` (sampler, halo, first-hop completion, stale halo embeddings,
  GCN normalisation, empty-neighbourhood rule, estimator, repartitioning).

Node keys: every (worker, node) pair is the int64 key ``w * N + v``, so the computation
graphs of all W workers are built by one vectorised sampler call and run in one forward.

Models mirror dgl_grappa.method.models: GraphSAGE (DGL SAGEConv, mean) and GCN (implicit self loop,
normalised by block in-degree + 1), ReLU + dropout between layers and dropout on the input.
Evaluation: full graph, full neighbourhoods, every epoch.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partitioners import make_partition, partition_stats  # noqa: E402

# --------------------------------------------------------------------------------------
# hyper-parameters (fixed per dataset; never tuned per mechanism)

HPARAMS = {
    # Planetoid: 120-140 train nodes, so small batches and more epochs.
    "cora": dict(hidden=64, dropout=0.5, lr=0.01, weight_decay=5e-4, batch=16, epochs=60),
    "citeseer": dict(hidden=64, dropout=0.5, lr=0.01, weight_decay=5e-4, batch=16, epochs=60),
    # lr 0.01: at the authors' 0.003 every system sits at chance for the first ~100 steps.
    "syn20k": dict(hidden=128, dropout=0.5, lr=0.01, weight_decay=0.0, batch=512, epochs=30),
    "syn5k": dict(hidden=128, dropout=0.5, lr=0.01, weight_decay=0.0, batch=512, epochs=30),  # gradient study
    "syn100k": dict(hidden=128, dropout=0.5, lr=0.01, weight_decay=0.0, batch=1000, epochs=20),
}
FANOUTS = {2: [25, 10], 3: [15, 10, 5], 4: [20, 15, 10, 5]}  # input layer first (authors' values)
W_MIN = 0.05
LAM = 0.5


# --------------------------------------------------------------------------------------
# graph


@dataclass
class Graph:
    """The full graph as an in-neighbour CSR plus node data (torch, int64 ids)."""

    name: str
    n: int
    indptr: torch.Tensor
    indices: torch.Tensor
    deg: torch.Tensor
    x: torch.Tensor
    y: torch.Tensor
    train: torch.Tensor
    val: torch.Tensor
    test: torch.Tensor
    num_classes: int
    dgl_graph: object = None

    @property
    def dst(self) -> torch.Tensor:
        return torch.repeat_interleave(torch.arange(self.n), self.deg)


#: Short keys of a custom synthetic dataset, ``syn:n=30000,deg=16,hom=0.6,noise=8,train=0.1``.
_SYN_KEYS = {
    "n": ("num_nodes", int),
    "deg": ("avg_degree", float),
    "hom": ("homophily", float),
    "noise": ("noise", float),
    "classes": ("num_classes", int),
    "train": ("train_frac", float),
}


def custom_synthetic(name: str):
    """SyntheticConfig of a ``syn:key=value,...`` dataset name (a graph other than the
    package's presets, to check a mechanism on a harder, non-saturated graph)."""
    from dgl_grappa.config import SyntheticConfig

    kw = {}
    for item in name[len("syn:") :].split(","):
        key, _, value = item.partition("=")
        if key not in _SYN_KEYS:
            raise ValueError(f"unknown key {key!r} in {name!r}; known: {sorted(_SYN_KEYS)}")
        field_name, cast = _SYN_KEYS[key]
        kw[field_name] = cast(value)
    if "train_frac" in kw:
        kw["val_frac"] = min(0.2, (1 - kw["train_frac"]) / 2)
    return SyntheticConfig(preset="custom", **kw)


def load_graph(name: str) -> Graph:
    from dgl_grappa.config import DataConfig, SyntheticConfig
    from dgl_grappa.data import load_dataset

    if name in ("cora", "citeseer"):
        cfg = DataConfig(name=name)
    elif name.startswith("syn:"):
        cfg = DataConfig(name="synthetic", synthetic=custom_synthetic(name))
    elif name.startswith("syn"):
        n = {"syn20k": 20_000, "syn100k": 100_000, "syn5k": 5_000}[name]
        cfg = DataConfig(name="synthetic", synthetic=SyntheticConfig(preset="hard", num_nodes=n, avg_degree=10))
    else:
        raise ValueError(name)
    g = load_dataset(cfg)
    indptr, indices, _ = g.adj_tensors("csc")  # column = destination: in-neighbours per node
    indptr, indices = indptr.to(torch.int64), indices.to(torch.int64)
    nd = g.ndata
    return Graph(
        name,
        g.num_nodes(),
        indptr,
        indices,
        indptr[1:] - indptr[:-1],
        nd["feat"].float(),
        nd["label"].long(),
        nd["train_mask"].bool(),
        nd["val_mask"].bool(),
        nd["test_mask"].bool(),
        int(nd["label"].max()) + 1,
        g,
    )


# --------------------------------------------------------------------------------------
# pure functions: local CSR, samplers, aggregation weights, first-hop aggregates


def local_csr(G: Graph, part: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """CSR of intra-part edges (halo dropped): (indptr, indices, local in-degree)."""
    keep = part[G.indices] == part[G.dst]
    ldeg = torch.zeros(G.n, dtype=torch.int64).index_add_(
        0, G.dst[keep], torch.ones(int(keep.sum()), dtype=torch.int64)
    )
    lptr = torch.zeros(G.n + 1, dtype=torch.int64)
    lptr[1:] = torch.cumsum(ldeg, 0)
    return lptr, G.indices[keep], ldeg


def sample_rows(
    indptr: torch.Tensor, indices: torch.Tensor, nodes: torch.Tensor, k: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Uniform sampling without replacement: min(k, deg) in-neighbours per node (k < 0: all).

    Returns (row, pos): row indexes ``nodes``, pos indexes ``indices`` (the CSR slot).
    """
    start = indptr[nodes]
    deg = indptr[nodes + 1] - start
    e = int(deg.sum())
    row = torch.repeat_interleave(torch.arange(nodes.numel()), deg)
    off = torch.cumsum(deg, 0) - deg
    local = torch.arange(e) - off[row]
    if k >= 0 and bool((deg > k).any()):
        # random order inside each row: sort by row + U(0,1), then keep the first k
        order = torch.argsort(row.to(torch.float64) + torch.rand(e, generator=gen, dtype=torch.float64))
        row, local = row[order], local[order]
        keep = (torch.arange(e) - off[row]) < k
        row, local = row[keep], local[keep]
    return row, start[row] + local


def sample_foldback(
    G: Graph,
    part: torch.Tensor,
    lptr: torch.Tensor,
    lind: torch.Tensor,
    ldeg: torch.Tensor,
    nodes: torch.Tensor,
    k: int,
    gen: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The authors' sampler: draw min(k, deg) slots over the FULL neighbour list; a draw that
    hits a remote neighbour is folded back onto local neighbour (slot mod deg_loc); nodes with
    no local neighbour lose their remote draws. Returns (row, src node id)."""
    row, pos = sample_rows(G.indptr, G.indices, nodes, k, gen)
    v = nodes[row]
    u = G.indices[pos]
    remote = part[u] != part[v]
    if bool(remote.any()):
        j = pos[remote] - G.indptr[v[remote]]
        dl = ldeg[v[remote]]
        ok = dl > 0
        folded = lind[lptr[v[remote][ok]] + j[ok] % dl[ok]]
        u = u.clone()
        idx = remote.nonzero(as_tuple=True)[0]
        u[idx[ok]] = folded
        keep = torch.ones_like(remote)
        keep[idx[~ok]] = False
        row, u = row[keep], u[keep]
    return row, u


def agg_weights(
    model: str, norm: str, row: torch.Tensor, ndraw: torch.Tensor, gdeg: torch.Tensor, ldeg: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Edge weights (one per sampled edge, duplicates allowed) and self weights of a layer.

    sage (mean): edge 1/ndraw; no self weight (SAGE has its own self path).
    gcn, norm="block" (package/DGL): self 1/(ndraw+1), edge 1/(ndraw+1).
    gcn, norm="ht" (Horvitz-Thompson to the full degree d): self 1/(d+1), edge d/(ndraw (d+1)).
    gcn, norm="gdeg" (global-degree normalisation): self 1/(d+1), edge (d_loc/ndraw)/(d+1).
    """
    nd = ndraw.to(torch.float32)
    if model == "sage":
        return 1.0 / nd[row], None
    d = gdeg.to(torch.float32)
    if norm == "block":
        return 1.0 / (nd[row] + 1.0), 1.0 / (nd + 1.0)
    if norm == "ht":
        return d[row] / nd[row] / (d[row] + 1.0), 1.0 / (d + 1.0)
    if norm == "gdeg":
        return ldeg.to(torch.float32)[row] / nd[row] / (d[row] + 1.0), 1.0 / (d + 1.0)
    raise ValueError(norm)


def first_hop(G: Graph, model: str) -> torch.Tensor:
    """Full-graph neighbour aggregate of the raw features, per node: SAGE mean_{N(v)} x_u
    (0 if no neighbour), GCN sum_{N(v)} x_u / (d_v + 1) (the self term x_v / (d_v + 1) is added
    in the layer, so that dropout can act on x_v alone). What the owners precompute."""
    s = torch.zeros_like(G.x).index_add_(0, G.dst, G.x[G.indices])
    d = G.deg.to(torch.float32).unsqueeze(1)
    if model == "sage":
        return s / d.clamp(min=1)
    return s / (d + 1)


def first_hop_var(G: Graph, model: str, p: float, fanout: int) -> torch.Tensor:
    """fhcdrop=2: per node and feature, the variance that DistDGL's layer-0 neighbour aggregate
    has around the exact one given the node: dropout p on each neighbour's row, then (when the
    fan-out k is below the degree d) a uniform k-subset without replacement. With m1, m2 the
    neighbours' first and second moments, Var(mean) = (p/(1-p) m2 + (d-k)/(d-1) (m2 - m1^2)) / k;
    GCN's aggregate is d/(d+1) times the mean. A second precomputed row per node, read with A x."""
    d = G.deg.to(torch.float32).unsqueeze(1)
    m1 = first_hop(G, "sage")  # the neighbour mean
    m2 = torch.zeros_like(G.x).index_add_(0, G.dst, G.x[G.indices] ** 2) / d.clamp(min=1)
    k = d.clamp(max=fanout) if fanout > 0 else d
    fpc = ((d - k) / (d - 1).clamp(min=1)).clamp(min=0)
    var = (p / (1 - p) * m2 + fpc * (m2 - m1 * m1).clamp(min=0)) / k.clamp(min=1)
    if model == "gcn":
        var = var * (d / (d + 1)) ** 2
    return var


class NoisyRows:
    """Rows of A x plus Gaussian noise of a given per-entry variance (fhcdrop=2): the second
    moments of DistDGL's sampled, dropped-out layer-0 aggregate without its neighbours' rows.
    Indexing (dense) or ``rows(nodes, p)`` (sparse, same pattern as A x) draws fresh noise."""

    def __init__(self, ax, var):
        self.ax = ax
        self.std = var.sqrt() if isinstance(var, torch.Tensor) else None
        if isinstance(ax, SparseRows):
            assert isinstance(var, SparseRows) and torch.equal(var.col, ax.col), "variance pattern != A x pattern"
            self.sstd = var.val.sqrt()

    def __getitem__(self, nodes):
        return self.ax[nodes] + torch.randn(len(nodes), self.ax.shape[1]) * self.std[nodes]

    def rows(self, nodes: torch.Tensor, p: float) -> torch.Tensor:
        a = self.ax
        r, pos = sample_rows(a.ptr, a.col, nodes, -1, None)
        v = a.val[pos] + torch.randn(pos.numel()) * self.sstd[pos]
        return torch.sparse_coo_tensor(torch.stack([r, a.col[pos]]), v, (nodes.numel(), a.dim))


def hop2_rows(G: Graph, model: str, ax: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """leaf=hop2: per node, the in-neighbour means (M a, M b) that layer 0 turns into an estimate
    of the mean of the neighbours' layer-0 outputs (ReLU of the mean, not the mean of ReLUs).
    SAGE: a = x, b = A x (mean); GCN: a = x / (d + 1), b = A x (sum / (d + 1))."""
    d = G.deg.to(torch.float32).unsqueeze(1)
    a = G.x if model == "sage" else G.x / (d + 1)

    def mean(t):
        return torch.zeros_like(t).index_add_(0, G.dst, t[G.indices]) / d.clamp(min=1)

    return mean(a), mean(ax)


@dataclass
class SparseRows:
    """Row-sparse matrix (CSR) for sparse bag-of-words inputs (Cora, CiteSeer: ~1 % non-zero)."""

    ptr: torch.Tensor
    col: torch.Tensor
    val: torch.Tensor
    dim: int

    @staticmethod
    def of(x: torch.Tensor) -> "SparseRows | None":
        if float((x != 0).float().mean()) > 0.1:
            return None
        c = x.to_sparse_csr()
        return SparseRows(c.crow_indices().long(), c.col_indices().long(), c.values(), x.shape[1])

    def rows(self, nodes: torch.Tensor, p: float) -> torch.Tensor:
        """Sparse COO [len(nodes), dim] of the rows, with dropout p on the stored entries
        (exactly dropout on the dense rows: a dropped zero stays zero)."""
        r, pos = sample_rows(self.ptr, self.col, nodes, -1, None)
        v = self.val[pos]
        if p > 0:
            v = v * (torch.rand(v.shape) >= p).to(v.dtype) / (1 - p)
        return torch.sparse_coo_tensor(torch.stack([r, self.col[pos]]), v, (nodes.numel(), self.dim))


def full_block(G: Graph, model: str) -> "Block":
    """The whole graph as one block (evaluation: full neighbourhoods)."""
    row = G.dst
    w, s = agg_weights(model, "block", row, G.deg, G.deg, G.deg)
    P = torch.sparse_coo_tensor(torch.stack([row, G.indices]), w, (G.n, G.n)).coalesce().to_sparse_csr()
    return Block(P, s, torch.arange(G.n), torch.arange(G.n))


# --------------------------------------------------------------------------------------
# blocks and the model


@dataclass
class Block:
    P: torch.Tensor  # sparse [n_dst, n_src] neighbour weights
    s: torch.Tensor | None  # [n_dst] self weights (GCN) or None (SAGE)
    dst_in_src: torch.Tensor  # [n_dst] position of every dst node among the src nodes
    dst_keys: torch.Tensor  # [n_dst] keys (w*N+v) of the dst nodes
    imp: tuple | None = None  # (dst rows, node ids) whose empty neighbourhood was imputed (leaf=hop2)


class Net(nn.Module):
    """GraphSAGE (mean) or GCN; forward over blocks or the full graph (one Block per layer)."""

    def __init__(self, model: str, in_dim: int, hidden: int, classes: int, layers: int, dropout: float):
        super().__init__()
        self.model, self.L = model, layers
        dims = [in_dim] + [hidden] * (layers - 1) + [classes]
        self.lin = nn.ModuleList()
        self.lin_n = nn.ModuleList()
        for i in range(layers):
            if model == "sage":  # SAGEConv: fc_self + fc_neigh (no bias) + bias, xavier(relu gain)
                a, b = nn.Linear(dims[i], dims[i + 1], bias=True), nn.Linear(dims[i], dims[i + 1], bias=False)
                nn.init.xavier_uniform_(a.weight, gain=nn.init.calculate_gain("relu"))
                nn.init.xavier_uniform_(b.weight, gain=nn.init.calculate_gain("relu"))
                nn.init.zeros_(a.bias)
                self.lin.append(a)
                self.lin_n.append(b)
            else:  # GraphConv: xavier weight, zero bias
                a = nn.Linear(dims[i], dims[i + 1], bias=True)
                nn.init.xavier_uniform_(a.weight)
                nn.init.zeros_(a.bias)
                self.lin.append(a)
        self.drop = nn.Dropout(dropout)

    def layer(self, i: int, blk: Block, h: torch.Tensor, imp: tuple | None = None) -> torch.Tensor:
        hd = h[blk.dst_in_src]
        agg = torch.sparse.mm(blk.P, h)
        if imp is not None:
            # leaf=hop2: an imputed row's one (self) edge has weight 1 (SAGE mean) or 1/2 (GCN,
            # ndraw=1); its neighbour term becomes that weight times the second-hop estimate
            rows, hv = imp
            agg = agg.index_copy(0, rows, hv * (1.0 if self.model == "sage" else 0.5))
        if self.model == "sage":
            return self.lin[i](hd) + self.lin_n[i](agg)
        return self.lin[i](hd * blk.s.unsqueeze(1) + agg)

    def layer0_sparse(self, blk: Block, xs: torch.Tensor) -> torch.Tensor:
        """Layer 0 on a (dropped-out) sparse input: transform first, then aggregate (same math)."""
        if self.model == "sage":
            hs = torch.sparse.mm(xs, self.lin[0].weight.t())
            hn = torch.sparse.mm(xs, self.lin_n[0].weight.t())
            return hs[blk.dst_in_src] + self.lin[0].bias + torch.sparse.mm(blk.P, hn)
        hw = torch.sparse.mm(xs, self.lin[0].weight.t())
        return hw[blk.dst_in_src] * blk.s.unsqueeze(1) + torch.sparse.mm(blk.P, hw) + self.lin[0].bias

    def _lin_in(self, lin: nn.Linear, x, nodes, drop: bool = True) -> torch.Tensor:
        p = self.drop.p if (self.training and drop) else 0.0
        if isinstance(x, SparseRows) or (isinstance(x, NoisyRows) and isinstance(x.ax, SparseRows)):
            out = torch.sparse.mm(x.rows(nodes, p), lin.weight.t())
            return out + lin.bias if lin.bias is not None else out
        return lin(F.dropout(x[nodes], p, self.training) if p > 0 else x[nodes])

    def layer0_from(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Layer 0 on precomputed mean rows (leaf=hop2): SAGE lin(a) + lin_n(b), with a = M x and
        b = M (A x); GCN W (a + b) + bias, with a = M (x / (d + 1)) and b = M (A x)."""
        if self.model == "sage":
            return self.lin[0](a) + self.lin_n[0](b)
        return self.lin[0](a + b)

    def first_layer_exact(self, x, ax, nodes: torch.Tensor, drop_ax: bool = True) -> torch.Tensor:
        """Layer 0 from precomputed (x, A x) rows of ``nodes`` (first-hop completion).
        ``drop_ax=False``: no dropout on A x (dropout before aggregation averages out over the
        neighbours; dropout on the precomputed mean would be much stronger noise)."""
        if self.model == "sage":
            return self._lin_in(self.lin[0], x, nodes) + self._lin_in(self.lin_n[0], ax, nodes, drop_ax)
        # GCN: W (x_v / (d_v + 1) + sum_u x_u / (d_v + 1)) + b, by linearity
        inv = 1.0 / (self.deg[nodes].to(torch.float32) + 1.0)
        xw = self._lin_in(self.lin[0], x, nodes) - self.lin[0].bias
        return xw * inv.unsqueeze(1) + self._lin_in(self.lin[0], ax, nodes, drop_ax)

    def forward(
        self,
        blocks: list,
        x: torch.Tensor,
        start: int = 0,
        h0: torch.Tensor | None = None,
        override=None,
        record: bool = False,
    ):
        """blocks[j] serves layer start+j. ``h0``: output of layer 0 when start == 1.
        ``override(i, blk, out) -> out`` replaces rows after layer i (stale halo embeddings)."""
        hs = []
        h = x if start == 0 else h0
        if start == 1:
            h = torch.relu(h) if self.L > 1 else h
            if override is not None:
                h = override(0, None, h)
        for j, blk in enumerate(blocks):
            i = start + j
            if i == 0 and isinstance(h, torch.Tensor) and h.is_sparse:
                out = self.layer0_sparse(blk, h)  # dropout already applied to the sparse rows
            else:
                imp = None
                if i == 1 and blk.imp is not None and getattr(self, "hop2", None) is not None:
                    rows, nodes = blk.imp
                    hv = torch.relu(self.layer0_from(self.hop2[0][nodes], self.hop2[1][nodes]))
                    imp = (rows, self.drop(hv))
                out = self.layer(i, blk, self.drop(h), imp)
            if i < self.L - 1:
                out = torch.relu(out)
                if record:
                    hs.append(out)
                if override is not None:
                    out = override(i, blk, out)
            h = out
        return (h, hs) if record else h


# --------------------------------------------------------------------------------------
# variants, partition views


@dataclass(frozen=True)
class Variant:
    system: str = "grappa"  # grappa | distdgl
    sampler: str = "local"  # local (DGL's on the local graph) | foldback
    halo: str = "drop"  # drop | keep (1-hop halo rows as leaves, read once per partitioning)
    # | keep2 (1-hop halo with its in-edges, 2-hop halo rows as leaves)
    fhc: bool = False  # first-hop completion: exact layer 0 from precomputed A x
    hist: int = 0  # stale halo embeddings refreshed every `hist` epochs (0 = off; needs halo keep)
    norm: str = "block"  # GCN normalisation: block | ht | gdeg
    empty: str = "zero"  # empty sampled neighbourhood: zero (DGL) | self (impute own features)
    est: str = "none"  # none | batch | node | shrinkage | cv (control variate, refreshed each epoch)
    repart: int = 0  # switch partitioning every `repart` epochs (0 = fixed)
    fhcdrop: int = 1  # fhc: dropout on the precomputed A x rows too (1), only on x (0),
    # or only on x plus Gaussian noise on A x with the variance of
    # DistDGL's sampled, dropped-out aggregate (2; first_hop_var)
    fhcat: str = "all"  # fhc: every node's layer 0 is exact (all), or only the halo
    # nodes' (halo: owned nodes sample layer 0 as DistDGL does, over
    # their full in-neighbour lists, with halo keep)
    leaf: str = "self"  # empty neighbourhood at layer 1 (halo leaves, with fhc and empty=self):
    # self (h0_v) | hop2 (layer 0 on the halo node's precomputed
    # neighbour means M x, M A x: an estimate of mean_u h0_u)

    def tag(self) -> str:
        if self.system == "distdgl":
            # DistDGL with an exact first hop (fhc; fhcdrop as set) isolates fhc's own effect
            fhc = f"+fhc{self.fhcdrop}" if self.fhc else ""
            return "distdgl" + ("" if self.norm == "block" else f"-{self.norm}") + fhc
        d = Variant()
        parts = [f"{k}={v}" for k, v in asdict(self).items() if k != "system" and v != getattr(d, k)]
        return "grappa" + ("[" + ",".join(parts) + "]" if parts else "")


def parse_variant(spec: str) -> Variant:
    """'grappa:halo=keep,fhc=1,est=batch' or 'distdgl'."""
    name, _, rest = spec.partition(":")
    kw = {}
    for item in filter(None, rest.split(",")):
        k, v = item.split("=")
        kw[k] = int(v) if k in ("fhc", "hist", "repart", "fhcdrop") else v
    if "fhc" in kw:
        kw["fhc"] = bool(kw["fhc"])
    return Variant(system=name, **kw)


class PartView:
    """What one partitioning gives every worker: local CSR, seeds, halo sets, coverage weights."""

    def __init__(self, G: Graph, part: np.ndarray, W: int, halo: str, hops: int):
        self.part = torch.as_tensor(part, dtype=torch.int64)
        self.W = W
        self.lptr, self.lind, self.ldeg = local_csr(G, self.part)
        self.seeds = [((self.part == w) & G.train).nonzero(as_tuple=True)[0] for w in range(W)]
        self.inner = torch.bincount(self.part, minlength=W)
        # halo of w: distinct sources of cut edges into w
        dst = G.dst
        cut = self.part[G.indices] != self.part[dst]
        keys = torch.unique(self.part[dst[cut]] * G.n + G.indices[cut])
        self.halo_keys = keys  # w*N+v of every halo (worker, node) pair
        self.halo_count = torch.bincount(keys // G.n, minlength=W)
        self.halo2_count = torch.zeros(W, dtype=torch.int64)
        self.halo2_edges = 0  # in-edges of the 1-hop halo nodes, all workers
        if halo == "keep2":
            # second ring: sources of the 1-hop halo nodes' in-edges that w holds in neither ring
            for w in range(W):
                h1 = torch.zeros(G.n, dtype=torch.bool)
                h1[keys[keys // G.n == w] % G.n] = True
                src = G.indices[h1[dst]]
                ring2 = torch.unique(src[(self.part[src] != w) & ~h1[src]])
                self.halo2_count[w] = ring2.numel()
                self.halo2_edges += int(h1[dst].sum())
        self.weights = self._coverage(G, halo, hops)

    def _coverage(self, G: Graph, halo: str, hops: int) -> torch.Tensor:
        """Clamped coverage weight of every node in its owner's local graph (package formula)."""
        from dgl_grappa.method import coverage as cov

        w_all = torch.ones(G.n)
        if hops <= 0:
            return w_all
        dst = G.dst
        for w in range(self.W):
            inner = self.part == w
            m = inner[dst] & (inner[G.indices] if halo == "drop" else torch.ones_like(dst, dtype=torch.bool))
            s, d = G.indices[m], dst[m]
            nodes = torch.unique(torch.cat([inner.nonzero(as_tuple=True)[0], s]))
            loc = torch.full((G.n,), -1, dtype=torch.int64)
            loc[nodes] = torch.arange(nodes.numel())
            c = cov.coverage(loc[s], loc[d], nodes.numel(), G.deg[nodes], hops, True)
            sel = inner[nodes]
            w_all[nodes[sel]] = cov.node_weights(c[sel], W_MIN)
        return w_all


# --------------------------------------------------------------------------------------
# the simulator


class Sim:
    def __init__(
        self, G: Graph, model: str, layers: int, W: int, var: Variant, hp: dict, seed: int, part_fn, fanouts=None
    ):
        self.G, self.model, self.L, self.W, self.var, self.hp, self.seed = G, model, layers, W, var, hp, seed
        self.fanouts = list(fanouts or FANOUTS[layers])
        self.part_fn = part_fn  # switch index -> (part ndarray, seconds)
        torch.manual_seed(seed)
        self.gen = torch.Generator().manual_seed(seed * 7919 + 1)
        self.net = Net(model, G.x.shape[1], hp["hidden"], G.num_classes, layers, hp["dropout"])
        self.opt = torch.optim.Adam(self.net.parameters(), lr=hp["lr"], weight_decay=hp["weight_decay"])
        self.model_bytes = sum(p.numel() * 4 for p in self.net.parameters())
        self.row_bytes = G.x.shape[1] * 4 + 8
        self.full = full_block(G, model)
        self.ax = first_hop(G, model) if var.fhc else None
        self.xs = SparseRows.of(G.x)
        self.net.deg = G.deg
        if self.ax is not None:
            self.ax = SparseRows.of(self.ax) or self.ax
            if var.fhcdrop == 2:
                v = first_hop_var(G, model, hp["dropout"], self.fanouts[0])
                self.ax = NoisyRows(self.ax, SparseRows.of(v) if isinstance(self.ax, SparseRows) else v)
        self.hist = None
        self.net.hop2 = None
        if var.leaf == "hop2":
            assert var.fhc and var.empty == "self" and var.norm == "block", (
                "leaf=hop2 needs fhc=1, empty=self, norm=block"
            )
            self.net.hop2 = hop2_rows(G, model, first_hop(G, model))
        self.hops = max(layers - (1 if var.fhc else 0), 0)
        self.bytes = {"grad": 0, "feature": 0, "one_time": 0, "switch_rows": 0, "hist": 0, "cv": 0}
        self.delta = None
        self.view = None
        self.switches = 0
        self.part_seconds = []

    # --- partitioning -------------------------------------------------------------
    def set_partition(self, switch: int):
        part, secs = self.part_fn(switch)
        self.part_seconds.append(secs)
        old = self.view
        grappa = self.var.system == "grappa"
        self.view = PartView(self.G, part, self.W, self.var.halo if grappa else "drop", self.hops if grappa else 0)
        v, G = self.view, self.G
        if self.var.system == "grappa":
            h = int(v.halo_count.sum())
            ot = 0
            if self.var.halo == "keep":
                ot += h * self.row_bytes  # halo feature rows, read once
            if self.var.halo == "keep2":
                # both rings' feature rows, and the 1-hop halo nodes' in-edges (a source id each)
                h = h + int(v.halo2_count.sum())
                ot += h * self.row_bytes + v.halo2_edges * 8
            if self.var.fhc:
                # drop: halo x rows, read once to compute the inner nodes' A x; keep: those rows are
                # already read, plus the halo nodes' A x rows from their owners
                ot += h * self.row_bytes
            if self.var.leaf == "hop2":
                ot += h * self.row_bytes  # one more precomputed row per halo node
            if self.var.fhc and self.var.fhcdrop == 2:
                ot += h * self.row_bytes  # the variance row, read with A x
            if old is not None:  # rows (features + in-edges) newly owned
                moved = old.part != v.part
                rows = int(moved.sum())
                self.bytes["switch_rows"] += rows * self.row_bytes + int(G.deg[moved].sum()) * 8
            self.bytes["one_time"] += ot
        self.switches += 1

    # --- blocks -----------------------------------------------------------------------
    def _sample(self, keys: torch.Tensor, k: int):
        """One layer for frontier keys: (row, src keys, ndraw, gdeg, ldeg)."""
        G, v_, var = self.G, self.view, self.var
        N = G.n
        w, v = keys // N, keys % N
        if var.system == "distdgl":
            row, pos = sample_rows(G.indptr, G.indices, v, k, self.gen)
            src = G.indices[pos]
            ldeg = G.deg[v]
        else:
            owned = v_.part[v] == w  # halo nodes (keep) are leaves
            idx = owned.nonzero(as_tuple=True)[0]
            vv = v[idx]
            if var.halo == "keep2":
                # the 1-hop halo nodes have their in-edges too (the second ring are the leaves)
                idx = (owned | torch.isin(keys, v_.halo_keys)).nonzero(as_tuple=True)[0]
                vv = v[idx]
            if var.halo in ("keep", "keep2"):
                r, pos = sample_rows(G.indptr, G.indices, vv, k, self.gen)
                src = G.indices[pos]
                ld = G.deg[vv]
            elif var.sampler == "foldback":
                r, src = sample_foldback(G, v_.part, v_.lptr, v_.lind, v_.ldeg, vv, k, self.gen)
                ld = v_.ldeg[vv]
            else:
                r, pos = sample_rows(v_.lptr, v_.lind, vv, k, self.gen)
                src = v_.lind[pos]
                ld = v_.ldeg[vv]
            row = idx[r]
            ldeg = torch.zeros_like(v)
            ldeg[idx] = ld
        src_keys = w[row] * N + src
        ndraw = torch.bincount(row, minlength=keys.numel())
        return row, src_keys, ndraw, G.deg[v], ldeg

    def build(self, seed_keys: torch.Tensor):
        """Blocks (input layer first) for the seeds; with fhc layer 0 is not sampled."""
        blocks = []
        frontier = seed_keys
        first = 1 if self.var.fhc and self.var.fhcat == "all" else 0
        for i in range(self.L - 1, first - 1, -1):
            k = self.fanouts[i]
            row, src_keys, ndraw, gdeg, ldeg = self._sample(frontier, k)
            if self.var.empty == "self":
                # a node whose sampled neighbourhood is empty (but not its true one) counts
                # itself as its one sampled neighbour: the neighbour mean is imputed by h_v
                empty = ((ndraw == 0) & (gdeg > 0)).nonzero(as_tuple=True)[0]
                if empty.numel():
                    row = torch.cat([row, empty])
                    src_keys = torch.cat([src_keys, frontier[empty]])
                    ndraw = ndraw.clone()
                    ndraw[empty] = 1
                    ldeg = ldeg.clone()
                    ldeg[empty] = gdeg[empty]
            imp = None
            if self.var.leaf == "hop2" and i == 1 and self.var.empty == "self" and empty.numel():
                imp = (empty, frontier[empty] % self.G.n)
            ew, s = agg_weights(self.model, self.var.norm, row, ndraw, gdeg, ldeg)
            nd = frontier.numel()
            allk = torch.cat([frontier, src_keys])
            uniq, inv = torch.unique(allk, return_inverse=True)
            dst_in_src, cols = inv[:nd], inv[nd:]
            P = torch.sparse_coo_tensor(torch.stack([row, cols]), ew, (nd, uniq.numel())).coalesce()
            blocks.append(Block(P, s, dst_in_src, frontier, imp))
            frontier = uniq
        blocks.reverse()
        return blocks, frontier  # frontier = input keys (src of layer 0, or dst of layer 0 with fhc)

    # --- training -------------------------------------------------------------------
    def _override(self):
        """Stale halo embeddings: replace the hidden rows of halo (non-owned) nodes."""
        if not (self.var.hist and self.hist is not None):
            return None
        N, part = self.G.n, self.view.part
        fhc = self.var.fhc

        def f(i, blk, out):
            if i == 0 and fhc:
                return out  # layer 0 is exact with fhc
            keys = blk.dst_keys if blk is not None else None
            if keys is None:
                return out
            w, v = keys // N, keys % N
            halo = (part[v] != w).nonzero(as_tuple=True)[0]
            if halo.numel() == 0:
                return out
            out = out.clone()
            out[halo] = self.hist[i + 1][v[halo]]
            return out

        return f

    def step(self, seed_lists: list) -> dict:
        G, N, var = self.G, self.G.n, self.var
        seed_keys = torch.cat([w * N + s for w, s in enumerate(seed_lists)])
        blocks, in_keys = self.build(seed_keys)
        in_v = in_keys % N
        if var.system == "distdgl":
            remote = int((self.view.part[in_v] != in_keys // N).sum())
            self.bytes["feature"] += remote * self.row_bytes
        self.net.train()
        out = self.forward_blocks(blocks, in_v)
        # the last block's dst nodes are seed_keys in the order given: out rows match them
        per = F.cross_entropy(out, G.y[seed_keys % N], reduction="none")
        loss = self.combine(per, seed_lists, seed_keys)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.delta is not None:
            for p, d in zip(self.net.parameters(), self.delta):
                p.grad += d
        self.opt.step()
        self.bytes["grad"] += int(2 * (self.W - 1) / self.W * self.model_bytes * self.W)
        return {"loss": float(per.mean())}

    def input_rows(self, nodes: torch.Tensor):
        """Input features of ``nodes``: sparse rows with dropout applied, or dense rows."""
        if self.xs is not None:
            return self.xs.rows(nodes, self.net.drop.p if self.net.training else 0.0)
        return self.G.x[nodes]

    def forward_blocks(self, blocks: list, in_v: torch.Tensor) -> torch.Tensor:
        if self.var.fhc and self.var.fhcat == "halo":
            assert self.var.halo == "keep" and not self.var.hist, "fhcat=halo needs halo=keep, hist=0"
            N, part = self.G.n, self.view.part
            xin = self.xs or self.G.x

            def exact_halo(i, blk, out):
                # layer 0 of the halo rows (no in-edges here) from their precomputed (x, A x)
                if i != 0:
                    return out
                k = blk.dst_keys
                rows = (part[k % N] != k // N).nonzero(as_tuple=True)[0]
                if rows.numel() == 0:
                    return out
                h = torch.relu(self.net.first_layer_exact(xin, self.ax, k[rows] % N, self.var.fhcdrop == 1))
                return out.index_copy(0, rows, h)

            return self.net(blocks, self.input_rows(in_v), override=exact_halo)
        if self.var.fhc:
            h0 = self.net.first_layer_exact(self.xs or self.G.x, self.ax, in_v, self.var.fhcdrop == 1)
            return self.net(blocks, None, start=1, h0=h0, override=self._override())
        return self.net(blocks, self.input_rows(in_v), override=self._override())

    def combine(self, per: torch.Tensor, seed_lists: list, seed_keys: torch.Tensor) -> torch.Tensor:
        """The reducer: how per-worker losses become the all-reduced gradient's objective."""
        est = self.var.est if self.var.system == "grappa" else "none"
        if est == "cv":
            est = "none"
        sizes = [s.numel() for s in seed_lists]
        chunks = torch.split(per, sizes)
        wv = self.view.weights[seed_keys % self.G.n]
        wch = torch.split(wv, sizes)
        live = [i for i, n in enumerate(sizes) if n > 0]
        if est == "none":
            return sum(chunks[i].mean() for i in live) / self.W
        if est == "node":
            return (wv * per).sum() / wv.sum()
        a = torch.tensor([float(wch[i].mean()) if sizes[i] else 0.0 for i in range(self.W)])
        if est == "shrinkage":
            a = (1 - LAM) * a + LAM * a.mean()
        return sum(a[i] * chunks[i].mean() for i in live) / a.sum()

    def refresh_cv(self):
        """Control variate: delta = g*(theta) - gbar_loc(theta), both without dropout; g* from one
        full-graph pass over all train nodes, gbar_loc from one local pass with every worker's
        train nodes as the batch. Added to every step's gradient until the next refresh."""
        G, N = self.G, self.G.n
        self.net.eval()
        self.net.zero_grad()
        out = self.net([self.full] * self.L, self.input_rows(torch.arange(N)))
        F.cross_entropy(out[G.train], G.y[G.train]).backward()
        g_full = [p.grad.clone() for p in self.net.parameters()]
        self.net.zero_grad()
        seeds = self.view.seeds
        keys = torch.cat([w * N + x for w, x in enumerate(seeds)])
        blocks, in_keys = self.build(keys)
        per = F.cross_entropy(self.forward_blocks(blocks, in_keys % N), G.y[keys % N], reduction="none")
        self.combine(per, seeds, keys).backward()
        self.delta = [a - p.grad for a, p in zip(g_full, self.net.parameters())]
        self.net.zero_grad()
        self.net.train()
        h = int(self.view.halo_count.sum())
        # distributed full-graph forward + backward: per layer, halo rows of hidden width each way
        # (layer 0 sends W x rows, not raw x; with fhc layer 0 needs no exchange), plus one extra
        # gradient all-reduce
        layers = self.L - (1 if self.var.fhc else 0)
        self.bytes["cv"] += h * 4 * self.hp["hidden"] * layers * 2 + int(2 * (self.W - 1) * self.model_bytes)

    @torch.no_grad()
    def evaluate(self) -> dict:
        self.net.eval()
        out, hs = self.net([self.full] * self.L, self.input_rows(torch.arange(self.G.n)), record=True)
        self.net.train()
        pred = out.argmax(1)
        ok = pred == self.G.y
        return {
            "val": float(ok[self.G.val].float().mean()),
            "test": float(ok[self.G.test].float().mean()),
            "train": float(ok[self.G.train].float().mean()),
            "hidden": hs,
        }

    def run(self, epochs: int, batch: int) -> dict:
        var = self.var
        t0 = time.perf_counter()
        self.set_partition(0)
        hist_epochs = []
        for ep in range(epochs):
            if var.repart and ep > 0 and ep % var.repart == 0:
                self.set_partition(ep // var.repart)
            if var.hist and (self.hist is None or ep % var.hist == 0):
                ev = self.evaluate()
                self.hist = {i + 1: h for i, h in enumerate(ev["hidden"])}
                ncache = (self.L - 1) - (1 if var.fhc else 0)
                self.bytes["hist"] += int(self.view.halo_count.sum()) * self.hp["hidden"] * 4 * max(ncache, 0)
            if var.est == "cv" and var.system == "grappa":
                self.refresh_cv()
            seeds = self.view.seeds
            steps = max(math.ceil(s.numel() / batch) for s in seeds)
            perms = [s[torch.randperm(s.numel(), generator=self.gen)] for s in seeds]
            chunks = [torch.tensor_split(p, steps) for p in perms]
            losses = []
            for st in range(steps):
                losses.append(self.step([c[st] for c in chunks])["loss"])
            ev = self.evaluate()
            hist_epochs.append(
                {
                    "epoch": ep,
                    "loss": float(np.mean(losses)),
                    "val": ev["val"],
                    "test": ev["test"],
                    "train_acc": ev["train"],
                    "steps": steps,
                }
            )
        wall = time.perf_counter() - t0
        return self.summary(hist_epochs, epochs, wall)

    def summary(self, hist_epochs: list, epochs: int, wall: float) -> dict:
        val = np.array([h["val"] for h in hist_epochs])
        test = np.array([h["test"] for h in hist_epochs])
        n_last = max(1, epochs // 5)  # "final" = mean over the last 20 % of epochs
        tail = max(2, epochs // 5)
        best = int(np.argmax(val))
        b = self.bytes
        one_time = b["one_time"] + b["switch_rows"] + b["hist"] + b["cv"]
        per_epoch = (b["grad"] + b["feature"] + one_time) / epochs
        v = self.view
        # rows held besides the inner rows: halo x (keep), A x of inner nodes (fhc, unless fhcat=halo),
        # A x of halo (fhc+keep); keep2 counts both rings as halo
        keep, fhc = self.var.halo in ("keep", "keep2"), self.var.fhc
        held = (v.halo_count + v.halo2_count).float()
        cache_rows = held * ((1 if keep else 0) + (1 if fhc and keep else 0)) + v.inner.float() * (
            1 if fhc and self.var.fhcat == "all" else 0
        )
        hid_ratio = self.hp["hidden"] * 4 / self.row_bytes
        ncache = max((self.L - 1) - (1 if self.var.fhc else 0), 0) if self.var.hist else 0
        cache_rows = cache_rows + v.halo_count.float() * ncache * hid_ratio
        return {
            "final_test": float(test[-n_last:].mean()),
            "final_val": float(val[-n_last:].mean()),
            "best_val": float(val[best]),
            "test_at_best_val": float(test[best]),
            "best_epoch": best,
            "converged": bool(abs(val[-tail:].mean() - val[-2 * tail : -tail].mean()) < 0.01),
            "val_tail_delta": float(val[-tail:].mean() - val[-2 * tail : -tail].mean()),
            "bytes_per_epoch": per_epoch,
            "bytes": {**b, "one_time_total": one_time},
            "cache_rows_over_inner_max": float((cache_rows / v.inner.float()).max()),
            "halo_over_inner_max": float((v.halo_count.float() / v.inner.float()).max()),
            "halo2_over_inner_max": float((v.halo2_count.float() / v.inner.float()).max()),
            "part_seconds_mean": float(np.mean(self.part_seconds)),
            "switches": self.switches,
            "wall_s": wall,
            "model_bytes": self.model_bytes,
            "bytes_v2": True,
            "halo_rows_total": int(v.halo_count.sum()),
            "row_bytes": self.row_bytes,
            "curve": hist_epochs,
        }


# --------------------------------------------------------------------------------------
# cells

_PART_CACHE: dict = {}


def partition_seed(dataset: str, seed: int, switch: int = 0) -> int:
    """Seed of a partitioning. The synthetic generator draws its planted blocks as
    default_rng(0).permutation(arange(N) % 64); a random partition drawn with seed 0 would be
    the same permutation of arange(N) % k, i.e. the planted blocks mod k (cut 0.08 instead of
    0.75). Synthetic graphs therefore get seeds offset by one."""
    return seed * 1000 + switch + (1 if dataset.startswith("syn") else 0)


def part_fn_for(G: Graph, method: str, W: int, seed: int):
    """switch index -> (part, seconds); switch s of seed r uses partition_seed(r, s)."""
    ind, ptr = G.indices.numpy(), G.indptr.numpy()
    tm = G.train.numpy()

    def f(switch: int):
        key = (G.name, method, W, seed, switch)
        if key not in _PART_CACHE:
            _PART_CACHE[key] = make_partition(
                method, ptr, ind, W, partition_seed(G.name, seed, switch), train_mask=tm, dgl_graph=G.dgl_graph
            )
        return _PART_CACHE[key]

    return f


def run_cell(
    G: Graph,
    dataset: str,
    model: str,
    layers: int,
    W: int,
    method: str,
    seed: int,
    var: Variant,
    epochs: int | None = None,
    batch: int | None = None,
) -> dict:
    hp = dict(HPARAMS["syn20k" if dataset.startswith("syn:") else dataset])
    if epochs:
        hp["epochs"] = epochs
    if batch:
        hp["batch"] = batch
    pf = part_fn_for(G, method, W, seed)
    sim = Sim(G, model, layers, W, var, hp, seed, pf)
    res = sim.run(hp["epochs"], hp["batch"])
    part0, _ = pf(0)
    res.update(
        {
            "dataset": dataset,
            "model": model,
            "layers": layers,
            "parts": W,
            "partition": method,
            "seed": seed,
            "variant": asdict(var),
            "tag": var.tag(),
            "hparams": hp,
            "fanouts": FANOUTS[layers],
            "partition_stats": partition_stats(G.indptr.numpy(), G.indices.numpy(), part0, W, G.train.numpy()),
        }
    )
    return res


def cell_path(out_dir: str, dataset, model, layers, W, method, seed, var: Variant) -> Path:
    stem = dataset.replace(":", "-").replace(",", "-").replace("=", "")  # syn:n=...,deg=... names
    return Path(out_dir) / f"{stem}_{method}{W}_{model}{layers}_s{seed}_{var.tag()}.json"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--models", default="sage,gcn")
    ap.add_argument("--layers", default="2,3")
    ap.add_argument("--parts", default="4")
    ap.add_argument("--partitions", default="random,ldg")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--variants", required=True, help="';'-separated, e.g. 'distdgl;grappa;grappa:halo=keep'")
    ap.add_argument("--epochs", type=int, default=0)
    ap.add_argument(
        "--batch",
        type=int,
        default=0,
        help="seeds per worker and step (0 = the dataset's; "
        "results do not record it in the file name: give such runs their own --out)",
    )
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    G = load_graph(a.dataset)
    os.makedirs(a.out, exist_ok=True)
    variants = [parse_variant(s) for s in a.variants.split(";") if s]
    for seed in map(int, a.seeds.split(",")):
        for method in a.partitions.split(","):
            for W in map(int, a.parts.split(",")):
                for layers in map(int, a.layers.split(",")):
                    for model in a.models.split(","):
                        for var in variants:
                            p = cell_path(a.out, a.dataset, model, layers, W, method, seed, var)
                            if p.exists():
                                continue
                            res = run_cell(
                                G, a.dataset, model, layers, W, method, seed, var, a.epochs or None, a.batch or None
                            )
                            p.write_text(json.dumps(res))
                            print(
                                f"{p.name}: test {res['final_test']:.4f} val {res['final_val']:.4f} "
                                f"B/ep {res['bytes_per_epoch']:.3g} conv {res['converged']} "
                                f"{res['wall_s']:.1f}s",
                                flush=True,
                            )


if __name__ == "__main__":
    main()
