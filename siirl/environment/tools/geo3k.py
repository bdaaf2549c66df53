"""The built-in ``geo3k`` tool, registered under verl's and the original siiRL's class paths as well, so
their ``geo3k_tool_config.yaml`` runs unchanged.

The policy submits its answer to a Geometry3K problem (``{"answer": "12"}``, no box); the score is siiRL's
geo3k scorer on that bare answer with no format bonus (1.0 right, 0.0 otherwise), as verl's tool scores it.
Step reward and ``calc_reward``: see :mod:`siirl.environment.tools.answer_tool`.
"""

from __future__ import annotations

from siirl.environment.tools.answer_tool import AnswerTool
from siirl.environment.tools.config import TOOLS
from siirl.reward_score.geo3k import compute_score


@TOOLS.register(
    "geo3k",
    "verl.tools.geo3k_tool.Geo3kTool",
    "siirl.execution.rollout_flow.multiturn.tools.geo3k_tool.Geo3kTool",
)
class Geo3kTool(AnswerTool):
    def score(self, answer: str, ground_truth: str) -> float:
        return compute_score(answer, ground_truth, format_weight=0.0, use_boxed=False)
