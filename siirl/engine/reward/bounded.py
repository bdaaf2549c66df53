"""The failure counts every reward manager reports, and the error of a late in-process score call.

In-process score calls are bounded by :class:`siirl.bounded_call.BoundedCalls` (a late call scores 0; its
thread is abandoned, not stopped). Use the ``parallel`` manager when a stuck call must also be killed.
"""

from __future__ import annotations

import logging

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
                self.owner, detail, outcome, kind, kind,
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
