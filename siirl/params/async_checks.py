"""What the asynchronous modes run, refused in one line before Ray otherwise (siirl.params.async_training).

An async run is the same task graph with its rollout node fed by a background producer
(siirl.dag_worker.async_rollout): features that restart the graph for more data, drive an environment from
inside the rollout, or train several policies have no producer of their own yet, so they are refused rather
than run synchronously behind the user's back.
"""

from __future__ import annotations

import math
from typing import Any

from siirl.errors import ConfigError
from siirl.params.async_training import TRAINER_MODES, async_schedule

#: Engines whose generation can stop at a chunk boundary and continue under new weights.
PARTIAL_ROLLOUT_ENGINES = ("hf",)


def _check_values(cfg: Any) -> None:
    section = cfg.async_training
    if str(cfg.trainer.v1.trainer_mode) not in TRAINER_MODES:
        raise ConfigError(
            f"bad config: trainer.v1.trainer_mode={cfg.trainer.v1.trainer_mode} is not one of {', '.join(TRAINER_MODES)}"
        )
    threshold = float(section.staleness_threshold)
    if not (0 <= threshold < math.inf):
        raise ConfigError(f"bad config: async_training.staleness_threshold must be finite and >= 0, got {threshold}")
    for key in ("trigger_parameter_sync_step", "chunk_tokens"):
        if int(getattr(section, key)) < 1:
            raise ConfigError(f"bad config: async_training.{key} must be >= 1, got {getattr(section, key)}")
    if int(section.require_batches) != 1:
        raise ConfigError(
            f"bad config: async_training.require_batches={section.require_batches}: a training step here takes one "
            "train batch (data.train_batch_size prompts); set the batch size instead (1 only)"
        )
    if int(cfg.rollout.nnodes) < 0 or int(cfg.rollout.n_gpus_per_node) < 0:
        raise ConfigError("bad config: rollout.nnodes and rollout.n_gpus_per_node must be >= 0")


def _refusal(cfg: Any, mode: str | None) -> str | None:
    """Why this async run cannot run as configured, or None (``mode``: the run's environment mode)."""
    if mode is not None:
        what = "EMBODIED environment rollouts" if mode == "steps" else "multi-turn rollouts"
        return f"{what} are not implemented in asynchronous training"
    if cfg.algorithm.filter_groups.enable:
        return "dynamic sampling (algorithm.filter_groups.enable) restarts a step for more groups, not implemented in asynchronous training"
    name = str(cfg.actor_rollout_ref.rollout.name)
    if async_schedule(cfg).partial_rollout and name not in PARTIAL_ROLLOUT_ENGINES:
        return f"async_training.partial_rollout with the '{name}' rollout engine is not implemented (hf only)"
    return None


def check_async(cfg: Any, env_mode: str | None) -> None:
    """Values first, then what the chosen mode runs; sync runs are untouched. ``env_mode``: the run's
    environment mode (siirl.environment.outputs.env_mode), None without one."""
    _check_values(cfg)
    if not async_schedule(cfg).is_async:
        return
    why = _refusal(cfg, env_mode)
    if why is not None:
        raise ConfigError(f"bad config: {why}")
