"""Reward managers by name: ``@register_reward_manager("name")`` on a RewardManager subclass.

The built-in managers live in sibling modules that are imported on first lookup, so importing this
module (or the package) stays cheap for the parallel manager's worker processes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from siirl.engine.reward.base import RewardManager
from siirl.errors import ConfigError

REWARD_MANAGERS: dict[str, type[RewardManager]] = {}
_BUILTIN_MODULES = ("naive", "batch", "parallel", "dapo")


def register_reward_manager(name: str) -> Callable[[type[RewardManager]], type[RewardManager]]:
    """Class decorator adding a manager under ``name`` (the value of ``reward_model.reward_manager``)."""

    def decorate(cls: type[RewardManager]) -> type[RewardManager]:
        if name in REWARD_MANAGERS and REWARD_MANAGERS[name] is not cls:
            raise ValueError(f"reward manager {name!r} is already registered")
        REWARD_MANAGERS[name] = cls
        return cls

    return decorate


def _load_builtins() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(f"siirl.engine.reward.{module}")


def reward_manager_names() -> list[str]:
    """Every registered manager, built-ins included (the values ``reward_model.reward_manager`` takes)."""
    _load_builtins()
    return sorted(REWARD_MANAGERS)


def make_reward_manager(
    name: str, tokenizer: Any = None, compute_score: Callable[..., Any] | None = None, **opts: Any
) -> RewardManager:
    """Build the manager registered as ``name``; ``opts`` go to its constructor (e.g. num_workers, timeout_s)."""
    _load_builtins()
    if name not in REWARD_MANAGERS:
        raise ConfigError(
            f"reward_model.reward_manager={name!r} is not registered; known: {', '.join(sorted(REWARD_MANAGERS))}"
        )
    return REWARD_MANAGERS[name](tokenizer=tokenizer, compute_score=compute_score, **opts)
