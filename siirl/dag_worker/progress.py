"""Live progress of a run on the driver's console, without the driver touching any batch.

Rank 0 posts a few numbers per step (step, reward, validation score, samples/s) to a tiny named Ray
actor, the :class:`ProgressBoard`, without waiting for a reply; the driver polls the board while it
watches the workers and draws ONE progress bar. Workers print no bars of their own (Ray would forward
each redraw as a new line).
"""

from __future__ import annotations

import logging
from typing import Any

import ray
from tqdm import tqdm

logger = logging.getLogger(__name__)

BOARD_NAME = "siirl_progress_board"
SHOWN = {"reward/mean": "reward", "val/score": "val", "perf/samples_per_s": "samples/s"}


class ProgressBoard:
    """The latest step and headline numbers; validation scores stick until the next validation."""

    def __init__(self) -> None:
        self.step, self.total = 0, 0
        self.values: dict[str, float] = {}

    def report(self, step: int, total: int, values: dict[str, float]) -> None:
        self.step, self.total = step, total
        self.values.update(values)

    def latest(self) -> tuple[int, int, dict[str, float]]:
        return self.step, self.total, dict(self.values)


def create_board() -> Any:
    """Started by the driver before the workers (no CPU reserved: it only stores a few floats)."""
    return ray.remote(ProgressBoard).options(name=BOARD_NAME, num_cpus=0).remote()


class ProgressReporter:
    """Worker side: rank 0 posts to the board if the driver made one; any other rank does nothing."""

    def __init__(self, enabled: bool) -> None:
        self.board = None
        if enabled and ray.is_initialized():
            try:
                self.board = ray.get_actor(BOARD_NAME)
            except ValueError:
                logger.debug("no progress board (not started by the siiRL driver)")

    def report(self, step: int, total: int, metrics: dict[str, float]) -> None:
        if self.board is not None:
            values = {key: float(metrics[key]) for key in SHOWN if key in metrics}
            self.board.report.remote(step, total, values)  # fire and forget: never waits on the driver


class ProgressBar:
    """Driver side: one tqdm bar fed from the board."""

    def __init__(self, board: Any) -> None:
        self.board = board
        self.bar: tqdm | None = None  # drawn once rank 0 has said how many steps there are
        self.pending = None

    def _apply(self, latest: tuple[int, int, dict[str, float]]) -> None:
        step, total, values = latest
        if not total:
            return
        if self.bar is None:
            self.bar = tqdm(total=total, initial=step, desc="siirl", unit="step", dynamic_ncols=True)
        self.bar.update(step - self.bar.n)
        shown = {SHOWN[k]: round(v, 0 if k == "perf/samples_per_s" else 3) for k, v in values.items()}
        self.bar.set_postfix(shown, refresh=True)

    def poll(self, wait_s: float = 0.0) -> None:
        """Apply the last query's answer if it has arrived (waiting at most ``wait_s``), then ask again."""
        if self.pending is not None:
            ready, _ = ray.wait([self.pending], timeout=wait_s)
            if not ready:
                return
            self._apply(ray.get(self.pending))
        self.pending = self.board.latest.remote()

    def close(self) -> None:
        """Show the final state (the workers' last posts were sent before they returned)."""
        try:
            self._apply(ray.get(self.board.latest.remote(), timeout=5.0))
        except (ray.exceptions.GetTimeoutError, ray.exceptions.RayActorError):
            pass
        if self.bar is not None:
            self.bar.close()
