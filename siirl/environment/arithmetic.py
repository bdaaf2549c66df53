"""``arith_chain``: a multi-step running-sum task the embedded tiny model can act in, on any CPU.

Each step shows one addition as text, e.g. ``"23+41="``; the action is the policy's answer. The next
step adds a fresh addend to the true running sum (``"64+17="``), whatever the policy answered, so every
episode lasts exactly ``steps`` turns and all samples of one task see the same problems. A step's reward
is 1 for a correct answer; the episode succeeds when every answer was right, and ``progress`` is the
fraction answered correctly. Operands stay within the addition task the model was warmed up on (sums
never exceed ``max_operand``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

from siirl.environment.base import StepResult
from siirl.environment.registry import register_env
from siirl.errors import ConfigError

_PROBLEM = re.compile(r"(\d+)\s*\+\s*(\d+)\s*=")
_ANSWER = re.compile(r"-?\d+")


def parse_answer(action: Any) -> int | None:
    """The first integer in the policy's text, or None."""
    match = _ANSWER.search(str(action))
    return int(match.group()) if match else None


@register_env("arith_chain")
class ArithmeticChainEnv:
    """``steps`` additions in a row; the first is the task prompt's ``a+b=`` when its sum is in range,
    else drawn from the seed (operands up to ``max_operand // 2``)."""

    @staticmethod
    def preflight(steps: int = 2, max_operand: int = 99, **_kwargs: Any) -> None:
        """Before Ray starts (``env.kwargs``): at least one step, operands from 1 up."""
        for key, value in (("steps", steps), ("max_operand", max_operand)):
            if value < 1:
                raise ConfigError(f"bad config: env.kwargs.{key}={value} must be >= 1 (env.name=arith_chain)")

    def __init__(self, steps: int = 2, max_operand: int = 99, fail_fast: bool = False) -> None:
        self.steps, self.max_operand, self.fail_fast = steps, max_operand, fail_fast
        self._rng = random.Random(0)
        self._total = 0
        self._turn = 0
        self._correct = 0

    def _first_problem(self, task: Mapping[str, Any]) -> tuple[int, int]:
        match = _PROBLEM.search(str(task.get("prompt_text", "")))
        if match and int(match.group(1)) + int(match.group(2)) <= self.max_operand:
            return int(match.group(1)), int(match.group(2))
        half = self.max_operand // 2
        return self._rng.randint(0, half), self._rng.randint(0, half)

    def _observation(self, left: int, right: int) -> str:
        return f"{left}+{right}="

    def reset(self, task: Mapping[str, Any], seed: int | None = None) -> StepResult:
        self._rng = random.Random(seed)
        a, b = self._first_problem(task)
        self._total, self._turn, self._correct = a + b, 0, 0
        return StepResult(self._observation(a, b), info={"target": self._total})

    def step(self, action: Any) -> StepResult:
        correct = parse_answer(action) == self._total
        self._turn += 1
        self._correct += int(correct)
        done = self._turn >= self.steps or (self.fail_fast and not correct)
        info = {
            "success": done and self._correct == self.steps,
            "progress": self._correct / self.steps,
            "correct": correct,
        }
        if done:
            return StepResult("", reward=float(correct), done=True, info=info)
        addend = self._rng.randint(0, max(0, self.max_operand - self._total))
        observation = self._observation(self._total, addend)
        self._total += addend
        info["target"] = self._total
        return StepResult(observation, reward=float(correct), done=False, info=info)

    def close(self) -> None:
        """Nothing to release."""
