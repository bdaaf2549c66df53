"""Reward managers by name: ``@REWARD_MANAGERS.register("name")`` on a RewardManager subclass.

The built-in managers live in sibling modules that are imported on first lookup, so importing this
module (or the package) stays cheap for the parallel manager's worker processes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from siirl.engine.reward.base import RewardManager
from siirl.registry import Registry

REWARD_MANAGERS: Registry[type[RewardManager]] = Registry(
    "reward manager", config_keys=("reward_model.reward_manager",)
)
_BUILTIN_MODULES = ("naive", "batch", "parallel", "dapo")


def load_builtins() -> None:
    """Register the built-in managers (their modules import torch, so not at import of this one)."""
    for module in _BUILTIN_MODULES:
        importlib.import_module(f"siirl.engine.reward.{module}")


def make_reward_manager(
    name: str, tokenizer: Any = None, compute_score: Callable[..., Any] | None = None, **opts: Any
) -> RewardManager:
    """Build the manager registered as ``name``; ``opts`` go to its constructor (e.g. num_workers, timeout_s)."""
    load_builtins()
    return REWARD_MANAGERS.get(name)(tokenizer=tokenizer, compute_score=compute_score, **opts)
