"""Workflow files (``configs/workflows/*.yaml``): a TaskGraph as plain YAML, with an exact round trip.

Format::

    pipeline_id: grpo
    description: ...
    nodes:
      - node_id: rollout_actor
        node_type: MODEL_INFERENCE
        node_role: ROLLOUT
        dependencies: []
        func: siirl.dag_worker.builtin_nodes:generate
        only_forward_compute: true   # optional, default false
        config: {placement_group: a} # optional, default {}
        reads: [responses]           # optional contract: batch keys read / written, model roles
        writes: [token_level_scores]
        roles: [actor]

siiRL's published format is read unchanged: ``dag_id`` may stand for ``pipeline_id`` (which defaults to
the file name), and a node without ``func`` runs the built-in function of its role
(``siirl.execution.dag.role_defaults``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from siirl.errors import ConfigError
from siirl.execution.dag.contract import NodeContract, as_keys
from siirl.execution.dag.node import Node
from siirl.execution.dag.node_types import DAGValidationError, NodeRole, NodeType, parse_enum
from siirl.execution.dag.role_defaults import default_func
from siirl.execution.dag.task_graph import TaskGraph
from siirl.user_files import load_user_yaml

_TOP_KEYS = ("pipeline_id", "dag_id", "description", "nodes")
_REQUIRED_NODE_KEYS = ("node_id", "node_type", "node_role")
_CONTRACT_KEYS = ("reads", "writes", "roles")
_NODE_KEYS = (*_REQUIRED_NODE_KEYS, "func", "dependencies", "only_forward_compute", "config", *_CONTRACT_KEYS)


ENV_REWARDS_NEED_MARFT = (
    "actor_rollout_ref.rollout.agent.rewards_with_env=true rewards the agent of a MARFT workflow that names an "
    "environment (env_path); pass that workflow as dag.workflow_path (docs/agents.md)"
)


def is_marft_layout(data: Any) -> bool:
    """True for the original siiRL's multi-agent (MARFT) layout: ``actor_N_config`` sections or nodes
    with an ``agent_group``; ``dag.workflow_path`` reads those as a team (``siirl.execution.dag.marft_workflow``)."""
    if not isinstance(data, Mapping):
        return False
    nodes = data.get("nodes") if isinstance(data.get("nodes"), list) else []
    per_agent = any(str(key).startswith("actor_") and str(key).endswith("_config") for key in data)
    return per_agent or any(isinstance(node, Mapping) and "agent_group" in node for node in nodes)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _check_keys(entry: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    unknown = [key for key in entry if key not in allowed]
    if unknown:
        raise DAGValidationError(f"{where} has unknown key {unknown[0]!r}; allowed: {', '.join(allowed)}")


def _node_from_entry(entry: Any, index: int) -> Node:
    if not isinstance(entry, Mapping):
        raise DAGValidationError(f"nodes[{index}] must be a mapping, got {type(entry).__name__}")
    where = f"node {entry.get('node_id', f'#{index}')!r}"
    _check_keys(entry, _NODE_KEYS, where)
    missing = [key for key in _REQUIRED_NODE_KEYS if key not in entry]
    if missing:
        raise DAGValidationError(f"{where} is missing required key {missing[0]!r}")
    node_type = parse_enum(NodeType, entry["node_type"], f"{where} node_type")
    node_role = parse_enum(NodeRole, entry["node_role"], f"{where} node_role")
    forward_only = entry.get("only_forward_compute", False)
    func = entry.get("func") or default_func(node_type, node_role, bool(forward_only))
    if func is None:
        raise DAGValidationError(f"{where} has no 'func' and role {node_role.name} has no built-in function")
    contract = None
    if any(key in entry for key in _CONTRACT_KEYS):
        contract = NodeContract(*(as_keys(entry.get(key), f"{where} {key}") for key in _CONTRACT_KEYS))
    return Node(
        node_id=entry["node_id"],
        node_type=node_type,
        node_role=node_role,
        executable_ref=func,
        dependencies=entry.get("dependencies") or [],
        only_forward_compute=forward_only,
        config=entry.get("config") or {},
        contract=contract,
    )


def workflow_from_dict(
    data: Any, resolve_executables: bool = True, default_id: str | None = None
) -> TaskGraph:
    """Build and validate a TaskGraph from the parsed YAML mapping (``default_id``: id when none is given)."""
    if not isinstance(data, Mapping):
        raise DAGValidationError(f"a workflow must be a mapping with {', '.join(_TOP_KEYS)}")
    if is_marft_layout(data):
        raise DAGValidationError(
            "workflow is in the original siiRL's MARFT layout (agent_group, actor_N_config), which builds a team "
            "from the run's config: pass it as dag.workflow_path (docs/agents.md)"
        )
    _check_keys(data, _TOP_KEYS, "workflow")
    if "pipeline_id" in data and "dag_id" in data:
        raise DAGValidationError("workflow sets both 'pipeline_id' and 'dag_id'; keep one")
    graph_id = data.get("pipeline_id", data.get("dag_id", default_id))
    if graph_id is None:
        raise DAGValidationError("workflow is missing required key 'pipeline_id'")
    nodes = data.get("nodes") or []
    if not isinstance(nodes, list):
        raise DAGValidationError(f"workflow 'nodes' must be a list, got {type(nodes).__name__}")
    graph = TaskGraph(graph_id, data.get("description") or "")
    for index, entry in enumerate(nodes):
        graph.add_node(_node_from_entry(entry, index))
    graph.validate_graph(resolve_executables=resolve_executables)
    return graph


def load_workflow_yaml(path: str | Path, resolve_executables: bool = True) -> TaskGraph:
    """Read a workflow file; every problem is a one-line ``DAGValidationError`` prefixed with the path."""
    path = Path(path)
    try:
        data = load_user_yaml(path, "workflow file")
    except ConfigError as exc:
        raise DAGValidationError(str(exc)) from None
    try:
        return workflow_from_dict(data, resolve_executables, default_id=path.stem)
    except DAGValidationError as exc:
        raise DAGValidationError(f"{path}: {exc}") from exc


def workflow_to_dict(graph: TaskGraph) -> dict[str, Any]:
    """The mapping ``dump_workflow_yaml`` writes; optional keys appear only when not at their default."""
    nodes = []
    for node in graph.nodes.values():
        entry: dict[str, Any] = {
            "node_id": node.node_id,
            "node_type": node.node_type.name,
            "node_role": node.node_role.name,
            "dependencies": list(node.dependencies),
            "func": node.executable_ref,
        }
        if node.only_forward_compute:
            entry["only_forward_compute"] = True
        if node.config:
            entry["config"] = node.config
        if node.contract is not None:
            entry.update({key: list(getattr(node.contract, key)) for key in _CONTRACT_KEYS})
        nodes.append(entry)
    return {"pipeline_id": graph.graph_id, "description": graph.description, "nodes": nodes}


class _WorkflowDumper(yaml.SafeDumper):
    """Safe dumper writing short scalar lists inline (``dependencies: [a, b]``) for readable diffs."""


def _represent_list(dumper: yaml.SafeDumper, items: list[Any]) -> yaml.Node:
    inline = all(isinstance(item, (str, int, float, bool)) or item is None for item in items)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", items, flow_style=inline)


_WorkflowDumper.add_representer(list, _represent_list)


def dump_workflow_yaml(graph: TaskGraph, path: str | Path | None = None) -> str:
    """YAML text of ``graph`` (written to ``path`` when given); ``load_workflow_yaml`` reads it back equal."""
    data = workflow_to_dict(graph)
    for entry in data["nodes"]:
        try:
            yaml.dump(entry.get("config", {}), Dumper=_WorkflowDumper)
        except yaml.YAMLError as exc:
            raise DAGValidationError(
                f"node {entry['node_id']!r} config is not plain YAML data ({_one_line(exc)})"
            ) from exc
    text = yaml.dump(data, Dumper=_WorkflowDumper, sort_keys=False, default_flow_style=False)
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text
