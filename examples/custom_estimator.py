"""An advantage estimator of the user's own, registered by name and selected by that name.

Name the module once in the config; the launcher imports it before checking the config and every DAG worker
imports it before building anything, so ``group_rank`` is a valid ``algorithm.adv_estimator``:

    python -m siirl.main_dag actor_rollout_ref.model.external_lib=examples.custom_estimator \\
        algorithm.adv_estimator=group_rank
"""

from __future__ import annotations

from collections import defaultdict

import torch

from siirl.algorithms.advantage import ADV_ESTIMATORS, AdvantageInputs


@ADV_ESTIMATORS.register("group_rank")
def group_rank_advantage(inputs: AdvantageInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Each response's rank among its prompt's responses, centred and scaled to [-1, 1] (tied scores share
    their mean rank; a group of one gets 0): unlike GRPO's z-score it ignores how far apart the scores are."""
    scores = inputs.outcome_scores()
    groups: dict[object, list[int]] = defaultdict(list)
    for row, uid in enumerate(inputs.require_index()):
        groups[uid].append(row)
    ranked = torch.zeros_like(scores)
    for rows in groups.values():
        group = scores[rows]
        below = (group.unsqueeze(0) < group.unsqueeze(1)).sum(1).to(scores.dtype)
        ties = (group.unsqueeze(0) == group.unsqueeze(1)).sum(1).to(scores.dtype)
        half = (len(rows) - 1) / 2
        ranked[rows] = (below + (ties - 1) / 2 - half) / half if half else 0.0
    advantages = ranked.unsqueeze(-1) * inputs.response_mask
    return advantages, advantages
