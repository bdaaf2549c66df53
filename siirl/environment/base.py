"""The environment contract: ``reset`` and ``step`` returning one :class:`StepResult`.

An environment is anything the policy acts on between generations: a tool, a text game, a simulator.
Observations are text (rendered into the conversation) or tensors / arrays (for vision policies); the
reward of every step is reported so that rollouts can keep per-turn and per-trajectory rewards, and
``info`` carries ``success`` (the task was solved) and ``progress`` (how far it got, in [0, 1]) when the
environment knows them. Environments are plain synchronous objects; :mod:`siirl.environment.vector`
runs many of them in worker processes and exposes an asynchronous ``step_async`` / ``step_wait`` pair.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

Observation = Any  # str for text environments; a tensor / array / dict of arrays otherwise


@dataclass
class StepResult:
    """What ``reset`` and ``step`` return."""

    observation: Observation
    reward: float = 0.0
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def success(self) -> bool:
        return bool(self.info.get("success", False))

    @property
    def failed(self) -> bool:
        """The environment itself broke (timeout, crash, bad action): not the policy's fault alone."""
        return "error" in self.info


@runtime_checkable
class Env(Protocol):
    """One episode at a time. ``task`` is the dataset row's fields (prompt text, ground truth, index)."""

    def reset(self, task: Mapping[str, Any], seed: int | None = None) -> StepResult: ...

    def step(self, action: Any) -> StepResult: ...

    def close(self) -> None: ...


def failed_result(error: str) -> StepResult:
    """The result standing in for an environment that timed out or raised: the episode ends, reward 0."""
    return StepResult(observation="", reward=0.0, done=True, info={"error": error, "success": False})
