"""Wall-clock accounting of an update's phases, cheap enough to stay on in every run.

An update is split into forward, backward, optimizer, collectives and data movement; whatever the
named phases do not cover is reported as ``host`` (Python bookkeeping, micro-batch planning, metric
arithmetic), so the parts always add up to the whole. Times are host wall clock: on an accelerator a
phase that only launches kernels shows as short and the wait appears in the next phase that blocks
(usually the collective or the ``.item()`` of a metric).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

UPDATE_PHASES = ("forward", "backward", "optimizer", "collectives", "data_movement")


class StageTimer:
    """Sums the time spent in named phases between ``start()`` and ``metrics()``."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self.began = time.perf_counter()

    def start(self) -> None:
        self.totals.clear()
        self.began = time.perf_counter()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.totals[name] += time.perf_counter() - started

    def metrics(self, prefix: str) -> dict[str, float]:
        """``{prefix}/{phase}`` seconds for every update phase (0 when unused) plus ``{prefix}/host``."""
        elapsed = time.perf_counter() - self.began
        out = {f"{prefix}/{name}": self.totals.get(name, 0.0) for name in UPDATE_PHASES}
        out[f"{prefix}/host"] = max(elapsed - sum(out.values()), 0.0)
        return out
