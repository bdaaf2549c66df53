"""Which ranks run which nodes.

Rule: a node runs on every rank (colocated, as in siiRL) unless its ``config["placement_group"]`` names a
group. Named groups must be parallel branches (no path from a node of one group to a node of another),
for example two agents, or a reward model beside the reference model. Each named group gets its own
contiguous rank range, in order of first appearance in the execution order: equal shares of the world by
default, or the sizes given in ``placement_sizes``. Unnamed nodes (shared rollout, advantage, ...) still
run on every rank; inputs produced by another group reach them through the data coordinator.
"""

from __future__ import annotations

from collections.abc import Mapping

from siirl.errors import ConfigError
from siirl.execution.dag.contract import PLANNER_CONFIG_KEYS
from siirl.execution.dag.task_graph import TaskGraph
from siirl.execution.scheduler.plan import ALL_RANKS

PLACEMENT_KEY = PLANNER_CONFIG_KEYS[0]


def node_placements(graph: TaskGraph) -> dict[str, str]:
    """node_id -> its placement group name, or ``ALL_RANKS`` when it has none."""
    placements = {}
    for node in graph:
        name = node.config.get(PLACEMENT_KEY, ALL_RANKS)
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(
                f"node {node.node_id!r}: {PLACEMENT_KEY} must be a non-empty string, got {name!r}"
            )
        placements[node.node_id] = name
    return placements


def check_parallel_branches(graph: TaskGraph, placements: Mapping[str, str]) -> None:
    """Fail when a node of one placement group feeds (directly or not) a node of another group."""
    graph.build_adjacency_lists()
    for node_id, group in placements.items():
        if group == ALL_RANKS:
            continue
        stack, seen = list(graph.adj[node_id]), set()
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            other = placements[current]
            if other not in (ALL_RANKS, group):
                raise ConfigError(
                    f"placement groups must be parallel branches, but {node_id!r} ({group}) "
                    f"feeds {current!r} ({other})"
                )
            stack.extend(graph.adj[current])


def split_ranks(
    groups: list[str], world_size: int, sizes: Mapping[str, int] | None = None
) -> dict[str, tuple[int, ...]]:
    """Contiguous rank ranges for the named groups (equal shares unless ``sizes`` is given)."""
    if not groups:
        if sizes:
            raise ConfigError(f"placement_sizes given ({', '.join(sizes)}) but no node sets {PLACEMENT_KEY}")
        return {}
    if sizes is None:
        if world_size % len(groups):
            raise ConfigError(
                f"{world_size} ranks cannot be split equally among {len(groups)} placement groups "
                f"({', '.join(groups)}); pass placement_sizes"
            )
        sizes = {group: world_size // len(groups) for group in groups}
    if sorted(sizes) != sorted(groups):
        raise ConfigError(
            f"placement_sizes names {sorted(sizes)} but the graph's placement groups are {sorted(groups)}"
        )
    bad = [group for group in groups if not isinstance(sizes[group], int) or sizes[group] < 1]
    if bad:
        raise ConfigError(f"placement_sizes[{bad[0]!r}] must be a positive integer, got {sizes[bad[0]]!r}")
    if sum(sizes.values()) != world_size:
        raise ConfigError(
            f"placement_sizes add up to {sum(sizes.values())} ranks, but the world has {world_size}"
        )
    ranges, start = {}, 0
    for group in groups:
        ranges[group] = tuple(range(start, start + sizes[group]))
        start += sizes[group]
    return ranges
