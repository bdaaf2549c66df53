"""One failure rule for the user code an environment calls (tools, interactions, environment steps), the
rule the reward managers follow: a call that fails (raises or times out) costs only its trajectory and is
counted; the first failure of each callable is logged once; a callable that has failed on every call it
ever made ends the job as a user error, one line naming it and its first failure.

Environments report per episode ``info["callbacks"] = {callable: [calls, failures, first failure]}``; the
rollout merges a step's episodes (:func:`merge_callbacks`) and hands them to :class:`CallbackFailures`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from siirl.errors import UserCallbackError

logger = logging.getLogger(__name__)

#: ``[calls, failures, first failure]`` per callable name.
CallbackStats = dict[str, list]


def note_call(stats: CallbackStats, name: str, failure: str = "") -> None:
    """Record one call of ``name``; ``failure`` (non-empty) when it raised or timed out."""
    entry = stats.setdefault(name, [0, 0, ""])
    entry[0] += 1
    if failure:
        entry[1] += 1
        entry[2] = entry[2] or failure


def merge_callbacks(episodes: Iterable[Mapping[str, list] | None]) -> CallbackStats:
    """The episodes' stats summed per callable; the first failure seen is kept."""
    total: CallbackStats = {}
    for stats in episodes:
        for name, (calls, failures, first) in (stats or {}).items():
            entry = total.setdefault(name, [0, 0, ""])
            entry[0] += calls
            entry[1] += failures
            entry[2] = entry[2] or first
    return total


class CallbackFailures:
    """Applies the rule step after step (one per rollout engine: 'ever succeeded' spans the run)."""

    def __init__(self, log: logging.Logger = logger) -> None:
        self.log = log
        self._worked: set[str] = set()
        self._logged: set[str] = set()

    def end_step(self, stats: Mapping[str, list]) -> None:
        for name, (calls, failures, first) in stats.items():
            if failures and name not in self._logged:
                self._logged.add(name)
                self.log.warning(
                    "%s: %s; a trajectory it times out in ends with score 0 (further failures are counted in "
                    "the tools/, interaction/ and env/ metrics, not logged)", name, first,
                )
            if calls > failures:
                self._worked.add(name)
            elif calls and name not in self._worked:
                raise UserCallbackError(f"{name} failed on every call ({calls} calls); the first: {first}")
