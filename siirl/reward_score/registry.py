"""Registry of rule-based score functions keyed by the dataset's ``data_source`` column.

A score function has the signature ``fn(solution_str, ground_truth, extra_info=None) -> float | dict``;
a dict must carry the reward under ``"score"`` and may add more per-sample values (e.g. ``"acc"``).
Adding a dataset is one decorated function: ``@SCORES.register("my/dataset")``; one that needs a service
the run configures (the code sandbox) names it: ``@SCORES.register("apps", services=("sandbox",))``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from siirl.errors import ConfigError
from siirl.registry import Registry

ScoreResult = float | dict[str, Any]
ScoreFn = Callable[..., ScoreResult]

SCORES: Registry[ScoreFn] = Registry("data_source")


def get_score_fn(data_source: str) -> ScoreFn:
    """The score function for ``data_source``; unknown names list the known ones."""
    try:
        return SCORES.get(data_source)
    except ConfigError as exc:
        raise ConfigError(f"{exc} (or set custom_reward_function.path)") from None


def default_compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None, **services: Any
) -> ScoreResult:
    """Score one response with the function registered for its data_source. ``services`` (e.g. ``sandbox``)
    reach the functions registered with ``services=(name, ...)``, as keyword arguments."""
    fn = get_score_fn(data_source)
    wanted = SCORES.metadata(data_source).get("services", ())
    return fn(solution_str, ground_truth, extra_info, **{name: services.get(name) for name in wanted})
