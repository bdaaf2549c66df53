"""verl's ``reward_extra_info``: the keys a score function returns in its dict beside ``score`` and ``acc``
(``{"score": 1.0, "format_ok": True, "length": 12}``). Each is logged per step as ``reward_extra/<key>`` (the
mean over the step's samples that report a number for it) and kept in the batch under its own name for later
nodes, as verl keeps them in ``non_tensor_batch``.
"""

from __future__ import annotations

import math
from numbers import Real

import torch
from tensordict import TensorDictBase

from siirl.data_coordinator.tensordict_ops import set_non_tensor_list

#: Extra values the managers report under names of their own (``reward/overlong*``) or store in the batch.
OWN_KEYS = frozenset({"score", "acc", "overlong_reward", "overlong"})
#: Extra values the reward node already stores as tensors of their own (DAPO's group filter reads them).
STORED_BY_REWARD_NODE = frozenset({"score", "acc"})
PREFIX = "reward_extra/"


def reward_extra_metrics(extra: dict[str, list]) -> dict[str, float]:
    """``reward_extra/<key>``: the mean of the key's numeric values (a bool counts 0 / 1); keys with none
    (strings, lists, all missing) are left out."""
    metrics = {}
    for key, values in extra.items():
        numbers = [float(v) for v in values if isinstance(v, Real) and math.isfinite(float(v))]
        if key not in OWN_KEYS and numbers:
            metrics[PREFIX + key] = sum(numbers) / len(numbers)
    return metrics


def store_reward_extra(batch: TensorDictBase, extra: dict[str, list], device: torch.device) -> None:
    """Put each extra key in ``batch``: numbers (bools, and None where a sample reported none, as NaN) as a
    ``(B,)`` float32 tensor; anything else as one Python value per row. A key naming a field the batch
    already has is refused, since overwriting it would corrupt what later nodes read."""
    for key, values in extra.items():
        if key in STORED_BY_REWARD_NODE:
            continue
        if key in batch.keys():  # noqa: SIM118 - keys() works on every tensordict release
            raise ValueError(
                f"the score function returned extra key {key!r}, which names a batch field the reward node "
                f"must not overwrite; rename it in the returned dict"
            )
        if all(v is None or isinstance(v, Real) for v in values):
            numbers = [math.nan if v is None else float(v) for v in values]
            batch[key] = torch.tensor(numbers, dtype=torch.float32, device=device)
        else:
            set_non_tensor_list(batch, key, list(values))
