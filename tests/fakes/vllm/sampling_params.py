"""``vllm.SamplingParams`` with the fields siiRL sets and vLLM's checks on them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SamplingParams:
    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    #: 0 or -1 disables top-k.
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    max_tokens: int | None = 16
    min_tokens: int = 0
    logprobs: int | None = None
    detokenize: bool = True
    skip_special_tokens: bool = True
    #: token id -> bias added to its logit (vLLM clamps to [-100, 100]).
    logit_bias: dict[int, float] | None = None

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}.")
        if self.temperature < 0.0:
            raise ValueError(f"temperature must be non-negative, got {self.temperature}.")
        if self.temperature < 1e-5 and self.n > 1:
            raise ValueError(f"n must be 1 when using greedy sampling, got {self.n}.")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}.")
        if self.top_k < -1:
            raise ValueError(f"top_k must be 0 (disable), or at least 1, got {self.top_k}.")
        if self.temperature < 1e-5:  # greedy: vLLM turns the cuts off
            self.top_p, self.top_k = 1.0, 0
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}.")
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = list(self.stop or [])
        if self.stop and not self.detokenize:
            raise ValueError("stop strings are only supported when detokenize is True. Set detokenize=True to use stop.")
        self.stop_token_ids = list(self.stop_token_ids or [])
