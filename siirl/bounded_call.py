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


class _Turns:
    """Calls of one function run one after the other on one thread, each bounded from its own start: a batch
    of score calls costs one hand-off between threads, not one per sample. Stops after an error of a
    ``stop_on`` type (a user error that the remaining calls would only repeat)."""

    def __init__(self, fn: Callable[..., Any], calls: list[tuple[tuple, dict[str, Any]]], stop_on: tuple) -> None:
        self.fn, self.calls, self.stop_on = fn, calls, stop_on
        self.outcomes: list[Outcome] = []
        self.changed = threading.Condition()
        self.started = time.monotonic()
        self.finished = self.abandoned = False

    def run(self) -> None:
        for args, kwargs in self.calls:
            try:
                outcome: Outcome = (self.fn(*args, **kwargs), None)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, which re-raises it
                outcome = (None, exc)
            with self.changed:
                if self.abandoned:
                    return
                self.outcomes.append(outcome)
                self.started = time.monotonic()
                self.changed.notify()
            if isinstance(outcome[1], self.stop_on):
                break
        with self.changed:
            self.finished = True
            self.changed.notify()

    def wait(self, timeout_s: float) -> bool:
        """True once every call has returned; False (and abandoned) as soon as one has run ``timeout_s``."""
        with self.changed:
            while not self.finished:
                left = self.started + timeout_s - time.monotonic()
                if left <= 0:
                    self.abandoned = True
                    return False
                self.changed.wait(left)
            return True


class _Server:
    """One daemon thread running the calls handed to it, one at a time, until told to stop (``None``)."""

    def __init__(self, name: str, on_start: Callable[[], None] | None) -> None:
        self.calls: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, args=(on_start,), name=name, daemon=True)
        self.thread.start()

    def _serve(self, on_start: Callable[[], None] | None) -> None:
        if on_start is not None:
            on_start()
        while (turns := self.calls.get()) is not None:
            turns.run()


def _stop_idle(idle: list[_Server], lock: threading.Lock) -> None:
    with lock:
        servers = list(idle)
        idle.clear()
    for server in servers:
        server.calls.put(None)
    for server in servers:  # joined: at exit a thread still winding down would race the interpreter's teardown
        server.thread.join(1.0)


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
            return [self._skipped()] * len(jobs)
        started = [self._start(_Turns(fn, [(args, kwargs)], ())) for fn, args, kwargs in jobs]
        return [outcome for turns in started for outcome in self._finish(*turns)]

    def call_in_turn(
        self, fn: Callable[..., Any], calls: list[tuple[tuple, dict[str, Any]]], stop_on: tuple = ()
    ) -> list[Outcome]:
        """``fn(*args, **kwargs)`` for each of ``calls``, one after the other on one thread, each bounded by
        ``timeout_s``: an outcome per call made (the calls after an error of a ``stop_on`` type are not made;
        those after a late one fail as skipped)."""
        if self.hung is not None:
            return [self._skipped()] * len(calls)
        return self._finish(*self._start(_Turns(fn, calls, stop_on)))

    def _start(self, turns: _Turns) -> tuple[_Server, _Turns]:
        server = self._server()
        server.calls.put(turns)
        return server, turns

    def _finish(self, server: _Server, turns: _Turns) -> list[Outcome]:
        if turns.wait(self.timeout_s):
            self._release(server)
            return turns.outcomes
        server.calls.put(None)  # abandoned: it exits if the late call ever returns
        self.hung = self.late()
        done = turns.outcomes
        return [*done, (None, self.hung), *[self._skipped()] * (len(turns.calls) - len(done) - 1)]

    def _skipped(self) -> Outcome:
        return None, self.timeout_error(SKIPPED_AFTER_HANG)

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
