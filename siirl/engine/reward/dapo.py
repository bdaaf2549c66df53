"""The ``dapo`` manager: naive scoring plus DAPO's soft overlong penalty.

Responses longer than ``max_response_length - overlong_buffer_len`` lose reward linearly, reaching
``-penalty_factor`` at ``max_response_length``; this discourages truncated answers without the cliff of a
hard cut-off.
"""

from __future__ import annotations

from typing import Any

from siirl.engine.reward.base import RewardInputs
from siirl.engine.reward.naive import NaiveRewardManager
from siirl.engine.reward.registry import REWARD_MANAGERS


def overlong_penalty(length: int, max_response_length: int, overlong_buffer_len: int, factor: float) -> float:
    """Penalty (<= 0) for a response of ``length`` tokens."""
    expected = max_response_length - overlong_buffer_len
    return min(-(length - expected) / overlong_buffer_len * factor, 0.0)


@REWARD_MANAGERS.register("dapo")
class DapoRewardManager(NaiveRewardManager):
    """Options: ``max_response_length`` (required), ``overlong_buffer_len`` (0 disables), ``penalty_factor``;
    ``reward_model.overlong_buffer``'s rules refuse a length outside (0, max_response_length) and a negative
    factor before Ray."""

    def __init__(
        self,
        tokenizer: Any = None,
        compute_score: Any = None,
        max_response_length: int | None = None,
        overlong_buffer_len: int = 0,
        penalty_factor: float = 1.0,
        **opts: Any,
    ):
        super().__init__(tokenizer, compute_score, **opts)
        self.max_response_length = max_response_length
        self.overlong_buffer_len = overlong_buffer_len
        self.penalty_factor = penalty_factor

    def score_batch(self, inputs: RewardInputs) -> tuple[list[float], dict[str, list]]:
        scores, extra = super().score_batch(inputs)
        if not self.overlong_buffer_len:
            return scores, extra
        penalties = [
            overlong_penalty(n, self.max_response_length, self.overlong_buffer_len, self.penalty_factor)
            for n in inputs.response_lengths
        ]
        # As in verl, ``score`` stays the score function's; the penalised reward is the returned score.
        extra["overlong_reward"] = penalties
        extra["overlong"] = [p < 0 for p in penalties]
        return [s + p for s, p in zip(scores, penalties)], extra
