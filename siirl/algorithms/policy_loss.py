"""Policy-gradient losses, registered by ``loss_mode``, with the uniform entry ``compute_policy_loss``.

A loss is ``fn(inputs: PolicyLossInputs) -> (loss, metrics)`` where ``metrics`` maps names to 0-d tensors;
``compute_policy_loss`` turns them into floats with a single host transfer. Losses reduce their
``(batch, response_len)`` loss matrix with ``inputs.aggregate`` so that the aggregation mode and the
data-parallel counts (see ``siirl.algorithms.aggregation``) apply the same way to every loss.

Options come from the actor section, ``inputs.config`` (an ``ActorConfig``; its defaults when none is given):

- ``clip_ratio_low`` / ``clip_ratio_high`` (unset: ``clip_ratio``): PPO-style ranges of ``vanilla`` and
  ``cpgd``; a larger ``clip_ratio_high`` is DAPO's clip-higher.
- ``clip_ratio_c`` (must be > 1): dual-clip bound of ``vanilla`` for negative advantages.
- ``gspo_clip_ratio_low`` / ``gspo_clip_ratio_high``: GSPO's sequence-ratio range; unset, a
  ``clip_ratio_low`` / ``clip_ratio_high`` the user set is GSPO's range (verl's GSPO reads those), else
  ``GSPO_CLIP_RANGE``.
- ``policy_drift_coeff`` and ``policy_drift_clip``: CPGD's drift regulariser.
- ``loss_agg_horizon`` (0: the mask width): the constant of ``seq-mean-token-sum-norm``.
- ``tau_pos`` / ``tau_neg`` (or ``policy_loss.tau_pos`` / ``tau_neg`` where set): SAPO's gate temperatures.

``rollout_is_weights`` (rollout correction, ``siirl.algorithms.rollout_correction``) multiply every loss's
per-token matrix in ``inputs.aggregate``, so each loss gets the correction without knowing about it; a
sequence-level loss (``geo_mean``) reduces with ``inputs.aggregate_sequences`` instead.

Every loss reports ``clipfrac_low`` / ``clipfrac_high`` (share of valid tokens whose objective is clipped
below / above) and ``ppo_kl`` (mean of ``old_log_prob - log_prob`` over valid tokens).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from functools import partial
from typing import Any

import torch

from siirl.algorithms.aggregation import agg_loss
from siirl.algorithms.masked import masked_mean
from siirl.errors import ConfigError
from siirl.params.model import ActorConfig
from siirl.registry import Registry

Metrics = dict[str, torch.Tensor]
PolicyLossFn = Callable[["PolicyLossInputs"], tuple[torch.Tensor, Metrics]]

POLICY_LOSSES: Registry[PolicyLossFn] = Registry(
    "policy loss_mode",
    open=True,
    config_keys=("actor_rollout_ref.actor.policy_loss.loss_mode",),
    also_allowed=("auto",),
)


def register_policy_loss(
    *names: str | Enum, options: Callable[[ActorConfig], str | None] | None = None
) -> Callable[[PolicyLossFn], PolicyLossFn]:
    """Decorator: make ``fn`` available as ``policy_loss.loss_mode=<name>``; ``options``: the refusal of the
    actor options it reads (None when they are fine), checked before Ray (``check_loss_options``)."""
    return POLICY_LOSSES.register(*names, options=options)


def get_policy_loss(name: str | Enum) -> PolicyLossFn:
    return POLICY_LOSSES.get(name)


@dataclass(frozen=True)
class PolicyLossInputs:
    old_log_prob: torch.Tensor
    log_prob: torch.Tensor
    advantages: torch.Tensor
    response_mask: torch.Tensor  # in log_prob's dtype
    config: ActorConfig
    reduce: Callable[..., torch.Tensor]  # agg_loss with the mask and data-parallel counts bound
    rollout_is_weights: torch.Tensor | None = None  # detached, in log_prob's dtype

    def aggregate(self, loss_mat: torch.Tensor, loss_agg_mode: str | None = None) -> torch.Tensor:
        """``loss_agg_mode`` (None: the configured one) over ``loss_mat`` times the rollout-correction weights."""
        if self.rollout_is_weights is not None:
            loss_mat = loss_mat * self.rollout_is_weights
        return self.reduce(loss_mat) if loss_agg_mode is None else self.reduce(loss_mat, loss_agg_mode=loss_agg_mode)

    def aggregate_sequences(self, seq_losses: torch.Tensor) -> torch.Tensor:
        """Mean over sequences of a ``(batch,)`` sequence-level loss, whatever ``loss_agg_mode`` says.

        Rollout-correction weights enter as each sequence's geometric mean over its valid tokens, the
        sequence-level counterpart of the token product a sequence ratio stands for.
        """
        if self.rollout_is_weights is not None:
            log_weights = torch.log(self.rollout_is_weights + 1e-10)
            seq_losses = seq_losses * torch.exp(masked_mean(log_weights, self.response_mask, dim=-1))
        loss_mat = seq_losses.unsqueeze(-1).expand_as(self.response_mask)
        return self.reduce(loss_mat, loss_agg_mode="seq-mean-token-mean")

    def share(self, flags: torch.Tensor) -> torch.Tensor:
        """Fraction of valid tokens where ``flags`` holds."""
        return masked_mean(flags.to(self.log_prob.dtype), self.response_mask).detach()

    @property
    def clip_range(self) -> tuple[float, float]:
        """The actor's ``clip_ratio_low/high``, else ``clip_ratio``."""
        return _clip_range(self.config)

    def ppo_kl(self, log_ratio: torch.Tensor) -> torch.Tensor:
        return masked_mean(-log_ratio, self.response_mask).detach()


def first_set(*values: float | None) -> float:
    return next(value for value in values if value is not None)


def _clip_range(cfg: ActorConfig) -> tuple[float, float]:
    """``clip_ratio_low/high``, else ``clip_ratio``."""
    low, high = first_set(cfg.clip_ratio_low, cfg.clip_ratio), first_set(cfg.clip_ratio_high, cfg.clip_ratio)
    return float(low), float(high)


#: GSPO's default range on the sequence-level ratio (the paper's 3e-4 / 4e-4).
GSPO_CLIP_RANGE = (3e-4, 4e-4)


def _gspo_clip_range(cfg: ActorConfig) -> tuple[float, float]:
    low = first_set(cfg.gspo_clip_ratio_low, cfg.clip_ratio_low, GSPO_CLIP_RANGE[0])
    return float(low), float(first_set(cfg.gspo_clip_ratio_high, cfg.clip_ratio_high, GSPO_CLIP_RANGE[1]))


def _ratio_range(low_key: str, high_key: str, read: Callable[[ActorConfig], tuple[float, float]]) -> Callable:
    """The refusal of a range around a ratio of 1 (``low`` in [0, 1), ``high`` >= 0) that a loss reads."""
    def refusal(cfg: ActorConfig) -> str | None:
        low, high = read(cfg)
        if 0 <= low < 1 and high >= 0:
            return None
        return f"{low_key} must be in [0, 1) and {high_key} >= 0, got {low} and {high}"
    return refusal


def open_range(cfg: ActorConfig) -> str | None:
    """The refusal of a range that clips a weight or a log-ratio rather than PPO's ratio, where a lower bound
    of 1 or more is meaningful (CISPO's ``clip_ratio_low=10``: no bound)."""
    low, high = _clip_range(cfg)
    return None if min(low, high) >= 0 else f"clip_ratio_low and clip_ratio_high must be >= 0, got {low} and {high}"


_ppo_range = _ratio_range("clip_ratio_low", "clip_ratio_high", _clip_range)


def _dual_clip(cfg: ActorConfig) -> str | None:
    """vanilla's options: PPO's range, then the dual-clip bound on the ratio."""
    dual = None if cfg.clip_ratio_c > 1 else f"clip_ratio_c must be > 1 (dual-clip bound on the ratio), got {cfg.clip_ratio_c}"
    return _ppo_range(cfg) or dual


def check_loss_options(cfg: Any) -> None:
    """The clip range (and dual-clip bound) each policy loss of the run reads, refused before Ray rather than at
    the first update: the actor's (under bypass mode, ``rollout_correction.loss_type=reinforce`` clips nothing)
    and the distillation term's policy-gradient form."""
    correction, actor = cfg.algorithm.rollout_correction, cfg.actor_rollout_ref.actor
    losses = []  # (section key, the key naming its loss, the loss, the options it reads)
    if not (correction.bypass_mode and correction.loss_type != "ppo_clip"):
        losses.append(("actor_rollout_ref.actor", "loss_mode", str(actor.policy_loss.loss_mode), actor))
    distill = cfg.distillation.distillation_loss
    if cfg.distillation.enabled and distill.use_policy_gradient:
        losses.append(("distillation.distillation_loss", "policy_loss_mode", str(distill.policy_loss_mode),
                       distill.policy_gradient_config()))
    for key, mode_key, mode, options in losses:
        check = POLICY_LOSSES.metadata(mode).get("options")
        problem = check(options) if check else None
        if problem:
            raise ConfigError(f"bad config: {key}.{problem} ({mode_key}={mode})")


@register_policy_loss("vanilla", options=_dual_clip)
def vanilla_policy_loss(inputs: PolicyLossInputs) -> tuple[torch.Tensor, Metrics]:
    """PPO clipped surrogate (arXiv 1707.06347) with asymmetric range and dual clip (arXiv 1912.09729)."""
    low, high = inputs.clip_range
    clip_c = float(inputs.config.clip_ratio_c)
    adv = inputs.advantages
    log_ratio = (inputs.log_prob - inputs.old_log_prob).clamp(-20.0, 20.0)
    ratio = torch.exp(log_ratio)
    clipped = torch.maximum(-adv * ratio, -adv * ratio.clamp(1 - low, 1 + high))
    loss_mat = torch.where(adv < 0, torch.minimum(clipped, -adv * clip_c), clipped)
    metrics = {
        "clipfrac_low": inputs.share((adv < 0) & (ratio < 1 - low)),
        "clipfrac_high": inputs.share((adv > 0) & (ratio > 1 + high)),
        "clipfrac_dual": inputs.share((adv < 0) & (ratio > clip_c)),
        "ppo_kl": inputs.ppo_kl(log_ratio),
    }
    return inputs.aggregate(loss_mat), metrics


@register_policy_loss("gspo", options=_ratio_range("gspo_clip_ratio_low", "gspo_clip_ratio_high", _gspo_clip_range))
def gspo_policy_loss(inputs: PolicyLossInputs) -> tuple[torch.Tensor, Metrics]:
    """GSPO (arXiv 2507.18071): clip the sequence ratio ``exp(mean_t log r_t)`` instead of token ratios.

    Token ratio ``s_it = sg(s_i) * pi(y_it) / sg(pi(y_it))`` equals the sequence ratio ``s_i`` in value
    while each token's gradient flows through its own log-prob (the paper's GSPO-token form); with
    ``seq-mean-token-mean`` aggregation this is exactly the sequence-level GSPO gradient.
    """
    low, high = _gspo_clip_range(inputs.config)
    adv, log_prob = inputs.advantages, inputs.log_prob
    log_ratio = log_prob - inputs.old_log_prob
    seq_log_ratio = masked_mean(log_ratio, inputs.response_mask, dim=-1).detach().unsqueeze(-1)
    token_log_ratio = (log_prob - log_prob.detach() + seq_log_ratio).clamp(max=10.0)
    ratio = torch.exp(token_log_ratio)
    loss_mat = torch.maximum(-adv * ratio, -adv * ratio.clamp(1 - low, 1 + high))
    metrics = {
        "clipfrac_low": inputs.share((adv < 0) & (ratio < 1 - low)),
        "clipfrac_high": inputs.share((adv > 0) & (ratio > 1 + high)),
        "ppo_kl": inputs.ppo_kl(log_ratio),
    }
    return inputs.aggregate(loss_mat), metrics


@register_policy_loss("cpgd", options=_ppo_range)
def cpgd_policy_loss(inputs: PolicyLossInputs) -> tuple[torch.Tensor, Metrics]:
    """CPGD (arXiv 2505.12504): policy gradient on the clipped *log* ratio plus a policy-drift penalty.

    Objective per token: ``min(A * log r, A * clip(log r, log(1-low), log(1+high)))``. The drift term is
    ``policy_drift_coeff * KL(pi_old || pi)``, estimated per token by ``r - 1 - log r``; its value is that
    estimate and its gradient ``min(r - 1, policy_drift_clip)`` times ``grad log pi``, the cap keeping a
    token with an exploding ratio from dominating the update.
    """
    low, high = inputs.clip_range
    adv, log_prob = inputs.advantages, inputs.log_prob
    log_ratio = log_prob - inputs.old_log_prob
    upper, lower = math.log1p(high), math.log1p(-low)
    clipped_log_ratio = torch.where(adv > 0, log_ratio.clamp(max=upper), log_ratio.clamp(min=lower))
    loss_mat = -adv * clipped_log_ratio
    drift_log_ratio = log_ratio.detach().clamp(-20.0, 20.0)  # keeps exp() finite on garbage tokens
    ratio = torch.exp(drift_log_ratio)
    drift = ratio - 1 - drift_log_ratio
    coeff = float(inputs.config.policy_drift_coeff)
    if coeff != 0.0:
        grad_weight = (ratio - 1).clamp(max=float(inputs.config.policy_drift_clip))
        loss_mat = loss_mat + coeff * (drift + grad_weight * (log_prob - log_prob.detach()))
    metrics = {
        "clipfrac_low": inputs.share((adv < 0) & (log_ratio < lower)),
        "clipfrac_high": inputs.share((adv > 0) & (log_ratio > upper)),
        "ppo_kl": inputs.ppo_kl(log_ratio),
        "policy_drift": masked_mean(drift, inputs.response_mask),
    }
    return inputs.aggregate(loss_mat), metrics


def compute_policy_loss(
    loss_mode: str | Enum | PolicyLossFn,
    *,
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str,
    config: ActorConfig | None = None,
    global_token_count: int | None = None,
    global_seq_count: int | None = None,
    dp_size: int = 1,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Loss of ``loss_mode`` (a registered name, or the loss function itself) and its metrics as floats."""
    fn = loss_mode if callable(loss_mode) else get_policy_loss(loss_mode)
    config = config if config is not None else ActorConfig()
    shapes = {t.shape for t in (old_log_prob, log_prob, advantages, response_mask)}
    if len(shapes) != 1 or log_prob.dim() != 2:
        raise ValueError(
            "old_log_prob, log_prob, advantages and response_mask must be 2-D of one shape, got "
            f"{[tuple(t.shape) for t in (old_log_prob, log_prob, advantages, response_mask)]}"
        )
    mask = response_mask.to(log_prob.dtype)
    reduce = partial(
        agg_loss,
        loss_mask=mask,
        loss_agg_mode=loss_agg_mode,
        global_token_count=global_token_count,
        global_seq_count=global_seq_count,
        dp_size=dp_size,
        horizon=config.loss_agg_horizon or None,  # 0 in the config: the mask width
    )
    weights = None if rollout_is_weights is None else rollout_is_weights.detach().to(log_prob.dtype)
    inputs = PolicyLossInputs(old_log_prob, log_prob, advantages, mask, config, reduce, weights)
    loss, metric_tensors = fn(inputs)
    values = torch.stack([v.detach().to(torch.float64) for v in metric_tensors.values()]).tolist()
    return loss, dict(zip(metric_tensors, values))
