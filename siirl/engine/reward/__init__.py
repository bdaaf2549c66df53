"""Rule-based reward managers: turn a rollout batch into ``token_level_scores``.

``make_reward_manager(name, tokenizer, compute_score=None, **opts)`` builds one of ``naive``, ``batch``,
``parallel`` (verl's ``prime``) or ``dapo``; ``load_custom_reward_fn(path, name)`` loads a user score function from a file.
Names are resolved lazily so that the parallel manager's worker processes, which import this package,
do not pay for importing torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "REWARD_MANAGERS": "registry",
    "make_reward_manager": "registry",
    "RewardManager": "base",
    "RewardInputs": "base",
    "load_custom_reward_fn": "custom",
    "custom_reward_fn_from_config": "custom",
    "FileRewardFunction": "custom",
    "get_list": "batch_fields",
    "get_str_list": "batch_fields",
    "get_ground_truths": "batch_fields",
    "set_list": "batch_fields",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
