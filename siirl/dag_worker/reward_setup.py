"""Reward manager from the run config: which manager (``reward_model.reward_manager``), its options, and
the score function (``custom_reward_function`` or the built-in scorers by data_source)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from siirl.environment.outputs import env_mode
from siirl.errors import SiirlUserError
from siirl.params.root import SiirlConfig


#: Manager name -> the constructor options it takes from the config (others take none).
def _pool_options(cfg: SiirlConfig) -> dict[str, Any]:
    return {"num_workers": cfg.reward_model.num_workers, "timeout_s": cfg.reward_model.timeout_s}


MANAGER_OPTIONS: dict[str, Callable[[SiirlConfig], dict[str, Any]]] = {
    "parallel": _pool_options,
    "prime": _pool_options,
    "dapo": lambda cfg: {
        "timeout_s": cfg.reward_model.timeout_s,
        "max_response_length": cfg.data.max_response_length,
        "overlong_buffer_len": cfg.reward_model.overlong_buffer.len if cfg.reward_model.overlong_buffer.enable else 0,
        "penalty_factor": cfg.reward_model.overlong_buffer.penalty_factor,
    },
}


def score_services(cfg: SiirlConfig) -> dict[str, Any]:
    """What the built-in scorers may call out to: the code sandbox when ``reward_model.sandbox_fusion.url``
    is set."""
    sandbox = cfg.reward_model.sandbox_fusion
    if not sandbox.url:
        return {}
    from siirl.reward_score.sandbox_fusion import SandboxFusion

    return {"sandbox": SandboxFusion(sandbox.url, int(sandbox.max_concurrent), int(sandbox.memory_limit_mb))}


def scores_by_rule(cfg: SiirlConfig) -> bool:
    """The built-in scorers (chosen by ``data_source``) score the rollouts against each row's ground truth;
    a reward model, an environment or the user's own function may not need one."""
    return not (cfg.reward_model.enable or cfg.custom_reward_function.path or env_mode(cfg) is not None)


def check_ground_truth(rows: Any) -> None:
    """A row without ``reward_model.ground_truth`` would fail the built-in scorer mid-step in a worker."""
    missing = rows.first_missing("reward_model", "ground_truth")
    if missing is not None:
        raise SiirlUserError(
            f"{rows.describe(missing)} has no reward_model.ground_truth, which the built-in rule rewards compare "
            "with; add it, or score with custom_reward_function.path or reward_model.enable=true"
        )


def make_reward_manager_from_config(cfg: SiirlConfig, tokenizer: Any) -> Any:
    from siirl.engine.reward import custom_reward_fn_from_config, make_reward_manager

    name = cfg.reward_model.reward_manager
    options = MANAGER_OPTIONS.get(name, lambda c: {"timeout_s": c.reward_model.timeout_s})(cfg)
    custom = custom_reward_fn_from_config(cfg.custom_reward_function)
    return make_reward_manager(name, tokenizer, compute_score=custom, services=score_services(cfg), **options)
