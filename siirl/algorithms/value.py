"""Critic loss: squared error to the returns with PPO-style value clipping."""

from __future__ import annotations

import torch

from siirl.algorithms.aggregation import agg_loss
from siirl.algorithms.masked import masked_mean


def compute_value_loss(
    vpreds: torch.Tensor,
    returns: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    cliprange_value: float,
    loss_agg_mode: str = "token-mean",
    global_token_count: int | None = None,
    global_seq_count: int | None = None,
    dp_size: int = 1,
    horizon: float | None = None,
) -> tuple[torch.Tensor, float]:
    """``0.5 * max((v - R)^2, (clip(v, v_old - c, v_old + c) - R)^2)`` aggregated over valid tokens.

    The prediction may not move further than ``cliprange_value`` from the rollout-time value ``values``
    without losing its gradient (the pessimistic max). ``horizon`` is the constant of
    ``seq-mean-token-sum-norm`` (default: the mask width), as for the policy loss. Returns the loss and the
    share of valid tokens where the clipped branch is the larger one.
    """
    if not vpreds.shape == returns.shape == values.shape == response_mask.shape:
        raise ValueError(
            "vpreds, returns, values and response_mask must have one shape, got "
            f"{[tuple(t.shape) for t in (vpreds, returns, values, response_mask)]}"
        )
    if cliprange_value < 0:
        raise ValueError(f"cliprange_value must be >= 0, got {cliprange_value}")
    mask = response_mask.to(vpreds.dtype)
    clipped_pred = torch.clamp(vpreds, values - cliprange_value, values + cliprange_value)
    unclipped_err = (vpreds - returns).square()
    clipped_err = (clipped_pred - returns).square()
    loss_mat = 0.5 * torch.maximum(unclipped_err, clipped_err)
    loss = agg_loss(loss_mat, mask, loss_agg_mode, global_token_count, global_seq_count, dp_size, horizon)
    clipfrac = masked_mean((clipped_err > unclipped_err).to(vpreds.dtype), mask).item()
    return loss, clipfrac
