"""Sampling parameters of one ``generate`` call: the training ones or the validation ones."""

from __future__ import annotations

from dataclasses import dataclass

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
