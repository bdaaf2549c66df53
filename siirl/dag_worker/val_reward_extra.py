"""Validation logs the score function's extra keys as training does: ``val/reward_extra/<key>``, the mean over
every validation sample (all ranks) that reported a number for it (training logs ``reward_extra/<key>``)."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from siirl.engine.reward.extra_metrics import PREFIX


def add_reward_extra(totals: dict[str, list[float]], metrics: dict[str, float], batch: Any) -> None:
    """Add one validation batch's extra numbers (kept in the batch by the reward node, NaN where a sample
    reported none) to ``totals``: key -> [sum, count]."""
    for name in metrics:
        key = name[len(PREFIX):] if name.startswith(PREFIX) else None
        if key is None or key not in batch.keys():  # noqa: SIM118 - keys() works on every tensordict release
            continue
        values = batch[key]
        if not isinstance(values, torch.Tensor):
            continue
        finite = values[torch.isfinite(values)].double()
        entry = totals.setdefault(key, [0.0, 0.0])
        entry[0] += finite.sum().item()
        entry[1] += finite.numel()


def val_reward_extra(totals: dict[str, list[float]]) -> dict[str, float]:
    """The means over all ranks; the keys of every rank (a rank's data sources may report keys others do not)."""
    gathered: list[dict[str, list[float]]] = [totals]
    if dist.is_initialized():
        gathered = [{} for _ in range(dist.get_world_size())]
        dist.all_gather_object(gathered, totals)
    merged: dict[str, list[float]] = {}
    for part in gathered:
        for key, (total, count) in part.items():
            entry = merged.setdefault(key, [0.0, 0.0])
            entry[0] += total
            entry[1] += count
    return {f"val/{PREFIX}{key}": total / count for key, (total, count) in sorted(merged.items()) if count}
