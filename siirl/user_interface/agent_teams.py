"""The built-in two-agent team for the three-number task (``python -m siirl.tasks.three_sum``).

``adder`` sees ``a+b+c=`` and is asked ``a+b=``; ``finisher`` sees the question and the adder's answer
and is asked ``<adder's answer>+c=``, whose answer is the team's. Both are copies of the embedded
two-number adder, trained as separate agents (own weights, optimiser and advantages).

Run: ``dag.custom_pipeline_fn=siirl.user_interface.agent_teams:two_agent_adders`` (per-agent rewards:
each agent is scored on its own addition) or ``...:two_agent_adders_shared`` (both get the team's
final-answer score, MARFT's shared-reward setting).
"""

from __future__ import annotations

import re

from siirl.execution.dag.multi_agent import AgentSpec, multi_agent_pipeline
from siirl.execution.dag.task_graph import TaskGraph
from siirl.params.root import SiirlConfig
from siirl.reward_score.arithmetic import parse_integer

_QUESTION = re.compile(r"(\d+)\+(\d+)\+(\d+)=")
MODULE = "siirl.user_interface.agent_teams"


def _operands(question: str) -> tuple[int, int, int]:
    match = _QUESTION.search(question)
    if match is None:
        raise ValueError(f"expected a question like '1+2+3=', got {question!r}")
    a, b, c = (int(g) for g in match.groups())
    return a, b, c


def adder_prompt(question: str, previous: list[str]) -> str:
    a, b, _ = _operands(question)
    return f"{a}+{b}="


def finisher_prompt(question: str, previous: list[str]) -> str:
    """Adds ``c`` to the adder's answer of this round (the last turn before the finisher's)."""
    _, _, c = _operands(question)
    partial = parse_integer(previous[-1])
    return f"{partial if partial is not None else previous[-1].strip()}+{c}="


def adder_reward(question: str, previous: list[str], output: str, ground_truth: str) -> float:
    a, b, _ = _operands(question)
    return 1.0 if parse_integer(output) == a + b else 0.0


def finisher_reward(question: str, previous: list[str], output: str, ground_truth: str) -> float:
    """Scored on the addition it was given, so it is not blamed for the adder's mistake."""
    _, _, c = _operands(question)
    partial = parse_integer(previous[-1])
    return 1.0 if partial is not None and parse_integer(output) == partial + c else 0.0


AGENTS = [
    AgentSpec("adder", f"{MODULE}:adder_prompt", f"{MODULE}:adder_reward"),
    AgentSpec("finisher", f"{MODULE}:finisher_prompt", f"{MODULE}:finisher_reward"),
]


def two_agent_adders(cfg: SiirlConfig | None = None) -> TaskGraph:
    """Each agent trains with the run's algorithm (estimator, KL terms, critic) on its own rows."""
    return multi_agent_pipeline(AGENTS, reward_mode="per_agent", pipeline_id="two_agent_adders", cfg=cfg)


def two_agent_adders_shared(cfg: SiirlConfig | None = None) -> TaskGraph:
    return multi_agent_pipeline(AGENTS, reward_mode="shared", pipeline_id="two_agent_adders_shared", cfg=cfg)
