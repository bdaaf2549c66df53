"""Score of the embedded long-tail task (``siirl/running_sums``): the whole trace of partial sums must be
right, so a response cannot shortcut to the final sum (the task exists for its long responses)."""

from __future__ import annotations

from siirl.reward_score.registry import SCORES


@SCORES.register("siirl/running_sums")
def compute_score(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
    """1.0 when the response's whitespace-separated tokens are exactly the partial sums, else 0.0."""
    expected = str(ground_truth).split()
    if not expected or not all(part.isdigit() for part in expected):
        raise ValueError(f"running_sums ground_truth must be space-separated integers, got {ground_truth!r}")
    return 1.0 if solution_str.split() == expected else 0.0
