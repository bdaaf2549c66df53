"""Tool calls in the policy's text, by chat format (``actor_rollout_ref.rollout.multi_turn.format``).

A parser turns one policy turn into :class:`ToolCall` s. A call that cannot be read (bad JSON, no name)
is kept as a call with an ``error``: the policy gets that error back as a tool turn, as it would from a
real tool, instead of its words being silently dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from siirl.registry import Registry


@dataclass
class ToolCall:
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    #: Why the call could not be read; set = the call is not executed, the error is the tool turn.
    error: str = ""


ToolParser = Callable[[str], list[ToolCall]]
TOOL_PARSERS: Registry[ToolParser] = Registry(
    "tool-call format", open=True, config_keys=("actor_rollout_ref.rollout.multi_turn.format",)
)

_HERMES_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_HERMES_OPEN = "<tool_call>"


def _read_call(body: str) -> ToolCall:
    """``{"name": ..., "arguments": {...}}``; ``arguments`` may also be a JSON string (some models write that)."""
    try:
        call = json.loads(body)
    except json.JSONDecodeError as exc:
        return ToolCall(error=f"the tool call is not valid JSON ({exc.msg} at char {exc.pos})")
    if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
        return ToolCall(error='a tool call must be a JSON object with a "name" string')
    arguments = call.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return ToolCall(call["name"], error=f"the arguments are not valid JSON ({exc.msg})")
    if not isinstance(arguments, dict):
        return ToolCall(call["name"], error='"arguments" must be a JSON object')
    return ToolCall(call["name"], arguments)


@TOOL_PARSERS.register("hermes", "qwen", "qwen25")
def parse_hermes(text: str) -> list[ToolCall]:
    """Qwen / Hermes style: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, any number of them.
    ``qwen`` / ``qwen25`` are SGLang's names of the same format (verl's SGLang-era YAMLs write ``format: qwen``).

    An opening tag left unclosed (the turn ran out of tokens mid-call) counts as one unreadable call.
    """
    calls = [_read_call(body.strip()) for body in _HERMES_CALL.findall(text)]
    if _HERMES_OPEN in _HERMES_CALL.sub("", text):
        calls.append(ToolCall(error="the tool call has no closing </tool_call>"))
    return calls
