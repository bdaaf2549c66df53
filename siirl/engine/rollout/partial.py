"""Generation that records which policy version sampled every token, and can cross a weight sync.

``generate_tagged`` runs the engine's whole generation under one version. ``generate_partial`` (verl's and
AReaL's partial / interruptible rollout) samples at most ``chunk_tokens`` tokens per row at a time; before
each piece ``chunk()`` is entered, which may load newer weights and says which version the piece samples
with. Unfinished rows keep their tokens and sampled log-probs and continue, prompt plus prefix re-read by
the new weights, so one response may span versions (``siirl.engine.rollout.rollout_pool``, which also
carries unfinished groups from one step's batch into the next).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import torch
from tensordict import TensorDict

from siirl.engine.rollout.rollout_pool import VERSION_KEY, RolloutPool

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


def generate_partial(engine, batch: TensorDict, chunk_tokens: int, chunk: ChunkGuard) -> TensorDict:
    """``engine.generate``'s output (plus :data:`VERSION_KEY`), sampled ``chunk_tokens`` at a time: a pool
    holding only ``batch``, run until every response ends."""
    pool = RolloutPool(engine)
    pool.add(batch)
    while pool.unfinished_groups:
        with chunk() as version:
            pool.advance(version, max_tokens=chunk_tokens)
    out, _ = pool.take(pool.finished_groups)
    return out
