"""Value checks the schema's types cannot express, as a table of (key, rule, what is allowed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, OmegaConf

from siirl.errors import ConfigError
from siirl.params.enums import AdvantageEstimator, WorkflowType


def _one_of(*values: str) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v in values), f"one of {', '.join(values)}"


_POSITIVE = (lambda v: v > 0, "> 0")
_NON_NEGATIVE = (lambda v: v >= 0, ">= 0")
_PROBABILITY = (lambda v: 0.0 < v <= 1.0, "in (0, 1]")

RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "algorithm.adv_estimator": _one_of(*(e.value for e in AdvantageEstimator)),
    "algorithm.workflow_type": _one_of(*(e.value for e in WorkflowType)),
    "algorithm.kl_ctrl.type": _one_of("fixed", "adaptive"),
    "data.truncation": _one_of("error", "left", "right"),
    "data.max_prompt_length": _POSITIVE,
    "data.max_response_length": _POSITIVE,
    "data.train_batch_size": _POSITIVE,
    "actor_rollout_ref.rollout.n": _POSITIVE,
    "actor_rollout_ref.rollout.temperature": _NON_NEGATIVE,
    "actor_rollout_ref.rollout.top_p": _PROBABILITY,
    "actor_rollout_ref.rollout.tensor_model_parallel_size": _POSITIVE,
    "actor_rollout_ref.actor.ppo_mini_batch_size": _POSITIVE,
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": _POSITIVE,
    "actor_rollout_ref.actor.ppo_epochs": _POSITIVE,
    "actor_rollout_ref.actor.optim.lr": _NON_NEGATIVE,
    "actor_rollout_ref.actor.optim.lr_scheduler_type": _one_of("constant", "cosine"),
    "actor_rollout_ref.actor.strategy": _one_of("auto", "fsdp", "fsdp2", "replicate"),
    "critic.strategy": _one_of("auto", "fsdp", "fsdp2", "replicate"),
    "actor_rollout_ref.actor.kl_loss_type": _one_of("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"),
    "actor_rollout_ref.model.dtype": _one_of("auto", "float32", "bfloat16", "float16"),
    "critic.optim.lr_scheduler_type": _one_of("constant", "cosine"),
    "trainer.nnodes": _POSITIVE,
    "trainer.log_level": _one_of("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
    "trainer.cpu_threads_per_worker": _NON_NEGATIVE,
    "trainer.n_devices_per_node": _POSITIVE,
    "trainer.total_epochs": _POSITIVE,
    "actor_rollout_ref.rollout.multi_turn.max_turns": _POSITIVE,
    "actor_rollout_ref.rollout.multi_turn.max_observation_length": _POSITIVE,
    "env.num_workers": _NON_NEGATIVE,
    "env.timeout_s": _POSITIVE,
}


def validate_config(cfg: DictConfig) -> None:
    """Raise ``ConfigError`` naming the first key whose value breaks its rule."""
    for key, (ok, allowed) in RULES.items():
        value = OmegaConf.select(cfg, key)
        if not ok(value):
            raise ConfigError(f"bad config: {key}={value!r} is invalid; expected {allowed}")
    if cfg.data.train_batch_size % max(cfg.actor_rollout_ref.actor.ppo_mini_batch_size, 1):
        raise ConfigError(
            "bad config: data.train_batch_size must be a multiple of actor_rollout_ref.actor.ppo_mini_batch_size "
            f"(got {cfg.data.train_batch_size} and {cfg.actor_rollout_ref.actor.ppo_mini_batch_size})"
        )
    _check_environment(cfg)


def _check_environment(cfg: DictConfig) -> None:
    """An environment-driven run (multi-turn or EMBODIED) must name an environment that resolves."""
    from siirl.environment import resolve_env_factory
    from siirl.environment.outputs import env_mode

    if env_mode(cfg) is None:
        return
    resolve_env_factory(str(cfg.env.name))
