"""Rollout correction's bypass mode (verl's ``algorithm.rollout_correction.bypass_mode=true``).

Two policies instead of three: the rollout's log-probs stand in for the old ones (no actor forward over the
responses), so the correction can no longer be computed before the update; it is computed inside the loss,
per micro-batch, from the CURRENT policy's log-probs (detached) against the rollout's, with the same
weights / rejection / veto as decoupled mode (``siirl.algorithms.rollout_correction``). ``loss_type`` picks
what the loss does with them:

- ``ppo_clip``: the clipped surrogate (the ``vanilla`` loss) with ratio ``pi / pi_rollout``; that ratio already
  is the importance weight, so the IS weights are only reported; rejected tokens leave the mask;
- ``reinforce``: ``-A * log pi`` times the truncated IS weights, no clipping; rejected tokens leave the mask.

Metrics: the loss's own plus verl's ``rollout_corr/*`` (micro-batch means).
"""

from __future__ import annotations

import torch

from siirl.algorithms.policy_loss import (
    PolicyLossFn,
    PolicyLossInputs,
    compute_policy_loss,
    vanilla_policy_loss,
)
from siirl.algorithms.rollout_correction import correct_rollout
from siirl.params.algorithm import RolloutCorrectionConfig
from siirl.registry import Registry

BYPASS_LOSSES: Registry[PolicyLossFn] = Registry(
    "rollout-correction loss_type", config_keys=("algorithm.rollout_correction.loss_type",)
)


def reinforce_policy_loss(inputs: PolicyLossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``-A * log pi`` per token; ``inputs.aggregate`` multiplies the IS weights in (verl's REINFORCE)."""
    log_ratio = inputs.log_prob - inputs.old_log_prob
    return inputs.aggregate(-inputs.advantages * inputs.log_prob), {"ppo_kl": inputs.ppo_kl(log_ratio)}


BYPASS_LOSSES.add("ppo_clip", vanilla_policy_loss, applies_is_weights=False)
BYPASS_LOSSES.add("reinforce", reinforce_policy_loss, applies_is_weights=True)


def compute_bypass_policy_loss(
    correction: RolloutCorrectionConfig,
    *,
    rollout_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str,
    **loss_kwargs: object,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The ``loss_type`` loss against the rollout's log-probs, corrected as ``correction`` asks; the rest of
    ``compute_policy_loss``'s arguments (actor config, data-parallel counts) pass through."""
    loss_type = correction.loss_type
    corrected = correct_rollout(log_prob.detach(), rollout_log_prob, response_mask, correction)
    weights = corrected.weights if BYPASS_LOSSES.metadata(loss_type)["applies_is_weights"] else None
    loss, metrics = compute_policy_loss(
        BYPASS_LOSSES.get(loss_type),
        old_log_prob=rollout_log_prob,
        log_prob=log_prob,
        advantages=advantages,
        response_mask=corrected.response_mask,
        loss_agg_mode=loss_agg_mode,
        rollout_is_weights=weights,
        **loss_kwargs,
    )
    return loss, {**metrics, **corrected.metrics}
