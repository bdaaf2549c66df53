"""Bounded in-process reward calls and the failure counts every manager reports.

``BoundedCaller`` runs a score function on a daemon thread and stops waiting after ``timeout_s``. Python
cannot stop a thread, so a call that never returns keeps its thread, but nobody waits for it: the caller
gets a timeout (the sample scores 0), the next call runs on a fresh thread, and a daemon thread never
keeps the process alive at exit. Use the ``parallel`` manager when a stuck call must also be killed.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from siirl.errors import RewardFunctionError

logger = logging.getLogger(__name__)

#: Failure kinds every manager reports as ``reward/<kind>`` metrics (fixed keys: ranks all-reduce them):
#: calls that ran past ``timeout_s``, raised, killed their process (``parallel``), returned NaN/inf (scored
#: 0) or returned a score beyond ``MAX_ABS_SCORE`` (clipped to it).
FAILURE_KINDS = ("timeouts", "errors", "crashes", "nonfinite", "clipped")
#: Kinds that mean the function itself is broken when no call has ever avoided them (hangs never end a job).
BROKEN_KINDS = ("errors", "crashes", "nonfinite")
#: The documented bound on one score: larger magnitudes are clipped and counted, never trained on as is.
MAX_ABS_SCORE = 1e4


class RewardTimeout(Exception):
    """A score-function call ran past the manager's ``timeout_s``."""


class FailureLog:
    """Counts failed reward calls by kind and logs the first of each kind (later ones only count).

    One rule in every manager: a call that fails sometimes scores 0 and is counted; a function whose every
    call so far has failed (raised, crashed or returned NaN) is a user error, raised with its first failure
    once a whole step has failed (:meth:`end_step`)."""

    def __init__(self, owner: str, log: logging.Logger = logger) -> None:
        self.owner, self.log = owner, log
        self.counts = dict.fromkeys(FAILURE_KINDS, 0)
        self._logged: set[str] = set()
        self._ever_scored = False
        self._first_failure: str | None = None
        self._at_start = dict(self.counts)

    def record(self, kind: str, detail: str, samples: int = 1, outcome: str = "scored 0") -> None:
        """``samples`` failed for one reason (``kind`` is one of ``FAILURE_KINDS``)."""
        self.counts[kind] += samples
        if kind in BROKEN_KINDS and self._first_failure is None:
            self._first_failure = detail
        if kind not in self._logged:
            self._logged.add(kind)
            self.log.warning(
                "%s: %s; %s (further %s are counted in the reward/%s metric, not logged)",
                self.owner,
                detail,
                outcome,
                kind,
                kind,
            )

    def start_step(self) -> None:
        """A batch is about to be scored: its failures are counted from here for :meth:`end_step`."""
        self._at_start = dict(self.counts)

    def end_step(self, samples: int, function: str) -> None:
        """After a batch of ``samples`` was scored: raise if the function has never produced a score."""
        failed = {kind: self.counts[kind] - self._at_start.get(kind, 0) for kind in FAILURE_KINDS}
        broken = sum(failed[kind] for kind in BROKEN_KINDS)
        if samples - broken - failed["timeouts"] > 0:
            self._ever_scored = True
        elif samples and broken >= samples and not self._ever_scored:
            raise RewardFunctionError(
                f"reward function {function} failed on every call ({samples} samples); the first: "
                f"{self._first_failure}"
            )

    def pop_metrics(self) -> dict[str, float]:
        """``reward/<kind>`` counts since the last call, then reset."""
        metrics = {f"reward/{kind}": float(n) for kind, n in self.counts.items()}
        self.counts = dict.fromkeys(FAILURE_KINDS, 0)
        return metrics


class _Job:
    """Calls of one function run one after the other on the serving thread, so a batch of samples costs one
    hand-off between threads instead of one per sample. ``outcomes`` gets ``(value, error)`` per finished call;
    ``started`` is when the running call began (the caller's deadline is ``started + timeout_s``)."""

    def __init__(
        self, fn: Callable[..., Any], calls: list[tuple[tuple, dict[str, Any]]], stop_on: tuple
    ) -> None:
        self.fn, self.calls, self.stop_on = fn, calls, stop_on
        self.outcomes: list[tuple[Any, BaseException | None]] = []
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.abandoned = False
        self.done = threading.Event()

    def run(self) -> None:
        for args, kwargs in self.calls:
            try:
                outcome: tuple[Any, BaseException | None] = (self.fn(*args, **kwargs), None)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, which re-raises it
                outcome = (None, exc)
            with self.lock:
                if self.abandoned:
                    return
                self.outcomes.append(outcome)
                self.started = time.monotonic()
            if isinstance(outcome[1], self.stop_on):
                break
        self.done.set()


def _serve(jobs: queue.SimpleQueue) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        job.run()


#: Why the calls after a hung one score 0 without running.
SKIPPED_AFTER_HANG = "not run: an earlier call of this step hung"


class BoundedCaller:
    """``call(fn, *args, **kwargs)`` returns fn's value, re-raises its exception, or raises
    ``RewardTimeout`` after ``timeout_s``.

    A step costs at most ``timeout_s`` of waiting on a stuck function, not ``timeout_s`` per sample: once a
    call of the step (see :meth:`start_step`) has timed out, its later calls raise ``RewardTimeout`` at once."""

    def __init__(self, timeout_s: float) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.timeout_s = timeout_s
        self._jobs: queue.SimpleQueue | None = None
        self._hung = False

    def start_step(self) -> None:
        """The calls that follow belong to a new step (a new batch): they run again."""
        self._hung = False

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        value, error = self.call_many(fn, [(args, kwargs)])[0]
        if error is not None:
            raise error
        return value

    def call_many(
        self, fn: Callable[..., Any], calls: list[tuple[tuple, dict[str, Any]]], stop_on: tuple = ()
    ) -> list[tuple[Any, BaseException | None]]:
        """``(value, error)`` of ``fn(*args, **kwargs)`` for each call, in order, every call bounded by
        ``timeout_s`` as with :meth:`call`: the one that runs past it gets a ``RewardTimeout`` and the rest
        are skipped (``RewardTimeout`` too). An error of a type in ``stop_on`` ends the list after it."""
        if self._hung:
            return [(None, RewardTimeout(SKIPPED_AFTER_HANG)) for _ in calls]
        if self._jobs is None:
            self._jobs = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(self._jobs,), name="siirl-reward", daemon=True).start()
        job = _Job(fn, calls, stop_on)
        self._jobs.put(job)
        while not job.done.wait(max(job.started + self.timeout_s - time.monotonic(), 0.0)):
            with job.lock:
                if time.monotonic() - job.started < self.timeout_s:
                    continue  # a later call is running: wait for its own deadline
                job.abandoned = True
                outcomes = list(job.outcomes)
            # Abandon the stuck thread: it serves nothing else; it exits if the call ever returns.
            self._jobs.put(None)
            self._jobs = None
            self._hung = True
            late = (None, RewardTimeout(f"score function timed out after {self.timeout_s:g}s"))
            skipped = [(None, RewardTimeout(SKIPPED_AFTER_HANG))] * (len(calls) - len(outcomes) - 1)
            return [*outcomes, late, *skipped]
        return job.outcomes

    def close(self) -> None:
        if self._jobs is not None:
            self._jobs.put(None)
            self._jobs = None
