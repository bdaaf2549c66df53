"""Which rollout engine a run uses and what it can give, checked and resolved when the config loads.

``device=cpu`` is the user's explicit request to run on the CPU: vLLM runs there through its CPU build
(refused before Ray when it is not installed), and an engine with no CPU build (SGLang) rolls out with hf,
said once. On other devices an engine the device cannot run stays an error (raised by the launcher).
"""

from __future__ import annotations

import logging

from siirl.device import backend_class, get_backend
from siirl.engine.rollout.base import ROLLOUT_ENGINES, RolloutEngine
from siirl.engine.workers.lora import configured_rank
from siirl.engine.workers.model_loading import resolve_dtype
from siirl.errors import ConfigError
from siirl.params.async_training import trainer_mode
from siirl.params.lora import lora_enabled, serves_adapters
from siirl.params.old_log_prob import BYPASS_KEY, OLD_LOG_PROB_KEY
from siirl.params.root import SiirlConfig

#: What ``device=cpu`` rolls out with when the command names an engine the CPU does not run.
CPU_ROLLOUT_ENGINE = "hf"

logger = logging.getLogger(__name__)


def configured_engine(cfg: SiirlConfig) -> type[RolloutEngine]:
    """The engine class ``actor_rollout_ref.rollout.name`` names."""
    return ROLLOUT_ENGINES.get(str(cfg.actor_rollout_ref.rollout.name))


def choose_rollout_engine(cfg: SiirlConfig) -> None:
    """Swap in hf for ``device=cpu`` when needed, then let the engine vet its settings. Run apart
    (``separate_async``, one engine per rollout rank), an engine whose groups span every DAG worker cannot
    span ranks with tensor parallelism."""
    rollout = cfg.actor_rollout_ref.rollout
    if str(cfg.trainer.device) == "cpu" and rollout.name not in backend_class("cpu").rollout_engines:
        logger.warning(
            "device=cpu: rollout engine '%s' does not run on the CPU; rolling out with '%s' (its engine knobs, "
            "tensor_model_parallel_size=%s included, are not applied)",
            rollout.name, CPU_ROLLOUT_ENGINE, rollout.tensor_model_parallel_size,
        )
        rollout.name, rollout.tensor_model_parallel_size = CPU_ROLLOUT_ENGINE, 1
    elif rollout.name == CPU_ROLLOUT_ENGINE and rollout.quantization is not None:
        logger.warning(
            "actor_rollout_ref.rollout.quantization=%s is a vLLM/SGLang setting; the hf engine generates in the "
            "policy's dtype", rollout.quantization,
        )
    if rollout.calculate_log_probs and sampled_log_prob_quality(cfg) == "unsupported":
        raise ConfigError(
            f"bad config: actor_rollout_ref.rollout.calculate_log_probs=true needs the log-probs the engine samples "
            f"with, which the '{rollout.name}' rollout engine does not record (the hf and vllm engines do)"
        )
    engine = configured_engine(cfg)
    engine.check_rollout_config(rollout)
    if trainer_mode(cfg) == "separate_async" and engine.spans_dag_world and rollout.tensor_model_parallel_size > 1:
        raise ConfigError(engine.apart_tp_refusal(rollout.tensor_model_parallel_size))


def sampled_log_prob_quality(cfg: SiirlConfig) -> str:
    """``exact``, ``approximate`` or ``unsupported``: the engine's sampled log-probs against the actor's, in
    the policy's dtype on the run's device."""
    device = str(cfg.trainer.device)
    backend = get_backend() if device == "auto" else backend_class(device)
    return configured_engine(cfg).sampled_log_probs(resolve_dtype(str(cfg.actor_rollout_ref.model.dtype), backend))


def check_lora_rollout(cfg: SiirlConfig) -> None:
    """An engine that serves LoRA adapters keeps the base weights it loaded, so they must be real ones, and
    serves adapters up to its largest rank."""
    rollout, model, engine = cfg.actor_rollout_ref.rollout, cfg.actor_rollout_ref.model, configured_engine(cfg)
    if not (serves_adapters(model) and engine.takes_lora_adapters):  # lora.merge: the engine gets every weight
        return
    if rollout.load_format == "dummy":
        raise ConfigError(
            f"bad config: actor_rollout_ref.rollout.load_format=dummy with LoRA on the '{rollout.name}' engine "
            "would leave its base weights random (only the adapter is synced); use safetensors or auto"
        )
    rank = configured_rank(model)
    if engine.largest_lora_rank is not None and rank > engine.largest_lora_rank:
        source = f"lora_rank={rank}"
        if model.lora_adapter_path:
            source = f"lora_adapter_path={model.lora_adapter_path} has rank {rank}"
        raise ConfigError(f"bad config: actor_rollout_ref.model.{source}, beyond the largest max_lora_rank "
                          f"{engine.largest_lora_rank} the '{rollout.name}' rollout engine serves")


def resolve_old_log_prob_source(cfg: SiirlConfig, env: str | None) -> str:
    """``auto`` -> ``rollout`` where the engine records exact log-probs of the weights being trained (never
    asynchronously, nor from an environment ``env``); bypass mode takes the rollout's whatever their quality,
    as verl does (see ``siirl.params.old_log_prob``)."""
    requested, asked_by = cfg.actor_rollout_ref.actor.old_log_prob_source, f"{OLD_LOG_PROB_KEY}=rollout"
    if cfg.algorithm.rollout_correction.bypass_mode:
        if requested == "recompute":
            raise ConfigError(
                f"bad config: {BYPASS_KEY}=true uses the rollout's log-probs as the old ones, but "
                f"{OLD_LOG_PROB_KEY}=recompute asks for the actor's forward; drop one of them"
            )
        requested, asked_by = "rollout", f"{BYPASS_KEY}=true"
    if cfg.actor_rollout_ref.actor.calculate_sum_pi_squared:  # only the actor's forward gives sum_pi_squared
        if requested == "rollout":
            raise ConfigError(
                f"bad config: {asked_by} skips the actor forward that "
                "actor_rollout_ref.actor.calculate_sum_pi_squared=true needs; use recompute (or auto)"
            )
        return "recompute"
    if requested == "recompute":
        return requested
    quality = sampled_log_prob_quality(cfg)
    if lora_enabled(cfg.actor_rollout_ref.model) and quality == "exact":
        quality = "approximate"  # the engine runs merged weights, the actor W x + B A x: rounding differs
    if requested == "rollout" and (quality == "unsupported" or env is not None):
        where = f"the '{cfg.actor_rollout_ref.rollout.name}' rollout engine" if env is None else "environment-driven rollouts"
        raise ConfigError(
            f"bad config: {asked_by} needs log-probs recorded while sampling, which {where} "
            "cannot provide; use recompute (or auto)"
        )
    if requested == "auto":  # asynchronous samples come from older weights: the actor recomputes pi_old
        exact = quality == "exact" and env is None and trainer_mode(cfg) == "sync"
        return "rollout" if exact else "recompute"
    return requested
