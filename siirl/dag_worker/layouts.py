"""Per-node data-parallel layouts, and handing the batch over where consecutive layouts differ."""

from __future__ import annotations

from siirl.data_coordinator import DpLayout, needs_redistribution
from siirl.execution.dag import Node
from siirl.execution.scheduler.plan import ExecutionPlan


def role_layouts(plan: ExecutionPlan) -> dict[str, DpLayout]:
    """Role key -> every worker's dp rank in that role (tensor-parallel peers share a dp rank)."""
    return {
        key: DpLayout(tuple(worker.coords[key].dp_rank for worker in plan.workers))
        for key in plan.groups
        if all(key in worker.coords for worker in plan.workers)
    }


def node_layout_key(node: Node, layouts: dict[str, DpLayout]) -> str | None:
    """Model nodes run in their role's layout; compute nodes run wherever the batch already is."""
    key = node.node_role.value
    return key if key in layouts else None


def layouts_differ(plan: ExecutionPlan) -> bool:
    layouts = list(role_layouts(plan).values())
    return any(needs_redistribution(layouts[0], other) for other in layouts[1:])


def moves_samples(plan: ExecutionPlan) -> bool:
    """Whether samples ever move between workers (a layout change inside one placement group, or a hand-off
    between groups), i.e. whether the job needs the data buffers at all."""
    return layouts_differ(plan) or bool(plan.handoffs)
