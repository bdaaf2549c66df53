"""GDPO (Group reward-Decoupled normalization Policy Optimization, arXiv 2601.05242), as verl defines it.

With several rewards (accuracy, format, ...), GRPO sums them before normalising in the group, so the reward
with the widest spread decides the sign of every advantage. GDPO normalises each component on its own
within the group (GRPO's ``(r_k - mean_g) / (std_g + epsilon)``, or only centred under
``norm_adv_by_std_in_grpo=false``), sums them with ``algorithm.gdpo_reward_weights`` (1 each when null),
spreads the sum over each response's tokens and whitens that over the batch's valid tokens.

The components are keys of the score function's returned dict (``{"score": ..., "accuracy_reward": ...,
"format_reward": ...}``), named by ``algorithm.gdpo_reward_keys``; the reward node keeps them in the batch
and the advantage node hands them over as ``AdvantageInputs.reward_components``.
"""

from __future__ import annotations

import torch

from siirl.algorithms.advantage import ADV_ESTIMATORS, AdvantageInputs
from siirl.algorithms.masked import masked_whiten
from siirl.algorithms.needs import EstimatorNeeds
from siirl.algorithms.outcome_advantage import group_normalised
from siirl.params.enums import AdvantageEstimator


def _component(inputs: AdvantageInputs, key: str) -> torch.Tensor:
    """The per-response values of reward component ``key``; every response must report a number."""
    values = (inputs.reward_components or {}).get(key)
    if values is None:
        raise ValueError(
            f"advantage estimator 'gdpo' reads reward component {key!r} (algorithm.gdpo_reward_keys), but the batch "
            f"has none: the score function must return a dict with the key {key!r}"
        )
    if torch.isnan(values).any():
        raise ValueError(
            f"advantage estimator 'gdpo': {int(torch.isnan(values).sum())} response(s) have no value for reward "
            f"component {key!r}; the score function must return it for every response"
        )
    return values.to(inputs.token_level_rewards.dtype)


@ADV_ESTIMATORS.register(AdvantageEstimator.GDPO, needs=EstimatorNeeds(reward_components=True))
def gdpo_advantage(inputs: AdvantageInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum over components of ``w_k * GRPO(r_k)``, whitened over the batch; returns equal the advantages."""
    config, index, mask = inputs.config, inputs.require_index(), inputs.response_mask
    keys = list(config.gdpo_reward_keys or ())
    if not keys:
        raise ValueError("advantage estimator 'gdpo' needs algorithm.gdpo_reward_keys (the reward components)")
    weights = list(config.gdpo_reward_weights) if config.gdpo_reward_weights is not None else [1.0] * len(keys)
    if len(weights) != len(keys):
        raise ValueError(f"algorithm.gdpo_reward_weights has {len(weights)} weights for {len(keys)} gdpo_reward_keys")
    total = torch.zeros_like(inputs.token_level_rewards[:, 0])
    for key, weight in zip(keys, weights):
        total = total + float(weight) * group_normalised(_component(inputs, key), index, config)
    advantages = masked_whiten(total.unsqueeze(-1) * mask, mask)
    return advantages, advantages
