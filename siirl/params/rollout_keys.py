"""verl's rollout generation limits (``rollout.prompt_length`` / ``response_length``), resolved at load.

verl defaults both to the data lengths. Here the response width training holds is
``data.max_response_length``, so a longer generation limit is refused rather than truncated behind the
user's back; a shorter one is honoured (the engine stops every response at that many tokens).
"""

from __future__ import annotations

from omegaconf import DictConfig

from siirl.errors import ConfigError

_ROLLOUT = "actor_rollout_ref.rollout"


def resolve_rollout_lengths(cfg: DictConfig) -> None:
    """Fill ``rollout.prompt_length`` / ``response_length`` (null: the data's), checked against what the data
    and training hold; the workers read the filled values."""
    rollout, data = cfg.actor_rollout_ref.rollout, cfg.data
    prompt = data.max_prompt_length if rollout.prompt_length is None else int(rollout.prompt_length)
    response = data.max_response_length if rollout.response_length is None else int(rollout.response_length)
    if response < 1 or response > data.max_response_length:
        raise ConfigError(
            f"bad config: {_ROLLOUT}.response_length={response} must be in [1, data.max_response_length="
            f"{data.max_response_length}] (the response width training holds); raise data.max_response_length instead"
        )
    if prompt < data.max_prompt_length:
        raise ConfigError(
            f"bad config: {_ROLLOUT}.prompt_length={prompt} is below data.max_prompt_length={data.max_prompt_length}: "
            "prompts the dataloader keeps would not fit; lower data.max_prompt_length instead"
        )
    rollout.prompt_length, rollout.response_length = prompt, response
