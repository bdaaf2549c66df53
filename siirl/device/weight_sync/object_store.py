"""Ray object store: the source puts each bucket once as a flat byte buffer; receivers get the references.

Ray moves an object to a node once, the first time a process there asks for it, and every other process
on that node maps the same shared-memory copy: with one ``put`` per bucket each byte crosses to each
receiving node once, however many rollout ranks that node holds. The buffers live until the last holder of
the ticket drops it. Host memory only: receivers copy each bucket to their device as their engine loads it.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch

from siirl.device.weight_sync.base import WEIGHT_SYNC_BACKENDS, SyncStats, SyncTicket, WeightSync
from siirl.device.weight_sync.buckets import Loader, bucket_bytes, iter_buckets, pack, payload_bytes, unpack


def _ray_put(value: Any) -> Any:
    import ray

    return ray.put(value)


def _ray_get(ref: Any) -> Any:
    import ray

    return ray.get(ref)


@WEIGHT_SYNC_BACKENDS.register("object_store", "ray")
class ObjectStoreSync(WeightSync):
    """``put`` / ``get``: Ray's by default; ``device``: where receivers unpack (default the host)."""

    def __init__(
        self,
        bucket_mb: float,
        dtype: torch.dtype | None = None,
        device: torch.device | str = "cpu",
        put: Callable[[Any], Any] = _ray_put,
        get: Callable[[Any], Any] = _ray_get,
    ) -> None:
        self.max_bytes = bucket_bytes(bucket_mb)
        self.dtype = dtype
        self.device = torch.device(device)
        self.put, self.get = put, get

    def send(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int) -> SyncTicket:
        stats, start, refs = SyncStats(version), time.perf_counter(), []
        for bucket in iter_buckets(named_tensors, self.max_bytes, self.dtype):
            flat, metas = pack(bucket, device="cpu")
            refs.append((self.put(flat.numpy()), metas))
            stats.add_bucket(len(metas), payload_bytes(metas))
        if not refs:
            raise ValueError("weight sync received no tensors: the trainer yielded an empty parameter list")
        stats.seconds = time.perf_counter() - start
        return SyncTicket(version, stats, payload=refs)

    def receive(self, load: Loader, ticket: SyncTicket | None = None) -> SyncStats:
        if ticket is None or not ticket.payload:
            raise ValueError("object_store weight sync: receive needs the ticket send returned")
        stats, start = SyncStats(ticket.version), time.perf_counter()
        for ref, metas in ticket.payload:
            load(unpack(self._flat(self.get(ref)), metas))
            stats.add_bucket(len(metas), payload_bytes(metas))
        stats.seconds = time.perf_counter() - start
        return stats

    def _flat(self, array: np.ndarray) -> torch.Tensor:
        """The shared-memory buffer as a tensor, read only (the engine copies out of it)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # Ray's buffers are read-only; nothing writes them
            flat = torch.from_numpy(array)
        return flat if self.device.type == "cpu" else flat.to(self.device)
