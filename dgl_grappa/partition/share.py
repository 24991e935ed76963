"""Hosts without shared storage: rank 0 sends other hosts' workers their part (``launch.copy_partitions``)."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path

import torch
import torch.distributed as dist

from .layout import has_part, part_files

log = logging.getLogger("dgl_grappa")


def share_partition(
    part_config: str | Path, rank: int, host_index: int, halo: str = "drop", chunk_bytes: int = 64 << 20
) -> int:
    """Rank 0 sends the workers on other hosts their part of a partitioning, over the process group.

    For hosts without shared storage: rank 0 has the partitioning on disk (it built it, or
    the launcher gave it); every worker on another host that lacks its files receives the
    json and its ``part<r>/`` folder (see :func:`part_files`) at the same path, written
    through temporary files. A collective: every rank calls it; point-to-point gloo sends
    bounded by the group's timeout, in chunks of ``chunk_bytes``.

    Args:
        part_config: the partitioning's json (the same path on every host).
        rank: this worker's rank.
        host_index: this worker's host.
        halo: ``train.halo`` (keep: every part's features are needed).

    Returns:
        Bytes sent (rank 0) or received (others); 0 where nothing moved.
    """
    d = Path(part_config).parent
    world = dist.get_world_size()
    have = rank == 0 or has_part(d, rank, halo)
    everyone: list = [None] * world
    dist.all_gather_object(everyone, (host_index, have))
    # Workers on rank 0's host share its storage; the others need the files unless they have them.
    needs = [h != everyone[0][0] and not ok for h, ok in everyone]
    need = needs[rank]
    moved = 0
    if rank == 0:
        for r in (r for r in range(1, world) if needs[r]):
            rel = part_files(d, [r], halo, metadata=False)
            header = pickle.dumps([(p, (d / p).stat().st_size) for p in rel])
            dist.send(torch.tensor([len(header)], dtype=torch.int64), dst=r)
            dist.send(torch.frombuffer(bytearray(header), dtype=torch.uint8), dst=r)
            for p in rel:
                with open(d / p, "rb") as f:
                    while chunk := f.read(chunk_bytes):
                        dist.send(torch.frombuffer(bytearray(chunk), dtype=torch.uint8), dst=r)
                        moved += len(chunk)
        log.info("sent partition files (%d bytes) to ranks %s", moved, [r for r in range(world) if needs[r]])
    elif need:
        n = torch.zeros(1, dtype=torch.int64)
        dist.recv(n, src=0)
        buf = torch.empty(int(n[0]), dtype=torch.uint8)
        dist.recv(buf, src=0)
        for p, size in pickle.loads(buf.numpy().tobytes()):
            target = d / p
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{rank}.tmp")
            with open(tmp, "wb") as f:
                left = size
                while left > 0:
                    chunk = torch.empty(min(chunk_bytes, left), dtype=torch.uint8)
                    dist.recv(chunk, src=0)
                    f.write(chunk.numpy().tobytes())
                    left -= chunk.numel()
            tmp.replace(target)  # several ranks of one host may write the json: same content
            moved += size
        log.info("received %d bytes of partition files into %s", moved, d)
    dist.barrier()
    return moved
