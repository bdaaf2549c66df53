"""SAPO (Soft Adaptive Policy Optimization, arXiv 2511.20347), as verl's ``loss_mode=sapo`` defines it.

PPO's hard clip zeroes the gradient of a token the moment its ratio leaves the trust region. SAPO replaces the
clipped surrogate with a smooth gate of the ratio, ``f(r) = sigmoid(tau * (r - 1)) * 4 / tau``, and the loss
``-f(r) * A`` per token. At ``r = 1`` the gate's slope is 1 (the plain policy gradient); away from it the
gradient ``A * 4 sigma (1 - sigma) r`` fades smoothly instead of dropping to 0. The temperature is ``tau_pos``
for tokens with a positive advantage and ``tau_neg`` otherwise (a larger ``tau_neg`` fades negative updates
sooner; verl's defaults 1.0 / 1.05). As in verl the loss is always aggregated ``seq-mean-token-mean``, whatever
``loss_agg_mode`` says; nothing is clipped, so ``clipfrac_*`` are 0.
"""

from __future__ import annotations

import torch

from siirl.algorithms.policy_loss import Metrics, PolicyLossInputs, first_set, register_policy_loss


def sapo_temperatures(inputs: PolicyLossInputs) -> tuple[float, float]:
    """``policy_loss.tau_pos`` / ``tau_neg`` where set (verl's current scripts), else the actor's keys (each
    > 0 by its field's rule, before Ray: the gate divides by them)."""
    cfg = inputs.config
    tau_pos, tau_neg = first_set(cfg.policy_loss.tau_pos, cfg.tau_pos), first_set(cfg.policy_loss.tau_neg, cfg.tau_neg)
    return float(tau_pos), float(tau_neg)


@register_policy_loss("sapo")
def sapo_policy_loss(inputs: PolicyLossInputs) -> tuple[torch.Tensor, Metrics]:
    tau_pos, tau_neg = sapo_temperatures(inputs)
    adv = inputs.advantages
    log_ratio = (inputs.log_prob - inputs.old_log_prob).clamp(-20.0, 20.0)
    ratio = torch.exp(log_ratio)
    tau = torch.where(adv > 0, torch.full_like(adv, tau_pos), torch.full_like(adv, tau_neg))
    gate = torch.sigmoid(tau * (ratio - 1.0)) * (4.0 / tau)
    none_clipped = torch.zeros((), dtype=inputs.log_prob.dtype, device=inputs.log_prob.device)
    metrics = {"clipfrac_low": none_clipped, "clipfrac_high": none_clipped, "ppo_kl": inputs.ppo_kl(log_ratio)}
    return inputs.aggregate(-gate * adv, loss_agg_mode="seq-mean-token-mean"), metrics
