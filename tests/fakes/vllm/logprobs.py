"""``vllm.logprobs``: what a request with ``SamplingParams(logprobs=k)`` gets back per generated token.

``CompletionOutput.logprobs`` is a list with one ``{token_id: Logprob}`` per generated token: the sampled
token first (always present, even for ``k=0``), then the ``k`` most likely tokens of that step.
``rank`` is the token's 1-based place when the step's vocabulary is sorted by log-prob, highest first.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


SampleLogprobs = list[dict[int, Logprob]]
