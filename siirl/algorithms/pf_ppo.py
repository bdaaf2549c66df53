"""Policy-filtered PPO (verl's ``algorithm.use_pf_ppo``): resample the batch by how much each response's
reward says, so the update spends more of its rows on informative responses.

After advantages are computed, ``batch`` rows are drawn with replacement, as many as there were, with
probability proportional to a weight of each response's total score (``token_level_scores``), chosen by
``algorithm.pf_ppo.reweight_method``:

- ``pow``: ``|score| ** weight_pow`` (large rewards, of either sign, dominate),
- ``max_min``: 1 for the batch's best and worst responses, 0 otherwise,
- ``max_random``: 0.4 for the best responses, 0.1 for the rest.

Every weight gets ``1e-8`` so a batch of zero scores still samples (uniformly). Draws come from the caller's
``torch.Generator`` so a seeded run resamples the same way.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from siirl.registry import Registry

ReweightFn = Callable[[torch.Tensor, float], torch.Tensor]

REWEIGHT_METHODS: Registry[ReweightFn] = Registry(
    "pf_ppo reweight_method", config_keys=("algorithm.pf_ppo.reweight_method",)
)


@REWEIGHT_METHODS.register("pow")
def _pow_weights(scores: torch.Tensor, weight_pow: float) -> torch.Tensor:
    return scores.abs().pow(weight_pow)


@REWEIGHT_METHODS.register("max_min")
def _max_min_weights(scores: torch.Tensor, weight_pow: float) -> torch.Tensor:
    extreme = (scores == scores.max()) | (scores == scores.min())
    return extreme.to(scores.dtype)


@REWEIGHT_METHODS.register("max_random")
def _max_random_weights(scores: torch.Tensor, weight_pow: float) -> torch.Tensor:
    return torch.where(scores == scores.max(), 0.4, 0.1).to(scores.dtype)


def pf_ppo_sample_indices(
    scores: torch.Tensor, reweight_method: str, weight_pow: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Row indices (``len(scores)`` of them, with repeats) drawn by the method's weights of ``scores``."""
    if scores.dim() != 1 or scores.numel() == 0:
        raise ValueError(f"pf_ppo needs one score per row, got shape {tuple(scores.shape)}")
    weights = REWEIGHT_METHODS.get(reweight_method)(scores.detach().double().cpu(), float(weight_pow))
    weights = (weights + 1e-8).clamp(min=1e-8)
    return torch.multinomial(weights, scores.numel(), replacement=True, generator=generator)
