"""Advantage estimators: registry and the uniform entry point ``compute_advantage``.

An estimator is a function ``fn(inputs: AdvantageInputs) -> (advantages, returns)`` registered under
an ``AdvantageEstimator`` value with ``@ADV_ESTIMATORS.register(name, needs=EstimatorNeeds(...))``; both outputs have the shape
``(batch, response_len)`` and are 0 on masked tokens. Estimators read their options from the
``algorithm`` section, ``inputs.config`` (an ``AlgorithmConfig``; its defaults when none is given):

==========================  =========================================================
field                       used by
==========================  =========================================================
``gamma``                   gae, reinforce_plus_plus (discount)
``lam``                     gae (GAE lambda)
``norm_adv_by_std_in_grpo`` grpo, gspo (False: Dr.GRPO, centre only)
``epsilon``                 grpo, gspo, cpgd (added to the group std)
``weight_factor_in_cpgd``   cpgd (STD_weight | clip_filter_like_weight | naive/none)
``cpgd_max_weight``         cpgd with clip_filter_like_weight (cap of the weight)
``gdpo_reward_keys``        gdpo (the reward components, each normalised in its group)
``gdpo_reward_weights``     gdpo (weight of each component in the sum; null: 1 each)
==========================  =========================================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

import torch

from siirl.algorithms.needs import NEEDS_ATTR, EstimatorNeeds
from siirl.errors import ConfigError
from siirl.params.algorithm import AlgorithmConfig
from siirl.params.old_log_prob import BYPASS_KEY
from siirl.params.root import SiirlConfig
from siirl.registry import Registry

AdvantageFn = Callable[["AdvantageInputs"], tuple[torch.Tensor, torch.Tensor]]

ADV_ESTIMATORS: Registry[AdvantageFn] = Registry(
    "advantage estimator", open=True, config_keys=("algorithm.adv_estimator",)
)


def get_adv_estimator(name: str | Enum) -> AdvantageFn:
    return ADV_ESTIMATORS.get(name)


def estimator_needs(name: str | Enum) -> EstimatorNeeds:
    """What the estimator registered (or importable) as ``name`` needs: its entry's ``needs`` metadata,
    else what a user function declared with ``@declare_estimator_needs``, else GRPO's."""
    fn = ADV_ESTIMATORS.get(name)  # refuses an unknown name in one line
    return ADV_ESTIMATORS.metadata(name).get("needs") or getattr(fn, NEEDS_ATTR, EstimatorNeeds())


def check_estimator_inputs(cfg: SiirlConfig) -> None:
    """What the estimator reads is produced: a greedy baseline response per prompt (remax) by greedy
    validation sampling, ``sum_pi_squared`` (optimal_token_baseline) by the actor."""
    estimator = cfg.algorithm.adv_estimator
    needs, val = estimator_needs(estimator), cfg.actor_rollout_ref.rollout.val_kwargs
    if needs.reward_baselines and not ((not val.do_sample or val.temperature == 0) and val.n == 1):
        raise ConfigError(
            f"bad config: algorithm.adv_estimator={estimator} scores a greedy baseline "
            "response per prompt with rollout.val_kwargs; keep val_kwargs.do_sample=false and n=1"
        )
    if needs.sum_pi_squared and not cfg.actor_rollout_ref.actor.calculate_sum_pi_squared:
        raise ConfigError(
            f"bad config: algorithm.adv_estimator={estimator} needs the policy's sum of squared token "
            "probabilities; set actor_rollout_ref.actor.calculate_sum_pi_squared=true (as verl requires)"
        )


def resolve_loss_mode(cfg: SiirlConfig) -> str:
    """``auto`` follows the estimator (cpgd, gspo, else vanilla); a mode contradicting an estimator's own
    loss is refused, and so is any loss but vanilla under bypass mode (which trains with
    ``rollout_correction.loss_type``: the other would be silently dropped)."""
    estimator, key = cfg.algorithm.adv_estimator, "actor_rollout_ref.actor.policy_loss.loss_mode"
    wanted = estimator_needs(estimator).loss_mode
    mode = str(cfg.actor_rollout_ref.actor.policy_loss.loss_mode)
    if mode == "auto":
        mode = wanted
    elif wanted != "vanilla" and mode != wanted:
        raise ConfigError(
            f"bad config: algorithm.adv_estimator={estimator} trains with loss_mode={wanted}, but "
            f"{key}={mode}; drop the override (auto) or pick a matching pair"
        )
    if cfg.algorithm.rollout_correction.bypass_mode and mode != "vanilla":
        raise ConfigError(
            f"bad config: {BYPASS_KEY}=true trains with algorithm.rollout_correction.loss_type "
            f"(ppo_clip or reinforce), not {key}={mode} (adv_estimator={estimator}); drop one of them"
        )
    return mode


@dataclass(frozen=True)
class AdvantageInputs:
    """Everything an estimator may use; ``response_mask`` is already in the rewards' dtype."""

    name: str
    token_level_rewards: torch.Tensor
    response_mask: torch.Tensor
    index: Sequence[object] | None
    values: torch.Tensor | None
    reward_baselines: torch.Tensor | None
    config: AlgorithmConfig
    #: The old policy's token log-probs, its sum of squared token probabilities, the rollout-correction
    #: IS weights: (batch, response_len) each, where the batch has them (optimal_token_baseline reads them).
    old_log_probs: torch.Tensor | None = None
    sum_pi_squared: torch.Tensor | None = None
    rollout_is_weights: torch.Tensor | None = None
    #: In a team, the agent acting next: its critic value and (unwhitened) advantage at its first response
    #: token, one per row (gae_marft continues from them; ``None`` for the last agent or a single policy).
    chain_values: torch.Tensor | None = None
    chain_advantages: torch.Tensor | None = None
    #: One value per response for each reward component the estimator reads (``EstimatorNeeds.reward_components``).
    reward_components: Mapping[str, torch.Tensor] | None = None

    def outcome_scores(self) -> torch.Tensor:
        """One scalar per response: the sum of its rewards over valid tokens."""
        return (self.token_level_rewards * self.response_mask).sum(dim=-1)

    def require_index(self) -> Sequence[object]:
        if self.index is None:
            raise ValueError(f"advantage estimator '{self.name}' needs index (the uid of each response)")
        return self.index

    def require(self, field: str) -> torch.Tensor:
        value = getattr(self, field)
        if value is None:
            raise ValueError(f"advantage estimator '{self.name}' needs {field}")
        return value


def compute_advantage(
    name: str | Enum,
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[object] | None = None,
    values: torch.Tensor | None = None,
    reward_baselines: torch.Tensor | None = None,
    config: AlgorithmConfig | None = None,
    chain: tuple[torch.Tensor, torch.Tensor] | None = None,
    reward_components: Mapping[str, torch.Tensor] | None = None,
    **token_inputs: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the estimator registered as ``name``; returns ``(advantages, returns)``, no gradient.

    ``index`` holds one group id (uid) per row; ``values`` are critic values ``(batch, response_len)``;
    ``reward_baselines`` one baseline reward per row (ReMax: the greedy response's reward);
    ``token_inputs`` the optional per-token tensors of ``AdvantageInputs`` (``old_log_probs``, ...);
    ``chain`` the next agent's ``(chain_values, chain_advantages)``, one per row (team estimators);
    ``reward_components`` one value per row for each reward component the estimator reads (gdpo).
    """
    fn = get_adv_estimator(name)
    if token_level_rewards.dim() != 2 or token_level_rewards.shape != response_mask.shape:
        raise ValueError(
            "token_level_rewards and response_mask must be 2-D of one shape, got "
            f"{tuple(token_level_rewards.shape)} and {tuple(response_mask.shape)}"
        )
    if values is not None and values.shape != token_level_rewards.shape:
        raise ValueError(
            f"values has shape {tuple(values.shape)}, expected {tuple(token_level_rewards.shape)}"
        )
    if reward_baselines is not None and reward_baselines.shape != token_level_rewards.shape[:1]:
        raise ValueError(
            f"reward_baselines has shape {tuple(reward_baselines.shape)}, expected ({token_level_rewards.shape[0]},)"
        )
    for key, tensor in token_inputs.items():
        if tensor is not None and tensor.shape != token_level_rewards.shape:
            raise ValueError(f"{key} has shape {tuple(tensor.shape)}, expected {tuple(token_level_rewards.shape)}")
    if chain is not None and any(t.shape != token_level_rewards.shape[:1] for t in chain):
        raise ValueError(f"chain values and advantages must have shape ({token_level_rewards.shape[0]},)")
    for key, tensor in (reward_components or {}).items():
        if tensor.shape != token_level_rewards.shape[:1]:
            raise ValueError(f"reward component {key!r} has shape {tuple(tensor.shape)}, expected ({token_level_rewards.shape[0]},)")
    if not token_level_rewards.is_floating_point():
        token_level_rewards = token_level_rewards.float()
    inputs = AdvantageInputs(
        name=name.value if isinstance(name, Enum) else str(name),
        token_level_rewards=token_level_rewards,
        response_mask=response_mask.to(token_level_rewards.dtype),
        index=index,
        values=values,
        reward_baselines=reward_baselines,
        config=config if config is not None else AlgorithmConfig(),
        chain_values=chain[0] if chain is not None else None,
        chain_advantages=chain[1] if chain is not None else None,
        reward_components=reward_components,
        **token_inputs,
    )
    with torch.no_grad():
        return fn(inputs)
