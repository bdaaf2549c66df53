"""The contract of a weight-sync transport and the name -> transport registry.

A transport has a source side (one trainer rank: ``send``) and a receiving side (each rollout rank that
holds an engine: ``receive``). ``send`` returns a :class:`SyncTicket`, small and picklable, that the
caller hands to the receivers (a Ray call argument); ``receive`` hands every bucket to ``load``, the
engine's weight-update call (``siirl.device.weight_sync.engine_loaders``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from siirl.device.weight_sync.buckets import Loader
from siirl.registry import Registry


@dataclass
class SyncStats:
    """What one side of one sync moved: ``bytes`` are the tensors' own bytes (padding excluded)."""

    version: int
    tensors: int = 0
    buckets: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def add_bucket(self, tensors: int, nbytes: int) -> None:
        self.tensors += tensors
        self.buckets += 1
        self.bytes += nbytes


@dataclass(frozen=True)
class SyncTicket:
    """What the receivers of one sync need from its source: the policy version the weights are, the
    source's stats and, for a transport that leaves the weights somewhere (object store), where."""

    version: int
    stats: SyncStats
    payload: Any = None


class WeightSync(ABC):
    """One way weights travel from the trainer to the rollout engines."""

    @abstractmethod
    def send(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int) -> SyncTicket:
        """Source side: move the full parameters (HF names) of policy ``version``."""

    @abstractmethod
    def receive(self, load: Loader, ticket: SyncTicket | None = None) -> SyncStats:
        """Receiving side: hand every bucket of one sync to ``load``. Collective transports need no
        ticket (the group carries the version); the object store reads its references from it."""


WEIGHT_SYNC_BACKENDS: Registry[type[WeightSync]] = Registry(
    "weight-sync backend", config_keys=("actor_rollout_ref.rollout.weight_sync",), also_allowed=("auto",)
)


def make_weight_sync(name: str, **kwargs: Any) -> WeightSync:
    """Build the transport registered as ``name`` (or one of its aliases, e.g. verl's ``naive`` / ``nccl``)."""
    return WEIGHT_SYNC_BACKENDS.get(name)(**kwargs)
