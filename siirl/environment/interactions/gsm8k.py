"""The built-in ``gsm8k`` interaction, registered under verl's and the original siiRL's class paths as well,
so their ``gsm8k_interaction_config.yaml`` runs unchanged.

The user checks the policy's last answer against ``interaction_kwargs.ground_truth`` with the flexible
GSM8K extraction (the last number; ``#### 42`` reads as 42), as the built-in gsm8k tool does: verl's strict
one would score every answer without ``####`` 0, so a policy that has not learnt that format would never
hear "correct". Right: "correct", score 1, the episode ends. Wrong: another try, score 0, it goes on.
"""

from __future__ import annotations

import uuid
from typing import Any

from siirl.environment.interactions.base import BaseInteraction
from siirl.environment.interactions.config import INTERACTIONS
from siirl.reward_score.gsm8k import compute_score

CORRECT = "Your response is correct!"
RETRY = "Your response is incorrect! You need to reflect on your answer and try again."


@INTERACTIONS.register(
    "gsm8k",
    "verl.interactions.gsm8k_interaction.Gsm8kInteraction",
    "siirl.execution.rollout_flow.multiturn.interactions.gsm8k_interaction.Gsm8kInteraction",
)
class Gsm8kInteraction(BaseInteraction):
    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        self._instances: dict[str, dict[str, Any]] = {}

    def start_interaction(self, instance_id: str | None = None, ground_truth: Any = None, **kwargs: Any) -> str:
        instance_id = instance_id or uuid.uuid4().hex
        self._instances[instance_id] = {"response": "", "ground_truth": ground_truth}
        return instance_id

    def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> tuple[bool, str, float, dict[str, Any]]:
        answers = [m.get("content") or "" for m in messages if m.get("role") == "assistant"]
        self._instances[instance_id]["response"] = answers[-1] if answers else ""
        score = self.calculate_score(instance_id)
        return score == 1.0, CORRECT if score == 1.0 else RETRY, score, {}

    def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
        state = self._instances[instance_id]
        if state["ground_truth"] is None:
            return 0.0
        return compute_score(str(state["response"]), str(state["ground_truth"]), method="flexible")

    def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)
