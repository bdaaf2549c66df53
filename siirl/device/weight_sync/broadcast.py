"""Bucketed collective broadcast from the source trainer rank to the rollout ranks: gloo on the CPU, NCCL on
CUDA, HCCL on Ascend (the device backend names it).

Per bucket the source broadcasts a small header (policy version and the bucket's :class:`TensorMeta`
list) and then the bucket as one flat buffer on the group's device; a header without metas ends the sync.
Both travel the hops of :class:`~siirl.device.weight_sync.topology.SyncGroup`: straight to every receiver
when each other node holds one, else to one leader per node that forwards inside its node, so each byte
crosses to each receiving node once. A rank joins the same broadcasts whether it sends, forwards or only
receives, so ``send`` and ``receive`` share one per-bucket step.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import torch
import torch.distributed as dist

from siirl.device.weight_sync.base import WEIGHT_SYNC_BACKENDS, SyncStats, SyncTicket, WeightSync
from siirl.device.weight_sync.buckets import (
    Loader,
    TensorMeta,
    bucket_bytes,
    iter_buckets,
    pack,
    payload_bytes,
    unpack,
)
from siirl.device.weight_sync.topology import SyncGroup


@WEIGHT_SYNC_BACKENDS.register("broadcast", "nccl", "hccl", "gloo")
class BroadcastSync(WeightSync):
    """``group``: from :func:`~siirl.device.weight_sync.topology.weight_sync_group`; ``src``: the source's
    global rank; ``device``: where the buffers live (the rank's accelerator for NCCL / HCCL, the host for
    gloo)."""

    def __init__(
        self,
        group: SyncGroup,
        src: int,
        bucket_mb: float,
        device: torch.device | str = "cpu",
        dtype: torch.dtype | None = None,
    ) -> None:
        self.group, self.src = group, int(src)
        self.max_bytes = bucket_bytes(bucket_mb)
        self.device = torch.device(device)
        self.dtype = dtype
        self.route = group.route(dist.get_rank())

    def _header(self, header: list[object]) -> list[object]:
        box = [header]
        device = None if self.device.type == "cpu" else self.device
        for group, src in self.route:
            dist.broadcast_object_list(box, src=src, group=group, device=device)
        return box[0]  # type: ignore[return-value]

    def _give(self, flat: torch.Tensor, metas: list[TensorMeta]) -> None:
        """Source side of one bucket's data."""
        for group, src in self.route:
            dist.broadcast(flat, src=src, group=group)

    def _take(self, size: int, metas: list[TensorMeta], load: Loader | None) -> None:
        """Receiving side of one bucket's data (a node's leader forwards it on the way)."""
        flat = torch.empty(size, dtype=torch.uint8, device=self.device)
        self._give(flat, metas)
        load(unpack(flat, metas))  # type: ignore[misc]

    def _done(self) -> None:
        """After the last bucket on a receiving rank."""

    def send(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int) -> SyncTicket:
        stats, start = SyncStats(version), time.perf_counter()
        for bucket in iter_buckets(named_tensors, self.max_bytes, self.dtype):
            flat, metas = pack(bucket, device=self.device)
            self._header([version, metas, flat.numel()])
            self._give(flat, metas)
            stats.add_bucket(len(metas), payload_bytes(metas))
        self._header([version, None, 0])
        if stats.tensors == 0:
            raise ValueError("weight sync received no tensors: the trainer yielded an empty parameter list")
        stats.seconds = time.perf_counter() - start
        return SyncTicket(version, stats)

    def receive(self, load: Loader | None, ticket: SyncTicket | None = None) -> SyncStats:
        start = time.perf_counter()
        version, metas, size = self._header([None, None, 0])
        stats = SyncStats(int(version))
        while metas is not None:
            self._take(int(size), metas, load)
            stats.add_bucket(len(metas), payload_bytes(metas))
            version, metas, size = self._header([None, None, 0])
        self._done()
        stats.seconds = time.perf_counter() - start
        return stats
