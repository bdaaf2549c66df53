"""The one bounded-call mechanism behind generation, score functions, tools and interactions."""

from __future__ import annotations

import gc
import threading
import time

import pytest

from siirl.bounded_call import SKIPPED_AFTER_HANG, BoundedCalls


class Late(Exception):
    pass


def test_calls_return_values_and_reraise_errors() -> None:
    calls = BoundedCalls(5, Late, "t-values")
    assert calls.call(lambda a, b=0: a + b, 2, b=3) == 5
    with pytest.raises(KeyError):
        calls.call(lambda: {}["x"])
    calls.close()


def test_a_finished_call_leaves_its_thread_for_the_next() -> None:
    calls = BoundedCalls(5, Late, "t-reuse")
    names = {calls.call(lambda: threading.get_ident()) for _ in range(20)}
    assert len(names) == 1
    calls.close()


def test_a_late_call_refuses_the_rest_of_its_step_then_the_next_step_runs() -> None:
    calls = BoundedCalls(0.2, Late, "t-late")
    release = threading.Event()
    started = time.monotonic()
    outcomes = calls.call_all([(release.wait, (), {}), (lambda: 7, (), {})])
    assert time.monotonic() - started < 2
    assert isinstance(outcomes[0][1], Late) and "timed out after 0.2s" in str(outcomes[0][1])
    assert outcomes[1] == (7, None)
    with pytest.raises(Late, match=SKIPPED_AFTER_HANG):
        calls.call(lambda: 1)
    calls.start_step()
    assert calls.call(lambda: 2) == 2
    release.set()
    calls.close()


def test_each_new_thread_runs_the_start_hook_first() -> None:
    seen = threading.local()
    calls = BoundedCalls(5, Late, "t-hook", on_thread_start=lambda: setattr(seen, "pinned", True))
    assert calls.call(lambda: getattr(seen, "pinned", False)) is True
    calls.close()


def test_idle_threads_end_with_their_owner() -> None:
    before = {t.ident for t in threading.enumerate() if t.name == "t-owner"}
    calls = BoundedCalls(5, Late, "t-owner")
    calls.call_all([(time.sleep, (0.01,), {}) for _ in range(3)])
    del calls
    gc.collect()
    deadline = time.monotonic() + 5
    while {t.ident for t in threading.enumerate() if t.name == "t-owner"} - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not {t.ident for t in threading.enumerate() if t.name == "t-owner"} - before


def test_a_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="timeout_s must be > 0"):
        BoundedCalls(0, Late, "t-bad")


def _nap(seconds: float) -> float:
    time.sleep(max(seconds, 0))
    if seconds < 0:
        raise ValueError("negative")
    return seconds


def test_calls_in_turn_are_bounded_each_not_together() -> None:
    calls = BoundedCalls(0.5, Late, "t-turns")
    outcomes = calls.call_in_turn(_nap, [((0.3,), {}), ((-1,), {}), ((0.3,), {})])
    assert [value for value, _ in outcomes] == [0.3, None, 0.3]  # 0.6 s in all, each under the bound
    assert isinstance(outcomes[1][1], ValueError) and outcomes[0][1] is None
    outcomes = calls.call_in_turn(_nap, [((0.0,), {}), ((3600,), {}), ((0.0,), {})])
    assert outcomes[0] == (0.0, None)
    assert isinstance(outcomes[1][1], Late) and str(outcomes[2][1]) == SKIPPED_AFTER_HANG
    calls.start_step()
    assert calls.call(_nap, 0.0) == 0.0  # a fresh thread serves the next step
    calls.close()


def test_calls_in_turn_stop_at_an_error_of_a_stop_type() -> None:
    ran: list[int] = []

    def fail_first(k: int) -> int:
        ran.append(k)
        if k == 0:
            raise KeyError("bad config")
        return k

    outcomes = BoundedCalls(5, Late, "t-stop").call_in_turn(fail_first, [((0,), {}), ((1,), {})], stop_on=(KeyError,))
    assert ran == [0] and len(outcomes) == 1 and isinstance(outcomes[0][1], KeyError)
