"""A bound on each generation call of a rollout engine (``actor_rollout_ref.rollout.generation_timeout_s``).

A hung score call is bounded (``reward_model.timeout_s``); a generation that never returns (a deadlocked
engine, a collective inside vLLM or SGLang that waits forever, a kernel that never finishes) would otherwise
hold its rank until the driver's stall watchdog ends the job. :func:`bound_generation` replaces ``generate``
and ``continue_sequences`` (a piece of a partial rollout) on one engine instance by bounded calls, so every
caller is covered whatever the engine: the rollout node, validation, an engine that wraps this one
(multi-turn, environments) and the asynchronous producer.

Each call is a :class:`siirl.bounded_call.BoundedCalls` call; past the bound the caller raises
:class:`GenerationTimeout`, which fails the step through the worker's usual error path. The engine, left
mid-call, refuses every later call at once with the same error.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from siirl.bounded_call import BoundedCalls

#: The key named in the error, so the user knows what to raise (or unset).
TIMEOUT_KEY = "actor_rollout_ref.rollout.generation_timeout_s"
#: The engine methods that generate; an engine without ``continue_sequences`` has only the first.
GENERATING_METHODS = ("generate", "continue_sequences")

_local = threading.local()


class GenerationTimeout(RuntimeError):
    """A rollout engine's generation call ran past ``generation_timeout_s``."""


@contextmanager
def generating_for(step: int) -> Iterator[None]:
    """Generation calls this thread makes inside the block sample step ``step``'s batch: an asynchronous
    producer runs ahead of the step its worker trains, so the worker's step would name the wrong one."""
    outer = getattr(_local, "step", None)
    _local.step = step
    try:
        yield
    finally:
        _local.step = outer


class _Bound:
    """The bounded calls of one engine; shared by its methods, so after one has hung none runs."""

    def __init__(
        self, engine_name: str, timeout_s: float, step: Callable[[], int], pin: Callable[[], None] | None
    ) -> None:
        self.engine_name, self.step = engine_name, step
        self.calls = BoundedCalls(timeout_s, GenerationTimeout, "siirl-rollout", on_thread_start=pin)
        self.hung: str | None = None

    def call(self, method: str, fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
        if self.hung is not None:
            raise GenerationTimeout(self.hung)
        step = getattr(_local, "step", None)
        step = self.step() if step is None else step
        try:
            return self.calls.call(fn, *args, **kwargs)
        except GenerationTimeout:
            if self.calls.hung is None:
                raise
            self.hung = (
                f"rollout engine {self.engine_name!r}: {method} at step {step} timed out after "
                f"{self.calls.timeout_s:g}s ({TIMEOUT_KEY})"
            )
            raise GenerationTimeout(self.hung) from None


def _bounded(bound: _Bound, method: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        return bound.call(method, fn, args, kwargs)

    return call


def bound_generation(
    engine: Any,
    engine_name: str,
    timeout_s: float | None,
    step: Callable[[], int],
    pin: Callable[[], None] | None = None,
) -> None:
    """Bound each generation call of ``engine`` by ``timeout_s`` seconds (None: no bound; the stall watchdog
    alone ends a hung generation). ``step()`` is the worker's step, named in the error unless the calling
    thread says otherwise (:func:`generating_for`). ``pin()`` runs first on each new calling thread: the
    current accelerator device is per thread, and a new thread would start on device 0."""
    if timeout_s is None:
        return
    bound = _Bound(engine_name, float(timeout_s), step, pin)
    for method in GENERATING_METHODS:
        fn = getattr(engine, method, None)
        if fn is not None:
            setattr(engine, method, _bounded(bound, method, fn))
