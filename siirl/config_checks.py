"""The run config every caller gets: ``load_config`` = ``siirl.params`` composition + the checks above it.

``siirl.params`` knows no engine, device, environment or algorithm, so what needs them lives here, one
layer up: every key a registry governs (``Registry(config_keys=...)``) must name one of its entries, and the
``auto`` choices that depend on those packages (``loss_mode``, ``old_log_prob_source``) are resolved once,
so the plan, the node contracts and every worker see the same values. Every mistake is one ``ConfigError``
line, raised before Ray starts.
"""

from __future__ import annotations

import importlib
import logging
from operator import attrgetter

from siirl.agent_loops import check_agent_loops
from siirl.algorithms import check_estimator_inputs, resolve_loss_mode
from siirl.algorithms.group_filter_metrics import check_group_filter_metric
from siirl.cluster import check_ray_init_keys
from siirl.dag_worker.metrics import check_loggers
from siirl.device import backend_class, get_backend
from siirl.engine.reward.registry import load_builtins as load_reward_managers
from siirl.engine.rollout import ROLLOUT_ENGINES
from siirl.engine.workers.model_loading import resolve_dtype
from siirl.environment.interactions import check_interaction_classes, load_interaction_config
from siirl.environment.outputs import env_mode
from siirl.environment.tools import check_tool_classes, load_tool_config
from siirl.errors import ConfigError
from siirl.execution.roles import ROLES, uses_critic, uses_lora
from siirl.params import compose_config
from siirl.params.async_checks import check_async
from siirl.params.async_training import trainer_mode
from siirl.params.lora import serves_adapters
from siirl.params.old_log_prob import BYPASS_KEY, OLD_LOG_PROB_KEY
from siirl.params.root import EXTERNAL_LIB_KEY, SiirlConfig, external_libs
from siirl.params.sequence_parallel import SP_KEYS, sequence_parallel_sizes
from siirl.registry import governed_keys, import_user_modules
from siirl.weight_transport import check_verl_backend, resolve_weight_sync

#: Modules whose import registers the other families that govern config keys.
REGISTRY_MODULES = (
    "siirl.data_coordinator.prompt_encoding",
    "siirl.dag_worker.metrics",
    "siirl.engine.workers.optim",
    "siirl.engine.workers.parallel_strategy",
    "siirl.environment",  # the built-in environments (``siirl.environment.outputs`` does not register them)
    "siirl.device.weight_sync",
)
#: What ``device=cpu`` rolls out with when the command names an engine the CPU does not run.
CPU_ROLLOUT_ENGINE = "hf"

logger = logging.getLogger(__name__)


def check_registry_values(cfg: SiirlConfig) -> None:
    """Every registry-governed key names an entry (or an allowed value such as ``auto``), matched without
    regard to case as verl and the original siiRL do; the value is stored as registered. The user's
    ``model.external_lib`` modules are imported first, so the names they register count."""
    import_user_modules(external_libs(cfg), EXTERNAL_LIB_KEY)
    for module in REGISTRY_MODULES:
        importlib.import_module(module)
    load_reward_managers()
    for key, registry in sorted(governed_keys().items()):
        section, _, leaf = key.rpartition(".")
        owner = attrgetter(section)(cfg) if section else cfg
        value = getattr(owner, leaf)
        if isinstance(value, list):
            value[:] = [registry.canonical(item) for item in value]
        else:
            value = registry.canonical(value)
            setattr(owner, leaf, value)
        registry.check_config(key, value)


def choose_rollout_engine(cfg: SiirlConfig) -> None:
    """``device=cpu`` is the user's explicit request to run on the CPU: vLLM runs there through its CPU build
    (refused before Ray when it is not installed), and an engine with no CPU build (SGLang) rolls out with hf,
    said once. On other devices an engine the device cannot run stays an error (raised by the launcher). Then
    the engine vets its settings; run apart (``separate_async``), in processes of its own, one engine per
    rollout rank, an engine whose groups span every DAG worker cannot span ranks with tensor parallelism."""
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
    engine = ROLLOUT_ENGINES.get(rollout.name)
    engine.check_rollout_config(rollout)
    if trainer_mode(cfg) == "separate_async" and engine.spans_dag_world and rollout.tensor_model_parallel_size > 1:
        raise ConfigError(engine.apart_tp_refusal(rollout.tensor_model_parallel_size))


def sampled_log_prob_quality(cfg: SiirlConfig) -> str:
    """How the log-probs the rollout engine can record while sampling compare with the actor's, in the
    policy's dtype on the run's device: ``exact``, ``approximate`` or ``unsupported``."""
    device = str(cfg.trainer.device)
    backend = get_backend() if device == "auto" else backend_class(device)
    dtype = resolve_dtype(str(cfg.actor_rollout_ref.model.dtype), backend)
    return ROLLOUT_ENGINES.get(str(cfg.actor_rollout_ref.rollout.name)).sampled_log_probs(dtype)


def resolve_old_log_prob_source(cfg: SiirlConfig) -> str:
    """``auto`` -> ``rollout`` where the engine records exact log-probs of the weights being trained (never in
    asynchronous training) (see ``siirl.params.old_log_prob``);
    rollout correction's bypass mode takes them from the rollout whatever their quality, as verl does."""
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
    engine = str(cfg.actor_rollout_ref.rollout.name)
    quality = sampled_log_prob_quality(cfg)
    if uses_lora(cfg) and quality == "exact":
        quality = "approximate"  # the engine runs merged weights, the actor W x + B A x: rounding differs
    mode = env_mode(cfg)
    if requested == "rollout" and (quality == "unsupported" or mode is not None):
        where = f"the '{engine}' rollout engine" if mode is None else "environment-driven rollouts"
        raise ConfigError(
            f"bad config: {asked_by} needs log-probs recorded while sampling, which {where} "
            "cannot provide; use recompute (or auto)"
        )
    if requested == "auto":  # asynchronous samples come from older weights: the actor recomputes pi_old
        exact = quality == "exact" and mode is None and trainer_mode(cfg) == "sync"
        return "rollout" if exact else "recompute"
    return requested


def check_tools(cfg: SiirlConfig) -> None:
    """A tool-calling (or interaction) run: its YAMLs load, their classes import, and the raw chat reaches
    the rollout."""
    multi_turn = cfg.actor_rollout_ref.rollout.multi_turn
    if env_mode(cfg) != "tools":
        return
    if multi_turn.tool_config_path:
        path = str(multi_turn.tool_config_path)
        check_tool_classes(load_tool_config(path), path)
    if multi_turn.interaction_config_path:
        path = str(multi_turn.interaction_config_path)
        check_interaction_classes(load_interaction_config(path), path)
    if not cfg.data.return_raw_chat:
        key = "tool_config_path" if multi_turn.tool_config_path else "interaction_config_path"
        raise ConfigError(
            f"bad config: actor_rollout_ref.rollout.multi_turn.{key} needs data.return_raw_chat=true "
            "(the rollout renders each chat itself and hands it to the tools and interactions, as in verl)"
        )


def check_lora_rollout(cfg: SiirlConfig) -> None:
    """An engine that serves LoRA adapters keeps the base weights it loaded, so they must be real ones."""
    rollout = cfg.actor_rollout_ref.rollout
    served = serves_adapters(cfg.actor_rollout_ref.model)  # lora.merge: the engine gets every weight instead
    if served and ROLLOUT_ENGINES.get(str(rollout.name)).takes_lora_adapters and rollout.load_format == "dummy":
        raise ConfigError(
            f"bad config: actor_rollout_ref.rollout.load_format=dummy with LoRA on the '{rollout.name}' engine "
            "would leave its base weights random (only the adapter is synced); use safetensors or auto"
        )


def warn_short_sandbox_budget(cfg: SiirlConfig) -> None:
    """A code response is scored when its slowest test case returns; a ``reward_model.timeout_s`` below that
    scores slow (but possibly passing) responses 0, and in the in-process managers the step's later
    responses with them."""
    from siirl.reward_score.sandbox_fusion import SandboxFusion

    reward = cfg.reward_model
    if not reward.sandbox_fusion.url:
        return
    longest = SandboxFusion(reward.sandbox_fusion.url).longest_request_s
    if reward.timeout_s < longest:
        logger.warning(
            "reward_model.timeout_s=%s is shorter than one SandboxFusion test case may take (%gs: compile and run "
            "limits plus the request); raise it so slow code is judged, not timed out", reward.timeout_s, longest,
        )


def check_vision_policy(cfg: SiirlConfig) -> None:
    """A vision-language policy needs a rollout engine that passes it the images; a critic of one would
    score token ids without them, and sequence parallelism would split image tokens from their images."""
    from siirl.engine.workers.vision import policy_sees_images

    if not policy_sees_images(cfg):
        return
    name = str(cfg.actor_rollout_ref.rollout.name)
    if not ROLLOUT_ENGINES.get(name).takes_images:
        raise ConfigError(
            f"bad config: {cfg.actor_rollout_ref.model.path} is a vision-language model and the '{name}' rollout "
            "engine does not pass images yet; set actor_rollout_ref.rollout.name=hf, vllm or sglang"
        )
    if uses_critic(cfg):
        raise ConfigError(
            "bad config: a critic (critic.enable / adv_estimator=gae) of a vision-language policy is not "
            "implemented (it would not see the images); use a critic-free estimator such as grpo"
        )
    if max(sequence_parallel_sizes(cfg).values()) > 1:
        raise ConfigError(
            "bad config: Ulysses sequence parallelism (ulysses_sequence_parallel_size > 1) of a vision-language "
            "policy is not implemented (its image tokens would be split from their images); set it to 1"
        )


def check_reference_sequence_parallel(cfg: SiirlConfig) -> None:
    """A reference served by the policy's own model (LoRA: adapters off) runs in the policy's sp groups."""
    sizes = sequence_parallel_sizes(cfg)
    if ROLES.get("reference").served_by(cfg) is not None and sizes["reference"] != sizes["actor"]:
        raise ConfigError(
            f"bad config: under LoRA the reference is the actor's model with its adapters off, so "
            f"{SP_KEYS['reference']}={sizes['reference']} must equal {SP_KEYS['actor']}={sizes['actor']}"
        )


def check_config(cfg: SiirlConfig) -> None:
    """The checks and resolutions that need the packages above ``siirl.params``, in place."""
    check_loggers(list(cfg.trainer.logger))
    check_ray_init_keys(cfg.ray_kwargs.ray_init)
    check_tools(cfg)
    check_agent_loops(cfg)
    check_verl_backend(str(cfg.actor_rollout_ref.rollout.weight_sync))
    check_registry_values(cfg)
    check_estimator_inputs(cfg)
    choose_rollout_engine(cfg)
    check_group_filter_metric(cfg, env_mode(cfg) is not None)
    check_lora_rollout(cfg)
    warn_short_sandbox_budget(cfg)
    check_reference_sequence_parallel(cfg)
    check_vision_policy(cfg)
    check_async(cfg, env_mode(cfg))
    cfg.actor_rollout_ref.rollout.weight_sync = resolve_weight_sync(cfg)
    cfg.actor_rollout_ref.actor.policy_loss.loss_mode = resolve_loss_mode(cfg)
    cfg.actor_rollout_ref.actor.old_log_prob_source = resolve_old_log_prob_source(cfg)


def load_config(
    overrides: list[str] | None = None, config_path: str | None = None, config_name: str | None = None
) -> SiirlConfig:
    """The run's config as the typed dataclass tree, checked and resolved: ``siirl.params.compose_config``
    (Hydra defaults, the user's ``--config-path/--config-name`` YAML, the overrides, schema and value
    tables), then ``check_config``."""
    cfg = compose_config(overrides, config_path=config_path, config_name=config_name)
    check_config(cfg)
    return cfg
