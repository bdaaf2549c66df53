"""Tool-calling multi-turn rollouts: verl's tool YAML, its ``BaseTool`` interface, chat-format parsers,
and :class:`ToolEnv`, which plays the tools as the multi-turn rollout's environment."""

from siirl.agent_loop.tool_parser import TOOL_PARSERS, ToolCall, parse_hermes
from siirl.environment.bounded import ToolTimeout, call_all_bounded, call_bounded
from siirl.environment.tools import geo3k, gsm8k, search  # noqa: F401 - registers the built-in tools
from siirl.environment.tools.base import BaseTool, response_text
from siirl.environment.tools.config import TOOLS, ToolSpec, build_tools, check_tool_classes, load_tool_config
from siirl.environment.tools.env import ToolEnv, truncate

__all__ = [
    "TOOLS",
    "TOOL_PARSERS",
    "BaseTool",
    "ToolCall",
    "ToolEnv",
    "ToolSpec",
    "ToolTimeout",
    "build_tools",
    "call_all_bounded",
    "call_bounded",
    "check_tool_classes",
    "load_tool_config",
    "parse_hermes",
    "response_text",
    "truncate",
]
