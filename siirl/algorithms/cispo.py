"""CISPO (MiniMax-M1, arXiv 2506.13585): clip the importance weight, never the gradient.

PPO's clip zeroes the gradient of every token whose ratio leaves the trust region, which silences the rare
high-ratio "reflection" tokens long reasoning depends on. CISPO keeps every token's REINFORCE gradient
``A * grad log pi`` and only bounds its weight: ``loss = -sg(clip(r, 1 - low, 1 + high)) * A * log pi``.
The range is ``clip_ratio_low`` / ``clip_ratio_high`` (unset: ``clip_ratio``) as in verl; a ``low`` of 1
or more leaves the weight unbounded below (verl's example sets ``clip_ratio_low=10``).
"""

from __future__ import annotations

import torch

from siirl.algorithms.policy_loss import Metrics, PolicyLossInputs, open_range, register_policy_loss


@register_policy_loss("cispo", options=open_range)
def cispo_policy_loss(inputs: PolicyLossInputs) -> tuple[torch.Tensor, Metrics]:
    low, high = inputs.clip_range
    log_ratio = (inputs.log_prob - inputs.old_log_prob).clamp(-20.0, 20.0)
    ratio = torch.exp(log_ratio)
    weight = ratio.clamp(1 - low, 1 + high).detach()
    loss_mat = -weight * inputs.advantages * inputs.log_prob
    metrics = {
        "clipfrac_low": inputs.share(ratio < 1 - low),
        "clipfrac_high": inputs.share(ratio > 1 + high),
        "ppo_kl": inputs.ppo_kl(log_ratio),
    }
    return inputs.aggregate(loss_mat), metrics
