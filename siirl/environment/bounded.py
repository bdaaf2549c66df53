"""Calls into user code that may hang (tools, interactions) bounded in time, plain or ``async def``.

Shared by the tool environment and the interactions it runs, so both stop waiting the same way: each call is a
:class:`siirl.bounded_call.BoundedCalls` call, marked as running user code and awaited when it is a coroutine.
``env.timeout_s`` (the whole step) backs the bound up by killing the environment process when even the bounded
step overruns.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from siirl import user_code
from siirl.bounded_call import BoundedCalls, Job, Outcome


class ToolTimeout(Exception):
    """A tool method ran past ``multi_turn.tool_timeout_s``."""


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _as_user_code(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        with user_code.running(f"callback {user_code.callable_name(fn)}"):
            value = fn(*args, **kwargs)
            return asyncio.run(_await(value)) if inspect.isawaitable(value) else value

    return run


class StepCalls(BoundedCalls):
    """The bounded calls of one environment step, so a step waits on hung user code once, not once per call.

    Each call waits at most ``timeout_s``; after one has timed out, the step's later calls are not run (they
    raise ``ToolTimeout`` at once), the rule the reward managers follow. ``start_step`` begins the next step.
    """

    def __init__(self, timeout_s: float) -> None:
        super().__init__(timeout_s, ToolTimeout, "siirl-tool")

    def call_all(self, jobs: list[Job]) -> list[Outcome]:
        return super().call_all([(_as_user_code(fn), args, kwargs) for fn, args, kwargs in jobs])


def call_all_bounded(jobs: list[Job], timeout_s: float) -> list[Outcome]:
    """Run every job at once and wait at most ``timeout_s`` for them (one step of its own)."""
    calls = StepCalls(timeout_s)
    try:
        return calls.call_all(jobs)
    finally:
        calls.close()


def call_bounded(fn: Callable[..., Any], timeout_s: float, *args: Any, **kwargs: Any) -> Any:
    """One bounded call: its value, or its exception (``ToolTimeout`` when late) raised here."""
    [(value, error)] = call_all_bounded([(fn, args, kwargs)], timeout_s)
    if error is not None:
        raise error
    return value
