"""Reduce a ``(batch, response_len)`` loss matrix to the scalar that is back-propagated.

Modes (``loss_agg_mode``):

- ``token-mean``: every valid token of the mini-batch weighs the same (DAPO).
- ``seq-mean-token-sum``: sum over a sequence's tokens, mean over sequences.
- ``seq-mean-token-mean``: mean over a sequence's tokens, mean over sequences (original GRPO).
- ``seq-mean-token-sum-norm``: sum over a sequence's tokens divided by a constant ``horizon`` (default:
  the mask width; configure ``max_response_length`` so the constant does not move between micro-batches),
  mean over sequences (Dr.GRPO).

Data parallelism and gradient accumulation contract
----------------------------------------------------
A mini-batch is split over ``dp_size`` data-parallel ranks and, on each rank, into micro-batches whose
losses are back-propagated one after another, so their gradients are *summed*; FSDP then *averages*
gradients over the ranks. To make that equal the gradient of the mini-batch loss, pass the counts of the
whole mini-batch over all ranks: ``global_token_count`` (valid tokens, for ``token-mean``) or
``global_seq_count`` (sequences, i.e. rows including fully masked ones, for the ``seq-*`` modes). Each
micro-batch then returns ``local_sum / global_count * dp_size``, where ``local_sum`` is the sum of its
per-unit (token or sequence) values; summing over micro-batches and averaging over ranks gives exactly
``total_sum / global_count``. Without the counts the result is the plain mean over this call's units,
which is only right when one call sees the whole mini-batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch

from siirl.algorithms.masked import masked_sum
from siirl.registry import Registry

Unit = Literal["token", "seq"]
#: A mode returns (sum of its per-unit values, number of local units, which unit it averages over).
#: The token count stays a tensor so that aggregation never forces a host-device synchronisation.
AggResult = tuple[torch.Tensor, torch.Tensor | int, Unit]
AggFn = Callable[[torch.Tensor, torch.Tensor, float], AggResult]

AGG_MODES: Registry[AggFn] = Registry(
    "loss_agg_mode", open=True, config_keys=("actor_rollout_ref.actor.loss_agg_mode", "critic.loss_agg_mode")
)


@AGG_MODES.register("token-mean")
def _token_mean(loss_mat: torch.Tensor, mask: torch.Tensor, horizon: float) -> AggResult:
    return masked_sum(loss_mat, mask), mask.to(loss_mat.dtype).sum(), "token"


@AGG_MODES.register("seq-mean-token-sum")
def _seq_mean_token_sum(loss_mat: torch.Tensor, mask: torch.Tensor, horizon: float) -> AggResult:
    return masked_sum(loss_mat, mask, dim=-1).sum(), loss_mat.shape[0], "seq"


@AGG_MODES.register("seq-mean-token-mean")
def _seq_mean_token_mean(loss_mat: torch.Tensor, mask: torch.Tensor, horizon: float) -> AggResult:
    tokens = mask.to(loss_mat.dtype).sum(dim=-1).clamp(min=1)
    return (masked_sum(loss_mat, mask, dim=-1) / tokens).sum(), loss_mat.shape[0], "seq"


@AGG_MODES.register("seq-mean-token-sum-norm")
def _seq_mean_token_sum_norm(loss_mat: torch.Tensor, mask: torch.Tensor, horizon: float) -> AggResult:
    return masked_sum(loss_mat, mask, dim=-1).sum() / horizon, loss_mat.shape[0], "seq"


def agg_loss(
    loss_mat: torch.Tensor,
    loss_mask: torch.Tensor,
    loss_agg_mode: str,
    global_token_count: int | None = None,
    global_seq_count: int | None = None,
    dp_size: int = 1,
    horizon: float | None = None,
) -> torch.Tensor:
    """Aggregate ``loss_mat`` over the valid entries of ``loss_mask`` (see the module docstring)."""
    mode = AGG_MODES.get(loss_agg_mode)
    if loss_mat.shape != loss_mask.shape or loss_mat.dim() != 2:
        raise ValueError(
            f"agg_loss needs 2-D loss_mat and loss_mask of one shape, got {tuple(loss_mat.shape)} "
            f"and {tuple(loss_mask.shape)}"
        )
    if dp_size < 1:
        raise ValueError(f"dp_size must be >= 1, got {dp_size}")
    if horizon is None:
        horizon = loss_mat.shape[-1]
    if horizon <= 0:
        raise ValueError(f"horizon must be > 0, got {horizon}")
    total, local_units, unit = mode(loss_mat, loss_mask, float(horizon))
    global_count = global_token_count if unit == "token" else global_seq_count
    if global_count is None:
        return total / torch.as_tensor(local_units, dtype=total.dtype, device=total.device).clamp(min=1)
    if global_count <= 0:
        raise ValueError(f"global {unit} count must be > 0, got {global_count}")
    return total / global_count * dp_size
