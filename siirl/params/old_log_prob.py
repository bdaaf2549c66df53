"""Where the PPO "old" log-probs come from: ``actor_rollout_ref.actor.old_log_prob_source``.

- ``recompute``: the actor runs one extra forward over every response after the rollout (verl's default).
- ``rollout``: the rollout engine records the log-probs of the tokens it samples, and that forward is
  skipped. Only engines that can record them accept it; environment-driven rollouts (multi-turn,
  EMBODIED) assemble their sequences from several calls and always recompute.
- ``auto`` (default): ``rollout`` where the engine's numbers are exact (the HF engine in float32: the same
  weights, synced before every rollout, through the same model code), else ``recompute``.

Resolved once, in ``load_config``, so the plan, the node contracts and every worker see the same choice.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from siirl.errors import ConfigError

OLD_LOG_PROB_KEY = "actor_rollout_ref.actor.old_log_prob_source"
SOURCES = ("auto", "recompute", "rollout")


def _model_dtype(cfg: DictConfig):
    """The dtype the engines will load the model in; the device need not be present (plan time)."""
    from siirl.device import backend_class, get_backend
    from siirl.engine.workers.model_loading import resolve_dtype

    device = str(cfg.trainer.device)
    backend = get_backend() if device == "auto" else backend_class(device)
    return resolve_dtype(str(cfg.actor_rollout_ref.model.dtype), backend)


def resolve_old_log_prob_source(cfg: DictConfig) -> str:
    from siirl.engine.rollout import rollout_engine_class
    from siirl.environment.outputs import env_mode

    requested = OmegaConf.select(cfg, OLD_LOG_PROB_KEY)  # one of SOURCES (validate's RULES)
    if requested == "recompute":
        return requested
    engine = str(cfg.actor_rollout_ref.rollout.name)
    quality = rollout_engine_class(engine).sampled_log_probs(_model_dtype(cfg))
    mode = env_mode(cfg)
    if requested == "rollout" and (quality == "unsupported" or mode is not None):
        where = f"the '{engine}' rollout engine" if mode is None else "environment-driven rollouts"
        raise ConfigError(
            f"bad config: {OLD_LOG_PROB_KEY}=rollout needs log-probs recorded while sampling, which {where} "
            "cannot provide; use recompute (or auto)"
        )
    if requested == "auto":
        return "rollout" if quality == "exact" and mode is None else "recompute"
    return requested
