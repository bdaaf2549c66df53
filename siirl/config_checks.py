"""The run config every caller gets: ``load_config`` = ``siirl.params`` composition + the checks above it.

``siirl.params`` knows no engine, device, environment or algorithm, so the rules that need them live with the
package that owns each feature; this hub runs them in order (resolutions feed later checks): every key a
registry governs (``Registry(config_keys=...)``) must name one of its entries, and the ``auto`` choices
(``loss_mode``, ``old_log_prob_source``, ``weight_sync``) are resolved once, so the plan, the node contracts
and every worker see the same values. Every mistake is one ``ConfigError`` line, raised before Ray starts.
"""

from __future__ import annotations

import importlib
from operator import attrgetter

from siirl.agent_loops import check_agent_loops
from siirl.algorithms.advantage import check_estimator_inputs, resolve_loss_mode
from siirl.algorithms.group_filter_metrics import check_group_filter_metric
from siirl.algorithms.policy_loss import check_loss_options
from siirl.cluster import check_ray_init_keys
from siirl.dag_worker.metrics import check_loggers
from siirl.engine.reward.registry import load_builtins as load_reward_managers
from siirl.engine.rollout.choice import check_lora_rollout, choose_rollout_engine, resolve_old_log_prob_source
from siirl.environment.outputs import env_mode
from siirl.environment.tools.config import check_tools
from siirl.execution.roles import check_reference_sequence_parallel, check_vision_policy
from siirl.params import compose_config
from siirl.params.async_checks import check_async
from siirl.params.root import EXTERNAL_LIB_KEY, SiirlConfig, external_libs
from siirl.registry import governed_keys, import_user_modules
from siirl.reward_score.sandbox_fusion import warn_short_sandbox_budget
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


def check_config(cfg: SiirlConfig) -> None:
    """The checks and resolutions that need the packages above ``siirl.params``, in place, in this order."""
    check_loggers(list(cfg.trainer.logger))
    check_ray_init_keys(cfg.ray_kwargs.ray_init)
    env = env_mode(cfg)
    check_tools(cfg, env)
    check_agent_loops(cfg)
    check_verl_backend(str(cfg.actor_rollout_ref.rollout.weight_sync))
    check_registry_values(cfg)
    check_estimator_inputs(cfg)
    choose_rollout_engine(cfg)
    check_group_filter_metric(cfg, env is not None)
    check_lora_rollout(cfg)
    warn_short_sandbox_budget(cfg.reward_model.sandbox_fusion.url, cfg.reward_model.timeout_s)
    check_reference_sequence_parallel(cfg)
    check_vision_policy(cfg)
    check_async(cfg, env)
    cfg.actor_rollout_ref.rollout.weight_sync = resolve_weight_sync(cfg)
    cfg.actor_rollout_ref.actor.policy_loss.loss_mode = resolve_loss_mode(cfg)
    check_loss_options(cfg)
    cfg.actor_rollout_ref.actor.old_log_prob_source = resolve_old_log_prob_source(cfg, env)


def load_config(
    overrides: list[str] | None = None, config_path: str | None = None, config_name: str | None = None
) -> SiirlConfig:
    """The run's config as the typed dataclass tree, checked and resolved: ``siirl.params.compose_config``
    (Hydra defaults, the user's ``--config-path/--config-name`` YAML, the overrides, schema and value
    tables), then ``check_config``."""
    cfg = compose_config(overrides, config_path=config_path, config_name=config_name)
    check_config(cfg)
    return cfg
