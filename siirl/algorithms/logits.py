"""Token log-probabilities and entropies from logits, in row chunks to bound peak memory.

With a vocabulary of 150k, a full float32 log-softmax of a 16k-token micro-batch is ~10 GB. Both functions
work on ``chunk_size`` rows at a time, upcast each chunk to at least float32 (bf16 log-sum-exp is too
coarse), and, when a gradient is needed, recompute each chunk in the backward pass instead of keeping its
intermediates (activation checkpointing), so only one chunk's temporaries are alive at any moment.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.checkpoint import checkpoint

DEFAULT_CHUNK_ROWS = 1024


def _upcast(logits: torch.Tensor) -> torch.Tensor:
    return logits.to(torch.promote_types(logits.dtype, torch.float32))


def _chunk_logprobs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    logits = _upcast(logits)
    return logits.gather(-1, labels.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)


def _chunk_entropy(logits: torch.Tensor) -> torch.Tensor:
    """``log S - sum(e * z) / S`` with ``e = exp(z)``, ``S = sum(e)`` on the row-max-shifted logits ``z``.

    Entropy is shift-invariant; the shift keeps ``exp`` finite and lets the large terms cancel before
    rounding (raw float32 logits near 5e3 would lose whole units). ``vecdot`` avoids one full temporary.
    """
    logits = _upcast(logits)
    shifted = logits - logits.amax(dim=-1, keepdim=True).detach()
    exp = torch.exp(shifted)
    total = exp.sum(dim=-1)
    return torch.log(total) - torch.linalg.vecdot(exp, shifted) / total


def _map_rows(
    fn: Callable[..., torch.Tensor], logits: torch.Tensor, labels: torch.Tensor | None, chunk_size: int
) -> torch.Tensor:
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    flat = logits.reshape(-1, logits.shape[-1])
    flat_labels = None if labels is None else labels.reshape(-1)
    track_grad = torch.is_grad_enabled() and logits.requires_grad
    pieces = []
    for start in range(0, flat.shape[0], chunk_size):
        rows = slice(start, start + chunk_size)
        args = (flat[rows],) if flat_labels is None else (flat[rows], flat_labels[rows])
        pieces.append(checkpoint(fn, *args, use_reentrant=False) if track_grad else fn(*args))
    if not pieces:
        return logits.new_zeros(logits.shape[:-1], dtype=torch.promote_types(logits.dtype, torch.float32))
    return torch.cat(pieces).reshape(logits.shape[:-1])


def logprobs_from_logits(
    logits: torch.Tensor, labels: torch.Tensor, chunk_size: int = DEFAULT_CHUNK_ROWS
) -> torch.Tensor:
    """``log softmax(logits)[label]`` as ``logits[label] - logsumexp(logits)``; shape ``labels.shape``."""
    if labels.shape != logits.shape[:-1]:
        raise ValueError(
            f"labels shape {tuple(labels.shape)} must be logits shape without the vocab dim "
            f"{tuple(logits.shape[:-1])}"
        )
    return _map_rows(_chunk_logprobs, logits, labels.long(), chunk_size)


def entropy_from_logits(logits: torch.Tensor, chunk_size: int = DEFAULT_CHUNK_ROWS) -> torch.Tensor:
    """Entropy of ``softmax(logits)`` over the last dim: ``logsumexp(z) - sum(softmax(z) * z)``."""
    return _map_rows(_chunk_entropy, logits, None, chunk_size)


def _chunk_sum_pi_squared(logits: torch.Tensor) -> torch.Tensor:
    """``sum softmax(z)^2 = exp(logsumexp(2z) - 2 logsumexp(z))``: no probability vector is materialised."""
    logits = _upcast(logits)
    return torch.exp(torch.logsumexp(2 * logits, dim=-1) - 2 * torch.logsumexp(logits, dim=-1))


def sum_pi_squared_from_logits(logits: torch.Tensor, chunk_size: int = DEFAULT_CHUNK_ROWS) -> torch.Tensor:
    """``sum_v pi(v)^2`` of ``softmax(logits)`` over the last dim (the policy's collision probability), which
    the optimal-token-baseline estimator needs per token."""
    return _map_rows(_chunk_sum_pi_squared, logits, None, chunk_size)
