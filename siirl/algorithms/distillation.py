"""On-policy distillation's loss term, as verl defines it (``verl/trainer/distillation/losses.py``).

Per sampled token, a single-sample KL estimator of the student against the frozen teacher,
``d_t = kl_penalty(log pi_student, log pi_teacher, loss_mode)`` (``k1``: ``log pi_s - log pi_t``, the reverse
KL's per-token estimate; ``k3``: its low-variance form), clamped to ``[-loss_max_clamp, loss_max_clamp]``.
Then either

- ``use_policy_gradient``: ``-d_t`` (detached) is each token's advantage in a clipped vanilla PPO loss over the
  old log-probs with the distillation section's own clip range (the on-policy distillation of Thinking
  Machines: the student is rewarded for tokens the teacher finds likely), or
- otherwise ``d_t`` itself is aggregated and backpropagated (a supervised KL loss, arXiv 2306.13649).

The actor's total is ``task_loss + distillation_loss_coef * term`` with ``use_task_rewards``, else the term
alone (the task loss, entropy and KL-to-reference terms included, is dropped, as in verl).
"""

from __future__ import annotations

from typing import Any

import torch

from siirl.algorithms.aggregation import agg_loss
from siirl.algorithms.kl import kl_penalty
from siirl.algorithms.masked import masked_mean
from siirl.algorithms.policy_loss import compute_policy_loss
from siirl.params.distillation import DistillationLossConfig

#: The batch key the teacher node writes: the teacher's log-prob of each sampled response token.
TEACHER_LOG_PROB = "teacher_log_prob"


def distillation_loss(
    cfg: DistillationLossConfig,
    *,
    log_prob: torch.Tensor,
    teacher_log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str,
    horizon: int | None = None,
    rollout_is_weights: torch.Tensor | None = None,
    **counts: Any,
) -> tuple[torch.Tensor, dict[str, torch.Tensor | float]]:
    """The distillation term and its per-token metrics (``distillation/...``, verl's names). ``counts`` are the
    global token / sequence counts and dp size that every actor loss term is aggregated with."""
    mask = response_mask.to(log_prob.dtype)
    per_token = kl_penalty(log_prob, teacher_log_prob.to(log_prob.dtype), cfg.loss_mode)
    metrics: dict[str, torch.Tensor | float] = {"distillation/abs_loss": masked_mean(per_token.abs(), mask).detach()}
    if cfg.loss_max_clamp is not None:
        per_token = per_token.clamp(-float(cfg.loss_max_clamp), float(cfg.loss_max_clamp))
    if not cfg.use_policy_gradient:
        return agg_loss(per_token, mask, loss_agg_mode, horizon=horizon, **counts), metrics
    clip = cfg.policy_gradient_config(horizon or 0)
    loss, pg_metrics = compute_policy_loss(
        cfg.policy_loss_mode, old_log_prob=old_log_prob, log_prob=log_prob, advantages=-per_token.detach(),
        response_mask=mask, loss_agg_mode=loss_agg_mode, config=clip, rollout_is_weights=rollout_is_weights,
        **counts,
    )
    metrics["distillation/pg_clipfrac"] = pg_metrics["clipfrac_low"] + pg_metrics["clipfrac_high"]
    metrics["distillation/ppo_kl"] = pg_metrics["ppo_kl"]
    return loss, metrics


def with_distillation(task_loss: torch.Tensor, term: torch.Tensor, cfg: DistillationLossConfig) -> torch.Tensor:
    """verl's combination: ``task + coef * term`` when task rewards are kept, else the term alone."""
    if not cfg.use_task_rewards:
        return term
    return task_loss + float(cfg.distillation_loss_coef) * term
