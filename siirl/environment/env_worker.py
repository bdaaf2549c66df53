"""The loop run by an environment worker process: build envs on demand, answer reset/step requests.

Requests are ``(op, [(slot, payload), ...])``; every slot's answer is sent as soon as it is ready, as
``(slot, ok, StepResult | error text)``, so the parent can time each call separately. An exception in
an environment becomes a failed answer for that slot only. Imports no torch: workers start fast.
"""

from __future__ import annotations

from typing import Any


def serve(conn: Any, spec: str, kwargs: dict[str, Any]) -> None:
    from siirl.environment.registry import make_env

    envs: dict[int, Any] = {}
    while True:
        try:
            op, items = conn.recv()
        except EOFError:
            break
        if op == "close":
            break
        for slot, payload in items:
            try:
                if slot not in envs:
                    envs[slot] = make_env(spec, **kwargs)
                env = envs[slot]
                result = env.reset(*payload) if op == "reset" else env.step(payload)
                conn.send((slot, True, result))
            except Exception as exc:  # noqa: BLE001 - a user environment may raise anything
                conn.send((slot, False, f"{type(exc).__name__}: {exc}"))
    for env in envs.values():
        try:
            env.close()
        except Exception:  # noqa: BLE001,S110 - closing must not mask the shutdown
            pass
    conn.close()
