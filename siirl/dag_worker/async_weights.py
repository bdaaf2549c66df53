"""How an asynchronous run's weights reach its rollout producer, by mode (siirl.params.async_training).

Both routes run on the training thread of every rank at the same points (the start, and after each update
on sync steps), since gathering sharded weights and broadcasting them are collectives; the producer loads
what they deliver at its next batch or piece (siirl.dag_worker.async_rollout).

- ``colocate_async``: each rank's actor and engine share the rank; the actor's gathered weights are handed
  to the rank's own producer through the run's transport (``object_store``).
- ``separate_async``: the trainers' first rank broadcasts the gathered weights to the rollout ranks over a
  group of those ranks (the device layer's bucketed broadcast: gloo, NCCL or HCCL; ``engine_broadcast``: into
  the vLLM / SGLang engine's own processes); the other trainer ranks take part in the gather only. The
  transport is ``actor_rollout_ref.rollout.weight_sync``, resolved before Ray (siirl.weight_transport) and
  carried by the plan; a rollout rank hands what it received to its producer thread through the object store.

``producer_transport``: the registered transport that hands a rank's snapshot to its producer thread.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from siirl.device.weight_sync import make_weight_sync, weight_sync_group
from siirl.device.weight_sync.engine_receivers import ENGINE_RECEIVERS
from siirl.execution.scheduler.async_graph import ROLLOUT_GROUP, TRAINER_GROUP

if TYPE_CHECKING:
    from siirl.dag_worker.context import WorkerContext

#: rollout engine -> the attribute of siiRL's engine adapter that holds the library's own engine object.
NATIVE_ENGINE = {"vllm": "llm", "sglang": "engine"}


class ColocatedWeights:
    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self.producer_transport = ctx.plan.resolved.weight_sync

    def initial(self, version: int) -> None:
        """The engine starts from the actor's weights (a resumed run's too)."""
        self.ctx.policy().refresh()

    def after_update(self, version: int, producer: Any) -> None:
        producer.publish(version, self.ctx.policy().actor.named_parameters_for_sync)


class SeparateWeights:
    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        placements = ctx.plan.placements
        self.src = placements[TRAINER_GROUP][0]
        members = [self.src, *placements[ROLLOUT_GROUP]]
        group = weight_sync_group(members, ctx.backend)  # every rank creates it
        self.role = "source" if ctx.rank == self.src else "receiver" if ctx.rank in members else "trainer"
        self.every = ctx.plan.resolved.schedule.sync_every
        self.producer_transport = "object_store"
        rollout, resolved = ctx.cfg.actor_rollout_ref.rollout, ctx.plan.resolved
        transport, options, name = resolved.weight_sync, {}, resolved.rollout_engine  # broadcast or engine_broadcast
        self.into_engine = transport == "engine_broadcast"
        if transport == "engine_broadcast":
            engine = ctx.policy().rollout
            native = getattr(engine, NATIVE_ENGINE[name]) if self.role == "receiver" else None
            options = {"engine": name, "engine_ranks": int(rollout.tensor_model_parallel_size),
                       "receiver": ENGINE_RECEIVERS.get(name)(native) if native is not None else None}
        self.sync = make_weight_sync(
            transport, group=group, src=self.src, device=ctx.backend.device(ctx.local_device),
            bucket_mb=rollout.weight_sync_bucket_mb, **options,
        )

    def _move(self, version: int, load: Any) -> None:
        if self.role == "receiver":
            self.sync.receive(load)
            return
        weights = self.ctx.policy().actor.named_parameters_for_sync()  # a gather over the trainers
        if self.role == "source":
            self.sync.send(weights, version)
        else:
            for _ in weights:
                pass

    def initial(self, version: int) -> None:
        """The rollout ranks' engines start from the trainers' weights (a resumed run's too)."""
        engine = self.ctx.policy().rollout
        self._move(version, engine.sync_weights if engine is not None else None)

    def after_update(self, version: int, producer: Any) -> None:
        if version % self.every:
            return
        if self.into_engine and producer is not None:  # the engine's processes take the buckets themselves
            began = time.perf_counter()
            with producer.engine_held(version):
                self._move(version, None)
            producer.loaded(version, time.perf_counter() - began)
            return
        snapshot: list = []
        self._move(version, lambda bucket: snapshot.extend((name, t.clone()) for name, t in bucket))
        if producer is not None:
            producer.publish(version, lambda: snapshot)


#: asynchronous trainer mode -> its route (built by every rank at the same point: it may form a group).
ROUTES = {"colocate_async": ColocatedWeights, "separate_async": SeparateWeights}
