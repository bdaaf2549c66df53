"""DAPO (arXiv 2503.14476) pieces: dynamic sampling and the soft overlong penalty.

Dynamic sampling drops prompts whose responses all scored the same (GRPO advantages are then all 0, so
they only dilute the batch); ``siirl.data_coordinator.gen_batches`` keeps generating until enough
informative prompts are collected.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from siirl.algorithms.grouping import group_ids


def filter_zero_variance_groups(
    uids: Sequence[object], metric_values: Sequence[float] | torch.Tensor, keep_singletons: bool = True
) -> tuple[list[int], dict[str, int]]:
    """Indices (in input order) of the samples whose uid group has a non-constant metric.

    A group of one response has no variance to measure; ``keep_singletons`` (default, as verl) keeps it.
    Stats: ``groups_kept``, ``groups_total``, ``samples_kept``, ``samples_total``.
    """
    if isinstance(metric_values, torch.Tensor):
        values = metric_values.detach().to("cpu", torch.float64).reshape(-1)
    else:
        values = torch.as_tensor(list(metric_values), dtype=torch.float64)
    if not torch.isfinite(values).all():
        raise ValueError("metric_values must be finite (found NaN or inf)")
    gid, n_groups = group_ids(uids, values.shape[0])
    ones = torch.ones_like(values)
    count = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, gid, ones)
    high = torch.full((n_groups,), -torch.inf, dtype=torch.float64).scatter_reduce(0, gid, values, "amax")
    low = torch.full((n_groups,), torch.inf, dtype=torch.float64).scatter_reduce(0, gid, values, "amin")
    keep_group = (high > low) | ((count == 1) & keep_singletons)
    kept = keep_group[gid].nonzero().flatten().tolist()
    stats = {
        "groups_kept": int(keep_group.sum()),
        "groups_total": n_groups,
        "samples_kept": len(kept),
        "samples_total": int(values.shape[0]),
    }
    return kept, stats


class GenerationBudgetExceeded(RuntimeError):
    """``max_num_gen_batches`` chunks were generated and still too few informative groups were kept
    (``siirl.data_coordinator.gen_batches`` collects them)."""


def overlong_reward_penalty(
    response_lengths: Sequence[int] | torch.Tensor,
    max_response_length: int,
    overlong_buffer_len: int,
    penalty_factor: float = 1.0,
) -> torch.Tensor:
    """DAPO's soft overlong punishment, one value per response (add it to the response's reward).

    0 up to ``max_response_length - overlong_buffer_len`` tokens, then falling linearly to
    ``-penalty_factor`` at ``max_response_length`` (and staying there beyond it).
    """
    if not 0 < overlong_buffer_len <= max_response_length:
        raise ValueError(
            f"overlong_buffer_len must be in (0, max_response_length={max_response_length}], got {overlong_buffer_len}"
        )
    if penalty_factor < 0:
        raise ValueError(f"penalty_factor must be >= 0, got {penalty_factor}")
    lengths = torch.as_tensor(response_lengths).to(torch.float32)
    if (lengths < 0).any():
        raise ValueError("response_lengths must be >= 0")
    excess = (lengths - (max_response_length - overlong_buffer_len)).clamp(0, overlong_buffer_len)
    return -excess / overlong_buffer_len * penalty_factor
