"""GPG (Group Policy Gradient, arXiv 2504.02546): plain policy gradient on rescaled group advantages.

The loss has no ratio and no clip (``-A * log pi``); the estimator centres each response's score on its
group mean (no std division) and multiplies by ``alpha = rows / rows with a non-zero score``, so a batch
where few responses score still takes a full-sized step (verl's ``gpg``; its ``f_norm`` is 1). ``alpha``
counts the rows this worker sees, which hold whole uid groups.
"""

from __future__ import annotations

import torch

from siirl.algorithms.advantage import ADV_ESTIMATORS, AdvantageInputs
from siirl.algorithms.grouping import group_stats
from siirl.algorithms.needs import EstimatorNeeds
from siirl.algorithms.policy_loss import Metrics, PolicyLossInputs, register_policy_loss
from siirl.params.enums import AdvantageEstimator


@register_policy_loss("gpg")
def gpg_policy_loss(inputs: PolicyLossInputs) -> tuple[torch.Tensor, Metrics]:
    """``-A * log pi``: the REINFORCE objective, no importance ratio (GPG trains on-policy)."""
    loss_mat = -inputs.advantages * inputs.log_prob
    return inputs.aggregate(loss_mat), {"ppo_kl": inputs.ppo_kl(inputs.log_prob - inputs.old_log_prob)}


@ADV_ESTIMATORS.register(AdvantageEstimator.GPG, needs=EstimatorNeeds(loss_mode="gpg"))
def gpg_advantage(inputs: AdvantageInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """``alpha * (score - group mean)``; a group of one keeps its raw score (baseline 0)."""
    scores = inputs.outcome_scores()
    stats = group_stats(scores, inputs.require_index())
    centred = torch.where(stats.singleton, scores, scores - stats.mean)
    alpha = scores.shape[0] / torch.count_nonzero(scores).clamp(min=1).to(scores.dtype)
    out = (alpha * centred).unsqueeze(-1) * inputs.response_mask
    return out, out
