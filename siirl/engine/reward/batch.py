"""The ``batch`` manager: one call of a user batch function with lists (e.g. to batch a remote judge)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from siirl.engine.reward.base import FAILED, RewardInputs, RewardManager
from siirl.engine.reward.registry import REWARD_MANAGERS
from siirl.errors import RewardFunctionError


def default_batch_compute_score(
    data_sources: list[str], solution_strs: list[str], ground_truths: list[str], extra_infos: list[Any],
    **services: Any,
) -> list[Any]:
    """Batch form of the data_source registry, used when no batch function is configured."""
    from siirl.reward_score import default_compute_score

    return [
        default_compute_score(*args, **services)
        for args in zip(data_sources, solution_strs, ground_truths, extra_infos)
    ]


@REWARD_MANAGERS.register("batch")
class BatchRewardManager(RewardManager):
    """Calls ``compute_score(data_sources=, solution_strs=, ground_truths=, extra_infos=)`` once per batch;
    ``timeout_s`` bounds that one call (a late batch scores 0 throughout)."""

    def default_score_fn(self) -> Callable[..., Any]:
        return default_batch_compute_score

    def score(self, inputs: RewardInputs) -> list[Any]:
        results = self.call_score(
            f"batch of {len(inputs)}",
            data_sources=inputs.data_sources,
            solution_strs=inputs.solutions,
            ground_truths=inputs.ground_truths,
            extra_infos=inputs.extra_infos,
        )
        if results is FAILED:
            return [0.0] * len(inputs)
        if isinstance(results, (str, bytes, dict)) or not hasattr(results, "__len__"):
            raise RewardFunctionError(
                f"batch compute_score must return a list of scores, got {type(results).__name__}"
            )
        return list(results)
