"""Tools the policy calls to submit an answer and hear whether it is right (verl's gsm8k and geo3k tools).

One instance per trajectory keeps the last submission and its score. Step reward: 0 when a submission scores
better than the trajectory's previous one, else -0.05 (resubmitting without improving costs a little);
``calc_reward``: the score of the last submission against ``create_kwargs.ground_truth``.
"""

from __future__ import annotations

import uuid
from typing import Any

from siirl.environment.tools.base import BaseTool

NO_IMPROVEMENT_PENALTY = -0.05


class AnswerTool(BaseTool):
    """Subclasses say how a submission is stored (``stored_answer``) and scored (``score``)."""

    def __init__(self, config: dict[str, Any], tool_schema: dict[str, Any]) -> None:
        super().__init__(config, tool_schema)
        self._instances: dict[str, dict[str, Any]] = {}

    def stored_answer(self, answer: str) -> str:
        return answer

    def score(self, answer: str, ground_truth: str) -> float:
        raise NotImplementedError(f"tool {self.name!r} does not implement score")

    def create(
        self, instance_id: str | None = None, ground_truth: Any = None, **kwargs: Any
    ) -> tuple[str, str]:
        instance_id = instance_id or uuid.uuid4().hex
        if ground_truth is None:  # verl's agent loop passes create_kwargs={...} as one keyword
            ground_truth = (kwargs.get("create_kwargs") or {}).get("ground_truth")
        self._instances[instance_id] = {"answer": "", "ground_truth": ground_truth, "reward": 0.0}
        return instance_id, ""

    def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[str, float, dict]:
        answer = str(parameters.get("answer", ""))
        state = self._instances[instance_id]
        state["answer"] = self.stored_answer(answer)
        reward = self.calc_reward(instance_id)
        step_reward = 0.0 if reward > state["reward"] else NO_IMPROVEMENT_PENALTY
        state["reward"] = reward
        return f"Current parsed answer={answer!r} reward={reward}", step_reward, {}

    def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        state = self._instances[instance_id]
        if state["ground_truth"] is None:
            return 0.0
        return self.score(state["answer"], str(state["ground_truth"]))

    def release(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)
