"""Bucketed collective broadcast over a ``torch.distributed`` group spanning the source trainer rank and
the rollout ranks: gloo on the CPU, NCCL on CUDA, HCCL on Ascend (the device backend names it).

Per bucket the source broadcasts a small header (policy version and the bucket's :class:`TensorMeta`
list) and then the bucket as one flat buffer on the group's device; a header without metas ends the sync.
Each byte leaves the source once per sync (the collective library fans it out) and reaches each receiving
rank once, so put one receiving rank per node in the group where the node's other ranks can take it from
that rank's engine (a tensor-parallel vLLM engine shards on load).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import torch
import torch.distributed as dist

from siirl.device.base import DeviceBackend
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


def weight_sync_group(ranks: Sequence[int], backend: DeviceBackend) -> dist.ProcessGroup:
    """A group over ``ranks`` (global ranks, source first by convention) using ``backend``'s collective
    library. Like every ``new_group``, every rank of the world must call it, members or not."""
    return dist.new_group(ranks=list(ranks), backend=backend.dist_backend)


@WEIGHT_SYNC_BACKENDS.register("broadcast", "nccl", "hccl", "gloo")
class BroadcastSync(WeightSync):
    """``group``: from :func:`weight_sync_group`; ``src``: the source's global rank; ``device``: where the
    buffers live (the rank's accelerator for NCCL / HCCL, the host for gloo)."""

    def __init__(
        self,
        group: dist.ProcessGroup,
        src: int,
        bucket_mb: float,
        device: torch.device | str = "cpu",
        dtype: torch.dtype | None = None,
    ) -> None:
        self.group, self.src = group, int(src)
        self.max_bytes = bucket_bytes(bucket_mb)
        self.device = torch.device(device)
        self.dtype = dtype

    def _header(self, header: list[object]) -> list[object]:
        box = [header]
        dist.broadcast_object_list(
            box, src=self.src, group=self.group, device=None if self.device.type == "cpu" else self.device
        )
        return box[0]  # type: ignore[return-value]

    def send(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int) -> SyncTicket:
        stats, start = SyncStats(version), time.perf_counter()
        for bucket in iter_buckets(named_tensors, self.max_bytes, self.dtype):
            flat, metas = pack(bucket, device=self.device)
            self._header([version, metas, flat.numel()])
            dist.broadcast(flat, src=self.src, group=self.group)
            stats.add_bucket(len(metas), payload_bytes(metas))
        self._header([version, None, 0])
        if stats.tensors == 0:
            raise ValueError("weight sync received no tensors: the trainer yielded an empty parameter list")
        stats.seconds = time.perf_counter() - start
        return SyncTicket(version, stats)

    def receive(self, load: Loader, ticket: SyncTicket | None = None) -> SyncStats:
        start = time.perf_counter()
        version, metas, size = self._header([None, None, 0])
        stats = SyncStats(int(version))
        while metas is not None:
            flat = torch.empty(int(size), dtype=torch.uint8, device=self.device)
            dist.broadcast(flat, src=self.src, group=self.group)
            bucket_metas: list[TensorMeta] = metas
            load(unpack(flat, bucket_metas))
            stats.add_bucket(len(bucket_metas), payload_bytes(bucket_metas))
            version, metas, size = self._header([None, None, 0])
        stats.seconds = time.perf_counter() - start
        return stats
