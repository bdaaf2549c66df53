"""Value checks the schema's types cannot express, as tables of (key, rule, what is allowed).

Names that pick a registered function (estimator, policy loss, aggregation, KL estimator) are looked up
in their registries, so a function registered from user code (``module:function``) passes and a typo is
one line listing what exists. Options that are accepted by the schema but not implemented are refused
here rather than silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, OmegaConf

from siirl.errors import ConfigError
from siirl.params.enums import WorkflowType
from siirl.params.model import REMOVE_PADDING_LAYOUTS
from siirl.params.old_log_prob import OLD_LOG_PROB_KEY, resolve_old_log_prob_source
from siirl.params.old_log_prob import SOURCES as OLD_LOG_PROB_SOURCES


def _one_of(*values: str) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v in values), f"one of {', '.join(values)}"


_POSITIVE = (lambda v: v > 0, "> 0")
_NON_NEGATIVE = (lambda v: v >= 0, ">= 0")
_PROBABILITY = (lambda v: 0.0 < v <= 1.0, "in (0, 1]")

RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
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
    "actor_rollout_ref.actor.loss_agg_horizon": _NON_NEGATIVE,
    "critic.loss_agg_horizon": _NON_NEGATIVE,
    "actor_rollout_ref.actor.optim.lr": _NON_NEGATIVE,
    "actor_rollout_ref.actor.optim.lr_scheduler_type": _one_of("constant", "cosine"),
    "actor_rollout_ref.actor.strategy": _one_of("auto", "fsdp", "fsdp2", "replicate"),
    "critic.strategy": _one_of("auto", "fsdp", "fsdp2", "replicate"),
    "reward_model.strategy": _one_of("auto", "fsdp", "fsdp2", "replicate"),
    "reward_model.micro_batch_size_per_gpu": _POSITIVE,
    "reward_model.forward_max_token_len_per_gpu": _POSITIVE,
    "actor_rollout_ref.model.dtype": _one_of("auto", "float32", "bfloat16", "float16"),
    "actor_rollout_ref.model.remove_padding_layout": _one_of(*REMOVE_PADDING_LAYOUTS),
    "critic.model.remove_padding_layout": _one_of(*REMOVE_PADDING_LAYOUTS),
    "reward_model.model.remove_padding_layout": _one_of(*REMOVE_PADDING_LAYOUTS),
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
    "dag.agent_placement": _one_of("auto", "own", "shared"),
    OLD_LOG_PROB_KEY: _one_of(*OLD_LOG_PROB_SOURCES),
}

#: key -> (the family's registry, by import path); the value must name a registered function.
REGISTRY_KEYS: dict[str, str] = {
    "algorithm.adv_estimator": "ADV_ESTIMATORS",
    "algorithm.kl_penalty": "KL_ESTIMATORS",
    "actor_rollout_ref.actor.kl_loss_type": "KL_ESTIMATORS",
    "actor_rollout_ref.actor.loss_agg_mode": "AGG_MODES",
    "critic.loss_agg_mode": "AGG_MODES",
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
    "reward_model.enable": (
        lambda v: bool(v),
        "is not supported: model-based rewards are not implemented; use rule rewards (custom_reward_function)",
    ),
}

LOSS_MODE_KEY = "actor_rollout_ref.actor.policy_loss.loss_mode"


def _check_registries(cfg: DictConfig) -> None:
    from siirl import algorithms

    for key, registry_name in REGISTRY_KEYS.items():
        value = OmegaConf.select(cfg, key)
        try:
            getattr(algorithms, registry_name).get(value)
        except ConfigError as exc:
            raise ConfigError(f"bad config: {key}={value!r}: {exc}") from None


def resolve_loss_mode(cfg: DictConfig) -> str:
    """``auto`` follows the estimator (cpgd -> cpgd, gspo -> gspo, else vanilla); an explicit mode that
    contradicts an estimator with a loss of its own is refused."""
    from siirl.algorithms import POLICY_LOSSES, estimator_needs

    estimator = cfg.algorithm.adv_estimator
    wanted = estimator_needs(estimator).loss_mode
    mode = OmegaConf.select(cfg, LOSS_MODE_KEY)
    if mode == "auto":
        return wanted
    try:
        POLICY_LOSSES.get(mode)
    except ConfigError as exc:
        raise ConfigError(f"bad config: {LOSS_MODE_KEY}={mode!r}: {exc}") from None
    if wanted != "vanilla" and mode != wanted:
        raise ConfigError(
            f"bad config: algorithm.adv_estimator={estimator} trains with loss_mode={wanted}, but "
            f"{LOSS_MODE_KEY}={mode}; drop the override (auto) or pick a matching pair"
        )
    return str(mode)


def _check_remax_baseline(cfg: DictConfig) -> None:
    from siirl.algorithms import estimator_needs

    val = cfg.actor_rollout_ref.rollout.val_kwargs
    greedy = (not val.do_sample or val.temperature == 0) and val.n == 1
    if estimator_needs(cfg.algorithm.adv_estimator).reward_baselines and not greedy:
        raise ConfigError(
            f"bad config: algorithm.adv_estimator={cfg.algorithm.adv_estimator} scores a greedy baseline "
            "response per prompt with rollout.val_kwargs; keep val_kwargs.do_sample=false and n=1"
        )


def validate_config(cfg: DictConfig) -> None:
    """Raise ``ConfigError`` naming the first key whose value breaks its rule; resolve ``loss_mode=auto``."""
    for key, (is_set, why) in UNSUPPORTED.items():
        value = OmegaConf.select(cfg, key)
        if is_set(value):
            raise ConfigError(f"bad config: {key}={value!r} {why}")
    for key, (ok, allowed) in RULES.items():
        value = OmegaConf.select(cfg, key)
        if not ok(value):
            raise ConfigError(f"bad config: {key}={value!r} is invalid; expected {allowed}")
    if cfg.data.train_batch_size % max(cfg.actor_rollout_ref.actor.ppo_mini_batch_size, 1):
        raise ConfigError(
            "bad config: data.train_batch_size must be a multiple of actor_rollout_ref.actor.ppo_mini_batch_size "
            f"(got {cfg.data.train_batch_size} and {cfg.actor_rollout_ref.actor.ppo_mini_batch_size})"
        )
    _check_registries(cfg)
    _check_remax_baseline(cfg)
    OmegaConf.update(cfg, LOSS_MODE_KEY, resolve_loss_mode(cfg))
    _check_environment(cfg)
    OmegaConf.update(cfg, OLD_LOG_PROB_KEY, resolve_old_log_prob_source(cfg))


def _check_environment(cfg: DictConfig) -> None:
    """An environment-driven run (multi-turn or EMBODIED) must name an environment that resolves."""
    from siirl.environment import resolve_env_factory
    from siirl.environment.outputs import env_mode

    if env_mode(cfg) is None:
        return
    resolve_env_factory(str(cfg.env.name))
