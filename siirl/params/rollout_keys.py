"""verl's rollout generation limits (``rollout.prompt_length`` / ``response_length``), resolved at load.

verl defaults both to the data lengths. Here the response width training holds is
``data.max_response_length``, so a longer generation limit is refused rather than truncated behind the
user's back; a shorter one is honoured (the engine stops every response at that many tokens).
"""

from __future__ import annotations

from omegaconf import DictConfig

from siirl.errors import ConfigError

_ROLLOUT = "actor_rollout_ref.rollout"


def generation_limits(prompt_length: int | None, response_length: int | None, data_prompt: int,
                      data_response: int) -> tuple[int, int]:
    """``(prompt, response)`` token limits of generation, checked against what the data and training hold."""
    prompt = data_prompt if prompt_length is None else int(prompt_length)
    response = data_response if response_length is None else int(response_length)
    if response < 1 or response > data_response:
        raise ConfigError(
            f"bad config: {_ROLLOUT}.response_length={response} must be in [1, data.max_response_length="
            f"{data_response}] (the response width training holds); raise data.max_response_length instead"
        )
    if prompt < data_prompt:
        raise ConfigError(
            f"bad config: {_ROLLOUT}.prompt_length={prompt} is below data.max_prompt_length={data_prompt}: "
            "prompts the dataloader keeps would not fit; lower data.max_prompt_length instead"
        )
    return prompt, response


def resolve_rollout_lengths(cfg: DictConfig) -> None:
    rollout = cfg.actor_rollout_ref.rollout
    rollout.prompt_length, rollout.response_length = generation_limits(
        rollout.prompt_length, rollout.response_length, cfg.data.max_prompt_length, cfg.data.max_response_length
    )
