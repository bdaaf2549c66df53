"""What each advantage estimator needs from the pipeline, declared where the estimator is registered.

The built-in pipeline is derived from these needs: ``values`` adds the critic's value and training
nodes, ``reward_baselines`` adds the greedy-baseline node (ReMax), ``groups`` says the estimator compares
the responses of one prompt (uid). ``loss_mode`` is the policy loss that ``loss_mode=auto`` picks for it.
An estimator from user code (``algorithm.adv_estimator=my_module:my_fn``) declares its needs with
``@declare_estimator_needs(...)``; without the decorator it is treated like GRPO (groups, vanilla loss).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

NEEDS_ATTR = "__siirl_estimator_needs__"


@dataclass(frozen=True)
class EstimatorNeeds:
    values: bool = False
    reward_baselines: bool = False
    groups: bool = True
    loss_mode: str = "vanilla"

    def batch_keys(self) -> tuple[str, ...]:
        """Batch keys the advantage node reads because of this estimator."""
        keys = ["uid"] if self.groups else []
        keys += ["values"] if self.values else []
        keys += ["reward_baselines"] if self.reward_baselines else []
        return tuple(keys)


def declare_estimator_needs(**needs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``@declare_estimator_needs(values=True)`` on an estimator function."""
    declared = EstimatorNeeds(**needs)

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(fn, NEEDS_ATTR, declared)
        return fn

    return wrap


#: Needs of the built-in estimators, by registered name (one function may serve several names).
NEEDS_BY_NAME: dict[str, EstimatorNeeds] = {}


def estimator_needs(name: str | Enum) -> EstimatorNeeds:
    """The needs of the estimator registered (or importable) as ``name``."""
    from siirl.algorithms.advantage import get_adv_estimator

    key = name.value if isinstance(name, Enum) else str(name)
    fn = get_adv_estimator(key)  # refuses an unknown name in one line
    return NEEDS_BY_NAME.get(key) or getattr(fn, NEEDS_ATTR, EstimatorNeeds())
