"""Calls into code that may never return, bounded in time: one mechanism for generation, score functions,
tools and interactions.

Python cannot stop a thread. Each call runs on a daemon thread of a small pool while the caller waits at most
the bound; past it the caller gets a timeout error and the thread is abandoned: nobody waits for it, it serves
nothing else, and a daemon thread never keeps the process alive. Threads that return are reused, so a bound
costs a queue hand-off per call, not a thread start (a score function is called once per sample).

After a call has run late, the caller's later calls are not made (they fail at once with
:data:`SKIPPED_AFTER_HANG`) until :meth:`BoundedCalls.start_step`: a step waits on hung code once, not once
per call. A caller that never starts a new step (a rollout engine left mid-call) stays refused.
"""

from __future__ import annotations

import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

#: Why the calls after a hung one fail without running.
SKIPPED_AFTER_HANG = "not run: an earlier call of this step hung"

Job = tuple[Callable[..., Any], tuple, dict[str, Any]]
Outcome = tuple[Any, "BaseException | None"]


class _Call:
    def __init__(self, job: Job) -> None:
        self.job = job
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        fn, args, kwargs = self.job
        try:
            self.value = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, which re-raises it
            self.error = exc
        self.done.set()


class _Server:
    """One daemon thread running the calls handed to it, one at a time, until told to stop (``None``)."""

    def __init__(self, name: str, on_start: Callable[[], None] | None) -> None:
        self.calls: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._serve, args=(on_start,), name=name, daemon=True).start()

    def _serve(self, on_start: Callable[[], None] | None) -> None:
        if on_start is not None:
            on_start()
        while (call := self.calls.get()) is not None:
            call.run()


def _stop_idle(idle: list[_Server], lock: threading.Lock) -> None:
    with lock:
        servers = list(idle)
        idle.clear()
    for server in servers:
        server.calls.put(None)


class BoundedCalls:
    """Calls bounded by ``timeout_s`` each, raising ``timeout_error`` when late.

    ``thread_name`` names the threads (seen in stack dumps); ``on_thread_start`` runs first on each new thread
    (the current accelerator device is per thread, and a new thread starts on device 0)."""

    def __init__(
        self,
        timeout_s: float,
        timeout_error: type[Exception],
        thread_name: str,
        on_thread_start: Callable[[], None] | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.timeout_s, self.timeout_error = float(timeout_s), timeout_error
        self.thread_name, self.on_thread_start = thread_name, on_thread_start
        self.hung: BaseException | None = None
        self._idle: list[_Server] = []
        self._lock = threading.Lock()
        # idle threads end with their owner, closed or not (tool environments come and go)
        weakref.finalize(self, _stop_idle, self._idle, self._lock)

    def start_step(self) -> None:
        """The calls that follow belong to a new step: they run again after a hung one."""
        self.hung = None

    def late(self) -> Exception:
        return self.timeout_error(f"timed out after {self.timeout_s:g}s")

    def call_all(self, jobs: list[Job]) -> list[Outcome]:
        """Run every job at once, each on its own thread, and wait at most ``timeout_s`` for them:
        ``(value, None)`` per finished job, ``(None, error)`` per failed or late one."""
        if self.hung is not None:
            return [(None, self.timeout_error(SKIPPED_AFTER_HANG))] * len(jobs)
        started = [(self._server(), _Call(job)) for job in jobs]
        for server, call in started:
            server.calls.put(call)
        deadline = time.monotonic() + self.timeout_s
        outcomes: list[Outcome] = []
        for server, call in started:
            if call.done.wait(max(0.0, deadline - time.monotonic())):
                self._release(server)
                outcomes.append((call.value, call.error))
            else:
                server.calls.put(None)  # abandoned: it exits if the call ever returns
                self.hung = self.late()
                outcomes.append((None, self.hung))
        return outcomes

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One bounded call: its value, or its exception (``timeout_error`` when late) raised here."""
        [(value, error)] = self.call_all([(fn, args, kwargs)])
        if error is not None:
            raise error
        return value

    def close(self) -> None:
        """Stop the idle threads now (a late call's thread is already on its own)."""
        _stop_idle(self._idle, self._lock)

    def _server(self) -> _Server:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return _Server(self.thread_name, self.on_thread_start)

    def _release(self, server: _Server) -> None:
        with self._lock:
            self._idle.append(server)
