"""KL divergence to the reference policy: per-token estimators, the KL loss and the in-reward penalty.

Estimators of ``KL(pi || pi_ref)`` from samples of ``pi`` (http://joschu.net/blog/kl-approx.html), with
``d = logprob - ref_logprob``:

- ``k1`` / ``kl``: ``d`` (unbiased, high variance, can be negative)
- ``abs``: ``|d|``
- ``k2`` / ``mse``: ``d**2 / 2`` (low variance, biased)
- ``k3`` / ``low_var_kl``: ``exp(-d) + d - 1`` (unbiased, always >= 0), clamped to [-10, 10] so that
  one token with an extreme ratio cannot blow up the loss.

The penalty enters either the loss (``kl_loss``, GRPO style) or the rewards (``apply_kl_penalty``, PPO
style, with a fixed or adaptive coefficient).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch

from siirl.algorithms.aggregation import agg_loss
from siirl.algorithms.masked import masked_mean
from siirl.params.algorithm import KLControlConfig
from siirl.registry import Registry

KLFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
KL_ESTIMATORS: Registry[KLFn] = Registry(
    "KL penalty type", open=True, config_keys=(
        "algorithm.kl_penalty", "actor_rollout_ref.actor.kl_loss_type", "distillation.distillation_loss.loss_mode"
    ),
)


@KL_ESTIMATORS.register("k1", "kl")
def _k1(logprob: torch.Tensor, ref_logprob: torch.Tensor) -> torch.Tensor:
    return logprob - ref_logprob


@KL_ESTIMATORS.register("abs")
def _abs(logprob: torch.Tensor, ref_logprob: torch.Tensor) -> torch.Tensor:
    return (logprob - ref_logprob).abs()


@KL_ESTIMATORS.register("k2", "mse")
def _k2(logprob: torch.Tensor, ref_logprob: torch.Tensor) -> torch.Tensor:
    return 0.5 * (logprob - ref_logprob).square()


@KL_ESTIMATORS.register("k3", "low_var_kl")
def _k3(logprob: torch.Tensor, ref_logprob: torch.Tensor) -> torch.Tensor:
    log_ratio = (ref_logprob - logprob).clamp(-20.0, 20.0)  # keeps exp() finite
    return (torch.exp(log_ratio) - log_ratio - 1).clamp(-10.0, 10.0)


def kl_penalty(logprob: torch.Tensor, ref_logprob: torch.Tensor, kind: str) -> torch.Tensor:
    """Per-token KL estimate of type ``kind`` (see the module docstring), same shape as the inputs."""
    fn = KL_ESTIMATORS.get(kind)
    if logprob.shape != ref_logprob.shape:
        raise ValueError(f"logprob {tuple(logprob.shape)} and ref_logprob {tuple(ref_logprob.shape)} differ")
    return fn(logprob, ref_logprob)


def kl_loss(
    logprob: torch.Tensor,
    ref_logprob: torch.Tensor,
    response_mask: torch.Tensor,
    kind: str,
    loss_agg_mode: str,
    **agg_kwargs: Any,
) -> torch.Tensor:
    """KL to the reference as a loss term, aggregated like the policy loss (``agg_kwargs``: counts, dp)."""
    return agg_loss(
        kl_penalty(logprob, ref_logprob, kind), response_mask.to(logprob.dtype), loss_agg_mode, **agg_kwargs
    )


class KLController(Protocol):
    value: float

    def update(self, current_kl: float, n_steps: int) -> None: ...


class FixedKLController:
    """A constant KL coefficient."""

    def __init__(self, kl_coef: float) -> None:
        self.value = float(kl_coef)

    def update(self, current_kl: float, n_steps: int) -> None:
        """The coefficient is fixed, so observations leave it unchanged."""


class AdaptiveKLController:
    """Coefficient steered towards ``target_kl`` (Ziegler et al., arXiv 1909.08593).

    Each update multiplies it by ``1 + clip(kl / target - 1, -0.2, 0.2) * n_steps / horizon``.
    """

    def __init__(self, init_kl_coef: float, target_kl: float, horizon: float) -> None:
        """``target_kl`` and ``horizon`` are > 0 (``algorithm.kl_ctrl``'s rule, before Ray)."""
        self.value = float(init_kl_coef)
        self.target = float(target_kl)
        self.horizon = float(horizon)

    def update(self, current_kl: float, n_steps: int) -> None:
        error = float(np.clip(current_kl / self.target - 1, -0.2, 0.2))
        self.value *= 1 + error * n_steps / self.horizon


KL_CONTROLLERS: Registry[Callable[[KLControlConfig], KLController]] = Registry(
    "KL controller type", open=True, config_keys=("algorithm.kl_ctrl.type",)
)


@KL_CONTROLLERS.register("fixed")
def _fixed(cfg: KLControlConfig) -> KLController:
    return FixedKLController(cfg.kl_coef)


@KL_CONTROLLERS.register("adaptive")
def _adaptive(cfg: KLControlConfig) -> KLController:
    return AdaptiveKLController(init_kl_coef=cfg.kl_coef, target_kl=cfg.target_kl, horizon=cfg.horizon)


def make_kl_controller(cfg: KLControlConfig) -> KLController:
    """The controller ``algorithm.kl_ctrl.type`` names (fixed | adaptive), built from that section."""
    return KL_CONTROLLERS.get(cfg.type)(cfg)


def apply_kl_penalty(
    token_level_scores: torch.Tensor,
    old_log_prob: torch.Tensor,
    ref_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    kl_ctrl: KLController,
    kind: str = "kl",
) -> tuple[torch.Tensor, dict[str, float]]:
    """Rewards ``scores - beta * KL`` per valid token; then feeds the batch's KL to ``kl_ctrl.update``.

    The reported KL is the mean over responses of each response's mean token KL; ``n_steps`` of the
    update is the number of responses.
    """
    mask = response_mask.to(old_log_prob.dtype)
    kld = kl_penalty(old_log_prob, ref_log_prob, kind) * mask
    beta = kl_ctrl.value
    rewards = token_level_scores - beta * kld
    current_kl = masked_mean(kld, mask, dim=-1).mean().item()
    kl_ctrl.update(current_kl=current_kl, n_steps=token_level_scores.shape[0])
    return rewards, {"actor/reward_kl_penalty": current_kl, "actor/reward_kl_penalty_coeff": beta}
