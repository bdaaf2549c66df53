"""How the HF engine turns logits into tokens: ``generate`` runs greedy over scores that our processors
have already reduced to the one token drawn for each row (where the device family runs float64; elsewhere
``generate`` samples as usual).

``generate``'s own sampling draws with ``torch.multinomial``, which for one sample per row draws an
exponential variate for every vocabulary entry: on a CPU it was most of a decode step's cost outside the
model. Inverse-CDF sampling draws one uniform per row from the same distribution. The warpers are
transformers' own, built in the order ``generate`` builds them in sampling mode (temperature, top-k,
top-p), and they run after every other processor as there (the log-prob recorder sees raw logits).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import LogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from siirl.engine.rollout.sampling import SamplingParams


class InverseCdfSampler(LogitsProcessor):
    """Draws each row's next token from ``softmax(scores)`` and returns scores that are 0 at that token and
    -inf elsewhere, so greedy decoding emits it. The CDF is float64, so no token's share is lost to rounding."""

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        cdf = torch.softmax(scores, dim=-1, dtype=torch.float64).cumsum(dim=-1)
        draw = torch.rand(cdf.shape[0], 1, dtype=torch.float64, device=cdf.device) * cdf[:, -1:]
        chosen = torch.searchsorted(cdf, draw, right=True).clamp_(max=cdf.shape[1] - 1)
        return torch.full_like(scores, float("-inf")).scatter_(1, chosen, 0.0)


def sampling_processors(params: SamplingParams, draws_itself: bool) -> list[LogitsProcessor]:
    """The processors that end a sampled step when the engine ``draws_itself``: the warpers ``params`` asks
    for, then the draw; none when greedy or when ``generate`` samples."""
    if params.greedy or not draws_itself:
        return []
    warpers: list[LogitsProcessor] = []
    if params.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(params.temperature))
    if params.top_k > 0:
        warpers.append(TopKLogitsWarper(top_k=params.top_k))
    if params.top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p=params.top_p))
    return [*warpers, InverseCdfSampler()]


def generation_kwargs(params: SamplingParams, draws_itself: bool) -> dict[str, Any]:
    """``GenerationConfig`` fields: greedy over the processed scores when the engine ``draws_itself`` (or
    decodes greedily), else ``generate``'s own sampling; neutral values override whatever the model's config
    ships (e.g. a repetition penalty), so tokens come from the policy's own distribution."""
    common: dict[str, Any] = {"num_beams": 1, "repetition_penalty": 1.0}
    if params.greedy or draws_itself:
        return {**common, "do_sample": False}
    return {
        **common,
        "do_sample": True,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": max(params.top_k, 0),
    }
