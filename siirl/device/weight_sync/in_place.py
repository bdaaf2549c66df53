"""Colocated: trainer and rollout engine share the process (and device), so ``send`` streams the buckets
straight into the engine's ``load``; nothing crosses a process boundary and there is no receiving side.

``bucket_mb=None``: ``load`` takes the whole stream and buckets it itself. A colocated rollout engine's
``sync_weights`` does (siirl.engine.rollout: by its fused layers, which a reload must receive whole), so the
policy hands it the trainer's parameters as they are gathered, one at a time, as it always has."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

import torch

from siirl.device.weight_sync.base import WEIGHT_SYNC_BACKENDS, SyncStats, SyncTicket, WeightSync
from siirl.device.weight_sync.buckets import Loader, bucket_bytes, iter_buckets, tensor_bytes


@WEIGHT_SYNC_BACKENDS.register("in_place", "naive")
class InPlaceSync(WeightSync):
    """``load``: the colocated engine's weight-update call; buckets of ``bucket_mb`` cast to ``dtype`` (None:
    one call with the whole stream, which ``load`` buckets itself)."""

    def __init__(self, load: Loader, bucket_mb: float | None, dtype: torch.dtype | None = None) -> None:
        self.load = load
        self.max_bytes = None if bucket_mb is None else bucket_bytes(bucket_mb)
        self.dtype = dtype

    def send(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int) -> SyncTicket:
        stats, start = SyncStats(version), time.perf_counter()
        if self.max_bytes is None:
            self._stream(named_tensors, stats)
        else:
            for bucket in iter_buckets(named_tensors, self.max_bytes, self.dtype):
                self.load(bucket)
                stats.add_bucket(len(bucket), sum(tensor_bytes(t) for _, t in bucket))
            if stats.tensors == 0:
                raise ValueError("weight sync received no tensors: the trainer yielded an empty parameter list")
        stats.seconds = time.perf_counter() - start
        return SyncTicket(version, stats)

    def _stream(self, named_tensors: Iterable[tuple[str, torch.Tensor]], stats: SyncStats) -> None:
        """One ``load`` of the whole stream, counted as the engine takes it (the engine judges what it gets)."""
        counted = [0, 0]  # tensors, bytes

        def stream() -> Iterator[tuple[str, torch.Tensor]]:
            for name, tensor in named_tensors:
                counted[0] += 1
                counted[1] += tensor_bytes(tensor)
                yield name, tensor

        self.load(stream())
        stats.add_bucket(*counted)

    def receive(self, load: Loader, ticket: SyncTicket | None = None) -> SyncStats:
        """The weights are already in the engine (``send`` loaded them): nothing to move."""
        if ticket is None:
            raise ValueError("in_place weight sync: receive needs the ticket send returned")
        return SyncStats(ticket.version)
