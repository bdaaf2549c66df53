"""The loop run by an environment worker process: build envs on demand, answer reset/step requests.

Requests are ``(op, [(slot, payload), ...])``; the slots of a request run at once, each on its own thread
(``SlotThreads``), and every slot's answer is sent as soon as it is ready, as ``(slot, ok, StepResult |
error text)``, so the parent waits for a request about as long as its slowest slot. An exception in an
environment becomes a failed answer for that slot only. Imports no torch: workers start fast.
"""

from __future__ import annotations

import threading
from typing import Any

from siirl.environment.slot_threads import SlotThreads


def serve(conn: Any, spec: str, kwargs: dict[str, Any]) -> None:
    from siirl.environment.registry import make_env

    envs: dict[int, Any] = {}
    threads = SlotThreads()
    sending = threading.Lock()

    def answer(slot: int, ok: bool, value: Any) -> None:
        with sending:
            conn.send((slot, ok, value))

    def call(op: str, slot: int, payload: Any) -> Any:
        if slot not in envs:
            envs[slot] = make_env(spec, **kwargs)
        return envs[slot].reset(*payload) if op == "reset" else envs[slot].step(payload)

    while True:
        try:
            op, items = conn.recv()
        except EOFError:
            break
        if op == "close":
            break
        for slot, payload in items:
            threads.submit(slot, lambda op=op, slot=slot, payload=payload: call(op, slot, payload), answer)
    threads.run_all({slot: env.close for slot, env in envs.items()})
    threads.close()
    conn.close()
