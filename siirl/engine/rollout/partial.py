"""Generation that records which policy version sampled every token, and can cross a weight sync.

``generate_tagged`` runs the engine's whole generation under one version, entering ``chunk()``, which may
load newer weights and says which version it samples with. Partial rollouts (verl's and AReaL's
interruptible rollout) sample in pieces under the same guard, each piece possibly under newer weights, so
one response may span versions: ``siirl.engine.rollout.rollout_pool``, which also carries unfinished groups
from one step's batch into the next.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import torch
from tensordict import TensorDict

from siirl.engine.rollout.rollout_pool import VERSION_KEY

#: ``chunk()``: a context entered around each piece of generation, yielding the version it samples with.
ChunkGuard = Callable[[], AbstractContextManager[int]]


def tag_versions(out: TensorDict, version: int) -> TensorDict:
    mask = out["response_mask"].bool()
    out[VERSION_KEY] = torch.where(mask, torch.full_like(mask, version, dtype=torch.long), -1)
    return out


def generate_tagged(engine, batch: TensorDict, chunk: ChunkGuard) -> TensorDict:
    """The engine's own generation under one ``chunk()`` (no sync can land mid-response)."""
    with chunk() as version:
        return tag_versions(engine.generate(batch), version)
