"""Which drawn prompts an asynchronous run has trained: what its checkpoint keeps, so that a resume neither
loses nor repeats one.

The producer draws prompts ahead of training and, with partial rollouts, trains them out of order (a slow
group goes into a later step than prompts drawn after it). A checkpoint saves the loader's state from before
the oldest draw that still has an untrained prompt and, for every draw from there on, the slots already
trained; the resumed run draws again from that state and leaves those slots out.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import torch

#: A prompt's tag: ``draw * TAG_STRIDE + slot`` (its row in the draw).
TAG_STRIDE = 1 << 32


@dataclass
class _Draw:
    state: Any  # the loader's state before this draw
    size: int
    trained: set[int] = field(default_factory=set)


class DrawLedger:
    """Draws in order; ``trained_before``: the slots a checkpoint recorded as trained, per draw from the
    resume point (:meth:`resume_point`'s second value)."""

    def __init__(self, trained_before: list[list[int]] | None = None) -> None:
        self._draws: deque[_Draw] = deque()
        self._first = 0  # the draw index of ``_draws[0]``
        self._before = [set(slots) for slots in trained_before or []]

    def drew(self, state: Any, size: int) -> tuple[int, torch.Tensor]:
        """Record a draw of ``size`` prompts made from loader state ``state``: its index and the slots to
        sample (those not trained before a resume)."""
        index = self._first + len(self._draws)
        trained = self._before[index] if index < len(self._before) else set()
        self._draws.append(_Draw(state, size, set(trained)))
        self._forget_trained()
        return index, torch.tensor([slot for slot in range(size) if slot not in trained], dtype=torch.long)

    def trained(self, tags: torch.Tensor) -> None:
        """The prompts of ``tags`` have trained."""
        for tag in tags.tolist():
            draw, slot = divmod(int(tag), TAG_STRIDE)
            self._draws[draw - self._first].trained.add(slot)
        self._forget_trained()

    def _forget_trained(self) -> None:
        while self._draws and len(self._draws[0].trained) == self._draws[0].size:
            self._draws.popleft()
            self._first += 1

    def resume_point(self, current_state: Any) -> tuple[Any, list[list[int]]]:
        """The loader state a resume starts from and the slots it leaves out, per draw from there."""
        if not self._draws:
            return current_state, []
        return self._draws[0].state, [sorted(draw.trained) for draw in self._draws]
