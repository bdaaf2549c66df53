"""A partial rollout of one batch run to its end: the pool of ``siirl.engine.rollout.rollout_pool`` holding
only that batch, sampled in pieces of ``chunk_tokens``, each piece under ``chunk()`` (which may load newer
weights and names the version the piece samples with). The tests compare it with the engine's whole
generation."""

from __future__ import annotations

from tensordict import TensorDict

from siirl.engine.rollout.partial import ChunkGuard
from siirl.engine.rollout.rollout_pool import RolloutPool


def generate_partial(engine, batch: TensorDict, chunk_tokens: int, chunk: ChunkGuard) -> TensorDict:
    """``engine.generate``'s output (plus the per-token policy versions), sampled ``chunk_tokens`` at a time."""
    pool = RolloutPool(engine)
    pool.add(batch)
    while pool.unfinished_groups:
        with chunk() as version:
            pool.advance(version, max_tokens=chunk_tokens)
    out, _ = pool.take(pool.finished_groups)
    return out
