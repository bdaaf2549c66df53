"""What a tool is (verl's ``BaseTool`` interface); each of its calls is bounded in time
(:mod:`siirl.environment.bounded`).

A tool serves every trajectory of an environment slot through instances: ``create`` one per trajectory
(with the row's ``tools_kwargs[<name>]["create_kwargs"]``), ``execute`` it for each call the policy makes
(``-> (response, step_reward, metrics)``), read ``calc_reward`` when the trajectory ends, then ``release``
it. Methods may be plain or ``async def`` (tools written for verl keep their coroutines). A response is a
string, or anything with a ``text`` attribute or key (verl's ``ToolResponse``).
"""

from __future__ import annotations

import uuid
from typing import Any


class BaseTool:
    """Subclass and override ``execute`` (and ``create`` / ``calc_reward`` / ``release`` when the tool has
    per-trajectory state). ``config`` is the YAML entry's ``config``; ``tool_schema`` its OpenAI schema."""

    def __init__(self, config: dict[str, Any], tool_schema: dict[str, Any]) -> None:
        self.config = dict(config or {})
        self.tool_schema = tool_schema
        self.name = tool_schema["function"]["name"]

    def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, str]:
        return instance_id or uuid.uuid4().hex, ""

    def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[Any, float, dict]:
        raise NotImplementedError(f"tool {self.name!r} does not implement execute")

    def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    def release(self, instance_id: str, **kwargs: Any) -> None:
        """Nothing to release."""


def response_text(response: Any) -> str:
    """The text of a tool response: a string, ``response.text`` or ``response["text"]`` (None -> "")."""
    if isinstance(response, dict):
        response = response.get("text")
    elif not isinstance(response, str) and hasattr(response, "text"):
        response = response.text
    return "" if response is None else str(response)
