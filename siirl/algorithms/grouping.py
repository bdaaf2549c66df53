"""Group statistics keyed by uid: the responses sampled for one prompt share a uid and form a group."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch


def hashable_uid(uid: object) -> Hashable:
    """Tensor / numpy scalars hash by identity, so compare them by value instead."""
    return uid.item() if hasattr(uid, "item") else uid  # type: ignore[return-value]


def group_ids(index: Sequence[object], batch_size: int) -> tuple[torch.Tensor, int]:
    """Map uids to dense group ids ``0..n_groups-1`` in order of first appearance."""
    if len(index) != batch_size:
        raise ValueError(f"index has {len(index)} uids but the batch has {batch_size} rows")
    dense: dict[Hashable, int] = {}
    ids = [dense.setdefault(hashable_uid(uid), len(dense)) for uid in index]
    return torch.tensor(ids, dtype=torch.long), len(dense)


@dataclass(frozen=True)
class GroupStats:
    """Per-sample view of its group's statistics (each tensor has one entry per row)."""

    count: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor  # Bessel-corrected; 0 for a group of one

    @property
    def singleton(self) -> torch.Tensor:
        return self.count == 1


def group_stats(scores: torch.Tensor, index: Sequence[object]) -> GroupStats:
    """Count, mean and unbiased std of ``scores`` (shape ``(batch,)``) within each uid group.

    Sums run in float64 and a group whose scores are all equal gets exactly its score as mean and 0 as
    std, so its centred scores are exactly 0 in any dtype (a float32 mean of 16 x 2.2 is not 2.2).
    """
    gid, n_groups = group_ids(index, scores.shape[0])
    gid = gid.to(scores.device)
    values = scores.to(torch.float64)
    count = torch.zeros(n_groups, dtype=torch.float64, device=scores.device).index_add_(
        0, gid, torch.ones_like(values)
    )
    mean = torch.zeros_like(count).index_add_(0, gid, values) / count
    sq_dev = torch.zeros_like(count).index_add_(0, gid, (values - mean[gid]) ** 2)
    std = torch.sqrt(sq_dev / (count - 1).clamp(min=1))
    high = torch.full_like(count, -torch.inf).scatter_reduce(0, gid, values, "amax")
    low = torch.full_like(count, torch.inf).scatter_reduce(0, gid, values, "amin")
    constant = (high == low)[gid]
    row_mean = torch.where(constant, values, mean[gid])
    row_std = torch.where(constant, torch.zeros_like(values), std[gid])
    dtype = scores.dtype
    return GroupStats(count=count[gid].to(dtype), mean=row_mean.to(dtype), std=row_std.to(dtype))
