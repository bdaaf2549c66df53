"""Geometry3K score (verl's geo3k examples): 0.9 for a correct boxed answer plus 0.1 for the reasoning
format, ``<think>...</think>`` followed by text holding ``\\boxed{...}``.

verl's Qwen2.5-VL GRPO scripts train on ``hiyouga/geometry3k`` rows with exactly this split, so a run
of those scripts reports rewards on the same scale as verl's.
"""

from __future__ import annotations

import re

from siirl.reward_score.math_boxed import answer_score
from siirl.reward_score.math_boxed import compute_score as boxed_accuracy
from siirl.reward_score.registry import SCORES

_REASONED = re.compile(r"<think>.*</think>.*\\boxed\{.*\}.*", re.DOTALL)


def format_score(solution_str: str) -> float:
    """1.0 when the whole response is a ``<think>`` block followed by a boxed answer."""
    return 1.0 if _REASONED.fullmatch(solution_str) else 0.0


@SCORES.register("hiyouga/geometry3k", "geo3k")
def compute_score(
    solution_str: str,
    ground_truth: str,
    extra_info: dict | None = None,
    format_weight: float = 0.1,
    use_boxed: bool = True,
) -> float:
    """``1 - format_weight`` times the answer's correctness plus ``format_weight`` times the format. The
    answer is the last boxed one, or (``use_boxed=False``, as the geo3k tool submits it) the whole string."""
    accuracy = boxed_accuracy(solution_str, ground_truth) if use_boxed else answer_score(solution_str, ground_truth)
    return (1.0 - format_weight) * accuracy + format_weight * format_score(solution_str)
