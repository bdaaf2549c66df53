"""Optimal Token Baseline (verl's ``adv_estimator=optimal_token_baseline``): a baseline per prompt group AND
per token position, weighted by how much variance each trajectory's path has accumulated so far.

The gradient variance of token ``j`` scales with ``||grad log pi||^2``, whose expectation under the softmax
is ``w_j = 1 - 2 pi_j + sum_v pi(v)^2`` (``pi_j`` the sampled token's probability). With the cumulative
``W_t = sum_{j<=t} w_j`` and the reward-to-go ``G_t``, the variance-minimising baseline at position ``t`` is
``B_t = sum_i G_it W_it / sum_i W_it`` over the group's responses still running at ``t``; the advantage is
``G_t - B_t``. Rollout-correction IS weights ``rho`` scale ``w`` by ``rho^2`` (truncated-IS MSE). A group of
one response has no baseline (advantage = return). Needs ``actor.calculate_sum_pi_squared=true``.
"""

from __future__ import annotations

import torch

from siirl.algorithms.advantage import ADV_ESTIMATORS, AdvantageInputs
from siirl.algorithms.grouping import group_ids
from siirl.algorithms.needs import EstimatorNeeds
from siirl.params.enums import AdvantageEstimator

EPSILON = 1e-8


@ADV_ESTIMATORS.register(AdvantageEstimator.OPTIMAL_TOKEN_BASELINE, needs=EstimatorNeeds(sum_pi_squared=True))
def optimal_token_baseline_advantage(inputs: AdvantageInputs) -> tuple[torch.Tensor, torch.Tensor]:
    mask = inputs.response_mask
    returns = (inputs.token_level_rewards * mask).flip(-1).cumsum(-1).flip(-1)
    pi = torch.exp(inputs.require("old_log_probs").to(returns.dtype))
    step_variance = 1 - 2 * pi + inputs.require("sum_pi_squared").to(returns.dtype)
    if inputs.rollout_is_weights is not None:
        step_variance = step_variance * inputs.rollout_is_weights.to(returns.dtype).square()
    path_variance = (step_variance * mask).cumsum(-1)
    gid, n_groups = group_ids(inputs.require_index(), returns.shape[0])
    gid = gid.to(returns.device)
    sums = returns.new_zeros(n_groups, returns.shape[1])
    numerator = sums.index_add(0, gid, returns * path_variance * mask)
    denominator = sums.index_add(0, gid, path_variance * mask) + EPSILON
    sizes = torch.bincount(gid, minlength=n_groups)
    baseline = torch.where((sizes[gid] > 1).unsqueeze(-1), (numerator / denominator)[gid], 0.0)
    return (returns - baseline) * mask, returns
