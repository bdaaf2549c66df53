"""One trajectory's interaction, every call bounded like a tool call (``multi_turn.tool_timeout_s``).

The row's ``interaction_kwargs["name"]`` picks the interaction (the preflight checks every row names a
configured one); the kwargs go to each of its calls, as in verl. An interaction that raises or runs late
ends that trajectory's interaction (its turn ends the episode) and is counted (``interaction_errors``);
it never ends the job.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from siirl.environment.bounded import call_bounded

logger = logging.getLogger(__name__)

#: Episode counters reported in ``info`` (and by the rollout as ``interaction/<name>`` metrics).
COUNTERS = ("interaction_turns", "interaction_errors")


class InteractionTurns:
    def __init__(self, interactions: Mapping[str, Any], timeout_s: float) -> None:
        self.interactions, self.timeout_s = dict(interactions), timeout_s
        self.counts = dict.fromkeys(COUNTERS, 0)
        self.scores: list[float] = []
        self._current: Any = None
        self._instance = ""
        self._kwargs: dict[str, Any] = {}

    @property
    def configured(self) -> bool:
        return bool(self.interactions)

    @property
    def active(self) -> bool:
        return self._current is not None

    def start(self, interaction_kwargs: Mapping[str, Any] | None) -> None:
        """Open the row's interaction (none configured: nothing to do)."""
        self.finalize()
        self.counts, self.scores = dict.fromkeys(COUNTERS, 0), []
        if not self.configured:
            return
        self._kwargs = dict(interaction_kwargs or {})
        name = self._kwargs.get("name")
        if name not in self.interactions:
            raise ValueError(
                f"a row's extra_info.interaction_kwargs names interaction {name!r}; configured: {sorted(self.interactions)}"
            )
        interaction = self.interactions[name]
        try:
            created = call_bounded(interaction.start_interaction, self.timeout_s, uuid.uuid4().hex, **self._kwargs)
        except Exception as exc:  # noqa: BLE001 - a user interaction may raise anything
            self._failed("start_interaction", exc)
            return
        self._current, self._instance = interaction, str(created)

    def respond(self, messages: list[dict[str, Any]]) -> tuple[bool, str, float] | None:
        """``(should_terminate, user text, score)`` for the conversation so far; None when the call failed."""
        self.counts["interaction_turns"] += 1
        try:
            outcome = call_bounded(
                self._current.generate_response, self.timeout_s, self._instance, list(messages), **self._kwargs
            )
            terminate, text, score = bool(outcome[0]), str(outcome[1] or ""), float(outcome[2] or 0.0)
        except Exception as exc:  # noqa: BLE001 - a user interaction may raise anything
            self._failed("generate_response", exc)
            self.finalize()
            return None
        self.scores.append(score)
        return terminate, text, score

    def finalize(self) -> None:
        if self._current is None:
            return
        interaction, self._current = self._current, None
        try:
            call_bounded(interaction.finalize_interaction, self.timeout_s, self._instance, **self._kwargs)
        except Exception as exc:  # noqa: BLE001 - closing must not end the episode
            logger.warning("interaction %r: finalize_interaction failed: %s: %s", interaction.name, type(exc).__name__, exc)

    def _failed(self, method: str, exc: BaseException) -> None:
        self.counts["interaction_errors"] += 1
        logger.warning("interaction %r: %s failed: %s: %s", self._kwargs.get("name"), method, type(exc).__name__, exc)
