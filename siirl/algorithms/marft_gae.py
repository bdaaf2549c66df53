"""MARFT's multi-agent GAE (``gae_marft``): one GAE chain through the turns of a team's agents.

The agents of a team act in turn on one episode, so the original siiRL treats their responses as one
trajectory: agent ``k``'s last token bootstraps from the value of agent ``k+1``'s first token, and the
running advantage carries over from agent ``k+1`` into agent ``k`` (it is never reset between agents;
the last agent bootstraps from 0). Within a response only the last token's reward enters the TD error
(``delta = r + gamma * V_next - V`` there, ``gamma * V_next - V`` elsewhere), as in siiRL. Each agent's
advantages are then whitened over its own valid tokens; returns are the unwhitened advantage plus value.

Here every agent's advantage node runs after the next agent's (the planner chains them, see
``siirl.execution.dag.multi_agent``) and reads that agent's head, :func:`chain_head`; masked tokens
inside a response are skipped without breaking the chain, as in ``gae``.
"""

from __future__ import annotations

import torch

from siirl.algorithms.advantage import ADV_ESTIMATORS, AdvantageInputs
from siirl.algorithms.masked import masked_whiten
from siirl.algorithms.needs import EstimatorNeeds
from siirl.params.enums import AdvantageEstimator


def _last_valid(mask: torch.Tensor) -> torch.Tensor:
    """Index of each row's last valid token (-1 for an empty row)."""
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    return torch.where(mask.bool(), positions, torch.full_like(positions, -1)).max(dim=1).values


def _first_valid(mask: torch.Tensor) -> torch.Tensor:
    """Index of each row's first valid token (0 for an empty row)."""
    return mask.bool().int().argmax(dim=1)


@ADV_ESTIMATORS.register(
    AdvantageEstimator.GAE_MARFT, needs=EstimatorNeeds(values=True, groups=False, agent_chain=True)
)
def marft_gae_advantage(inputs: AdvantageInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over this agent's tokens, continued from the next agent's head (``chain_values``,
    ``chain_advantages``; zeros for the last agent, where it equals GAE on the final reward)."""
    rewards, mask = inputs.token_level_rewards, inputs.response_mask
    values = inputs.require("values").to(rewards.dtype)
    gamma, lam = inputs.config.gamma, inputs.config.lam
    zeros = torch.zeros_like(rewards[:, 0])
    next_value = zeros if inputs.chain_values is None else inputs.chain_values.to(rewards.dtype)
    running = zeros if inputs.chain_advantages is None else inputs.chain_advantages.to(rewards.dtype)
    last = _last_valid(mask)
    advantages = torch.zeros_like(rewards)
    for t in reversed(range(rewards.shape[1])):
        valid = mask[:, t]
        reward = torch.where(last == t, rewards[:, t], zeros)
        delta = reward + gamma * next_value - values[:, t]
        running = valid * (delta + gamma * lam * running) + (1 - valid) * running
        next_value = valid * values[:, t] + (1 - valid) * next_value
        advantages[:, t] = running * valid
    returns = (advantages + values) * mask
    return masked_whiten(advantages, mask), returns


def chain_head(
    values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, incoming: tuple[torch.Tensor, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """What the agent acting before this one continues from: this agent's value and unwhitened advantage
    (``returns - values``) at its first valid token, or, where it answered nothing, what it continued from."""
    rows = torch.arange(values.shape[0], device=values.device)
    first = _first_valid(mask)
    answered = mask.bool().any(dim=1)
    head_value = values[rows, first].to(returns.dtype)
    head_advantage = returns[rows, first] - head_value
    return (
        torch.where(answered, head_value, incoming[0].to(returns.dtype)),
        torch.where(answered, head_advantage, incoming[1].to(returns.dtype)),
    )
