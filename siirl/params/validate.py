"""Value checks the schema's types cannot express and that need nothing above ``siirl.params``.

``RULES`` holds value ranges and the choices that ``siirl.params`` itself defines (enums, option tuples).
A key whose value names a registry entry (estimator, loss, engine, dtype, ...) is not listed here: its
registry states the keys it governs and ``siirl.config_checks`` checks them, so the allowed values are
written once. Options that are accepted by the schema but not implemented are refused here rather than
silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, OmegaConf

from siirl.errors import ConfigError
from siirl.params.enums import WorkflowType
from siirl.params.lora import check_lora_keys
from siirl.params.model import REMOVE_PADDING_LAYOUTS, ROLLOUT_LOAD_FORMATS
from siirl.params.old_log_prob import OLD_LOG_PROB_KEY
from siirl.params.old_log_prob import SOURCES as OLD_LOG_PROB_SOURCES


def _one_of(*values: str) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v in values), f"one of {', '.join(values)}"


_POSITIVE = (lambda v: v > 0, "> 0")
_NON_NEGATIVE = (lambda v: v >= 0, ">= 0")
_PROBABILITY = (lambda v: 0.0 < v <= 1.0, "in (0, 1]")

RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "algorithm.workflow_type": _one_of(*(e.value for e in WorkflowType)),
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
    "actor_rollout_ref.actor.loss_agg_horizon": _NON_NEGATIVE,
    "critic.loss_agg_horizon": _NON_NEGATIVE,
    "actor_rollout_ref.actor.optim.lr": _NON_NEGATIVE,
    "actor_rollout_ref.model.remove_padding_layout": _one_of(*REMOVE_PADDING_LAYOUTS),
    "actor_rollout_ref.rollout.load_format": _one_of(*ROLLOUT_LOAD_FORMATS),
    "critic.model.remove_padding_layout": _one_of(*REMOVE_PADDING_LAYOUTS),
    "reward_model.model.remove_padding_layout": _one_of(*REMOVE_PADDING_LAYOUTS),
    "reward_model.micro_batch_size_per_gpu": _POSITIVE,
    "reward_model.forward_max_token_len_per_gpu": _POSITIVE,
    "trainer.nnodes": _POSITIVE,
    "trainer.log_level": _one_of("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
    "trainer.cpu_threads_per_worker": _NON_NEGATIVE,
    "trainer.n_devices_per_node": _POSITIVE,
    "trainer.total_epochs": _POSITIVE,
    "trainer.critic_warmup": _NON_NEGATIVE,
    "actor_rollout_ref.rollout.multi_turn.max_turns": _POSITIVE,
    "actor_rollout_ref.rollout.multi_turn.max_observation_length": _POSITIVE,
    "env.num_workers": _NON_NEGATIVE,
    "env.timeout_s": _POSITIVE,
    "dag.agent_placement": _one_of("auto", "own", "shared"),
    OLD_LOG_PROB_KEY: _one_of(*OLD_LOG_PROB_SOURCES),
}

#: Options the schema accepts for verl compatibility but siiRL does not implement: key -> (is it set?, why).
UNSUPPORTED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "actor_rollout_ref.actor.strategy": (
        lambda v: v == "megatron",
        "is not implemented; the actor trains with FSDP2 or replicated (strategy=auto|fsdp|replicate)",
    ),
    "critic.strategy": (
        lambda v: v == "megatron",
        "is not implemented; the critic trains with FSDP2 or replicated (strategy=auto|fsdp|replicate)",
    ),
    "reward_model.strategy": (
        lambda v: v == "megatron",
        "is not implemented; the reward model runs with FSDP2 or replicated (strategy=auto|fsdp|replicate)",
    ),
}

def validate_config(cfg: DictConfig) -> None:
    """Raise ``ConfigError`` naming the first key whose value breaks its rule."""
    for key, (is_set, why) in UNSUPPORTED.items():
        value = OmegaConf.select(cfg, key)
        if is_set(value):
            raise ConfigError(f"bad config: {key}={value!r} {why}")
    for key, (ok, allowed) in RULES.items():
        value = OmegaConf.select(cfg, key)
        if not ok(value):
            raise ConfigError(f"bad config: {key}={value!r} is invalid; expected {allowed}")
    check_lora_keys(cfg)
    if cfg.data.train_batch_size % max(cfg.actor_rollout_ref.actor.ppo_mini_batch_size, 1):
        raise ConfigError(
            "bad config: data.train_batch_size must be a multiple of actor_rollout_ref.actor.ppo_mini_batch_size "
            f"(got {cfg.data.train_batch_size} and {cfg.actor_rollout_ref.actor.ppo_mini_batch_size})"
        )
