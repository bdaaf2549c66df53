"""GMPO (Geometric-Mean Policy Optimization, arXiv 2507.20673): optimise the geometric mean of token ratios.

GRPO averages token ratios arithmetically, so one token with an extreme ratio moves the whole sequence's
objective; the geometric mean ``exp(mean_t log r_t)`` is far less sensitive to such outliers, which lets
GMPO clip in a wider range. Per sequence ``i`` with mean advantage ``A_i``:

    loss_i = -A_i * exp(mean_t clip_sign(A_i)(log r_t))

where the clip acts on the *log* ratio, pessimistically by the advantage's sign (as PPO's min): for
``A > 0`` a token's log ratio is capped at ``clip_ratio_high``, for ``A < 0`` floored at ``-clip_ratio_low``
(unset: ``clip_ratio``; verl's example sets 0.4 both ways, i.e. ratios in ``[e^-0.4, e^0.4]``). The loss is
the mean over sequences whatever ``loss_agg_mode`` says (a sequence-level objective, as in verl), and the
advantage is taken per sequence (the mean over its tokens), so outcome estimators such as GRPO fit it.
"""

from __future__ import annotations

import torch

from siirl.algorithms.masked import masked_mean
from siirl.algorithms.policy_loss import Metrics, PolicyLossInputs, open_range, register_policy_loss


@register_policy_loss("geo_mean", options=open_range)
def geo_mean_policy_loss(inputs: PolicyLossInputs) -> tuple[torch.Tensor, Metrics]:
    low, high = inputs.clip_range
    adv, mask = inputs.advantages, inputs.response_mask
    log_ratio = inputs.log_prob - inputs.old_log_prob
    pessimistic = torch.where(adv > 0, log_ratio.clamp(max=high), log_ratio.clamp(min=-low))
    pessimistic = pessimistic * (adv != 0)  # a token without advantage adds no ratio (as verl's sign(A))
    seq_ratio = torch.exp(masked_mean(pessimistic, mask, dim=-1))
    seq_advantage = masked_mean(adv, mask, dim=-1)
    metrics = {
        "clipfrac_low": inputs.share((adv < 0) & (log_ratio < -low)),
        "clipfrac_high": inputs.share((adv > 0) & (log_ratio > high)),
        "ppo_kl": inputs.ppo_kl(log_ratio),
    }
    return inputs.aggregate_sequences(-seq_advantage * seq_ratio), metrics
