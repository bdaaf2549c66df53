"""GSM8K score: the answer follows ``####`` (strict) or is the last number in the text (flexible)."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from siirl.reward_score.registry import SCORES

_NUMBER = r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+"
_STRICT = re.compile(r"####\s*\$?\s*(" + _NUMBER + r")")
_ANY_NUMBER = re.compile(_NUMBER)
METHODS = ("strict", "flexible")


def normalize_number(text: str) -> str:
    """Canonical spelling of a number: "1,000" -> "1000", "18.00" -> "18", "$5." -> "5", "0.50" -> "0.5".

    Text that is not a number comes back stripped, so comparisons still behave predictably.
    """
    cleaned = text.strip().replace(",", "").replace("$", "").rstrip(".").strip()
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return cleaned
    if not value.is_finite():
        return cleaned
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def extract_solution(solution_str: str, method: str = "strict") -> str | None:
    """The answer in ``solution_str`` (normalised), or None when there is none.

    strict: the last ``#### <number>``. flexible: the last number anywhere in the text.
    """
    if method == "strict":
        matches = _STRICT.findall(solution_str)
    elif method == "flexible":
        matches = _ANY_NUMBER.findall(solution_str)
    else:
        raise ValueError(f"gsm8k method must be one of {METHODS}, got {method!r}")
    return normalize_number(matches[-1]) if matches else None


@SCORES.register("openai/gsm8k", "gsm8k")
def compute_score(
    solution_str: str,
    ground_truth: str,
    extra_info: dict | None = None,
    method: str = "strict",
    format_score: float = 0.0,
    score: float = 1.0,
) -> float:
    """``score`` for a correct answer, ``format_score`` for a wrong but well-formed one, 0.0 for none."""
    answer = extract_solution(solution_str, method)
    if answer is None:
        return 0.0
    return score if answer == normalize_number(str(ground_truth)) else format_score
