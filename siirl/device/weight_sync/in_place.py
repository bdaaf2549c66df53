"""Colocated: trainer and rollout engine share the process (and device), so ``send`` streams the buckets
straight into the engine's ``load``; nothing crosses a process boundary and there is no receiving side."""

from __future__ import annotations

import time
from collections.abc import Iterable

import torch

from siirl.device.weight_sync.base import WEIGHT_SYNC_BACKENDS, SyncStats, SyncTicket, WeightSync
from siirl.device.weight_sync.buckets import Loader, bucket_bytes, iter_buckets, tensor_bytes


@WEIGHT_SYNC_BACKENDS.register("in_place", "naive")
class InPlaceSync(WeightSync):
    """``load``: the colocated engine's weight-update call; buckets of ``bucket_mb`` cast to ``dtype``."""

    def __init__(self, load: Loader, bucket_mb: float, dtype: torch.dtype | None = None) -> None:
        self.load = load
        self.max_bytes = bucket_bytes(bucket_mb)
        self.dtype = dtype

    def send(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int) -> SyncTicket:
        stats, start = SyncStats(version), time.perf_counter()
        for bucket in iter_buckets(named_tensors, self.max_bytes, self.dtype):
            self.load(bucket)
            stats.add_bucket(len(bucket), sum(tensor_bytes(t) for _, t in bucket))
        if stats.tensors == 0:
            raise ValueError("weight sync received no tensors: the trainer yielded an empty parameter list")
        stats.seconds = time.perf_counter() - start
        return SyncTicket(version, stats)

    def receive(self, load: Loader, ticket: SyncTicket | None = None) -> SyncStats:
        """The weights are already in the engine (``send`` loaded them): nothing to move."""
        if ticket is None:
            raise ValueError("in_place weight sync: receive needs the ticket send returned")
        return SyncStats(ticket.version)
