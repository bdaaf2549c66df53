"""The graphs an asynchronous schedule can run (siirl.params.async_training), checked at plan time.

The background producer (siirl.dag_worker.async_rollout) stands in for the graph's first node, the
rollout, on every worker; the rest of the graph trains on what it produced. So the graph must start with
one single-policy rollout node on every rank: a team of agents, a graph that starts elsewhere or one split
into placement groups is refused in one line before Ray.
"""

from __future__ import annotations

from typing import Any

from siirl.errors import ConfigError
from siirl.execution.dag.multi_agent import agent_names
from siirl.execution.dag.node_types import NodeRole
from siirl.execution.dag.task_graph import TaskGraph
from siirl.execution.scheduler.placement import node_placements
from siirl.execution.scheduler.plan import ALL_RANKS
from siirl.params.async_training import async_schedule


def check_async_graph(graph: TaskGraph, cfg: Any) -> None:
    schedule = async_schedule(cfg)
    if not schedule.is_async:
        return
    prefix = f"bad config: trainer.v1.trainer_mode={schedule.mode}"
    agents = agent_names(graph)
    if agents:
        raise ConfigError(f"{prefix}: multi-agent teams ({', '.join(agents)}) are not implemented in asynchronous training")
    first = graph.nodes[graph.get_execution_order()[0]]
    if first.node_role is not NodeRole.ROLLOUT:
        raise ConfigError(
            f"{prefix}: the producer replaces the graph's first node, which must be the rollout; "
            f"{first.node_id!r} is {first.node_role.value}"
        )
    named = sorted({p for p in node_placements(graph).values() if p != ALL_RANKS})
    if named:
        raise ConfigError(f"{prefix}: placement groups ({', '.join(named)}) are not implemented in asynchronous training")
