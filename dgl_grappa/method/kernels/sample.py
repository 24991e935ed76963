"""Neighbour sampling in PyTorch operations: DGL's ``NeighborSampler`` semantics on any torch device.

:class:`TorchNeighborSampler` draws, for every seed of a layer, ``min(in-degree, fan-out)`` of its in-edges
uniformly without replacement (every in-edge when the fan-out is -1), layer by layer from the output
layer inwards, and relabels each layer's nodes as DGL's ``to_block`` does: a block's destinations are its
first source rows. It reads the local graph's CSC index tensors once, on the sampler's device, and from
then on every draw is a handful of tensor operations there (gathers, a fan-out's worth of vectorised
random draws for the seeds whose in-degree exceeds it, one scatter that numbers the new source nodes), so a GPU
trainer samples on its GPU with the CPU-only DGL that ``pip`` installs.

Its randomness is its own ``torch.Generator`` on the sampler's device, reseeded at every epoch
(:meth:`~TorchNeighborSampler.reseed`) the way :class:`~dgl_grappa.method.sampler.LocalBatches` reseeds
DGL's: a run's batches depend on the seed and the epoch only, also in a helper thread.

Blocks come out in one of two layouts: ``dgl`` (DGL blocks made with ``dgl.create_block`` from the sampled
index tensors, on the CPU, with ``dgl.NID`` set as DGL's sampler sets it) for DGL's layers, or ``plain``
(:class:`~.plain.PlainGraph`, what the torch kernels read), which never leaves the device.

Example:
    >>> import dgl, torch
    >>> g = dgl.graph((torch.tensor([1, 2, 3, 0, 0]), torch.tensor([0, 0, 0, 1, 2])))
    >>> sampler = TorchNeighborSampler([2], layout="plain")
    >>> sampler.reseed(0)
    >>> input_nodes, output_nodes, blocks = sampler.sample(g, torch.tensor([0, 1]))
    >>> blocks[0].in_degrees().tolist()   # min(in-degree, fan-out): 2 of node 0's 3, node 1's one
    [2, 1]
    >>> input_nodes[:2].tolist()          # the destinations are the first source rows
    [0, 1]
"""

from __future__ import annotations

import dgl
import torch
from torch import Tensor

from .plain import PlainGraph

__all__ = ["TorchNeighborSampler", "LAYOUTS"]

_NONE = torch.iinfo(torch.int64).max  # no position yet (the scatter keeps the smallest)

LAYOUTS = ("dgl", "plain")
"""How the sampled blocks come out: DGL blocks (DGL's layers, CPU) or plain index tensors (the torch kernels)."""


def _exclusive_cumsum(x: Tensor) -> Tensor:
    """``[0, x0, x0 + x1, ...]`` without the total: where each segment starts."""
    out = torch.zeros_like(x)
    if x.numel() > 1:
        torch.cumsum(x[:-1], 0, out=out[1:])
    return out


def _segment_ranks(lengths: Tensor, total: int) -> tuple[Tensor, Tensor]:
    """For segments of ``lengths`` (summing to ``total``): each element's segment and its rank in it."""
    seg = torch.repeat_interleave(torch.arange(lengths.numel(), device=lengths.device), lengths, output_size=total)
    rank = torch.arange(total, device=lengths.device) - _exclusive_cumsum(lengths).index_select(0, seg)
    return seg, rank


class TorchNeighborSampler:
    """Uniform neighbour sampling without replacement over a graph's in-edges, in PyTorch operations.

    Args:
        fanouts: in-edges drawn per destination and layer, input layer first (-1: all of them; 0: none), as
            ``dgl.dataloading.NeighborSampler(fanouts)``.
        device: where the graph's structure is held and the draws run (the trainer's device).
        layout: ``dgl`` (DGL blocks: DGL's layers; the CPU only) or ``plain`` (index tensors: the torch kernels).
        seed: the generator's first seed (:meth:`reseed` sets it again).

    It answers ``sample(graph, seeds)`` as DGL's samplers do, so :class:`~dgl_grappa.method.sampler.LocalBatches`
    and ``dgl.dataloading.as_edge_prediction_sampler`` take it as they take DGL's. ``graph``'s CSC structure is
    copied to ``device`` at its first draw and kept (one graph at a time: a new graph replaces it).
    """

    output_device = None  # what dgl.dataloading.as_edge_prediction_sampler reads of a node-wise sampler

    hub_ratio: float = 32.0
    """Seeds above their fan-out are drawn by sorting random keys of their in-edges, or, where their mean
    in-degree exceeds this many fan-outs (hubs), by Floyd's algorithm, whose work does not grow with the degree."""

    def __init__(self, fanouts: list[int], device="cpu", layout: str = "dgl", seed: int = 0):
        if layout not in LAYOUTS:
            raise ValueError(f"layout={layout!r} is not one of {', '.join(LAYOUTS)}")
        self.device = torch.device(device)
        if layout == "dgl" and self.device.type != "cpu":
            raise ValueError(
                "layout='dgl' builds DGL blocks, which the CPU-only DGL cannot hold on "
                f"{self.device}; use layout='plain' (the torch kernels) there"
            )
        if any(f < -1 for f in fanouts):
            raise ValueError(f"fanouts={list(fanouts)} has an entry below -1 (-1 = every in-edge)")
        self.fanouts = list(fanouts)
        self.layout = layout
        self._graph = None
        self._stream = None  # the draws' CUDA stream (on a GPU)
        self.reseed(seed)

    def reseed(self, seed: int) -> None:
        """Restart the draws from ``seed`` (every epoch: the batches depend on the seed and the epoch only)."""
        self.generator = torch.Generator(device=self.device).manual_seed(int(seed))

    def bind(self, graph: dgl.DGLGraph) -> "TorchNeighborSampler":
        """Hold ``graph``'s in-edges as CSC index tensors on the sampler's device (done once per graph)."""
        if self._graph is not graph:
            indptr, indices, eids = graph.adj_tensors("csc")
            dev = self.device
            self.indptr = indptr.to(dev, torch.int64)
            self.indices = indices.to(dev, torch.int64)
            # DGL blocks carry each edge's id in the graph (dgl.EID), as DGL's sampler sets it
            self.eids = eids.to(torch.int64) if self.layout == "dgl" else None
            self.num_nodes = graph.num_nodes()
            # node -> row of the layer being built (-1: none), and node -> its first position among a layer's
            # new sources: scratch kept between draws, cleared after each
            self._slot = torch.full((self.num_nodes,), -1, dtype=torch.int64, device=dev)
            self._first = torch.full((self.num_nodes,), _NONE, dtype=torch.int64, device=dev)
            self._graph = graph
        return self

    @property
    def nbytes(self) -> int:
        """Bytes of the structure held on the device (0 before the first draw)."""
        if self._graph is None:
            return 0
        held = (self.indptr, self.indices, self._slot, self._first, self.eids)
        return sum(t.numel() * t.element_size() for t in held if t is not None)

    def sample(self, graph: dgl.DGLGraph, seeds: Tensor, exclude_eids=None) -> tuple[Tensor, Tensor, list]:
        """``(input_nodes, output_nodes, blocks)`` around ``seeds`` (local ids), as DGL's ``NeighborSampler``.

        All three are on the sampler's device (``output_nodes``: the seeds).
        """
        if exclude_eids is not None:
            raise ValueError("TorchNeighborSampler excludes no edges; sample without exclude")
        if isinstance(seeds, dict):
            raise TypeError(
                "TorchNeighborSampler samples homogeneous graphs; use DGL's NeighborSampler for a "
                "heterogeneous one (train.sampler: dgl)"
            )
        if self.device.type != "cuda":
            return self._sample(graph, seeds)
        # On a GPU the draws run on a stream of their own: their host reads (the sizes of what was drawn) wait
        # for the draws alone, not for the training step queued on the trainer's stream (train.prefetch draws
        # the next batch while the step's backward pass runs). The trainer's stream then waits for the draws,
        # and the allocator is told that it uses their tensors.
        consumer = torch.cuda.current_stream(self.device)
        if self._stream is None:
            self._stream = torch.cuda.Stream(self.device)
        with torch.cuda.stream(self._stream):
            out = self._sample(graph, seeds)
        consumer.wait_stream(self._stream)
        input_nodes, output_nodes, blocks = out
        for t in [input_nodes, output_nodes] + [x for b in blocks for x in (b.src, b.dst)]:
            t.record_stream(consumer)
        return out

    def _sample(self, graph: dgl.DGLGraph, seeds: Tensor) -> tuple[Tensor, Tensor, list]:
        self.bind(graph)
        dtype = seeds.dtype
        output_nodes = seeds.to(self.device)  # the loss reads the seeds' labels where the tables are
        nodes = output_nodes.to(torch.int64)
        blocks = []
        for fanout in reversed(self.fanouts):
            src_nodes, src, dst, edge = self._layer(nodes, fanout)
            blocks.insert(0, self._block(src, dst, src_nodes, nodes, edge))
            nodes = src_nodes
        return nodes.to(dtype), output_nodes, blocks

    def _layer(self, seeds: Tensor, fanout: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """One layer: (source nodes, destinations first; each drawn edge's source row, destination row, and
        position in the CSC arrays)."""
        start = self.indptr.index_select(0, seeds)
        deg = self.indptr.index_select(0, seeds + 1) - start
        if fanout == -1:
            heavy = torch.zeros_like(deg, dtype=torch.bool)
        else:
            heavy = deg > fanout
        light = ~heavy
        # every in-edge of the seeds whose in-degree is within the fan-out (all of them with -1)
        l_idx = light.nonzero().squeeze(1)
        l_deg = deg.index_select(0, l_idx)
        seg, rank = _segment_ranks(l_deg, int(l_deg.sum()))
        edges = [start.index_select(0, l_idx).index_select(0, seg) + rank]
        dst = [l_idx.index_select(0, seg)]
        h_idx = heavy.nonzero().squeeze(1)
        if h_idx.numel():
            h_deg = deg.index_select(0, h_idx)
            total = int(h_deg.sum())
            draw = self._floyd if total > self.hub_ratio * fanout * h_idx.numel() else self._sorted
            edges_h, dst_h = draw(h_idx, start.index_select(0, h_idx), h_deg, fanout, total)
            edges.append(edges_h)
            dst.append(dst_h)
        edge = torch.cat(edges)
        dst_rows = torch.cat(dst)
        nbr = self.indices.index_select(0, edge)
        src_nodes, src_rows = self._relabel(seeds, nbr)
        return src_nodes, src_rows, dst_rows, edge

    def _sorted(self, rows: Tensor, start: Tensor, deg: Tensor, fanout: int, total: int) -> tuple[Tensor, Tensor]:
        """``fanout`` of each row's ``deg`` in-edges, uniformly without replacement: every candidate edge gets a
        random key and each row keeps the ``fanout`` smallest (every order of the keys is equally likely, so
        every ``fanout``-subset is). The key is ``row << bits | random``: one sort groups the rows and ranks
        the keys. The work is a sort of the rows' in-edges."""
        seg, rank = _segment_ranks(deg, total)
        bits = 62 - max(1, int(rows.numel()).bit_length())
        noise = torch.randint(0, 1 << bits, (total,), generator=self.generator, device=self.device)
        order = torch.argsort((seg << bits) | noise)
        # Sorted by row first, row i's candidates fill the same span of the order as of the input, so an
        # element's rank in its row is its key's rank too: the first ``fanout`` of each row are chosen.
        chosen = order[rank < fanout]
        picked = seg.index_select(0, chosen)
        return start.index_select(0, picked) + rank.index_select(0, chosen), rows.index_select(0, picked)

    def _floyd(self, rows: Tensor, start: Tensor, deg: Tensor, fanout: int, total: int) -> tuple[Tensor, Tensor]:
        """``fanout`` of each row's ``deg`` in-edges, uniformly without replacement: Floyd's algorithm, all rows
        at once. Step i draws t uniformly from [0, deg - fanout + i] and takes t, or that upper end when t was
        taken already; after ``fanout`` steps every ``fanout``-subset is equally likely. The work is
        rows x fanout^2 comparisons, whatever the degrees (no pass over a hub's in-edges)."""
        n = rows.numel()
        # every step's draw at once: column i is uniform in [0, top_i], top_i = deg - fanout + i
        top = (deg - fanout).unsqueeze(1) + torch.arange(fanout, device=self.device)
        u = torch.rand((n, fanout), dtype=torch.float64, generator=self.generator, device=self.device)
        draws = torch.minimum((u * (top + 1)).to(torch.int64), top)
        picked = torch.empty((n, fanout), dtype=torch.int64, device=self.device)
        for i in range(fanout):
            t = draws[:, i]
            taken = (picked[:, :i] == t.unsqueeze(1)).any(1)
            picked[:, i] = torch.where(taken, top[:, i], t)
        edges = (start.unsqueeze(1) + picked).reshape(-1)
        return edges, rows.repeat_interleave(fanout)

    def _relabel(self, seeds: Tensor, nbr: Tensor) -> tuple[Tensor, Tensor]:
        """DGL's ``to_block`` numbering: the seeds are rows 0..n-1, then the other sources in the order they
        first appear among the drawn edges. The first appearance of each is found by a scatter of positions
        (the smallest wins) rather than a sort, so the cost is linear in the edges."""
        slot, first = self._slot, self._first
        n = seeds.numel()
        slot.index_put_((seeds,), torch.arange(n, device=self.device))
        pos = torch.arange(nbr.numel(), device=self.device)
        first.scatter_reduce_(0, nbr, pos, reduce="amin")
        is_new = (first.index_select(0, nbr) == pos) & (slot.index_select(0, nbr) < 0)
        new = nbr.index_select(0, is_new.nonzero().squeeze(1))
        slot.index_put_((new,), torch.arange(n, n + new.numel(), device=self.device))
        rows = slot.index_select(0, nbr)
        slot.index_fill_(0, seeds, -1)
        slot.index_fill_(0, new, -1)
        first.index_fill_(0, nbr, _NONE)
        return torch.cat([seeds, new]), rows

    def _block(self, src: Tensor, dst: Tensor, src_nodes: Tensor, dst_nodes: Tensor, edge: Tensor):
        if self.layout == "plain":
            return PlainGraph(src, dst, int(src_nodes.numel()), int(dst_nodes.numel()), True)
        idtype = self._graph.idtype
        block = dgl.create_block(
            (src.to(idtype), dst.to(idtype)),
            num_src_nodes=int(src_nodes.numel()),
            num_dst_nodes=int(dst_nodes.numel()),
            idtype=idtype,
        )
        block.srcdata[dgl.NID] = src_nodes.to(idtype)
        block.dstdata[dgl.NID] = dst_nodes.to(idtype)
        block.edata[dgl.EID] = self.eids.index_select(0, edge).to(idtype)
        return block
