"""A process pool that enforces a per-call timeout by killing the worker that runs a stuck call.

``concurrent.futures`` cannot cancel a running call, so a hanging reward function would block a step
forever and leak its worker. Here every worker reports ``(call token, pid)`` when it starts a call; the
parent times each call from that moment, SIGKILLs the worker of a call that overruns, replaces the
(then broken) executor and resubmits the calls that were merely interrupted. Calls that raise come back
as failures instead of exceptions. This module imports no torch so that spawned workers start fast.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from siirl.bounded_call import SKIPPED_AFTER_HANG

_POLL_S = 0.02
_MAX_FAILED_STARTS = 2  # rounds in a row in which workers died before starting any call

_start_queue: Any = None


@dataclass
class CallOutcome:
    """Result of one call: ``ok`` with ``value``, or a failure with a one-line ``error`` of a ``kind``:
    ``errors`` (the call raised), ``timeouts`` or ``crashes`` (its worker process died)."""

    ok: bool
    value: Any = None
    error: str = ""
    kind: str = "errors"


def _init_worker(start_queue: Any) -> None:
    global _start_queue
    _start_queue = start_queue


def _run_call(token: tuple[int, int], fn: Callable[..., Any], args: tuple) -> tuple[bool, Any]:
    _start_queue.put((token, os.getpid()))
    try:
        return True, fn(*args)
    except Exception as exc:  # noqa: BLE001 - any user error becomes a failed outcome, never a dead pool
        return False, f"{type(exc).__name__}: {exc}"


class TimeoutProcessPool:
    """Runs ``fn(*args)`` for many argument tuples in worker processes, each call limited to ``timeout_s``.

    Reusable across calls of :meth:`map`. :meth:`close` stops the workers; so does dropping the pool
    (the executor's management thread exits once the executor is garbage collected).
    """

    def __init__(self, num_workers: int, timeout_s: float, mp_context: str = "spawn"):
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if mp_context not in ("spawn", "forkserver"):
            raise ValueError(
                f"mp_context must be 'spawn' or 'forkserver' (fork is unsafe here), got {mp_context!r}"
            )
        self.num_workers = num_workers
        self.timeout_s = timeout_s
        self._ctx = multiprocessing.get_context(mp_context)
        self._executor: ProcessPoolExecutor | None = None
        self._queue: Any = None
        self._round = 0

    def _ensure_executor(self) -> ProcessPoolExecutor:
        if self._executor is None:
            # Synchronous puts (no feeder thread): a call's start is recorded even if it crashes the worker
            # at once. A fresh queue per executor: a killed worker cannot leave a half-written message.
            self._queue = self._ctx.SimpleQueue()
            self._executor = ProcessPoolExecutor(
                self.num_workers, mp_context=self._ctx, initializer=_init_worker, initargs=(self._queue,)
            )
        return self._executor

    def _discard_executor(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
        if self._queue is not None:
            self._queue.close()
            self._queue = None

    def close(self) -> None:
        """Stop all workers; the pool starts new ones if used again."""
        self._discard_executor()

    def map(self, fn: Callable[..., Any], arg_tuples: Sequence[tuple]) -> list[CallOutcome]:
        """One outcome per argument tuple, in order; never raises for failures of ``fn`` itself.

        When a worker dies by itself (segfault, ``os._exit``) and several calls were running, each of
        them becomes a suspect and is re-run alone, so the blame lands on the call that really crashed.
        """
        outcomes: list[CallOutcome | None] = [None] * len(arg_tuples)
        suspects: set[int] = set()
        failed_starts = 0
        while pending := [i for i, o in enumerate(outcomes) if o is None]:
            isolated = sorted(suspects.intersection(pending))[:1]
            self._round += 1
            started, broken, killed = self._run_round(fn, arg_tuples, isolated or pending, outcomes)
            if killed:  # a call hung: the rest of the step scores 0 rather than each waiting timeout_s
                for i in pending:
                    outcomes[i] = outcomes[i] or CallOutcome(False, error=SKIPPED_AFTER_HANG, kind="timeouts")
                break
            if not broken:
                continue
            running = [i for i in started if outcomes[i] is None]
            failed_starts = 0 if started else failed_starts + 1
            if len(running) == 1:
                outcomes[running[0]] = CallOutcome(
                    False, error="worker process died while running the call", kind="crashes"
                )
            suspects.update(running)
            if failed_starts >= _MAX_FAILED_STARTS:
                for i in pending:
                    outcomes[i] = outcomes[i] or CallOutcome(
                        False, error="worker processes failed to start", kind="crashes"
                    )
        return [o for o in outcomes if o is not None]

    def _run_round(
        self, fn: Callable[..., Any], arg_tuples: Sequence[tuple], indices: list[int], outcomes: list
    ) -> tuple[dict[int, tuple[int, float]], bool, bool]:
        """Submit the calls ``indices`` and collect them until all finish or the executor breaks.

        Returns the calls that started (index -> (pid, start time)), whether the executor broke, and
        whether that was our timeout kill (interrupted calls are then retried without blame).
        """
        executor = self._ensure_executor()
        try:
            futures = {i: executor.submit(_run_call, (self._round, i), fn, arg_tuples[i]) for i in indices}
        except BrokenProcessPool:
            # A worker died after the last round had collected its result: nothing of this round ran.
            self._discard_executor()
            return {}, True, False
        started: dict[int, tuple[int, float]] = {}
        broken = killed = False
        not_done = set(futures.values())
        while not_done and not broken:
            _, not_done = wait(not_done, timeout=_POLL_S, return_when=FIRST_COMPLETED)
            self._drain_starts(started)
            broken = self._record_finished(futures, outcomes)
            now = time.monotonic()
            for i, (pid, t0) in started.items():
                if outcomes[i] is None and not futures[i].done() and now - t0 > self.timeout_s:
                    outcomes[i] = CallOutcome(False, error=f"timed out after {self.timeout_s:g}s", kind="timeouts")
                    _kill(pid)
                    broken = killed = True
        if broken:
            self._record_finished(futures, outcomes)
            # Interrupted calls' workers die with the executor anyway; SIGKILL them so that a call
            # ignoring SIGTERM cannot stall the shutdown.
            for i, (pid, _) in started.items():
                if outcomes[i] is None:
                    _kill(pid)
            self._discard_executor()
        return started, broken, killed

    @staticmethod
    def _record_finished(futures: dict[int, Future], outcomes: list) -> bool:
        """Store outcomes of finished futures; True when some future only says the executor broke."""
        broken = False
        for i, future in futures.items():
            if outcomes[i] is not None or not future.done():
                continue
            exc = future.exception()
            if isinstance(exc, BrokenProcessPool):
                broken = True
            elif exc is not None:
                outcomes[i] = CallOutcome(False, error=f"{type(exc).__name__}: {exc}")
            else:
                ok, value = future.result()
                outcomes[i] = CallOutcome(True, value) if ok else CallOutcome(False, error=value)
        return broken

    def _drain_starts(self, started: dict[int, tuple[int, float]]) -> None:
        while not self._queue.empty():
            (round_id, i), pid = self._queue.get()
            if round_id == self._round:
                started[i] = (pid, time.monotonic())


def _kill(pid: int) -> None:
    try:
        os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))
    except ProcessLookupError:
        pass
