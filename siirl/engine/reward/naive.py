"""The ``naive`` manager: one score-function call per sample, in order, in this process, each bounded by
``timeout_s`` (a late call scores 0 and is counted in ``reward/timeouts``)."""

from __future__ import annotations

from typing import Any

from siirl.engine.reward.base import RewardInputs, RewardManager
from siirl.engine.reward.bounded import RewardTimeout
from siirl.engine.reward.registry import REWARD_MANAGERS
from siirl.errors import ScoreServiceError


@REWARD_MANAGERS.register("naive")
class NaiveRewardManager(RewardManager):
    """Simplest and easiest to debug: exceptions from the score function propagate unchanged, except a
    failed scoring service (``ScoreServiceError``, e.g. an unreachable sandbox), which scores 0 and counts."""

    def score(self, inputs: RewardInputs) -> list[Any]:
        results: list[Any] = []
        samples = zip(inputs.data_sources, inputs.solutions, inputs.ground_truths, inputs.extra_infos)
        for i, (ds, sol, gt, extra) in enumerate(samples):
            try:
                results.append(self.caller.call(self.compute_score, ds, sol, gt, extra))
            except RewardTimeout as exc:
                self.failures.record("timeouts", f"sample {i} (data_source {ds!r}): {exc}")
                results.append(0.0)
            except ScoreServiceError as exc:
                self.failures.record("errors", f"sample {i} (data_source {ds!r}): {exc}")
                results.append(0.0)
        return results
