"""Rule-based reward (score) functions, picked per sample by the dataset's ``data_source``.

Importing this package registers the built-in scorers: the embedded addition, digit-image and running-sums tasks, GSM8K,
boxed-answer MATH datasets, Geometry3K, and verl's code datasets (run in a SandboxFusion server).
``default_compute_score`` dispatches through that registry.

A leaf (it imports only ``siirl.errors`` and ``siirl.registry``): the reward managers, the tools and
interactions of multi-turn rollouts and the user-facing nodes all score with it. Named after its verl
counterpart, ``verl.utils.reward_score``.
"""

from siirl.reward_score import arithmetic, code_execution, geo3k, gsm8k, math_boxed, running_sums
from siirl.reward_score.registry import (
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
    "running_sums",
]
