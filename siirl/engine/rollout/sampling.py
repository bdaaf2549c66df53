"""Sampling parameters of one ``generate`` call: the training ones or the validation ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from siirl.params.model import RolloutConfig, ValSamplingConfig


@dataclass(frozen=True)
class SamplingParams:
    n: int
    do_sample: bool
    temperature: float
    top_p: float
    #: <= 0 disables top-k filtering.
    top_k: int

    @property
    def greedy(self) -> bool:
        """Greedy decoding: sampling off, or a temperature of 0 (the limit of sharpening)."""
        return not self.do_sample or self.temperature == 0.0

    @classmethod
    def from_config(cls, cfg: RolloutConfig | ValSamplingConfig) -> SamplingParams:
        """From a ``RolloutConfig`` (training) or its ``val_kwargs`` (validation) node."""
        return cls(
            n=int(cfg.n),
            do_sample=bool(cfg.do_sample),
            temperature=float(cfg.temperature),
            top_p=float(cfg.top_p),
            top_k=int(cfg.top_k),
        )

    def hf_generation_kwargs(self) -> dict[str, Any]:
        """``GenerationConfig`` fields; neutral values override whatever the model's config ships
        (e.g. a repetition penalty), so samples come from the policy's own distribution."""
        common: dict[str, Any] = {"num_beams": 1, "repetition_penalty": 1.0}
        if self.greedy:
            return {**common, "do_sample": False}
        return {
            **common,
            "do_sample": True,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": max(self.top_k, 0),
        }
