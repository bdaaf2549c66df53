"""Score for answers written as ``\\boxed{...}`` (MATH-style datasets).

The last ``\\boxed``/``\\fbox`` wins; braces may nest. Both sides get a light normalisation so that
harmless spelling differences (spaces, ``\\left``/``\\right``, ``\\dfrac``) do not cost the reward.
"""

from __future__ import annotations

import re

from siirl.reward_score.registry import SCORES

_BOX = re.compile(r"\\(boxed|fbox)(?![a-zA-Z])")
_SIZE_COMMANDS = re.compile(r"\\left(?![a-zA-Z])|\\right(?![a-zA-Z])")
_FRAC_VARIANTS = re.compile(r"\\[dt]frac(?![a-zA-Z])")
_SPACING = re.compile(r"\\[!,;: ]|\s+")


def last_boxed_content(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` (or ``\\boxed x``), None if absent/unclosed."""
    matches = list(_BOX.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    rest = text[last.end() :].lstrip()
    if not rest.startswith("{"):
        # "\boxed 5" form: the argument runs to the next "$" or whitespace.
        spaced = last.group(1) == "boxed" and text[last.end() : last.end() + 1].isspace()
        return (re.split(r"[\s$]", rest, maxsplit=1)[0] or None) if spaced else None
    depth = 0
    for i, char in enumerate(rest):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return rest[1:i]
    return None


def normalize_answer(answer: str) -> str:
    """Light normalisation: drop spaces, ``\\left``/``\\right``, ``$``, a trailing '.'; ``\\dfrac`` -> ``\\frac``."""
    answer = _SIZE_COMMANDS.sub("", answer)
    answer = _FRAC_VARIANTS.sub(r"\\frac", answer)
    answer = _SPACING.sub("", answer).replace("$", "")
    return answer.rstrip(".")


@SCORES.register(
    "lighteval/MATH",
    "DigitalLearningGmbH/MATH-lighteval",
    "HuggingFaceH4/MATH-500",
    "math",
)
def compute_score(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
    """1.0 when the last boxed answer equals the ground truth after normalisation.

    A ground truth that is itself a full solution with a box is reduced to its boxed answer first.
    """
    answer = last_boxed_content(solution_str)
    return 0.0 if answer is None else answer_score(answer, ground_truth)


def answer_score(answer: str, ground_truth: str) -> float:
    """1.0 when a bare answer equals the ground truth (reduced to its boxed answer if it has one) after
    normalisation."""
    truth = str(ground_truth)
    boxed_truth = last_boxed_content(truth)
    if boxed_truth is not None:
        truth = boxed_truth
    return 1.0 if normalize_answer(answer) == normalize_answer(truth) else 0.0
