"""Colocated asynchronous rollout: a producer thread samples the next steps' batches while the worker trains.

The task graph is unchanged; its first node, the rollout, takes the batch of step ``j`` from this producer
instead of generating it (``take``). The producer draws prompts from this worker's shard and samples them
with the weights it last received, tagging every response token with the policy version that sampled it
(``siirl.engine.rollout.partial``). After every ``trigger_parameter_sync_step`` updates the loop publishes
the actor's weights (``publish``: a snapshot through the device layer's weight sync, taken on the training
thread, where the all-gather of sharded weights is collective); the producer loads the newest snapshot
before each batch, or, with partial rollouts, before each piece.

Partial rollouts: the producer keeps more than a step's prompt groups in flight (``RolloutPool``); a step's
batch is the first groups to finish, and a piece of generation stops as soon as they have, or when newer
weights are published, so a long response no longer holds its step: it goes on, under the newer weights,
into a later step's batch.

Staleness: a trained token's age is the version being trained (``step - 1`` updates applied) minus the
version that sampled it. The producer starts step ``j``'s batch only once it holds weights of version at
least ``j - 1 - max_lag``, and versions only grow; a group carried over holding a token older than that is
sampled again from its prompt (``async/restarted_groups``). So every token of every trained sample is at
most ``max_lag`` old; ``take`` checks it again on every token.

Metrics (per step): ``async/staleness_mean|max`` over trained tokens, ``async/partial_fraction`` (samples
whose tokens span several versions), ``async/rollout_idle_s`` (the producer waiting for fresh enough
weights), ``async/trainer_idle_s`` (the rollout node waiting for its batch), ``async/weight_sync_s``
(snapshot plus load), ``async/generate_s`` (the producer's time sampling the step's batch),
``async/carried_groups`` (groups still in flight when it was taken), ``async/restarted_groups``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from tensordict import TensorDict

from siirl.dag_worker.drawn_prompts import TAG_STRIDE, DrawLedger
from siirl.data_coordinator.tensordict_ops import select_rows
from siirl.device.weight_sync import SyncTicket, WeightSync
from siirl.engine.rollout.bounded import generating_for
from siirl.engine.rollout.partial import VERSION_KEY, generate_tagged
from siirl.engine.rollout.rollout_pool import RolloutPool
from siirl.params.async_training import AsyncSchedule

logger = logging.getLogger(__name__)

#: How long ``close`` waits for the producer to reach a point where it can stop.
CLOSE_TIMEOUT_S = 60.0


class _Stopped(Exception):
    """Raised inside the producer when the job ends while it generates."""


def token_staleness(versions: torch.Tensor, trained_version: int) -> dict[str, float]:
    """Age of every response token (``versions`` >= 0) at ``trained_version``, and the share of samples
    whose tokens come from several versions."""
    mask = versions >= 0
    ages = (trained_version - versions[mask]).to(torch.float64)
    newest = torch.where(mask, versions, -1).max(-1).values
    oldest = torch.where(mask, versions, torch.iinfo(versions.dtype).max).min(-1).values
    has_tokens = mask.any(-1)
    spans = (newest > oldest) & has_tokens
    return {
        "async/staleness_mean": ages.mean().item() if ages.numel() else 0.0,
        "async/staleness_max": ages.max().item() if ages.numel() else 0.0,
        "async/partial_fraction": spans.float().mean().item(),
    }


class AsyncRollout:
    """One worker's producer. ``next_shard()`` draws the next prompts; ``loader_state()`` is the data
    loader's state (what a checkpoint saves); ``start_version`` the updates applied when the run (re)starts,
    already loaded into ``engine``."""

    def __init__(
        self,
        engine: Any,
        schedule: AsyncSchedule,
        sync: WeightSync,
        next_shard: Callable[[], TensorDict],
        loader_state: Callable[[], Any],
        start_version: int = 0,
        trained_ahead: list[list[int]] | None = None,
    ) -> None:
        self.engine, self.schedule, self.sync = engine, schedule, sync
        self._next_shard, self._loader_state = next_shard, loader_state
        self._engine_lock = threading.Lock()  # one user of the engine at a time: a piece, or validation
        self._draw_lock = threading.Lock()  # the loader: drawn by the producer, read by checkpoints
        self._changed = threading.Condition()
        # (step, batch, its prompts' tags, the producer's metrics of that batch)
        self._ready: deque[tuple[int, TensorDict, torch.Tensor, dict[str, float]]] = deque()
        self._ledger = DrawLedger(trained_ahead)
        self._pool = RolloutPool(engine) if schedule.partial_rollout else None
        self._groups_per_step = 0  # prompts per draw, known at the first draw
        self._restarted = 0
        self._pending: SyncTicket | None = None
        self.engine_version = self.published = self.trained = start_version
        self._next = start_version + 1  # the step whose batch is drawn next
        self._error: BaseException | None = None
        self._stopping = False
        self._rollout_idle = self._weight_sync = 0.0
        self._thread = threading.Thread(target=self._run, name="siirl-async-rollout", daemon=True)

    # ----- the producer thread -----

    def start(self) -> None:
        self._thread.start()

    def _wait_for_weights(self, step: int) -> None:
        oldest = step - 1 - self.schedule.max_lag
        began = time.perf_counter()
        with self._changed:
            self._changed.wait_for(lambda: self._stopping or self.published >= oldest)
        self._rollout_idle += time.perf_counter() - began
        if self._stopping:
            raise _Stopped

    @contextmanager
    def _piece(self) -> Iterator[int]:
        """Around each piece of generation: load the newest published weights, then hold the engine."""
        with self._engine_lock:
            if self._stopping:
                raise _Stopped
            self._load_pending()
            yield self.engine_version

    def _load_pending(self) -> None:
        with self._changed:
            ticket, self._pending = self._pending, None
        if ticket is not None and ticket.version > self.engine_version:
            stats = self.sync.receive(self.engine.sync_weights, ticket)
            self.engine_version = ticket.version
            self._weight_sync += stats.seconds

    def _draw(self) -> tuple[TensorDict, torch.Tensor]:
        """The next shard of prompts, less those a resumed run trained already, and their tags."""
        keep = torch.empty(0, dtype=torch.long)
        while not len(keep):  # a draw the run trained whole before it resumed is skipped
            with self._draw_lock:
                state = self._loader_state()
                batch = self._next_shard()
                draw, keep = self._ledger.drew(state, batch.batch_size[0])
        self._groups_per_step = self._groups_per_step or batch.batch_size[0]
        return select_rows(batch, keep), draw * TAG_STRIDE + keep

    def _produce(self, step: int) -> tuple[TensorDict, torch.Tensor]:
        """Step ``step``'s batch and its prompts' tags. With partial rollouts it is the first groups to finish
        in the pool; the others go on into later steps' batches."""
        if self._pool is None:
            batch, tags = self._draw()
            return generate_tagged(self.engine, batch, self._piece), tags
        self._restarted += self._pool.restart(step - 1 - self.schedule.max_lag)  # tokens past the bound
        while not self._groups_per_step or self._pool.finished_groups < self._groups_per_step:
            while self._wants_prompts(step):
                self._pool.add(*self._draw())
            with self._piece() as version:
                self._pool.advance(version, self.schedule.chunk_tokens, self._groups_per_step, self._pause)
        return self._pool.take(self._groups_per_step)

    def _wants_prompts(self, step: int) -> bool:
        """Fewer groups in the pool than step ``step`` takes; or, so that its batch need not wait for its
        slowest, no more than that still running while a row started now could still train at the next step
        (a producer already as far ahead as the bound allows would have to sample it again, and is not what
        the trainer waits for)."""
        per_step, pool = self._groups_per_step, self._pool
        if not per_step or pool.unfinished_groups + pool.finished_groups < per_step:
            return True
        can_carry = self.engine_version >= step - self.schedule.max_lag
        return can_carry and pool.unfinished_groups <= per_step

    def _pause(self) -> bool:
        """Asked after every token of a piece: newer weights wait to be loaded, or the job ends."""
        return self._stopping or self._pending is not None

    def _run(self) -> None:
        try:
            while True:
                step = self._next
                self._wait_for_weights(step)
                began = time.perf_counter()
                with generating_for(step):
                    out, tags = self._produce(step)
                with self._changed:
                    produced = {"async/generate_s": time.perf_counter() - began,
                                "async/carried_groups": float(self._pool.unfinished_groups if self._pool else 0)}
                    self._ready.append((step, out, tags, produced))
                    self._next = step + 1
                    self._changed.notify_all()
        except _Stopped:
            return
        except BaseException as exc:  # handed to the training thread, which raises it
            logger.exception("asynchronous rollout failed")
            with self._changed:
                self._error = exc
                self._changed.notify_all()

    # ----- the training thread -----

    def take(self, step: int) -> tuple[TensorDict, dict[str, float]]:
        """Step ``step``'s batch (waiting for it) and the step's async metrics."""
        began = time.perf_counter()
        with self._changed:
            self._changed.wait_for(lambda: self._ready or self._error is not None)
            if not self._ready:  # batches finished before a failure still train
                raise RuntimeError(f"asynchronous rollout failed: {self._error}") from self._error
            produced_for, out, tags, produced = self._ready.popleft()
        with self._draw_lock:  # what a checkpoint after this step must not draw again
            self._ledger.trained(tags)
        if produced_for != step:
            raise RuntimeError(f"asynchronous rollout: step {step} got the batch drawn for step {produced_for}")
        metrics = token_staleness(out[VERSION_KEY], step - 1)
        if metrics["async/staleness_max"] > self.schedule.max_lag:
            raise RuntimeError(
                f"asynchronous rollout: step {step} would train tokens {metrics['async/staleness_max']:.0f} versions "
                f"old, over the bound {self.schedule.max_lag}"
            )
        metrics.update({
            "async/trainer_idle_s": time.perf_counter() - began,
            "async/rollout_idle_s": self._rollout_idle,
            "async/weight_sync_s": self._weight_sync,
            "async/engine_version": float(self.engine_version),
            **produced,
            "async/restarted_groups": float(self._restarted),
        })
        self._rollout_idle = self._weight_sync = 0.0
        self._restarted = 0
        return out, metrics

    def publish(self, version: int, named_tensors: Callable[[], Iterable[tuple[str, Any]]]) -> None:
        """After the update that made ``version``: on sync steps, snapshot the weights for the producer."""
        self.trained = version
        if version % self.schedule.sync_every:
            return
        ticket = self.sync.send(named_tensors(), version)
        self._weight_sync += ticket.stats.seconds
        with self._changed:
            self._pending, self.published = ticket, version
            self._changed.notify_all()

    def loaded(self, version: int, seconds: float) -> None:
        """After the training thread loaded ``version`` into the engine itself (the engine-broadcast transport,
        within ``engine_held(version)``): nothing to snapshot, the producer samples with it from now on."""
        self.trained = version
        self._weight_sync += seconds
        with self._changed:
            self.published = version
            self._changed.notify_all()

    @contextmanager
    def engine_held(self, version: int | None = None) -> Iterator[None]:
        """The engine for the training thread (validation), with the newest published weights loaded;
        ``version``: the weights the caller loads into it meanwhile (a colocated actor's), if any."""
        with self._engine_lock:
            self._load_pending()
            yield
            if version is not None:
                self.engine_version = max(self.engine_version, version)

    def resume_point(self) -> tuple[Any, list[list[int]]]:
        """What a checkpoint saves: the loader's state before the oldest draw with an untrained prompt, and
        the slots already trained per draw from there (siirl.dag_worker.drawn_prompts)."""
        with self._draw_lock:
            return self._ledger.resume_point(self._loader_state())

    def close(self) -> None:
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        if self._thread.is_alive():
            self._thread.join(CLOSE_TIMEOUT_S)

