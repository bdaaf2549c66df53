"""The graphs an asynchronous schedule can run (siirl.params.async_training), checked at plan time, and the
separate placement of ``separate_async``.

The background producer (siirl.dag_worker.async_rollout) stands in for the graph's first node, the
rollout, on the ranks that run it; the rest of the graph trains on what it produced. So the graph must start
with one single-policy rollout node: a team of agents, a graph that starts elsewhere or one already split
into placement groups is refused in one line before Ray. ``separate_async`` (verl's fully-async layout)
puts the rollout node in placement group ``rollout`` on nodes of its own (``separate_split``) and every other
node in group ``trainer``; the rollout group hands each step's batch to the
trainers through the data coordinator (``siirl.dag_worker.handoff``).
"""

from __future__ import annotations

from typing import Any

from siirl.errors import ConfigError
from siirl.execution.dag.multi_agent import agent_names
from siirl.execution.dag.node_types import NodeRole
from siirl.execution.dag.task_graph import TaskGraph
from siirl.execution.scheduler.placement import PLACEMENT_KEY, node_placements
from siirl.execution.scheduler.plan import ALL_RANKS
from siirl.params.async_training import AsyncSchedule

ROLLOUT_GROUP, TRAINER_GROUP = "rollout", "trainer"


def check_async_graph(graph: TaskGraph, schedule: AsyncSchedule) -> None:
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


def separate_split(cfg: Any, per_node: int) -> tuple[int, int, int]:
    """(trainer nodes, rollout nodes, workers per node) of ``separate_async``. ``rollout.nnodes`` given: those
    nodes beside the ``trainer.nnodes`` ones. Unset (verl's V1 default sizes the pool for you): on several
    nodes the rollout takes one of them; on one node its devices are split in half, each half planned as a
    node of its own, so ``trainer.v1.trainer_mode=separate_async`` alone runs on a 2-CPU host."""
    trainer_nodes, nodes = int(cfg.trainer.nnodes), int(cfg.rollout.nnodes)
    if nodes >= 1:
        per_rollout_node = int(cfg.rollout.n_gpus_per_node) or per_node
        if per_rollout_node != per_node:
            raise ConfigError(
                f"bad config: rollout.n_gpus_per_node={per_rollout_node} must equal the trainer's {per_node} "
                "devices per node (the plan gives every node the same number of workers)"
            )
        return trainer_nodes, nodes, per_node
    if trainer_nodes > 1:
        return trainer_nodes - 1, 1, per_node
    if per_node % 2 == 0:
        return 1, 1, per_node // 2
    raise ConfigError(
        f"bad config: trainer.v1.trainer_mode=separate_async splits the job's devices between rollout and "
        f"training, and {per_node} device(s) on one node do not split evenly; set rollout.nnodes (the rollout's "
        "own nodes) or an even trainer.n_gpus_per_node"
    )


def separate_layout(
    graph: TaskGraph, cfg: Any, per_node: int, schedule: AsyncSchedule
) -> tuple[TaskGraph, int, int, dict[str, int]] | None:
    """``separate_async``: the graph with its two placement groups, the planned nodes of the whole job,
    workers per planned node and the groups' sizes; None for the other modes (``schedule``: the resolved run's)."""
    if schedule.mode != "separate_async":
        return None
    trainer_nodes, rollout_nodes, per_node = separate_split(cfg, per_node)
    placed = graph.copy()
    for node in placed:
        group = ROLLOUT_GROUP if node.node_role is NodeRole.ROLLOUT else TRAINER_GROUP
        node.config = {**node.config, PLACEMENT_KEY: group}
    sizes = {ROLLOUT_GROUP: rollout_nodes * per_node, TRAINER_GROUP: trainer_nodes * per_node}
    return placed, trainer_nodes + rollout_nodes, per_node, sizes
