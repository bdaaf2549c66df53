"""Rollout correction (verl's ``algorithm.rollout_correction``): the rollout engine samples from
``pi_rollout``, the actor trains ``pi_train``; kernels, dtypes or stale weights make them differ, and the
policy gradient is then biased. With ``rho = pi_train / pi_rollout`` per token (from the recomputed
``old_log_probs`` and the ``rollout_log_probs`` recorded while sampling):

- importance sampling (``rollout_is=token|sequence``): weights ``rho`` per token, or ``prod_t rho_t`` per
  response, truncated above at ``rollout_is_threshold`` (TIS) or, given ``'lower_upper'``, set to 0 outside
  that range (IcePop), and optionally rescaled to mean 1; the policy loss multiplies its token matrix by them.
  Without bypass mode the old log-probs are the actor's recomputation, the proximal policy of AReaL's decoupled
  PPO: the loss clips ``pi / pi_old`` and these weights carry ``pi_old / pi_rollout`` (behaviour), so token
  IcePop is AReaL's objective with its behaviour-weight cap and floor;
- rejection sampling (``rollout_rs=token|sequence|geometric``): tokens (token) or whole responses (the
  product, or the geometric mean ``exp(mean_t log rho_t)``) whose ratio leaves ``[lower, upper]`` are
  masked out of ``response_mask``;
- divergence rejection (verl's ``rollout_rs=token_k1,seq_max_k2,...``): ``siirl.algorithms.divergence_rejection``;
- veto (``rollout_token_veto_threshold``): a response with any token ``rho`` below it is masked out whole.

Ratios are formed in log space and exponentiated within ``exp(+-20)``. Metrics use verl's names under
``rollout_corr/``. Sequence weights broadcast over the response's tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from siirl.algorithms.divergence_rejection import SAFETY_BOUND, divergence_rejection_mask, rejected_fractions
from siirl.algorithms.masked import masked_mean, masked_sum
from siirl.params.algorithm import RolloutCorrectionConfig
from siirl.params.divergence_bounds import is_divergence_spec, parse_bounds
from siirl.params.is_threshold import parse_is_threshold

#: The batch key the IS weights travel under to the actor's policy loss (verl's name).
IS_WEIGHTS_KEY = "rollout_is_weights"
Metrics = dict[str, float]


def _token(log_ratio: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return log_ratio


def _sequence(log_ratio: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return masked_sum(log_ratio, mask, dim=-1).unsqueeze(-1)


def _geometric(log_ratio: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return masked_mean(log_ratio, mask, dim=-1).unsqueeze(-1)


#: Level -> the log-ratio it compares: (B, R) per token or (B, 1) per response.
LEVELS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "token": _token,
    "sequence": _sequence,
    "geometric": _geometric,
}


@dataclass(frozen=True)
class RolloutCorrection:
    #: (B, R) truncated IS weights, 0 on padding; None without ``rollout_is``.
    weights: torch.Tensor | None
    #: ``response_mask`` with rejected tokens / responses set to 0.
    response_mask: torch.Tensor
    metrics: Metrics


def _level_ratio(log_ratio: torch.Tensor, mask: torch.Tensor, level: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(the level's log-ratio, its ratio broadcast to (B, R))."""
    level_log = LEVELS[level](log_ratio, mask)
    return level_log, torch.exp(level_log.clamp(-SAFETY_BOUND, SAFETY_BOUND)).expand_as(log_ratio)


def _ratio_stats(
    prefix: str, ratio: torch.Tensor, mask: torch.Tensor, upper: float, lower: float
) -> Metrics:
    """verl's mean / max / min, share above / below the bounds, std and effective sample size of a ratio."""
    valid = mask.bool()
    bounded = ratio.clamp(lower, upper)
    bounded_mean = masked_mean(bounded, mask)
    variance = masked_mean(bounded.square(), mask) - bounded_mean.square()
    ess = 1.0 / masked_mean((bounded / (bounded_mean + 1e-8)).square(), mask)
    return {
        f"{prefix}_mean": masked_mean(ratio, mask).item(),
        f"{prefix}_max": ratio[valid].max().item(),
        f"{prefix}_min": ratio[valid].min().item(),
        f"{prefix}_ratio_fraction_high": masked_mean((ratio > upper).to(mask.dtype), mask).item(),
        f"{prefix}_ratio_fraction_low": masked_mean((ratio < lower).to(mask.dtype), mask).item(),
        f"{prefix}_std": variance.clamp(min=0).sqrt().item(),
        f"{prefix}_eff_sample_size": ess.item(),
    }


def importance_weights(
    log_ratio: torch.Tensor, mask: torch.Tensor, level: str, threshold: Any, batch_normalize: bool
) -> tuple[torch.Tensor, Metrics]:
    """IS weights (B, R), 0 on padding, bounded as ``threshold`` says (a number: truncated at it;
    ``'lower_upper'``: 0 outside the range), and their statistics (before bounding)."""
    _, ratio = _level_ratio(log_ratio, mask, level)
    upper, lower = parse_is_threshold(threshold)
    metrics = _ratio_stats("rollout_is", ratio, mask, upper, 1.0 / upper if lower is None else lower)
    if lower is None:
        weights = ratio.clamp(max=upper) * mask
    else:
        kept = ((ratio >= lower) & (ratio <= upper)).to(mask.dtype)
        weights = ratio * kept * mask
        metrics["rollout_is_oob_ratio"] = masked_mean(1.0 - kept, mask).item()
    if batch_normalize:
        per_level = weights if level == "token" else masked_mean(weights, mask, dim=-1)
        level_mask = mask if level == "token" else (mask.sum(dim=-1) > 0).to(mask.dtype)
        factor = masked_mean(per_level, level_mask)
        if factor > 1e-8:
            weights = weights / factor
        metrics["rollout_is_batch_norm_factor"] = factor.item() if factor > 1e-8 else 1.0
    return weights.detach(), metrics


def rejection_mask(
    log_ratio: torch.Tensor, mask: torch.Tensor, level: str, upper: float, lower: float
) -> tuple[torch.Tensor, Metrics]:
    """``mask`` with tokens (token level) or responses whose ratio leaves ``[lower, upper]`` set to 0."""
    _, ratio = _level_ratio(log_ratio, mask, level)
    metrics = _ratio_stats("rollout_rs", ratio, mask, upper, lower)
    keep = ((ratio >= lower) & (ratio <= upper)).to(mask.dtype)
    return mask * keep, {**metrics, **rejected_fractions(keep, mask)}


def veto_mask(log_ratio: torch.Tensor, mask: torch.Tensor, threshold: float) -> tuple[torch.Tensor, Metrics]:
    """``mask`` with every response that has a token ratio below ``threshold`` set to 0."""
    catastrophic = (log_ratio < torch.log(torch.tensor(threshold, dtype=log_ratio.dtype))) & mask.bool()
    vetoed = catastrophic.any(dim=-1, keepdim=True)
    metrics = {
        "rollout_is_veto_fraction": vetoed.to(mask.dtype).mean().item(),
        "rollout_is_catastrophic_token_fraction": masked_mean(catastrophic.to(mask.dtype), mask).item(),
    }
    return mask * (~vetoed).to(mask.dtype), metrics


def off_policy_metrics(old_log_probs: torch.Tensor, rollout_log_probs: torch.Tensor, mask: torch.Tensor) -> Metrics:
    """How far the two policies are apart: KL estimates, perplexities, chi-squared of the ratio."""
    log_ratio = old_log_probs - rollout_log_probs
    train_mean = masked_mean(old_log_probs, mask, dim=-1)
    rollout_mean = masked_mean(rollout_log_probs, mask, dim=-1)
    log_ppl_diff = rollout_mean - train_mean
    ratio = torch.exp(log_ratio.clamp(-SAFETY_BOUND, SAFETY_BOUND))
    seq_ratio = torch.exp(masked_sum(log_ratio, mask, dim=-1).clamp(-SAFETY_BOUND, SAFETY_BOUND))
    return {
        "training_ppl": torch.exp(-train_mean).mean().item(),
        "training_log_ppl": (-train_mean).mean().item(),
        "rollout_ppl": torch.exp(-rollout_mean).mean().item(),
        "rollout_log_ppl": (-rollout_mean).mean().item(),
        "kl": masked_mean(-log_ratio, mask).item(),
        "k3_kl": masked_mean(ratio - log_ratio - 1, mask).item(),
        "log_ppl_diff": log_ppl_diff.mean().item(),
        "log_ppl_abs_diff": log_ppl_diff.abs().mean().item(),
        "ppl_ratio": torch.exp(log_ppl_diff).mean().item(),
        "chi2_token": (masked_mean(ratio.square(), mask) - 1).item(),
        "chi2_seq": (seq_ratio.square().mean() - 1).item(),
    }


def correct_rollout(
    old_log_probs: torch.Tensor,
    rollout_log_probs: torch.Tensor,
    response_mask: torch.Tensor,
    config: RolloutCorrectionConfig,
) -> RolloutCorrection:
    """IS weights, rejection and veto as ``config`` asks, plus the off-policy metrics, all ``rollout_corr/``."""
    if not (old_log_probs.shape == rollout_log_probs.shape == response_mask.shape):
        raise ValueError(
            "old_log_probs, rollout_log_probs and response_mask must have one shape, got "
            f"{[tuple(t.shape) for t in (old_log_probs, rollout_log_probs, response_mask)]}"
        )
    mask = response_mask.to(torch.float32)
    old, rollout = old_log_probs.detach().float(), rollout_log_probs.detach().float()
    if not mask.any():
        return RolloutCorrection(None, response_mask, {})
    log_ratio = old - rollout
    metrics = off_policy_metrics(old, rollout, mask)
    weights = None
    if config.rollout_is is not None:
        weights, is_metrics = importance_weights(
            log_ratio, mask, config.rollout_is, config.rollout_is_threshold, config.rollout_is_batch_normalize
        )
        metrics.update(is_metrics)
    kept = mask
    if is_divergence_spec(config.rollout_rs):
        kept, rs_metrics = divergence_rejection_mask(log_ratio, kept, parse_bounds(config.rollout_rs, config.rollout_rs_threshold))
        metrics.update(rs_metrics)
    elif config.rollout_rs is not None:
        upper = (
            config.rollout_rs_threshold
            if config.rollout_rs_threshold is not None
            else parse_is_threshold(config.rollout_is_threshold)[0]
        )
        lower = config.rollout_rs_threshold_lower if config.rollout_rs_threshold_lower is not None else 1.0 / upper
        kept, rs_metrics = rejection_mask(log_ratio, kept, config.rollout_rs, upper, lower)
        metrics.update(rs_metrics)
    if config.rollout_token_veto_threshold is not None:
        not_vetoed, veto_metrics = veto_mask(log_ratio, mask, config.rollout_token_veto_threshold)
        kept = kept * not_vetoed
        metrics.update(veto_metrics)
    metrics = {f"rollout_corr/{name}": value for name, value in metrics.items()}
    return RolloutCorrection(weights, kept.to(response_mask.dtype), metrics)
