"""One trajectory's interaction, its calls bounded with the tool calls of the same step (``StepCalls``).

The row's ``interaction_kwargs["name"]`` picks the interaction (the preflight checks every row names a
configured one); the kwargs go to each of its calls, as in verl. An interaction that raises or runs late
ends that trajectory's interaction (its turn ends the episode) and is counted (``interaction_errors``,
``interaction_timeouts``); one that fails on every call ends the job (siirl.environment.callback_failures).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from siirl.environment.bounded import StepCalls, ToolTimeout
from siirl.environment.callback_failures import CallbackStats, note_call

logger = logging.getLogger(__name__)

#: Episode counters reported in ``info`` (and by the rollout as ``interaction/<name>`` metrics).
COUNTERS = ("interaction_turns", "interaction_errors", "interaction_timeouts")


class InteractionTurns:
    def __init__(self, interactions: Mapping[str, Any], calls: StepCalls) -> None:
        self.interactions, self.calls = dict(interactions), calls
        self.counts = dict.fromkeys(COUNTERS, 0)
        self.callbacks: CallbackStats = {}
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
        self.counts, self.scores, self.callbacks = dict.fromkeys(COUNTERS, 0), [], {}
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
            created = self.calls.call(interaction.start_interaction, uuid.uuid4().hex, **self._kwargs)
        except Exception as exc:  # noqa: BLE001 - a user interaction may raise anything
            self._failed(interaction, "start_interaction", exc)
            return
        note_call(self.callbacks, self._name(interaction, "start_interaction"))
        self._current, self._instance = interaction, str(created)

    def respond(self, messages: list[dict[str, Any]]) -> tuple[bool, str, float] | None:
        """``(should_terminate, user text, score)`` for the conversation so far; None when the call failed."""
        self.counts["interaction_turns"] += 1
        try:
            outcome = self.calls.call(self._current.generate_response, self._instance, list(messages), **self._kwargs)
            terminate, text, score = bool(outcome[0]), str(outcome[1] or ""), float(outcome[2] or 0.0)
        except Exception as exc:  # noqa: BLE001 - a user interaction may raise anything
            self._failed(self._current, "generate_response", exc)
            self.finalize()
            return None
        note_call(self.callbacks, self._name(self._current, "generate_response"))
        self.scores.append(score)
        return terminate, text, score

    def finalize(self) -> None:
        """Close the trajectory's interaction; not called while one of its calls of this step still runs."""
        if self._current is None:
            return
        interaction, self._current = self._current, None
        if self.calls.hung is not None:
            return
        try:
            self.calls.call(interaction.finalize_interaction, self._instance, **self._kwargs)
        except Exception as exc:  # noqa: BLE001 - closing must not end the episode
            logger.warning("interaction %r: finalize_interaction failed: %s: %s", interaction.name, type(exc).__name__, exc)

    def _name(self, interaction: Any, method: str) -> str:
        cls = type(interaction)
        return f"interaction {self._kwargs.get('name')!r} ({cls.__module__}.{cls.__qualname__}.{method})"

    def _failed(self, interaction: Any, method: str, exc: BaseException) -> None:
        """Counted and reported to the failure rule (which logs the first), never raised."""
        timed_out = isinstance(exc, ToolTimeout)
        self.counts["interaction_timeouts" if timed_out else "interaction_errors"] += 1
        detail = f"{type(exc).__name__}: {exc}"
        note_call(self.callbacks, self._name(interaction, method), detail)
