"""Value and cross-field checks of verl's optional algorithm sections (``algorithm.pf_ppo``,
``algorithm.rollout_correction``, GDPO's reward keys, SAPO's temperatures) and of ``trainer.dump_high_diff_tokens``, which reads the same recorded
rollout log-probs: each mistake is one ``ConfigError`` line before Ray starts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig

from siirl.errors import ConfigError
from siirl.params.algorithm import ROLLOUT_IS_LEVELS, ROLLOUT_RS_LEVELS
from siirl.params.divergence_bounds import OPTIONS, is_divergence_spec, parse_bounds
from siirl.params.is_threshold import parse_is_threshold

_CORRECTION = "algorithm.rollout_correction"


def _null_or(choices: tuple[str, ...]) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v is None or v in choices), f"null or one of {', '.join(choices)}"


_NULL_OR_POSITIVE = (lambda v: v is None or v > 0, "null or > 0")

RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "algorithm.pf_ppo.weight_pow": (lambda v: v >= 0, ">= 0"),
    f"{_CORRECTION}.rollout_is": _null_or(ROLLOUT_IS_LEVELS),
    f"{_CORRECTION}.rollout_rs": (
        lambda v: v is None or v in ROLLOUT_RS_LEVELS or is_divergence_spec(v),
        f"null, one of {', '.join(ROLLOUT_RS_LEVELS)}, or verl's options {', '.join(OPTIONS)} (comma separated)",
    ),
    f"{_CORRECTION}.rollout_is_threshold": (
        lambda v: parse_is_threshold(v) is not None, "a number > 0 or 'lower_upper' with 0 < lower <= upper"
    ),
    f"{_CORRECTION}.rollout_rs_threshold": (
        lambda v: v is None or isinstance(v, str) or v > 0, "null, > 0, or bounds per divergence option"
    ),
    f"{_CORRECTION}.rollout_rs_threshold_lower": _NULL_OR_POSITIVE,
    f"{_CORRECTION}.rollout_token_veto_threshold": _NULL_OR_POSITIVE,
    # SAPO's gate divides by its temperatures
    "actor_rollout_ref.actor.tau_pos": (lambda v: v > 0, "> 0"),
    "actor_rollout_ref.actor.tau_neg": (lambda v: v > 0, "> 0"),
    "actor_rollout_ref.actor.policy_loss.tau_pos": _NULL_OR_POSITIVE,
    "actor_rollout_ref.actor.policy_loss.tau_neg": _NULL_OR_POSITIVE,
}


def _check_rejection_bounds(corr: DictConfig) -> None:
    """verl's divergence options carry every bound in ``rollout_rs_threshold``; the ratio levels take one
    upper number and an optional lower one below it."""
    if is_divergence_spec(corr.rollout_rs):
        if corr.rollout_rs_threshold_lower is not None:
            raise ConfigError(
                f"bad config: {_CORRECTION}.rollout_rs_threshold_lower applies to rollout_rs=token|sequence|geometric; "
                f"rollout_rs={corr.rollout_rs} takes its lower bounds in rollout_rs_threshold ('lower_upper')"
            )
        parse_bounds(corr.rollout_rs, corr.rollout_rs_threshold)
        return
    if isinstance(corr.rollout_rs_threshold, str):
        raise ConfigError(
            f"bad config: {_CORRECTION}.rollout_rs_threshold={corr.rollout_rs_threshold!r} lists bounds of verl's "
            f"divergence options, but rollout_rs={corr.rollout_rs} takes one number"
        )
    upper = corr.rollout_rs_threshold if corr.rollout_rs_threshold is not None else parse_is_threshold(corr.rollout_is_threshold)[0]
    if corr.rollout_rs is not None and corr.rollout_rs_threshold_lower is not None and corr.rollout_rs_threshold_lower > upper:
        raise ConfigError(
            f"bad config: {_CORRECTION}.rollout_rs_threshold_lower={corr.rollout_rs_threshold_lower} is above the "
            f"upper bound {upper}; every response would be rejected"
        )


def _check_gdpo(algo: DictConfig) -> None:
    """GDPO normalises the reward components ``gdpo_reward_keys`` names; its weights, if given, pair with them."""
    keys, weights = algo.gdpo_reward_keys, algo.gdpo_reward_weights
    if str(algo.adv_estimator) == "gdpo" and not keys:
        raise ConfigError(
            "bad config: algorithm.adv_estimator=gdpo needs algorithm.gdpo_reward_keys, the keys of the score "
            "function's returned dict to normalise one by one (e.g. '[\"accuracy_reward\",\"format_reward\"]')"
        )
    if keys and weights is not None and len(weights) != len(keys):
        raise ConfigError(
            f"bad config: algorithm.gdpo_reward_weights has {len(weights)} weights for {len(keys)} gdpo_reward_keys"
        )


def check_algorithm_sections(cfg: DictConfig) -> None:
    algo = cfg.algorithm
    _check_gdpo(algo)
    if algo.use_pf_ppo and str(algo.adv_estimator) != "gae":
        raise ConfigError(
            f"bad config: algorithm.use_pf_ppo=True resamples after GAE as in verl, but "
            f"algorithm.adv_estimator={algo.adv_estimator}; use gae or drop use_pf_ppo"
        )
    corr = algo.rollout_correction
    _check_rejection_bounds(corr)
    active = any(corr[k] is not None for k in ("rollout_is", "rollout_rs", "rollout_token_veto_threshold"))
    users = [_CORRECTION] if active else []
    users += [f"{_CORRECTION}.bypass_mode=true"] if corr.bypass_mode else []
    users += ["trainer.dump_high_diff_tokens=true"] if cfg.trainer.dump_high_diff_tokens else []
    if users and not cfg.actor_rollout_ref.rollout.calculate_log_probs:
        raise ConfigError(
            f"bad config: {' and '.join(users)} compares the rollout's log-probs with the actor's; set "
            "actor_rollout_ref.rollout.calculate_log_probs=true so the rollout records them (as verl requires)"
        )
