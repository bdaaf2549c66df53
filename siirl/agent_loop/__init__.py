"""verl's agent-loop API (``verl.experimental.agent_loop``) under siiRL's name; see docs/agents.md."""

from siirl.agent_loop.base import (
    AGENT_LOOPS,
    AgentLoopBase,
    AgentLoopOutput,
    GenerationServer,
    TokenOutput,
    register,
)
from siirl.agent_loop.single_turn import SingleTurnAgentLoop

__all__ = [
    "AGENT_LOOPS", "AgentLoopBase", "AgentLoopOutput", "GenerationServer", "SingleTurnAgentLoop", "TokenOutput",
    "register",
]
