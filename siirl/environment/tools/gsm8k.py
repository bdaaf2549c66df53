"""The built-in ``gsm8k`` tool, registered under verl's and the original siiRL's class paths as well, so
their ``gsm8k_tool_config.yaml`` runs unchanged.

The policy submits an answer (``{"answer": "72"}``); the tool says whether it parses and is right (1.0 right,
0.0 otherwise, with the flexible GSM8K extraction). Step reward and ``calc_reward``: see
:mod:`siirl.environment.tools.answer_tool`.
"""

from __future__ import annotations

from siirl.environment.tools.answer_tool import AnswerTool
from siirl.environment.tools.config import TOOLS
from siirl.reward_score.gsm8k import compute_score


@TOOLS.register(
    "gsm8k",
    "verl.tools.gsm8k_tool.Gsm8kTool",
    "siirl.execution.rollout_flow.multiturn.tools.gsm8k_tool.Gsm8kTool",
)
class Gsm8kTool(AnswerTool):
    def stored_answer(self, answer: str) -> str:
        return answer if answer.startswith("#### ") else f"#### {answer}"

    def score(self, answer: str, ground_truth: str) -> float:
        return compute_score(answer, ground_truth, method="flexible")
