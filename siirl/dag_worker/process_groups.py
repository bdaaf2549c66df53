"""torch.distributed groups for the planner's rank sets (every rank creates every group, same order)."""

from __future__ import annotations

import torch.distributed as dist

from siirl.execution.scheduler.plan import ExecutionPlan


def build_dp_groups(plan: ExecutionPlan, rank: int) -> dict[str, dist.ProcessGroup | None]:
    """Role key -> this rank's dp process group (None = the default group, when it spans every rank).

    ``new_group`` is collective over the whole world, so all ranks walk all groups in plan order.
    """
    mine: dict[str, dist.ProcessGroup | None] = {}
    for key, groups in plan.groups.items():
        for ranks in groups.dp_groups:
            ranks = sorted(ranks)
            whole_world = len(ranks) == plan.world_size
            group = None if whole_world else dist.new_group(ranks)
            if rank in ranks:
                mine[key] = group
    return mine


def build_sp_groups(plan: ExecutionPlan, rank: int) -> dict[str, dist.ProcessGroup]:
    """Role key -> this rank's Ulysses sequence-parallel group, for the roles the plan splits that way
    (collective like ``build_dp_groups``: call it on every rank, after it)."""
    mine: dict[str, dist.ProcessGroup] = {}
    for key, groups in plan.groups.items():
        if groups.model_parallel != "sp":
            continue
        for ranks in groups.tp_groups:
            group = dist.new_group(sorted(ranks))
            if rank in ranks:
                mine[key] = group
    return mine
