"""The environments of one request step at once, each slot on its own long-lived thread.

Concurrent, so a request of many slots costs about its slowest call, not their sum (a tool that hangs
in every trajectory costs a turn one ``tool_timeout_s``). One thread per slot for the slot's whole life,
so an environment is created, stepped and closed on one thread (simulators with thread-bound GL contexts
need that). A slot whose call never returns keeps its thread busy; the caller stops waiting for it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

#: ``answer(slot, ok, value or error text)``, called on the slot's thread when its call ends.
Answer = Callable[[int, bool, Any], None]


def _serve(slot: int, jobs: queue.SimpleQueue) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        fn, answer = job
        try:
            value, ok = fn(), True
        except Exception as exc:  # noqa: BLE001 - a user environment may raise anything
            value, ok = f"{type(exc).__name__}: {exc}", False
        answer(slot, ok, value)


class SlotThreads:
    def __init__(self) -> None:
        self._jobs: dict[int, queue.SimpleQueue] = {}

    def submit(self, slot: int, fn: Callable[[], Any], answer: Answer) -> None:
        """Run ``fn()`` on ``slot``'s thread, after the slot's earlier calls."""
        if slot not in self._jobs:
            self._jobs[slot] = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(slot, self._jobs[slot]), daemon=True, name=f"siirl-env-{slot}").start()
        self._jobs[slot].put((fn, answer))

    def run_all(self, calls: dict[int, Callable[[], Any]]) -> dict[int, tuple[bool, Any]]:
        """Run every slot's call at once and wait for all of them (for callers that cannot time out)."""
        done: dict[int, tuple[bool, Any]] = {}
        finished = threading.Semaphore(0)

        def answer(slot: int, ok: bool, value: Any) -> None:
            done[slot] = (ok, value)
            finished.release()

        for slot, fn in calls.items():
            self.submit(slot, fn, answer)
        for _ in calls:
            finished.acquire()
        return done

    def close(self) -> None:
        """Let every slot thread end once its current call returns."""
        for jobs in self._jobs.values():
            jobs.put(None)
        self._jobs.clear()
