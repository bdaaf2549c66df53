"""verl's ``algorithm.rollout_correction.rollout_is_threshold``: one number, or ``'lower_upper'``.

- a number (or a numeric string): truncated importance sampling (TIS), weights clipped at it;
- ``'lower_upper'`` (e.g. ``'0.5_5.0'``): IcePop, weights outside ``[lower, upper]`` set to 0 and the rest
  kept as they are. With the recomputed old log-probs as the proximal policy this is AReaL's decoupled PPO
  objective, whose behaviour importance weight ``pi_prox / pi_behav`` drops out of the loss above its cap
  (``behav_imp_weight_cap``) and below its floor.
"""

from __future__ import annotations

from typing import Any

from siirl.errors import ConfigError

KEY = "algorithm.rollout_correction.rollout_is_threshold"


def parse_is_threshold(value: Any) -> tuple[float, float | None]:
    """``(upper, lower)``: ``lower`` is None for TIS. Anything else is one ``ConfigError`` line."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(f"bad config: {KEY}={value!r} must be a number (TIS) or 'lower_upper' (IcePop)")
    lower_text, sep, upper_text = str(value).strip().partition("_")
    try:
        upper = float(upper_text if sep else lower_text)
        lower = float(lower_text) if sep else None
    except ValueError:
        raise ConfigError(f"bad config: {KEY}={value!r} must be a number (TIS) or 'lower_upper' (IcePop)") from None
    if lower is None and upper <= 0:
        raise ConfigError(f"bad config: {KEY}={value!r} must be > 0")
    if lower is not None and not 0 < lower <= upper:
        raise ConfigError(f"bad config: {KEY}={value!r} needs 0 < lower <= upper in 'lower_upper'")
    return upper, lower
