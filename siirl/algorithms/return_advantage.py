"""Estimators built on token-level returns: GAE (with a critic), REINFORCE++ and ReMax.

Masked tokens inside a response (e.g. tool output in multi-turn data) are skipped: they neither receive
an advantage nor break the discounting chain between the valid tokens around them.
"""

from __future__ import annotations

import torch

from siirl.algorithms.advantage import ADV_ESTIMATORS, AdvantageInputs
from siirl.algorithms.masked import masked_whiten
from siirl.algorithms.needs import EstimatorNeeds
from siirl.params.enums import AdvantageEstimator


@ADV_ESTIMATORS.register(AdvantageEstimator.GAE, needs=EstimatorNeeds(values=True, groups=False))
def gae_advantage(inputs: AdvantageInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised Advantage Estimation (arXiv 1506.02438) with ``gamma`` and ``lam``.

    Returns are ``advantage + value`` (the critic's targets); advantages are then whitened over the
    valid tokens of the batch, as PPO does.
    """
    rewards, mask = inputs.token_level_rewards, inputs.response_mask
    values = inputs.require("values")
    gamma, lam = inputs.config.gamma, inputs.config.lam
    next_value = torch.zeros_like(rewards[:, 0])
    running = torch.zeros_like(rewards[:, 0])
    advantages = torch.zeros_like(rewards)
    for t in reversed(range(rewards.shape[1])):
        valid = mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = valid * (delta + gamma * lam * running) + (1 - valid) * running
        next_value = valid * values[:, t] + (1 - valid) * next_value
        advantages[:, t] = running * valid
    returns = (advantages + values) * mask
    return masked_whiten(advantages, mask), returns


def _discounted_returns(rewards: torch.Tensor, mask: torch.Tensor, gamma: float) -> torch.Tensor:
    running = torch.zeros_like(rewards[:, 0])
    returns = torch.zeros_like(rewards)
    for t in reversed(range(rewards.shape[1])):
        valid = mask[:, t]
        running = valid * (rewards[:, t] + gamma * running) + (1 - valid) * running
        returns[:, t] = running * valid
    return returns


@ADV_ESTIMATORS.register(AdvantageEstimator.REINFORCE_PLUS_PLUS, needs=EstimatorNeeds(groups=False))
def reinforce_plus_plus_advantage(inputs: AdvantageInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE++ (arXiv 2501.03262): discounted returns, whitened over the batch's valid tokens."""
    returns = _discounted_returns(
        inputs.token_level_rewards, inputs.response_mask, inputs.config.gamma
    )
    return masked_whiten(returns, inputs.response_mask), returns


@ADV_ESTIMATORS.register(AdvantageEstimator.REMAX, needs=EstimatorNeeds(reward_baselines=True, groups=False))
def remax_advantage(inputs: AdvantageInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """ReMax (arXiv 2310.10505): undiscounted return-to-go minus the greedy response's reward."""
    mask = inputs.response_mask
    returns = _discounted_returns(inputs.token_level_rewards, mask, 1.0)
    baselines = inputs.require("reward_baselines").to(returns.dtype)
    return (returns - baselines.unsqueeze(-1)) * mask, returns
