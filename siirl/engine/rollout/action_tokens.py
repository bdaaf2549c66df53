"""Continuous robot actions as tokens, the way OpenVLA writes them: each action dimension is cut into
``bins`` equal bins over ``[low, high]`` and bin ``b`` is written as the ``b``-th of the ``bins`` last plain
(non-special) tokens of the vocabulary. A response of ``dims * chunk`` action tokens is an action chunk:
``chunk`` consecutive ``dims``-D actions that the environment executes in order before the policy looks
again (OpenVLA-OFT's chunks). A token outside the action range (the model is free to sample one) reads as
the nearest bin, as OpenVLA's clipping does; a response cut short is completed with no-op values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class ActionTokenizer:
    def __init__(
        self, tokenizer: Any, dims: int = 7, chunk: int = 1, bins: int = 256, low: float = -1.0, high: float = 1.0
    ) -> None:
        if dims < 1 or chunk < 1 or bins < 2 or not low < high:
            raise ValueError(f"need dims >= 1, chunk >= 1, bins >= 2 and low < high; got {dims}, {chunk}, {bins}, "
                             f"[{low}, {high}]")
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        plain = [i for i in range(len(tokenizer)) if i not in special]
        if len(plain) < bins:
            raise ValueError(f"the tokenizer has {len(plain)} plain tokens, fewer than the {bins} action bins")
        #: Token id of each bin, lowest bin first.
        self.token_ids = np.asarray(plain[-bins:], dtype=np.int64)
        self.dims, self.chunk, self.bins, self.low, self.high = dims, chunk, bins, low, high
        edges = np.linspace(low, high, bins + 1)
        self.centers = (edges[:-1] + edges[1:]) / 2

    @property
    def response_length(self) -> int:
        """Tokens of one action chunk."""
        return self.dims * self.chunk

    def encode(self, actions: Any) -> list[int]:
        """``(chunk, dims)`` (or ``dims``) actions -> their tokens, each value clipped to ``[low, high]``."""
        values = np.clip(np.asarray(actions, dtype=np.float64).reshape(-1), self.low, self.high)
        scaled = (values - self.low) / (self.high - self.low) * self.bins
        return self.token_ids[np.minimum(scaled.astype(np.int64), self.bins - 1)].tolist()

    def decode(self, tokens: Sequence[int], noop: Sequence[float] | None = None) -> np.ndarray:
        """Tokens of one response -> a ``(chunk, dims)`` array; missing values come from ``noop`` (a
        ``dims``-D action; zeros without one)."""
        ids = np.asarray(list(tokens)[: self.response_length], dtype=np.int64)
        bins = np.clip(np.searchsorted(self.token_ids, ids), 0, self.bins - 1)
        out = np.tile(np.asarray(noop if noop is not None else np.zeros(self.dims), dtype=np.float64), self.chunk)
        out[: len(bins)] = self.centers[bins]
        return out.reshape(self.chunk, self.dims)
