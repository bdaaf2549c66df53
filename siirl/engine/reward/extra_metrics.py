"""verl's ``reward_extra_info`` in the step's metrics: the keys a score function returns in its dict beside
``score`` and ``acc`` (``{"score": 1.0, "format_ok": True, "length": 12}``), each logged as the mean over the
step's samples that report a number for it, as ``reward_extra/<key>``.
"""

from __future__ import annotations

import math
from numbers import Real

#: Extra values the managers report under names of their own (``reward/overlong*``) or store in the batch.
OWN_KEYS = frozenset({"score", "acc", "overlong_reward", "overlong"})
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
