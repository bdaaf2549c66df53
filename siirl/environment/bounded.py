"""Calls into user code that may hang (tools, interactions) bounded in time, plain or ``async def``.

Shared by the tool environment and the interactions it runs, so both stop waiting the same way.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

from siirl import user_code


class ToolTimeout(Exception):
    """A tool method ran past ``multi_turn.tool_timeout_s``."""


def _run(fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any], box: dict[str, Any]) -> None:
    try:
        with user_code.running(f"callback {user_code.callable_name(fn)}"):
            value = fn(*args, **kwargs)
            if inspect.isawaitable(value):
                value = asyncio.run(_await(value))
        box["value"] = value
    except BaseException as exc:  # noqa: BLE001 - handed to the caller
        box["error"] = exc


async def _await(awaitable: Any) -> Any:
    return await awaitable


def call_all_bounded(
    jobs: list[tuple[Callable[..., Any], tuple, dict[str, Any]]], timeout_s: float
) -> list[tuple[Any, BaseException | None]]:
    """Run ``fn(*args, **kwargs)`` for every job at once, each on its own daemon thread, and wait at most
    ``timeout_s`` for them; ``(value, None)`` per finished job, ``(None, error)`` per failed or late one.

    Python cannot stop a thread: a late call keeps running on its thread, but nobody waits for it, and a
    daemon thread never keeps the process alive. ``env.timeout_s`` (the whole step) backs this up by
    killing the environment process when even the bounded step overruns.
    """
    boxes: list[dict[str, Any]] = [{} for _ in jobs]
    threads = [
        threading.Thread(target=_run, args=(fn, args, kwargs, box), daemon=True, name="siirl-tool")
        for (fn, args, kwargs), box in zip(jobs, boxes)
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    outcomes: list[tuple[Any, BaseException | None]] = []
    for thread, box in zip(threads, boxes):
        if thread.is_alive():
            outcomes.append((None, ToolTimeout(f"timed out after {timeout_s:g}s")))
        else:
            outcomes.append((box.get("value"), box.get("error")))
    return outcomes


def call_bounded(fn: Callable[..., Any], timeout_s: float, *args: Any, **kwargs: Any) -> Any:
    """One bounded call: its value, or its exception (``ToolTimeout`` when late) raised here."""
    [(value, error)] = call_all_bounded([(fn, args, kwargs)], timeout_s)
    if error is not None:
        raise error
    return value


class StepCalls:
    """The bounded calls of one environment step, so a step waits on hung user code once, not once per call.

    Each call waits at most ``timeout_s``; after one has timed out (``hung``), the step's later calls are
    not run (they raise ``ToolTimeout`` at once), the rule the reward managers follow. ``start_step``
    begins the next step.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.hung: ToolTimeout | None = None

    def start_step(self) -> None:
        self.hung = None

    def call_all(
        self, jobs: list[tuple[Callable[..., Any], tuple, dict[str, Any]]]
    ) -> list[tuple[Any, BaseException | None]]:
        if self.hung is not None:
            return [(None, ToolTimeout("not run: an earlier call of this step hung"))] * len(jobs)
        outcomes = call_all_bounded(jobs, self.timeout_s)
        self.hung = next((e for _, e in outcomes if isinstance(e, ToolTimeout)), None)
        return outcomes

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        [(value, error)] = self.call_all([(fn, args, kwargs)])
        if error is not None:
            raise error
        return value
