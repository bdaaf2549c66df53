"""Exact-match score for the embedded tasks with integer answers: addition (``siirl/arith_add``, three-number
``siirl/arith_add3``) and reading a digit off an image (``siirl/digit_images``)."""

from __future__ import annotations

import re

from siirl.reward_score.registry import SCORES

_INTEGER = re.compile(r"[+-]?\d+")


def parse_integer(text: str) -> int | None:
    """The integer ``text`` spells (surrounding whitespace allowed), else None."""
    text = text.strip()
    return int(text) if _INTEGER.fullmatch(text) else None


@SCORES.register("siirl/arith_add", "siirl/arith_add3", "siirl/digit_images")
def compute_score(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
    """1.0 when the whole response is the integer answer, else 0.0 (no partial credit: "46 apples" fails)."""
    expected = parse_integer(str(ground_truth))
    if expected is None:
        raise ValueError(f"arithmetic ground_truth must be an integer, got {ground_truth!r}")
    return 1.0 if parse_integer(solution_str) == expected else 0.0
