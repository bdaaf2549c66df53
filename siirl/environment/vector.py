"""Many environments at once, each call limited in time, in worker processes (or inline for cheap ones).

Slot ``i`` lives in worker ``i % num_workers``; the slots of one call run at once, each on its own thread
(``SlotThreads``). ``step_async`` sends the actions and returns at once, so the caller can do other work
(or ``await astep``) while the environments run; ``step_wait`` collects the answers. ``timeout_s`` bounds
the whole reset or step (all slots, all workers), not each slot: a slot still running then, or whose
worker died, is contained like a reward function: the worker is killed (SIGKILL) and replaced at the
next ``reset``, the slot's episode ends with reward 0 and ``info["error"]``, and the other episodes that
lived in that worker end the same way at their next step, because their state died with it.
``num_workers=0`` runs the environments in this process (no timeout can be enforced then; use it for
environments that cannot hang, or that bound their own calls, as the tool environment does).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import time
from collections.abc import Mapping, Sequence
from typing import Any

from siirl import user_code
from siirl.environment.base import StepResult, failed_result
from siirl.environment.env_worker import serve
from siirl.environment.registry import make_env, resolve_env_factory
from siirl.environment.slot_threads import SlotThreads

logger = logging.getLogger(__name__)


class _Worker:
    def __init__(self, ctx: Any, spec: str, kwargs: dict[str, Any]) -> None:
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=serve, args=(child, spec, kwargs), daemon=True)
        self.process.start()
        child.close()

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()


class VectorEnv:
    """``num_envs`` environments built from ``spec`` (registry name or ``module:Class``) with ``kwargs``."""

    def __init__(
        self,
        spec: str,
        num_envs: int,
        kwargs: Mapping[str, Any] | None = None,
        num_workers: int = 1,
        timeout_s: float = 30.0,
        mp_context: str = "spawn",
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if num_workers < 0 or timeout_s <= 0:
            raise ValueError(f"need num_workers >= 0 and timeout_s > 0, got {num_workers}, {timeout_s}")
        resolve_env_factory(spec)  # a bad name fails here, in this process, with one clear line
        self.spec, self.kwargs = spec, dict(kwargs or {})
        self.num_envs, self.timeout_s = num_envs, timeout_s
        self.num_workers = min(num_workers, num_envs)
        self._ctx = multiprocessing.get_context(mp_context)
        self._workers: list[_Worker | None] = [None] * self.num_workers
        self._inline: dict[int, Any] = {}
        self._inline_threads = SlotThreads()
        self._lost: dict[int, str] = {}  # slot -> why its episode state is gone
        self._pending: tuple[str, list[int], dict[int, StepResult]] | None = None

    # ----- calls -----

    def reset(self, tasks: Sequence[Mapping[str, Any]], seeds: Sequence[int | None]) -> list[StepResult]:
        """Start episode ``i`` of ``tasks`` in slot ``i`` (``len(tasks) <= num_envs``)."""
        if len(tasks) > self.num_envs or len(tasks) != len(seeds):
            raise ValueError(f"reset got {len(tasks)} tasks / {len(seeds)} seeds for {self.num_envs} slots")
        slots = list(range(len(tasks)))
        for slot in slots:
            self._lost.pop(slot, None)
        self._send("reset", {slot: (dict(tasks[slot]), seeds[slot]) for slot in slots})
        return self._collect()

    def step_async(self, actions: Mapping[int, Any]) -> None:
        """Send ``{slot: action}``; answers come from ``step_wait``."""
        if self._pending is not None:
            raise RuntimeError("step_async called twice without step_wait")
        self._send("step", dict(actions))

    def step_wait(self) -> list[StepResult]:
        """Results in the order of the slots given to ``step_async``."""
        return self._collect()

    def step(self, actions: Mapping[int, Any]) -> list[StepResult]:
        self.step_async(actions)
        return self.step_wait()

    async def astep(self, actions: Mapping[int, Any]) -> list[StepResult]:
        """``step`` for asyncio callers: the wait runs in a thread, the event loop stays free."""
        self.step_async(actions)
        return await asyncio.to_thread(self.step_wait)

    # ----- plumbing -----

    def _send(self, op: str, payloads: dict[int, Any]) -> None:
        done: dict[int, StepResult] = {}
        if self.num_workers == 0:
            calls = {slot: lambda s=slot, p=payload: self._run_inline(op, s, p) for slot, payload in payloads.items()}
            done = {slot: value for slot, (_, value) in self._inline_threads.run_all(calls).items()}
            self._pending = (op, list(payloads), done)
            return
        per_worker: dict[int, list[tuple[int, Any]]] = {}
        for slot, payload in payloads.items():
            if op == "step" and slot in self._lost:
                done[slot] = failed_result(self._lost[slot])
                continue
            per_worker.setdefault(slot % self.num_workers, []).append((slot, payload))
        for index, items in per_worker.items():
            worker = self._workers[index]
            if worker is None or not worker.process.is_alive():
                worker = self._workers[index] = _Worker(self._ctx, self.spec, self.kwargs)
            worker.conn.send((op, items))
        self._pending = (op, list(payloads), done)

    def _run_inline(self, op: str, slot: int, payload: Any) -> StepResult:
        try:
            if slot not in self._inline:
                self._inline[slot] = make_env(self.spec, **self.kwargs)
            env = self._inline[slot]
            with user_code.running(f"environment {self.spec} {op}"):
                return env.reset(*payload) if op == "reset" else env.step(payload)
        except Exception as exc:  # noqa: BLE001 - a user environment may raise anything
            return failed_result(f"{type(exc).__name__}: {exc}")

    def _collect(self) -> list[StepResult]:
        if self._pending is None:
            raise RuntimeError("step_wait called without step_async")
        op, slots, done = self._pending
        self._pending = None
        waiting: dict[int, set[int]] = {}
        for slot in slots:
            if slot not in done:
                waiting.setdefault(slot % self.num_workers, set()).add(slot)
        deadline = time.monotonic() + self.timeout_s
        for index, expected in waiting.items():
            self._collect_worker(op, index, expected, done, deadline)
        return [done[slot] for slot in slots]

    def _collect_worker(
        self, op: str, index: int, expected: set[int], done: dict[int, StepResult], deadline: float
    ) -> None:
        worker = self._workers[index]
        assert worker is not None
        began = time.monotonic()
        while expected:
            error = ""
            try:
                if worker.conn.poll(max(0.0, deadline - time.monotonic())):
                    slot, ok, value = worker.conn.recv()
                    done[slot] = value if ok else failed_result(value)
                    expected.discard(slot)
                    continue
                error = f"environment {self.spec!r} {op} timed out after {self.timeout_s:g}s"
            except (EOFError, OSError) as exc:
                error = f"environment {self.spec!r}: its worker process died during {op} ({type(exc).__name__})"
            logger.warning("%s (worker %d, %.1fs); its episodes end with reward 0", error, index, 
                           time.monotonic() - began)
            self._lose_worker(index, error)
            for slot in expected:
                done[slot] = failed_result(error)
            return

    def _lose_worker(self, index: int, error: str) -> None:
        worker = self._workers[index]
        if worker is not None:
            worker.kill()
        self._workers[index] = None
        for slot in range(index, self.num_envs, max(self.num_workers, 1)):
            self._lost[slot] = f"{error}; episode state lost with its worker"

    def close(self) -> None:
        for index, worker in enumerate(self._workers):
            if worker is None:
                continue
            try:
                worker.conn.send(("close", []))
                worker.process.join(timeout=5)
            except (OSError, ValueError):
                pass
            worker.kill()
            self._workers[index] = None
        self._inline_threads.run_all({slot: env.close for slot, env in self._inline.items()})
        self._inline_threads.close()
        self._inline.clear()

    def __enter__(self) -> VectorEnv:  # noqa: PYI034 - py3.10 has no typing.Self
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
