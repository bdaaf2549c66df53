"""Asynchronous training: verl's ``async_training.*``, ``trainer.v1.trainer_mode``, ``rollout.{nnodes,
n_gpus_per_node}`` and ``actor_rollout_ref.hybrid_engine``, resolved into one schedule.

verl's semantics (its fully-async recipe and V1 trainer): ``staleness_threshold`` is the extra fraction of a
parameter-sync window the rollout may produce ahead (0 = synchronous, 1 ~ one-step off-policy), counted here
in policy versions: a token may be trained at most ``ceil(staleness_threshold)`` versions after the version
that sampled it (verl V1's ``trainer.v1.sampler.max_off_policy_threshold``, when set, is that bound
directly), times the sync window: with ``trigger_parameter_sync_step = N`` the rollout's weights move
every N updates, so the bound is ``(ceil(staleness_threshold) + 1) * N - 1`` updates (``N - 1`` when
staleness is 0: a window's samples all come from its first version). ``partial_rollout`` lets in-flight generations cross a weight sync (tokens and log-probs
kept, generation continues under the new weights). ``hybrid_engine=False`` or ``rollout.nnodes > 0`` is
verl's fully-async launch (rollout on its own devices), i.e. ``separate_async``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

from siirl.errors import ConfigError
from siirl.params.rules import (
    FINITE_NON_NEGATIVE,
    IS_NOT,
    MUST_BE,
    NON_NEGATIVE,
    POSITIVE,
    checked,
    one_of,
    or_null,
    refused,
)

TRAINER_MODES = ("sync", "colocate_async", "separate_async")
#: verl's fully-async recipe's staleness: its rollout runs up to one version ahead, so rollout and training
#: overlap on their separate devices (at 0 they take turns).
SEPARATE_STALENESS = 0.1


@dataclass
class AsyncTrainingConfig:
    #: Extra share of a sync window the rollout may run ahead; 0 = synchronous. Bound in versions: ceil(this).
    #: null: verl's fully-async default (``SEPARATE_STALENESS``) under separate_async, else 0.
    staleness_threshold: Optional[float] = checked(  # noqa: UP045 - OmegaConf reads Optional
        None, or_null(FINITE_NON_NEGATIVE, "finite and >= 0"), says=MUST_BE
    )
    #: Training steps between two weight syncs to the rollout (verl: trainer steps per parameter sync).
    trigger_parameter_sync_step: int = checked(1, POSITIVE)
    #: verl's PPO mini-batches per trainer fetch; here a step trains on one train batch (1 only).
    require_batches: int = refused(
        1, lambda v: v != 1, "is not supported: a training step here takes one train batch "
        "(data.train_batch_size prompts); set the batch size instead (1 only)", early=False,
    )
    #: In-flight generations continue across a weight sync, keeping their tokens and log-probs.
    partial_rollout: bool = False
    #: siiRL: at most this many tokens per piece of a partial rollout (finished rows leave between pieces;
    #: each piece re-reads its rows' prefixes); null: a piece runs until the step's groups have finished or
    #: newer weights are published.
    chunk_tokens: Optional[int] = checked(8, or_null(POSITIVE, ">= 1"), says=MUST_BE)  # noqa: UP045


@dataclass
class V1SamplerConfig:
    """verl V1's ``trainer.v1.sampler``: its staleness bound, in policy versions."""

    #: Versions a token may be older than the weights it trains; null = from async_training.staleness_threshold.
    max_off_policy_threshold: Optional[int] = checked(  # noqa: UP045 - OmegaConf reads Optional
        None, or_null(NON_NEGATIVE, ">= 0 (or null)")
    )
    #: drop | wait: what verl does with a group over the bound. Here the producer never starts one that could
    #: pass it (it waits for fresh enough weights first), so both values train the same samples.
    max_off_policy_strategy: str = checked("drop", one_of("drop", "wait"))

    def validate(self, cfg: Any, key: str) -> None:
        """An async run's bound covers a sync window: the one derived from ``staleness_threshold`` always
        does; verl V1's, given in versions, may not."""
        every, bound = int(cfg.async_training.trigger_parameter_sync_step), self.max_off_policy_threshold
        if trainer_mode(cfg) != "sync" and bound is not None and int(bound) < every - 1:
            raise ConfigError(
                f"bad config: weights reach the rollout every {every} updates "
                f"(async_training.trigger_parameter_sync_step), so the staleness bound must be at least "
                f"{every - 1} versions, got {bound} ({key}.max_off_policy_threshold)"
            )


@dataclass
class TrainerV1Config:
    """verl's ``trainer.v1.*``: the trainer mode (sync | colocate_async | separate_async) and its sampler."""

    trainer_mode: str = checked("sync", one_of(*TRAINER_MODES), says=IS_NOT)
    sampler: V1SamplerConfig = field(default_factory=V1SamplerConfig)


@dataclass
class RolloutPlacementConfig:
    """verl's fully-async top-level ``rollout.*``: the rollout's own devices (0 = colocated with training)."""

    nnodes: int = checked(0, NON_NEGATIVE)
    n_gpus_per_node: int = checked(0, NON_NEGATIVE)
    #: verl's total rollout samples of a fully-async run; the run length here is trainer.total_training_steps.
    total_rollout_steps: Optional[int] = None  # noqa: UP045 - OmegaConf reads Optional


@dataclass(frozen=True)
class AsyncSchedule:
    """What the loop runs: the mode, the version lag a trained token may have, and whether generations
    continue across a sync."""

    mode: str
    max_lag: int
    partial_rollout: bool
    sync_every: int
    chunk_tokens: int | None

    @property
    def is_async(self) -> bool:
        return self.mode != "sync"


def trainer_mode(cfg: Any) -> str:
    """The mode the keys ask for: ``trainer.v1.trainer_mode`` unless verl's fully-async launch keys (a
    rollout with its own devices) say ``separate_async``; a positive staleness under ``sync`` is
    ``colocate_async`` (verl's one-step-off-policy runs on shared devices)."""
    mode = str(cfg.trainer.v1.trainer_mode)
    if not cfg.actor_rollout_ref.hybrid_engine or int(cfg.rollout.nnodes) > 0:
        return "separate_async"
    if mode == "sync" and float(cfg.async_training.staleness_threshold or 0) > 0:
        return "colocate_async"
    return mode


def async_schedule(cfg: Any) -> AsyncSchedule:
    section = cfg.async_training
    mode = trainer_mode(cfg)
    every = int(section.trigger_parameter_sync_step)
    v1_bound = cfg.trainer.v1.sampler.max_off_policy_threshold
    if mode == "sync":
        lag = 0
    elif v1_bound is not None:  # verl V1's bound, in versions, as it reads it
        lag = int(v1_bound)
    else:
        threshold = section.staleness_threshold
        if threshold is None:
            threshold = SEPARATE_STALENESS if mode == "separate_async" else 0.0
        lag = (math.ceil(float(threshold)) + 1) * every - 1
    return AsyncSchedule(mode, lag, bool(section.partial_rollout) and mode != "sync", every,
                         None if section.chunk_tokens is None else int(section.chunk_tokens))
