"""Which ranks run which nodes.

Rule: a node runs on every rank (colocated, as in siiRL) unless its ``config["placement_group"]`` names a
group. Each named group gets its own contiguous rank range, in order of first appearance in the execution
order: equal shares of the world by default, or the sizes given in ``placement_sizes``.

Groups may follow one another: when a node depends on a node of another group, the producing ranks hand
their output to the consuming ranks through the data coordinator (``siirl.dag_worker.handoff``). Every
worker runs its own nodes in the one global execution order and a hand-off never waits on its consumers,
so such chains cannot deadlock. What the training loop cannot run is refused here: a node that takes its
input from another group must have that one dependency (it gets one batch, not a merge of several), a
node on every rank cannot depend on a group (ranks inside and outside the group would hold different data),
and dynamic sampling, which restarts the graph on its own ranks for more data, cannot be combined with
hand-offs (the other groups would have consumed the abandoned batch).

Multi-agent graphs (nodes with ``config["agent"]``) are placed by ``dag.agent_placement``: ``own`` puts
agent ``k``'s nodes in placement group ``k`` (its name), ``shared`` keeps every agent on every rank, and
``auto`` (the default) picks ``own`` when the ranks split equally among the agents, else ``shared``.
"""

from __future__ import annotations

from collections.abc import Mapping

from siirl.errors import ConfigError
from siirl.execution.dag.contract import PLANNER_CONFIG_KEYS, model_agent, node_agent
from siirl.execution.dag.multi_agent import AGENT_KEY, agent_names
from siirl.execution.dag.node_types import NodeRole
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


def agent_placement_mode(mode: str, num_agents: int, world_size: int) -> str:
    """``own`` or ``shared`` for ``num_agents`` agents on ``world_size`` ranks (``auto`` decides); ``mode`` is
    one of auto, own, shared (the rule of ``dag.agent_placement``)."""
    fits = num_agents > 0 and world_size >= num_agents and world_size % num_agents == 0
    if mode == "auto":
        return "own" if fits and num_agents > 1 else "shared"
    if mode == "own" and num_agents == 0:
        raise ConfigError(
            "dag.agent_placement=own places the agents of a multi-agent graph, and this graph has none "
            "(e.g. dag.custom_pipeline_fn=siirl.user_interface.agent_teams:two_agent_adders)"
        )
    if mode == "own" and not fits:
        raise ConfigError(
            f"dag.agent_placement=own needs the {world_size} ranks to split equally among the "
            f"{num_agents} agents; use a multiple of {num_agents} ranks or dag.agent_placement=shared"
        )
    return mode


def place_agents(graph: TaskGraph, mode: str, world_size: int) -> TaskGraph:
    """``graph`` with every agent's nodes in a placement group named after the agent (``own`` placement).

    Nodes of the team (no ``agent`` key, e.g. ``team_reward``) follow their first placed dependency: the
    team reward reads only the last agent's output, so it runs on that agent's ranks with no hand-off in
    front of it and one hand-off per earlier agent behind it, instead of shipping the whole batch to every
    rank to compute the same scores everywhere. Nodes that already name a placement group keep it.
    """
    order = graph.get_execution_order()
    agents = agent_names(graph)
    if agent_placement_mode(mode, len(agents), world_size) != "own":
        return graph
    placed = graph.copy()
    chosen: dict[str, str] = {}
    for node_id in order:
        node = placed.nodes[node_id]
        if model_agent(node.config) != node_agent(node.config):
            raise ConfigError(
                f"node {node_id!r} of agent {node_agent(node.config)!r} uses agent "
                f"{model_agent(node.config)!r}'s model (a shared critic), which needs both agents on the "
                "same workers; set dag.agent_placement=shared"
            )
        upstream = next((chosen[d] for d in node.dependencies if d in chosen), None)
        group = node.config.get(PLACEMENT_KEY) or node.config.get(AGENT_KEY) or upstream
        if group:
            node.config = {**node.config, PLACEMENT_KEY: group}
            chosen[node_id] = group
    return placed


def check_handoffs(graph: TaskGraph, placements: Mapping[str, str]) -> None:
    """Fail on data flows the training loop cannot run (see the module docstring)."""
    for node in graph:
        group = placements[node.node_id]
        foreign = [d for d in node.dependencies if placements[d] not in (ALL_RANKS, group)]
        if not foreign:
            continue
        if group == ALL_RANKS:
            raise ConfigError(
                f"node {node.node_id!r} runs on every rank but depends on {foreign[0]!r} "
                f"({placements[foreign[0]]}); give it a placement group"
            )
        if len(node.dependencies) > 1:
            raise ConfigError(
                f"node {node.node_id!r} ({group}) takes its input from {foreign[0]!r} "
                f"({placements[foreign[0]]}), so it must have that one dependency, got {node.dependencies}"
            )
        if any(n.node_role is NodeRole.DYNAMIC_SAMPLING for n in graph):
            raise ConfigError(
                "dynamic sampling restarts the graph on its own ranks, which cannot be combined with "
                f"placement groups handing data to each other ({foreign[0]!r} -> {node.node_id!r})"
            )


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
