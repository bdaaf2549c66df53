"""Value checks the schema's types cannot express and that need nothing above ``siirl.params``.

``RULES`` holds value ranges and the choices that ``siirl.params`` itself defines (enums, option tuples).
A key whose value names a registry entry (estimator, loss, engine, dtype, ...) is not listed here: its
registry states the keys it governs and ``siirl.config_checks`` checks them, so the allowed values are
written once. Options that are accepted by the schema but not implemented are refused here rather than
silently ignored.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from siirl.errors import ConfigError
from siirl.params.algorithm_checks import RULES as ALGORITHM_RULES
from siirl.params.algorithm_checks import check_algorithm_sections
from siirl.params.chat_template import check_custom_chat_template
from siirl.params.checkpoint_contents import check_checkpoint_contents
from siirl.params.distillation import check_distillation, refuse_other_teachers
from siirl.params.enums import WorkflowType
from siirl.params.fsdp import check_fsdp_sections
from siirl.params.lora import check_lora_keys
from siirl.params.model import REMOVE_PADDING_LAYOUTS, ROLLOUT_LOAD_FORMATS, SKIP_ACTIONS
from siirl.params.old_log_prob import OLD_LOG_PROB_KEY
from siirl.params.old_log_prob import SOURCES as OLD_LOG_PROB_SOURCES
from siirl.params.verl_engines import engine_refusal


def _one_of(*values: str) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v in values), f"one of {', '.join(values)}"


_POSITIVE = (lambda v: v > 0, "> 0")
_NON_NEGATIVE = (lambda v: v >= 0, ">= 0")
_PROBABILITY = (lambda v: 0.0 < v <= 1.0, "in (0, 1]")
_FINITE_POSITIVE = (lambda v: 0 < v < math.inf, "finite and > 0")
_FINITE_NON_NEGATIVE = (lambda v: 0 <= v < math.inf, "finite and >= 0")
_TOP_K = (lambda v: v >= -1, ">= -1 (-1 or 0: no top-k filtering)")

RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "algorithm.workflow_type": _one_of(*(e.value for e in WorkflowType)),
    "data.max_prompt_length": _POSITIVE,
    "data.max_response_length": _POSITIVE,
    "data.train_batch_size": _POSITIVE,
    "data.gen_batch_size": (lambda v: v is None or v > 0, "> 0 (or null: data.train_batch_size)"),
    "reward_model.overlong_buffer.penalty_factor": _NON_NEGATIVE,
    "actor_rollout_ref.rollout.n": _POSITIVE,
    "actor_rollout_ref.rollout.temperature": (
        lambda v: 0 < v < math.inf,
        (
            "finite and > 0: the policy's log-probs are taken at the sampling temperature; greedy validation is "
            "actor_rollout_ref.rollout.val_kwargs.temperature=0"
        ),
    ),
    "actor_rollout_ref.rollout.top_p": _PROBABILITY,
    "actor_rollout_ref.rollout.top_k": _TOP_K,
    "actor_rollout_ref.rollout.val_kwargs.temperature": (
        lambda v: 0 <= v < math.inf, "finite and >= 0 (0: greedy)"
    ),
    "actor_rollout_ref.rollout.val_kwargs.top_p": _PROBABILITY,
    "actor_rollout_ref.rollout.val_kwargs.top_k": _TOP_K,
    "actor_rollout_ref.rollout.val_kwargs.n": _POSITIVE,
    "actor_rollout_ref.rollout.tensor_model_parallel_size": _POSITIVE,
    "actor_rollout_ref.actor.ppo_mini_batch_size": _POSITIVE,
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": _POSITIVE,
    "actor_rollout_ref.actor.ppo_epochs": _POSITIVE,
    "actor_rollout_ref.actor.loss_agg_horizon": _NON_NEGATIVE,
    "critic.loss_agg_horizon": _NON_NEGATIVE,
    "actor_rollout_ref.actor.optim.lr": _FINITE_NON_NEGATIVE,
    "critic.optim.lr": _FINITE_NON_NEGATIVE,
    "actor_rollout_ref.model.remove_padding_layout": _one_of(*REMOVE_PADDING_LAYOUTS),
    "actor_rollout_ref.rollout.load_format": _one_of(*ROLLOUT_LOAD_FORMATS),
    "actor_rollout_ref.rollout.skip.action": _one_of(*SKIP_ACTIONS),
    "actor_rollout_ref.rollout.skip.max_dump_step": _POSITIVE,
    "critic.model.remove_padding_layout": _one_of(*REMOVE_PADDING_LAYOUTS),
    "reward_model.model.remove_padding_layout": _one_of(*REMOVE_PADDING_LAYOUTS),
    "reward_model.micro_batch_size_per_gpu": _POSITIVE,
    "reward_model.timeout_s": _FINITE_POSITIVE,
    "reward_model.num_workers": _POSITIVE,
    "reward_model.forward_max_token_len_per_gpu": _POSITIVE,
    "reward_model.sandbox_fusion.max_concurrent": _POSITIVE,
    "reward_model.sandbox_fusion.memory_limit_mb": _POSITIVE,
    "actor_rollout_ref.model.fused_kernel_options.impl_backend": (
        lambda v: v in (None, "torch", "triton"), "one of torch, triton (or null)"
    ),
    "critic.model.fused_kernel_options.impl_backend": (
        lambda v: v in (None, "torch", "triton"), "one of torch, triton (or null)"
    ),
    "actor_rollout_ref.rollout.max_model_len": (lambda v: v is None or v > 0, "> 0 (or null)"),
    "actor_rollout_ref.rollout.max_num_batched_tokens": (lambda v: v is None or v > 0, "> 0 (or null)"),
    "actor_rollout_ref.rollout.max_num_seqs": (lambda v: v is None or v > 0, "> 0 (or null)"),
    "actor_rollout_ref.rollout.generation_timeout_s": (
        lambda v: v is None or 0 < v < math.inf, "null (no bound) or finite and > 0"
    ),
    "trainer.nnodes": _POSITIVE,
    "trainer.log_level": _one_of("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
    "trainer.cpu_threads_per_worker": _NON_NEGATIVE,
    "trainer.stall_timeout_s": (lambda v: v is None or 0 <= v < math.inf, "null (follow the step times) or >= 0"),
    "trainer.max_nonfinite_steps": _NON_NEGATIVE,
    "trainer.n_devices_per_node": _POSITIVE,
    "trainer.total_epochs": _POSITIVE,
    "trainer.critic_warmup": _NON_NEGATIVE,
    "trainer.log_val_generations": _NON_NEGATIVE,
    "trainer.use_legacy_worker_impl": _one_of("auto", "enable", "disable"),
    "data.filter_overlong_prompts_workers": _POSITIVE,
    "data.image_patch_size": (lambda v: v is None or v > 0, "> 0 (or null: the image processor's own)"),
    "actor_rollout_ref.rollout.multi_turn.max_turns": _POSITIVE,
    "actor_rollout_ref.rollout.multi_turn.max_observation_length": _POSITIVE,
    "actor_rollout_ref.rollout.multi_turn.max_user_turns": (lambda v: v is None or v >= 0, "null or >= 0"),
    "actor_rollout_ref.rollout.multi_turn.max_parallel_calls": _POSITIVE,
    "actor_rollout_ref.rollout.multi_turn.max_tool_response_length": _POSITIVE,
    "actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side": _one_of("left", "middle", "right"),
    "actor_rollout_ref.rollout.multi_turn.tool_timeout_s": _POSITIVE,
    "actor_rollout_ref.rollout.multi_turn.tokenization_sanity_check_mode": _one_of(
        "strict", "ignore_strippable", "disable"
    ),
    "actor_rollout_ref.rollout.mode": _one_of("sync", "async"),
    "env.num_workers": _NON_NEGATIVE,
    "env.timeout_s": _FINITE_POSITIVE,
    "dag.agent_placement": _one_of("auto", "own", "shared"),
    OLD_LOG_PROB_KEY: _one_of(*OLD_LOG_PROB_SOURCES),
}

#: Options the schema accepts for verl compatibility but siiRL does not implement: key -> (is it set?, why).
UNSUPPORTED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "actor_rollout_ref.rollout.multi_turn.use_inference_chat_template": (
        lambda v: bool(v),
        "is not implemented; earlier turns keep the policy's own tokens (verl's false)",
    ),
    "actor_rollout_ref.actor.strategy": (
        lambda v: v == "megatron",
        "is not implemented; the actor trains with FSDP2 or replicated (strategy=auto|fsdp|replicate)",
    ),
    "critic.strategy": (
        lambda v: v == "megatron",
        "is not implemented; the critic trains with FSDP2 or replicated (strategy=auto|fsdp|replicate)",
    ),
    "trainer.del_local_ckpt_after_load": (
        lambda v: v is True,
        "is not supported; siiRL keeps checkpoints it resumed from (trainer.max_ckpt_to_keep prunes them)",
    ),
    "global_profiler.tool": (
        lambda v: v not in (None, "torch"),
        (
            "is not supported; verl's nsys, npu and torch_memory profilers drive CUDA/Ascend tools siiRL does "
            "not wrap; use torch (a trace per profiled step, every device) or the timings in metrics.jsonl"
        ),
    ),
    "actor_rollout_ref.rollout.name": (
        lambda v: v == "trtllm",
        "is not implemented: there is no TensorRT-LLM rollout engine; use vllm, sglang or hf",
    ),
    "reward_model.strategy": (
        lambda v: v == "megatron",
        "is not implemented; the reward model runs with FSDP2 or replicated (strategy=auto|fsdp|replicate)",
    ),
}

def _check_dapo_keys(cfg: DictConfig) -> None:
    """verl's DAPO keys act only together with the feature they tune, so alone they are refused, not ignored."""
    data = cfg.data
    buffer = cfg.reward_model.overlong_buffer
    if not buffer.enable:
        return
    if cfg.reward_model.reward_manager != "dapo":
        raise ConfigError(
            "bad config: reward_model.overlong_buffer.enable=true is applied by the dapo reward manager; set "
            f"reward_model.reward_manager=dapo (got {cfg.reward_model.reward_manager!r})"
        )
    if buffer.max_resp_len is not None and buffer.max_resp_len != data.max_response_length:
        raise ConfigError(
            f"bad config: reward_model.reward_kwargs.max_resp_len={buffer.max_resp_len} differs from "
            f"data.max_response_length={data.max_response_length}; the overlong penalty counts to the latter"
        )
    if not 0 < buffer.len < data.max_response_length:
        raise ConfigError(
            f"bad config: reward_model.overlong_buffer.len={buffer.len} must be in (0, data.max_response_length="
            f"{data.max_response_length})"
        )


#: A key path through one of these sections asks for a feature siiRL does not implement (verl's Megatron
#: scripts set ``actor_rollout_ref.actor.megatron.*`` next to ``strategy=megatron``).
UNSUPPORTED_SECTIONS = {"megatron": "Megatron-LM training is not implemented; siiRL trains with FSDP2 or replicated"}


def _yaml_value(text: str) -> Any:
    """An override's value as Hydra reads it (``false`` is a bool), the text itself if it is no YAML."""
    try:
        return yaml.safe_load(text) if text else text
    except yaml.YAMLError:
        return text


def refuse_unsupported(overrides: list[str], user_tree: dict[str, Any] | None) -> None:
    """Name an unsupported feature the input asks for, before any unknown-key error it also causes: a
    Megatron script fails on ``strategy=megatron``, not on the first ``megatron.*`` key the schema lacks."""
    refuse_other_teachers(overrides, user_tree)
    raw = OmegaConf.create(user_tree or {})
    for override in overrides:
        key, sep, value = override.partition("=")
        key = key.lstrip("+~")
        for section, why in UNSUPPORTED_SECTIONS.items():
            if section in key.split("."):
                raise ConfigError(f"bad config: {key}: {why}")
        engine = engine_refusal(key, value)
        if engine:
            raise ConfigError(f"bad config: {engine}")
        if sep and key in UNSUPPORTED:
            OmegaConf.update(raw, key, _yaml_value(value), force_add=True)
    for key, (is_set, why) in UNSUPPORTED.items():
        value = OmegaConf.select(raw, key, default=None)
        if value is not None and is_set(value):
            raise ConfigError(f"bad config: {key}={value!r} {why}")
    for section, why in UNSUPPORTED_SECTIONS.items():
        if _has_section(user_tree or {}, section):
            raise ConfigError(f"bad config: the config file sets {section}.*: {why}")


def _has_section(tree: Any, section: str) -> bool:
    return isinstance(tree, dict) and any(k == section or _has_section(v, section) for k, v in tree.items())


def validate_config(cfg: DictConfig) -> None:
    """Raise ``ConfigError`` naming the first key whose value breaks its rule."""
    for key, (is_set, why) in UNSUPPORTED.items():
        value = OmegaConf.select(cfg, key)
        if is_set(value):
            raise ConfigError(f"bad config: {key}={value!r} {why}")
    for key, (ok, allowed) in {**RULES, **ALGORITHM_RULES}.items():
        value = OmegaConf.select(cfg, key)
        if not ok(value):
            raise ConfigError(f"bad config: {key}={value!r} is invalid; expected {allowed}")
    check_fsdp_sections(cfg)
    check_lora_keys(cfg)
    check_custom_chat_template(cfg.actor_rollout_ref.model.custom_chat_template)
    check_algorithm_sections(cfg)
    check_distillation(cfg)
    check_checkpoint_contents(cfg)
    if cfg.data.train_batch_size % max(cfg.actor_rollout_ref.actor.ppo_mini_batch_size, 1):
        raise ConfigError(
            "bad config: data.train_batch_size must be a multiple of actor_rollout_ref.actor.ppo_mini_batch_size "
            f"(got {cfg.data.train_batch_size} and {cfg.actor_rollout_ref.actor.ppo_mini_batch_size})"
        )
    _check_dapo_keys(cfg)
