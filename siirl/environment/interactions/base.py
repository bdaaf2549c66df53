"""What an interaction is (verl's ``BaseInteraction`` interface): the simulated user of a multi-turn rollout.

When the policy ends a turn without calling a tool, the interaction reads the conversation and answers as
the user: ``generate_response(instance_id, messages, **interaction_kwargs)`` returns
``(should_terminate, response_text, score, metrics)``. ``start_interaction`` opens one instance per
trajectory (with the row's ``extra_info.interaction_kwargs``), ``finalize_interaction`` closes it.
Methods may be plain or ``async def`` (interactions written for verl keep their coroutines).
"""

from __future__ import annotations

import uuid
from typing import Any


class BaseInteraction:
    """Subclass and override ``generate_response`` (and ``start_interaction`` / ``finalize_interaction``
    when the interaction keeps per-trajectory state). ``config`` is the YAML entry's ``config`` plus its
    ``name``."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = dict(config or {})
        self.name = self.config.get("name", type(self).__name__)

    def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        return instance_id or uuid.uuid4().hex

    def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> tuple[bool, str, float, dict[str, Any]]:
        raise NotImplementedError(f"interaction {self.name!r} does not implement generate_response")

    def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        """Nothing to close."""
