"""The built-in ``gsm8k`` tool, registered under verl's and the original siiRL's class paths as well, so
their ``gsm8k_tool_config.yaml`` runs unchanged.

The policy submits an answer (``{"answer": "72"}``); the tool says whether it parses and is right. Step
reward: 0 when the answer scores better than the trajectory's previous submission, else -0.05 (resubmitting
without improving costs a little); ``calc_reward``: the score (1.0 right, 0.0 otherwise) of the last
submission against ``create_kwargs.ground_truth``, with the flexible GSM8K extraction.
"""

from __future__ import annotations

import uuid
from typing import Any

from siirl.environment.tools.base import BaseTool
from siirl.environment.tools.config import TOOLS
from siirl.user_interface.rewards.gsm8k import compute_score

NO_IMPROVEMENT_PENALTY = -0.05


@TOOLS.register(
    "gsm8k",
    "verl.tools.gsm8k_tool.Gsm8kTool",
    "siirl.execution.rollout_flow.multiturn.tools.gsm8k_tool.Gsm8kTool",
)
class Gsm8kTool(BaseTool):
    def __init__(self, config: dict[str, Any], tool_schema: dict[str, Any]) -> None:
        super().__init__(config, tool_schema)
        self._instances: dict[str, dict[str, Any]] = {}

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
        state["answer"] = answer if answer.startswith("#### ") else f"#### {answer}"
        reward = self.calc_reward(instance_id)
        step_reward = 0.0 if reward > state["reward"] else NO_IMPROVEMENT_PENALTY
        state["reward"] = reward
        return f"Current parsed answer={answer!r} reward={reward}", step_reward, {}

    def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        state = self._instances[instance_id]
        if state["ground_truth"] is None:
            return 0.0
        return compute_score(state["answer"], str(state["ground_truth"]), method="flexible")

    def release(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)
