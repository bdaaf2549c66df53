"""TaskGraph + cluster shape + per-role parallelism -> a deterministic ExecutionPlan.

Ranks are numbered node-major (rank = node_index * devices_per_node + local_rank). Inside each role's
rank range, tensor parallelism is the fastest-varying dimension (Megatron order): tp groups are runs of
``tp`` consecutive ranks, so with ``devices_per_node % tp == 0`` they never cross a machine, and dp groups
take one rank from each tp group. A trained model's Ulysses sequence-parallel groups (``sp``) are laid out
the same way: the ranks of an sp group hold the same data, as those of a tp group do. Only roles that own a
model (MODEL_INFERENCE / MODEL_TRAIN nodes) get process groups; COMPUTE / DATA_LOAD nodes work on whatever
shard their worker holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from siirl.errors import ConfigError
from siirl.execution.dag.contract import model_agent
from siirl.execution.dag.contract_check import check_contracts
from siirl.execution.dag.node_types import NodeRole, NodeType
from siirl.execution.dag.task_graph import TaskGraph
from siirl.execution.scheduler.async_graph import check_async_graph, separate_layout
from siirl.execution.scheduler.placement import (
    check_handoffs,
    node_placements,
    place_agents,
    split_ranks,
)
from siirl.execution.scheduler.plan import (
    ALL_RANKS,
    ExecutionPlan,
    Handoff,
    RoleCoord,
    RoleGroups,
    WorkerPlan,
)
from siirl.params.resolved import ResolvedRun, resolve
from siirl.params.root import SiirlConfig, or_defaults
from siirl.params.sequence_parallel import sequence_parallel_sizes

_MODEL_TYPES = (NodeType.MODEL_INFERENCE, NodeType.MODEL_TRAIN)
_SPEC_KEYS = ("tp", "sp", "dp")

#: Parallelism per role key: ``{"actor": {"tp": 2}}``; ``"<placement>/<role>"`` overrides one placement.
Parallelism = Mapping[str, Mapping[str, int]]


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{what} must be a positive integer, got {value!r}")
    return value


def _role_key(node: Any, placement: str) -> str:
    """``<placement>/<role>``; an agent's roles are ``<agent>/<role>`` wherever it runs (its name says where),
    with the model of the agent a node borrows it from (``model_agent``, e.g. a shared critic)."""
    agent = model_agent(node.config)
    if agent:
        return f"{agent}/{node.node_role.value}"
    return node.node_role.value if placement == ALL_RANKS else f"{placement}/{node.node_role.value}"


def _model_role_keys(
    graph: TaskGraph, order: list[str], placements: Mapping[str, str]
) -> dict[str, tuple[NodeRole, str]]:
    """Role key -> (role, placement) for every model role, in execution order."""
    keys: dict[str, tuple[NodeRole, str]] = {}
    for node_id in order:
        node = graph.nodes[node_id]
        if node.node_type in _MODEL_TYPES:
            placement = placements[node_id]
            key = _role_key(node, placement)
            if keys.setdefault(key, (node.node_role, placement))[1] != placement:
                raise ConfigError(
                    f"node {node_id!r}: all nodes of role {key!r} must share one placement group, "
                    f"got {keys[key][1]!r} and {placement!r}"
                )
    return keys


def _handoffs(graph: TaskGraph, order: list[str], placements: Mapping[str, str]) -> list[Handoff]:
    """Every edge between placement groups, with the role key whose dp layout each side's batch is in.

    A model node's batch is in its role's layout; a compute node's stays where its same-group input was,
    or, fed from elsewhere, lands in the layout of its group's first model role.
    """
    first_role: dict[str, str] = {}
    for node_id in order:
        node = graph.nodes[node_id]
        if node.node_type in _MODEL_TYPES:
            first_role.setdefault(placements[node_id], _role_key(node, placements[node_id]))
    data_role: dict[str, str | None] = {}
    edges = []
    for node_id in order:
        node, group = graph.nodes[node_id], placements[node_id]
        same = [d for d in node.dependencies if placements[d] == group]
        if node.node_type in _MODEL_TYPES:
            data_role[node_id] = _role_key(node, group)
        else:
            data_role[node_id] = data_role[same[0]] if same else first_role.get(group)
        for dep in node.dependencies:
            if placements[dep] in (ALL_RANKS, group):
                continue
            sides = {dep: data_role[dep], node_id: data_role[node_id]}
            lacking = next((n for n, role in sides.items() if role is None), None)
            if lacking is not None:
                raise ConfigError(
                    f"placement group {placements[lacking]!r} has no model node, so {lacking!r} has no "
                    f"data-parallel layout to hand data over in ({dep!r} -> {node_id!r})"
                )
            edges.append(Handoff(dep, node_id, sides[dep], sides[node_id]))
    return edges


def _check_parallelism_keys(parallelism: Parallelism, role_keys: Mapping[str, tuple[NodeRole, str]]) -> None:
    known = set(role_keys) | {role.value for role, _ in role_keys.values()}
    for key, spec in parallelism.items():
        if key not in known:
            raise ConfigError(
                f"parallelism given for {key!r}, but the graph has no model node with that role; "
                f"model roles: {', '.join(sorted(known))}"
            )
        if not isinstance(spec, Mapping):
            raise ConfigError(f"parallelism[{key!r}] must be a mapping like {{'tp': 2}}, got {spec!r}")
        unknown = [k for k in spec if k not in _SPEC_KEYS]
        if unknown:
            raise ConfigError(f"parallelism[{key!r}] has unknown key {unknown[0]!r}; allowed: tp, sp, dp")
        if "tp" in spec and "sp" in spec:
            raise ConfigError(f"parallelism[{key!r}] sets both tp and sp; a role shares its data over one of them")


def _role_mesh(
    key: str, role: NodeRole, placement: str, ranks: tuple[int, ...], spec: Mapping[str, int], per_node: int
) -> RoleGroups:
    """Lay ``ranks`` out as a dp x tp (or dp x sp) mesh and check it fits the machines."""
    kind = "sp" if "sp" in spec else "tp"
    tp = _positive_int(spec.get(kind, 1), f"{key} {kind}")
    if kind == "tp" and tp > per_node:
        raise ConfigError(f"{key} tp={tp} exceeds {per_node} devices per node (tp groups never span nodes)")
    if len(ranks) % tp:
        raise ConfigError(f"{key}: its {len(ranks)} ranks are not divisible by {kind}={tp}")
    dp = len(ranks) // tp
    if "dp" in spec and _positive_int(spec["dp"], f"{key} dp") != dp:
        raise ConfigError(f"{key} dp={spec['dp']} does not match {len(ranks)} ranks / {kind}={tp} = {dp}")
    tp_groups = [ranks[d * tp : (d + 1) * tp] for d in range(dp)]
    for group in tp_groups if kind == "tp" else ():  # an sp group may span nodes (its all-to-all crosses them)
        if len({rank // per_node for rank in group}) > 1:
            raise ConfigError(
                f"{key} tp group {list(group)} spans nodes; make the placement sizes multiples of "
                f"{per_node} devices per node or of tp={tp}"
            )
    dp_groups = [tuple(group[t] for group in tp_groups) for t in range(tp)]
    return RoleGroups(key, role, placement, ranks, tp, dp, tp_groups, dp_groups, model_parallel=kind)


def _worker(
    rank: int,
    graph: TaskGraph,
    placements: Mapping[str, str],
    ranges: Mapping[str, tuple[int, ...]],
    groups: Mapping[str, RoleGroups],
    per_node: int,
) -> WorkerPlan:
    own = next((name for name, ranks in ranges.items() if name != ALL_RANKS and rank in ranks), ALL_RANKS)
    local = [node_id for node_id in graph.nodes if placements[node_id] in (ALL_RANKS, own)]
    remote = {
        node_id: [dep for dep in graph.nodes[node_id].dependencies if dep not in local] for node_id in local
    }
    coords = {}
    for key, mesh in groups.items():
        if rank in mesh.ranks:
            position = mesh.ranks.index(rank)
            coords[key] = RoleCoord(
                position // mesh.tp_size, mesh.dp_size, position % mesh.tp_size, mesh.tp_size, mesh.model_parallel
            )
    return WorkerPlan(
        rank=rank,
        node_index=rank // per_node,
        local_rank=rank % per_node,
        placement=own,
        graph=graph.subgraph(local, f"{graph.graph_id}_rank{rank}"),
        coords=coords,
        remote_inputs={node_id: deps for node_id, deps in remote.items() if deps},
    )


def make_plan(
    graph: TaskGraph,
    nnodes: int,
    devices_per_node: int,
    parallelism: Parallelism | None = None,
    placement_sizes: Mapping[str, int] | None = None,
    agent_placement: str = "auto",
    resolved: ResolvedRun | None = None,
) -> ExecutionPlan:
    """Plan ``graph`` onto ``nnodes x devices_per_node`` ranks; same inputs, same plan, on every process.

    ``agent_placement`` (auto | own | shared) places the agents of a multi-agent graph (see ``placement``).
    """
    nnodes = _positive_int(nnodes, "nnodes")
    per_node = _positive_int(devices_per_node, "devices_per_node")
    world_size = nnodes * per_node
    parallelism = parallelism or {}
    graph.validate_graph(resolve_executables=False)
    graph = place_agents(graph, agent_placement, world_size)
    order = graph.get_execution_order()
    placements = node_placements(graph)
    check_handoffs(graph, placements)
    named = list(dict.fromkeys(placements[n] for n in order if placements[n] != ALL_RANKS))
    ranges = {ALL_RANKS: tuple(range(world_size)), **split_ranks(named, world_size, placement_sizes)}
    role_keys = _model_role_keys(graph, order, placements)
    _check_parallelism_keys(parallelism, role_keys)
    groups = {
        key: _role_mesh(
            key,
            role,
            placement,
            ranges[placement],
            parallelism.get(key, parallelism.get(role.value, {})),
            per_node,
        )
        for key, (role, placement) in role_keys.items()
    }
    workers = [_worker(rank, graph, placements, ranges, groups, per_node) for rank in range(world_size)]
    plan = ExecutionPlan(
        graph.graph_id, nnodes, per_node, order, ranges, groups, workers, _handoffs(graph, order, placements)
    )
    return plan if resolved is None else replace(plan, resolved=resolved)


def plan_from_config(graph: TaskGraph, cfg: SiirlConfig | None) -> ExecutionPlan:
    """``make_plan`` with the run config: ``trainer.nnodes``, ``trainer.n_gpus_per_node`` (when > 0) else
    ``trainer.n_devices_per_node``, the rollout's ``tensor_model_parallel_size``, the trained and reference
    models' ``ulysses_sequence_parallel_size`` and ``dag.agent_placement``.

    First the node contracts are checked against the config (``check_contracts``), so a graph that
    would fail at step 1 for a missing key or model is refused here, in one line. ``None``: the defaults.
    """
    cfg = or_defaults(cfg)
    resolved = resolve(cfg)
    check_contracts(graph, cfg)
    check_async_graph(graph, resolved.schedule)
    per_node = cfg.trainer.n_gpus_per_node or cfg.trainer.n_devices_per_node
    model_roles = {n.node_role for n in graph if n.node_type in _MODEL_TYPES}
    parallelism: dict[str, dict[str, int]] = {}
    if NodeRole.ROLLOUT in model_roles:
        parallelism[NodeRole.ROLLOUT.value] = {"tp": cfg.actor_rollout_ref.rollout.tensor_model_parallel_size}
    for role, size in sequence_parallel_sizes(cfg).items():
        if size > 1 and NodeRole(role) in model_roles:
            parallelism[role] = {"sp": size}
    separate = separate_layout(graph, cfg, per_node, resolved.schedule)
    if separate is not None:  # verl's fully-async layout: the rollout on nodes of its own
        graph, nnodes, per_node, sizes = separate
        return make_plan(graph, nnodes, per_node, parallelism, placement_sizes=sizes, resolved=resolved)
    return make_plan(
        graph, cfg.trainer.nnodes, per_node, parallelism, agent_placement=cfg.dag.agent_placement, resolved=resolved,
    )
