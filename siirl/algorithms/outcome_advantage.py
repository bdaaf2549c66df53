"""Outcome-reward estimators that compare the responses of one prompt (a uid group) with each other.

Each response's score is the sum of its token rewards; the per-response advantage is then spread over its
valid tokens. A group of one response has no peers: as in verl its baseline is 0 and its scale 1, so its
advantage is the raw score. A group whose scores are all equal has std 0; ``epsilon`` keeps the division
finite and the advantages come out as exactly 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from siirl.algorithms.advantage import ADV_ESTIMATORS, AdvantageInputs
from siirl.algorithms.grouping import GroupStats, group_stats
from siirl.algorithms.masked import masked_whiten
from siirl.algorithms.needs import EstimatorNeeds
from siirl.params.algorithm import AlgorithmConfig
from siirl.params.enums import AdvantageEstimator
from siirl.registry import Registry


def _per_token(per_response: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return per_response.unsqueeze(-1) * mask


def _centred(scores: torch.Tensor, stats: GroupStats) -> torch.Tensor:
    return torch.where(stats.singleton, scores, scores - stats.mean)


def _std_scaled(scores: torch.Tensor, stats: GroupStats, epsilon: float) -> torch.Tensor:
    std = torch.where(stats.singleton, torch.ones_like(stats.std), stats.std)
    return _centred(scores, stats) / (std + epsilon)


@ADV_ESTIMATORS.register(AdvantageEstimator.GSPO, needs=EstimatorNeeds(loss_mode="gspo"))
@ADV_ESTIMATORS.register(AdvantageEstimator.GRPO)
def grpo_advantage(inputs: AdvantageInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO (arXiv 2402.03300): ``(score - group mean) / (group std + epsilon)``.

    ``norm_adv_by_std_in_grpo=False`` drops the std division (Dr.GRPO, arXiv 2503.20783). GSPO uses the
    same advantages; what makes it GSPO is the sequence-level policy loss (``loss_mode=gspo``).
    """
    adv = group_normalised(inputs.outcome_scores(), inputs.require_index(), inputs.config)
    out = _per_token(adv, inputs.response_mask)
    return out, out


def group_normalised(scores: torch.Tensor, index: Sequence[object], config: AlgorithmConfig) -> torch.Tensor:
    """GRPO's per-response advantage of ``scores`` (one per row) within their uid groups."""
    stats = group_stats(scores, index)
    if config.norm_adv_by_std_in_grpo:
        return _std_scaled(scores, stats, config.epsilon)
    return _centred(scores, stats)


#: CPGD weight factors: (scores, group stats, inputs) -> per-response advantage.
CpgdWeightFn = Callable[[torch.Tensor, GroupStats, AdvantageInputs], torch.Tensor]
CPGD_WEIGHTS: Registry[CpgdWeightFn] = Registry(
    "weight_factor_in_cpgd", open=True, config_keys=("algorithm.weight_factor_in_cpgd",)
)


@CPGD_WEIGHTS.register("STD_weight")
def _cpgd_std_weight(scores: torch.Tensor, stats: GroupStats, inputs: AdvantageInputs) -> torch.Tensor:
    """Weight 1 / group std: the GRPO-style normalisation."""
    return _std_scaled(scores, stats, inputs.config.epsilon)


@CPGD_WEIGHTS.register("clip_filter_like_weight")
def _cpgd_clip_filter_like_weight(
    scores: torch.Tensor, stats: GroupStats, inputs: AdvantageInputs
) -> torch.Tensor:
    """Weight ``min(batch / informative, cpgd_max_weight)`` shared by the whole batch.

    Responses of groups whose centred scores are all 0 carry no signal; rescaling by the share of
    informative responses makes the update as large as if those had been filtered out (like DAPO dynamic
    sampling), and the cap keeps a batch with few informative responses from taking a huge step.
    """
    centred = _centred(scores, stats)
    informative = torch.where(stats.singleton, scores != 0, stats.std > 0)
    n_informative = informative.sum().clamp(min=1).to(scores.dtype)
    weight = (scores.shape[0] / n_informative).clamp(max=inputs.config.cpgd_max_weight)
    return centred * weight


@CPGD_WEIGHTS.register("naive", "none")
def _cpgd_no_weight(scores: torch.Tensor, stats: GroupStats, inputs: AdvantageInputs) -> torch.Tensor:
    """Weight 1: plain group-centred scores."""
    return _centred(scores, stats)


@ADV_ESTIMATORS.register(AdvantageEstimator.CPGD, needs=EstimatorNeeds(loss_mode="cpgd"))
def cpgd_advantage(inputs: AdvantageInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """CPGD (arXiv 2505.12504): group-centred scores times the weight factor ``weight_factor_in_cpgd``."""
    weight_fn = CPGD_WEIGHTS.get(inputs.config.weight_factor_in_cpgd)
    scores = inputs.outcome_scores()
    out = _per_token(
        weight_fn(scores, group_stats(scores, inputs.require_index()), inputs), inputs.response_mask
    )
    return out, out


@ADV_ESTIMATORS.register(AdvantageEstimator.RLOO)
def rloo_advantage(inputs: AdvantageInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """RLOO (arXiv 2402.14740): score minus the mean score of the *other* responses of the group."""
    scores = inputs.outcome_scores()
    stats = group_stats(scores, inputs.require_index())
    others_mean = (stats.mean * stats.count - scores) / (stats.count - 1).clamp(min=1)
    adv = scores - torch.where(stats.singleton, torch.zeros_like(scores), others_mean)
    out = _per_token(adv, inputs.response_mask)
    return out, out


@ADV_ESTIMATORS.register(AdvantageEstimator.REINFORCE_PLUS_PLUS_BASELINE)
def reinforce_plus_plus_baseline_advantage(inputs: AdvantageInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE++ with baseline (arXiv 2501.03262): group-centred scores, whitened over the batch.

    Returns are the centred scores before whitening.
    """
    scores = inputs.outcome_scores()
    centred = _per_token(_centred(scores, group_stats(scores, inputs.require_index())), inputs.response_mask)
    return masked_whiten(centred, inputs.response_mask), centred
