"""Rule-based reward (score) functions, picked per sample by the dataset's ``data_source``.

Importing this package registers the built-in scorers: the embedded addition and digit-image tasks, GSM8K,
boxed-answer MATH datasets, Geometry3K, and verl's code datasets (run in a SandboxFusion server).
``default_compute_score`` dispatches through that registry.
"""

from siirl.user_interface.rewards import arithmetic, code_execution, geo3k, gsm8k, math_boxed
from siirl.user_interface.rewards.registry import (
    SCORES,
    ScoreFn,
    ScoreResult,
    default_compute_score,
    get_score_fn,
)

__all__ = [
    "SCORES",
    "ScoreFn",
    "ScoreResult",
    "arithmetic",
    "code_execution",
    "default_compute_score",
    "geo3k",
    "get_score_fn",
    "gsm8k",
    "math_boxed",
]
