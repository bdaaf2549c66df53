"""Where a worker's training batches come from: ONE source, chosen when the run starts from the plan's
resolved schedule (siirl.params.resolved), so neither the loop nor the rollout node asks which mode runs.

- ``LoaderSource`` (synchronous): each step draws the next shard of prompts from this worker's loader and
  the rollout node samples it with the policy's engine.
- ``ProducerSource`` (an asynchronous rank that rolls out: every rank of ``colocate_async``, the rollout
  ranks of ``separate_async``): the background producer (siirl.dag_worker.async_rollout) draws and samples
  ahead; the loop draws nothing and the rollout node takes the step's batch from it. Weights reach it
  through the run's weight route (siirl.dag_worker.async_weights).
- ``HandoffSource`` (the trainer ranks of ``separate_async``): their first node is fed by the rollout
  group's hand-off (siirl.dag_worker.handoff), so they draw nothing; after each update they take part in
  moving the weights to the rollout ranks.

Every source answers the same calls: ``draw`` (the step's input and how many loader draws it took),
``rollout`` (the rollout node's output), ``start`` / ``after_update`` (weights), ``engine_held``
(validation), ``resume_point`` (what a checkpoint saves) and ``close``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from tensordict import TensorDict

from siirl.dag_worker.async_rollout import AsyncRollout
from siirl.dag_worker.async_weights import ROUTES
from siirl.device.weight_sync import make_weight_sync
from siirl.errors import SiirlUserError

if TYPE_CHECKING:
    from siirl.dag_worker.context import WorkerContext
    from siirl.dag_worker.policy import Policy

logger = logging.getLogger(__name__)

#: (the rollout's output, the mask of its prompt tokens, the source's metrics of that batch)
Rollout = tuple[TensorDict, torch.Tensor, dict[str, float]]


class ShardReader:
    """This worker's shard of the train loader, epoch after epoch (reshuffled), as one endless stream."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self._batches: Iterator[TensorDict] | None = None

    def next(self) -> TensorDict:
        while True:
            if self._batches is None:
                self.check_same_order()
                self._batches = iter(self.ctx.train_loader)
            try:
                return next(self._batches)
            except StopIteration:
                self._batches = None

    def check_same_order(self) -> None:
        """With ``data.sampler`` every worker draws the epoch's order from its own sampler instance: the rollout
        dp ranks compare them before cutting shards (an unseeded generator, or a curriculum ``update`` that
        reacts to each worker's own shard, would otherwise train on overlapping shards)."""
        loader = self.ctx.train_loader
        sampler = getattr(loader, "user_sampler", None)
        if sampler is None or not dist.is_initialized() or "rollout" not in self.ctx.groups:
            return
        group = self.ctx.groups["rollout"]
        digests: list = [None] * dist.get_world_size(group)
        dist.all_gather_object(digests, loader.order_digest(), group=group)
        if len(set(digests)) > 1:
            raise SiirlUserError(
                f"data.sampler: {sampler.name} gave the data-parallel workers different orders for epoch "
                f"{loader.epoch}; its order must depend only on the global RNGs (seeded per epoch "
                "from data.seed) and on updates that are the same on every worker"
            )


def sample(policy: Policy, batch: TensorDict, validate: bool) -> Rollout:
    """Roll ``batch`` out with the policy's engine, now (its weights synced when stale)."""
    policy.refresh()
    out = policy.rollout.generate(batch, validate=validate)
    policy.done()
    return out, batch["attention_mask"], {}


class LoaderSource:
    def __init__(self, reader: ShardReader) -> None:
        self.reader = reader

    def draw(self) -> tuple[TensorDict | None, int]:
        return self.reader.next(), 1

    def rollout(self, policy: Policy, batch: TensorDict, step: int, validate: bool) -> Rollout:
        return sample(policy, batch, validate)

    def start(self, version: int) -> None:
        """Synchronous runs load weights at each rollout (``Policy.refresh``)."""

    def after_update(self, version: int) -> None:
        """Nothing moves between updates: the next rollout refreshes the engine."""

    def engine_held(self, step: int) -> AbstractContextManager[None]:
        return nullcontext()

    def resume_point(self) -> tuple[Any, list[list[int]]]:
        return self.reader.ctx.train_loader.state_dict(), []

    def close(self) -> None:
        """Nothing runs in the background."""


class HandoffSource(LoaderSource):
    """Trainer ranks of ``separate_async``: batches arrive by hand-off; ``weights`` is the separate route."""

    def __init__(self, reader: ShardReader, weights: Any) -> None:
        super().__init__(reader)
        self.weights = weights

    def start(self, version: int) -> None:
        self.weights.initial(version)

    def after_update(self, version: int) -> None:
        self.weights.after_update(version, None)


class ProducerSource:
    """``colocated``: the rank's actor trains the weights its engine samples with (validation then loads
    the step's own weights into the engine)."""

    def __init__(self, producer: AsyncRollout, weights: Any, colocated: bool) -> None:
        self.producer, self.weights, self.colocated = producer, weights, colocated

    def draw(self) -> tuple[TensorDict | None, int]:
        return None, 0  # the producer draws its own prompts

    def rollout(self, policy: Policy, batch: TensorDict | None, step: int, validate: bool) -> Rollout:
        if validate:  # validation samples its own prompts with the engine, held from the producer meanwhile
            return sample(policy, batch, validate)
        out, metrics = self.producer.take(step)
        return out, out["attention_mask"][:, : out["prompts"].shape[1]], metrics

    def start(self, version: int) -> None:
        """The engine starts from the trainers' weights (a resumed run's too), then the producer runs."""
        self.weights.initial(version)
        self.producer.start()

    def after_update(self, version: int) -> None:
        self.weights.after_update(version, self.producer)

    def engine_held(self, step: int) -> AbstractContextManager[None]:
        return self.producer.engine_held(step if self.colocated else None)

    def resume_point(self) -> tuple[Any, list[list[int]]]:
        return self.producer.resume_point()  # it drew the prompts of the steps it runs ahead on

    def close(self) -> None:
        self.producer.close()


def _loader(ctx: WorkerContext, reader: ShardReader, start: int, trained_ahead: list[list[int]]) -> LoaderSource:
    return LoaderSource(reader)


def _asynchronous(
    ctx: WorkerContext, reader: ShardReader, start: int, trained_ahead: list[list[int]]
) -> ProducerSource | HandoffSource:
    """Every rank builds the mode's weight route at the same point (its process groups are collective)."""
    schedule = ctx.plan.resolved.schedule
    weights = ROUTES[schedule.mode](ctx)
    policy = ctx.policy()
    if policy.rollout is None:  # a trainer placed apart from the rollout
        return HandoffSource(reader, weights)
    sync = make_weight_sync(weights.producer_transport, bucket_mb=ctx.cfg.actor_rollout_ref.rollout.weight_sync_bucket_mb)
    producer = AsyncRollout(
        policy.rollout, schedule, sync, reader.next, ctx.train_loader.state_dict, start_version=start,
        trained_ahead=trained_ahead,
    )
    logger.info(
        "asynchronous rollout (%s): tokens at most %d versions old, partial rollouts %s",
        schedule.mode, schedule.max_lag, "on" if schedule.partial_rollout else "off",
    )
    return ProducerSource(producer, weights, colocated=policy.actor is not None)


#: trainer mode -> how a worker's batch source is built.
SOURCES: dict[str, Callable[..., Any]] = {
    "sync": _loader, "colocate_async": _asynchronous, "separate_async": _asynchronous,
}


def choose_batch_source(
    ctx: WorkerContext, start: int, trained_ahead: list[list[int]]
) -> LoaderSource | ProducerSource | HandoffSource:
    """The run's source (not yet started: ``start`` it after validating before training); ``start``: the
    updates applied when the run (re)starts; ``trained_ahead``: from the checkpoint it resumes."""
    return SOURCES[ctx.plan.resolved.schedule.mode](ctx, ShardReader(ctx), start, trained_ahead)
