"""verl's divergence-based rejection (``algorithm.rollout_correction.rollout_rs=token_k1,seq_max_k2,...``):
mask out tokens or whole responses whose estimated divergence between the training and the rollout policy
leaves a bound, a hard trust region rather than PPO's soft clip.

An option is ``<aggregation>_<estimator>``. Estimators per token, from ``lr = log(pi_train / pi_rollout)``
clamped to +-20: ``k1 = -lr`` (kept within ``[log lower, log upper]``), ``k2 = lr^2 / 2`` and
``k3 = e^lr - 1 - lr`` (kept at or below ``upper``). Aggregations: ``token`` (each token on its own) and
``seq_sum`` / ``seq_mean`` / ``seq_max`` over a response's valid tokens (the whole response kept or not;
verl has no ``seq_max_k1``). Several options separated by commas must all pass.

Bounds come from ``rollout_rs_threshold`` (``siirl.params.divergence_bounds``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from siirl.algorithms.masked import masked_mean, masked_sum
from siirl.params.divergence_bounds import AGGREGATION_NAMES, ESTIMATOR_NAMES, Bound

SAFETY_BOUND = 20.0
Stat = Callable[[torch.Tensor], torch.Tensor]
Aggregate = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

ESTIMATORS: dict[str, Stat] = {
    "k1": lambda lr: -lr,
    "k2": lambda lr: 0.5 * lr.square(),
    "k3": lambda lr: torch.expm1(lr) - lr,
}


def _seq_max(stat: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    top = stat.masked_fill(~mask.bool(), float("-inf")).amax(dim=-1, keepdim=True)
    return torch.where(torch.isinf(top), torch.zeros_like(top), top)


#: Aggregation -> the statistic it bounds: (B, R) per token or (B, 1) per response.
AGGREGATIONS: dict[str, Aggregate] = {
    "token": lambda stat, mask: stat,
    "seq_sum": lambda stat, mask: masked_sum(stat, mask, dim=-1).unsqueeze(-1),
    "seq_mean": lambda stat, mask: masked_mean(stat, mask, dim=-1).unsqueeze(-1),
    "seq_max": _seq_max,
}
assert tuple(ESTIMATORS) == ESTIMATOR_NAMES and tuple(AGGREGATIONS) == AGGREGATION_NAMES


def divergence_rejection_mask(
    log_ratio: torch.Tensor, mask: torch.Tensor, bounds: list[Bound]
) -> tuple[torch.Tensor, dict[str, float]]:
    """``mask`` with every token / response failing any bound set to 0, and verl's ``rollout_rs_*`` metrics."""
    safe = log_ratio.clamp(-SAFETY_BOUND, SAFETY_BOUND)
    keep_all = torch.ones_like(mask)
    metrics: dict[str, float] = {}
    for bound in bounds:
        aggregation, _, estimator = bound.option.rpartition("_")
        stat = AGGREGATIONS[aggregation](ESTIMATORS[estimator](safe), mask)
        keep = stat <= bound.upper
        if bound.lower is not None:
            keep &= stat >= bound.lower
        keep = keep.to(mask.dtype).expand_as(mask)
        keep_all = keep_all * keep
        valid_stat = stat.expand_as(mask)[mask.bool()]
        metrics[f"rollout_rs_{bound.option}_mean"] = valid_stat.mean().item()
        metrics[f"rollout_rs_{bound.option}_max"] = valid_stat.max().item()
        metrics[f"rollout_rs_{bound.option}_masked_fraction"] = masked_mean(1 - keep, mask).item()
    return mask * keep_all, {**metrics, **rejected_fractions(keep_all, mask)}


def rejected_fractions(keep: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """verl's share of valid tokens rejected and share of responses with any token rejected."""
    rejected = (1 - keep) * mask
    return {
        "rollout_rs_masked_fraction": masked_mean(1 - keep, mask).item(),
        "rollout_rs_seq_masked_fraction": (rejected.sum(dim=-1) > 0).to(mask.dtype).mean().item(),
    }
