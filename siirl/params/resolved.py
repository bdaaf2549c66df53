"""The one resolve step: what a run derives from several config keys, computed once before planning.

``resolve(cfg)`` runs on the driver inside ``plan_from_config`` (siirl.execution.scheduler.planner); the
execution plan carries its ``ResolvedRun`` to every worker, so the planner and the workers read these
values and never derive them again. The ``auto`` choices that need the engine and device registries
(weight transport, loss mode, old log-prob source, a CPU fallback of the rollout engine) are settled by
``siirl.config_checks.load_config`` before this step, which gathers them here with the async schedule and
the batch size the loader draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from siirl.errors import ConfigError
from siirl.params.async_training import AsyncSchedule, async_schedule


@dataclass(frozen=True)
class ResolvedRun:
    #: Synchronous or one of the asynchronous schedules, with its staleness bound and sync window.
    schedule: AsyncSchedule
    #: The registered weight-sync transport (siirl.weight_transport): in_place, object_store, broadcast, ...
    weight_sync: str
    #: The policy loss (``actor.policy_loss.loss_mode`` with ``auto`` settled by the estimator).
    loss_mode: str
    #: ``rollout`` (the engine's sampled log-probs are the old ones) or ``recompute`` (the actor's forward).
    old_log_prob_source: str
    #: The rollout engine that runs (after ``device=cpu``'s fallback to hf).
    rollout_engine: str
    #: Prompts one draw of the train loader yields (all ranks together): ``data.gen_batch_size`` when a
    #: synchronous run generates in chunks of it, else ``data.train_batch_size`` (an asynchronous producer
    #: draws a train batch per step; verl's fully-async ``gen_batch_size=1`` is its streaming unit).
    prompts_per_draw: int
    #: Training steps of the whole run: ``trainer.total_training_steps``, else draws per epoch x epochs; -1
    #: when a sampler of the user's decides. The lr schedules decay over it where ``optim.total_training_steps``
    #: is unset, as verl's trainer fills that key.
    run_steps: int = -1


def resolve(cfg: Any) -> ResolvedRun:
    """The run's derived values, from a config ``load_config`` has checked."""
    schedule = async_schedule(cfg)
    data, arr = cfg.data, cfg.actor_rollout_ref
    per_draw = data.train_batch_size if schedule.is_async else data.prompts_per_generation()
    run_steps = _run_steps(cfg, int(per_draw))
    for name, optim in (("actor_rollout_ref.actor", arr.actor.optim), ("critic", cfg.critic.optim)):
        scheduled = optim.lr_scheduler_type != "constant" or (optim.lr_warmup_steps < 0 < optim.lr_warmup_steps_ratio)
        if scheduled and optim.total_training_steps <= 0 and run_steps <= 0:
            raise ConfigError(
                f"{name}.optim.lr_scheduler_type={optim.lr_scheduler_type} (or its warm-up ratio) needs the run's "
                f"length, which data.sampler decides: set trainer.total_training_steps or "
                f"{name}.optim.total_training_steps"
            )
    return ResolvedRun(
        schedule=schedule,
        weight_sync=str(arr.rollout.weight_sync),
        loss_mode=str(arr.actor.policy_loss.loss_mode),
        old_log_prob_source=str(arr.actor.old_log_prob_source),
        rollout_engine=str(arr.rollout.name),
        prompts_per_draw=int(per_draw),
        run_steps=run_steps,
    )


def _run_steps(cfg: Any, per_draw: int) -> int:
    """The loop's own count (siirl.dag_worker.loop), from the train files' row counts; -1 when unknowable
    here (a user's sampler, or files the preflight will refuse)."""
    if cfg.trainer.total_training_steps > 0:
        return int(cfg.trainer.total_training_steps)
    if cfg.data.sampler.class_path or not cfg.data.train_files:
        return -1
    try:
        rows = sum(pq.ParquetFile(path).metadata.num_rows for path in cfg.data.train_files)
    except (OSError, pa.ArrowException):
        return -1
    return rows // max(per_draw, 1) * int(cfg.trainer.total_epochs)
