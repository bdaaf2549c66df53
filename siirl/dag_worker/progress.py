"""Live progress of a run on the driver's console, without the driver touching any batch.

Rank 0 posts a few numbers per step (step, reward, validation score, samples/s) to a tiny named Ray
actor, the :class:`ProgressBoard`, without waiting for a reply; the driver polls the board while it
watches the workers and draws ONE progress bar. Workers print no bars of their own (Ray would forward
each redraw as a new line).

Every rank also posts a heartbeat (its step and the node it starts) to the board, at most a few per
second, so the driver can name a worker that stopped making progress (:class:`StallWatch`) instead of
waiting on it in silence. How long a silence may last follows the job's own step times unless the user set
``trainer.stall_timeout_s`` (:func:`stall_limit`).
"""

from __future__ import annotations

import logging
import statistics
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import ray
from tqdm import tqdm

from siirl.ray_names import job_scoped

logger = logging.getLogger(__name__)

BOARD_NAME = "siirl_progress_board"
SHOWN = {"reward/mean": "reward", "val/score": "val", "perf/samples_per_s": "samples/s"}
#: A rank posts a heartbeat at most this often (a step has about ten nodes; the board needs far fewer).
BEAT_INTERVAL_S = 0.5
#: The automatic stall limit before any step has been timed: the first step also warms engines and caches up,
#: and a large model's first rollout may take many minutes without a heartbeat (the limit before it followed steps).
FIRST_STEP_LIMIT_S = 1800.0
#: Once steps are timed, the automatic limit is this many median steps, at least ``LONGEST_STEPS`` times the
#: longest step seen (a validation or save step) and at least ``MIN_LIMIT_S`` (a frozen rank of a job of
#: sub-second steps is named in two minutes, ended in four).
MEDIAN_STEPS, LONGEST_STEPS, MIN_LIMIT_S = 10, 2, 120.0
#: Steps whose durations the board keeps (the median follows the recent steps; memory stays flat).
TIMED_STEPS = 256


def stall_limit(explicit: float | None, step_seconds: Sequence[float]) -> float:
    """Seconds without a heartbeat from any rank before the driver warns (it ends the job at twice that).
    An explicit ``trainer.stall_timeout_s`` wins; null follows the job's own step times."""
    if explicit is not None:
        return float(explicit)
    if not step_seconds:
        return FIRST_STEP_LIMIT_S
    return max(MIN_LIMIT_S, MEDIAN_STEPS * statistics.median(step_seconds), LONGEST_STEPS * max(step_seconds))


def limit_text(explicit: float | None, limit: float) -> str:
    """How the limit was set, for the warning and the error line."""
    if explicit is not None:
        return f"trainer.stall_timeout_s={explicit:g}"
    how = ("until the first step ends" if limit == FIRST_STEP_LIMIT_S else
           f"{MEDIAN_STEPS} x the median step, >= {LONGEST_STEPS} x the longest, >= {MIN_LIMIT_S:g}s")
    return f"the stall limit {limit:.0f}s (trainer.stall_timeout_s=null: {how})"


class ProgressBoard:
    """The latest step and headline numbers; validation scores stick until the next validation."""

    def __init__(self) -> None:
        self.step, self.total = 0, 0
        self.values: dict[str, float] = {}
        #: rank -> (board clock at the beat, step, what the rank was starting)
        self.beats: dict[int, tuple[float, int, str]] = {}
        #: seconds between rank 0's reports of consecutive steps (a save falls into the next step's time)
        self.step_seconds: deque[float] = deque(maxlen=TIMED_STEPS)
        self.reported_at: float | None = None

    def report(self, step: int, total: int, values: dict[str, float]) -> None:
        now = time.monotonic()
        if self.reported_at is not None and step > self.step:
            self.step_seconds.append(now - self.reported_at)
        self.reported_at = now  # also after validation before training: the first step starts then
        self.step, self.total = step, total
        self.values.update(values)

    def beat(self, rank: int, step: int, doing: str) -> None:
        self.beats[rank] = (time.monotonic(), step, doing)

    def latest(self) -> tuple[int, int, dict[str, float]]:
        return self.step, self.total, dict(self.values)

    def silences(self) -> tuple[dict[int, tuple[float, int, str]], list[float]]:
        """rank -> (seconds since its last heartbeat, its step, what it was starting), on the board's clock;
        and the recent steps' durations."""
        now = time.monotonic()
        return ({rank: (now - at, step, doing) for rank, (at, step, doing) in self.beats.items()},
                list(self.step_seconds))


def create_board() -> Any:
    """Started by the driver before the workers (no CPU reserved: it only stores a few floats), on the driver's
    own Ray node: with no CPU asked for, Ray may place it on any node, and losing that node would take the
    progress bar and the stall watch with it while the driver needs them to name the lost node."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    return ray.remote(ProgressBoard).options(name=job_scoped(BOARD_NAME), num_cpus=0, scheduling_strategy=here).remote()


class ProgressReporter:
    """Worker side: every rank beats, rank 0 also posts the headline numbers, if the driver made a board."""

    def __init__(self, rank: int) -> None:
        self.rank, self.board, self.last_beat = rank, None, 0.0
        if ray.is_initialized():
            try:
                self.board = ray.get_actor(job_scoped(BOARD_NAME))
            except ValueError:
                logger.debug("no progress board (not started by the siiRL driver)")

    def report(self, step: int, total: int, metrics: dict[str, float]) -> None:
        if self.board is not None and self.rank == 0:
            values = {key: float(metrics[key]) for key in SHOWN if key in metrics}
            self.board.report.remote(step, total, values)  # fire and forget: never waits on the driver
        self.beat(step, "step end", force=True)

    def beat(self, step: int, doing: str, force: bool = False) -> None:
        """Tell the board this rank is alive and what it starts (throttled to ``BEAT_INTERVAL_S``)."""
        now = time.monotonic()
        if self.board is not None and (force or now - self.last_beat >= BEAT_INTERVAL_S):
            self.last_beat = now
            self.board.beat.remote(self.rank, step, doing)


class StallWatch:
    """Driver side: a job in which no rank has beaten for the stall limit (:func:`stall_limit`) is stalled. The
    ranks silent the longest are named in one warning; if the silence reaches twice the limit the job is ended.
    ``timeout_s``: the user's ``trainer.stall_timeout_s`` (None: follow the step times; 0: never)."""

    def __init__(self, board: Any, timeout_s: float | None) -> None:
        self.board, self.timeout_s = board, timeout_s
        self.pending = None
        self.warned = False

    def poll(self) -> str | None:
        """The reason to end the job, once the silence reaches the limit; warns once on the way there."""
        if self.timeout_s == 0:
            return None
        if self.pending is not None:
            ready, _ = ray.wait([self.pending], timeout=0)
            if not ready:
                return None
            verdict = self._judge(*ray.get(self.pending))
            if verdict is not None:
                return verdict
        self.pending = self.board.silences.remote()
        return None

    def _judge(self, silences: dict[int, tuple[float, int, str]], step_seconds: Sequence[float] = ()) -> str | None:
        if not silences:
            return None
        limit = stall_limit(self.timeout_s, step_seconds)
        quietest = min(age for age, _, _ in silences.values())
        if quietest < limit:
            self.warned = False
            return None
        longest = max(age for age, _, _ in silences.values())
        stuck = sorted(rank for rank, (age, _, _) in silences.items() if age >= longest - BEAT_INTERVAL_S)
        where = "; ".join(f"rank {r} last at step {silences[r][1]}, {silences[r][2]}" for r in stuck)
        line = f"no DAG worker made progress for {longest:.0f}s; the silent longest: {where}"
        how = limit_text(self.timeout_s, limit)
        if quietest >= 2 * limit:
            return f"{line}; ended after 2 x {how}"
        if not self.warned:
            self.warned = True
            logger.warning("%s (the job ends if this lasts to 2 x %s)", line, how)
        return None


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
