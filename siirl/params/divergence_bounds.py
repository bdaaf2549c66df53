"""Bounds of verl's divergence-based rejection (``algorithm.rollout_correction.rollout_rs=token_k1,...``,
applied by ``siirl.algorithms.divergence_rejection``): which options exist and how ``rollout_rs_threshold``
spells their bounds. Torch-free, so the config checks parse them before Ray starts.

``rollout_rs_threshold`` gives one bound spec shared by every option or one per option, comma separated:
``lower_upper`` or ``upper`` (lower ``1 / upper``) for k1 options (ratio bounds, kept as logs), ``upper``
for the others; all > 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from siirl.errors import ConfigError

_KEY = "algorithm.rollout_correction"
ESTIMATOR_NAMES = ("k1", "k2", "k3")
AGGREGATION_NAMES = ("token", "seq_sum", "seq_mean", "seq_max")
#: verl's options: every aggregation with every estimator but ``seq_max_k1``.
OPTIONS = tuple(
    f"{agg}_{est}" for agg in AGGREGATION_NAMES for est in ESTIMATOR_NAMES if (agg, est) != ("seq_max", "k1")
)


@dataclass(frozen=True)
class Bound:
    option: str
    #: Upper bound of the statistic (k1: log of the ratio bound).
    upper: float
    #: Lower bound (k1 only: log of the lower ratio bound).
    lower: float | None = None


def is_divergence_spec(rollout_rs: str | None) -> bool:
    return rollout_rs is not None and all(part.strip() in OPTIONS for part in str(rollout_rs).split(","))


def _positive(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"bad config: {_KEY}.rollout_rs_threshold has {text!r} for {option}; expected a number") from None
    if value <= 0:
        raise ConfigError(f"bad config: {_KEY}.rollout_rs_threshold for {option} must be > 0, got {text}")
    return value


def _bound(option: str, spec: str) -> Bound:
    if not option.endswith("k1"):
        if "_" in spec:
            raise ConfigError(f"bad config: {_KEY}.rollout_rs_threshold for {option} is one upper bound, got {spec!r}")
        return Bound(option, _positive(spec, option))
    lower_text, _, upper_text = spec.rpartition("_")
    upper = _positive(upper_text, option)
    lower = _positive(lower_text, option) if lower_text else 1.0 / upper
    return Bound(option, math.log(upper), math.log(lower))


def parse_bounds(rollout_rs: str, threshold: Any) -> list[Bound]:
    """One ``Bound`` per distinct option of ``rollout_rs``; a malformed spec is one ``ConfigError`` line."""
    options = list(dict.fromkeys(part.strip() for part in rollout_rs.split(",") if part.strip()))
    if threshold is None:
        raise ConfigError(f"bad config: {_KEY}.rollout_rs={rollout_rs} needs rollout_rs_threshold (bounds per option)")
    specs = [part.strip() for part in str(threshold).split(",") if part.strip()]
    if len(specs) not in (1, len(options)):
        raise ConfigError(
            f"bad config: {_KEY}.rollout_rs_threshold={threshold} gives {len(specs)} bounds for "
            f"{len(options)} rollout_rs options; give one shared bound or one per option"
        )
    return [_bound(option, spec) for option, spec in zip(options, specs * len(options) if len(specs) == 1 else specs)]
