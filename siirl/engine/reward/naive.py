"""The ``naive`` manager: one score-function call per sample, in order, in this process, each bounded by
``timeout_s`` (a late call scores 0 and is counted in ``reward/timeouts``). verl's ``gdpo`` manager is this
loop (every key of a returned dict kept as reward extra info, which GDPO's components are), so it is the
same entry."""

from __future__ import annotations

from typing import Any

from siirl.engine.reward.base import FAILED, RewardInputs, RewardManager
from siirl.engine.reward.registry import REWARD_MANAGERS


@REWARD_MANAGERS.register("naive", "gdpo")
class NaiveRewardManager(RewardManager):
    """Simplest and easiest to debug: one call at a time, in this process."""

    def score(self, inputs: RewardInputs) -> list[Any]:
        samples = zip(inputs.data_sources, inputs.solutions, inputs.ground_truths, inputs.extra_infos)
        samples = list(samples)
        whats = [f"sample {i} (data_source {ds!r})" for i, (ds, *_) in enumerate(samples)]
        results = self.call_scores(whats, [(sample, {}) for sample in samples])
        return [0.0 if result is FAILED else result for result in results]
