"""Fluent builder: ``Pipeline(...).add_node(...).add_node(...).build()`` gives a validated TaskGraph."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from siirl.execution.dag.contract import NodeContract, as_keys
from siirl.execution.dag.node import Node, callable_ref
from siirl.execution.dag.node_types import DAGValidationError, NodeRole, NodeType
from siirl.execution.dag.task_graph import TaskGraph


class Pipeline:
    """Describe an algorithm as named steps and their dependencies; ``build()`` checks it all at once."""

    def __init__(self, pipeline_id: str, description: str = "") -> None:
        self._graph = TaskGraph(pipeline_id, description)

    @classmethod
    def from_graph(cls, graph: TaskGraph, pipeline_id: str | None = None) -> Pipeline:
        """A pipeline starting from a copy of ``graph`` (e.g. a built-in one), to extend with ``insert_after``
        or ``add_node`` instead of rebuilding it node by node."""
        pipeline = cls(pipeline_id or graph.graph_id, graph.description)
        pipeline._graph = graph.copy(pipeline_id)
        return pipeline

    @property
    def pipeline_id(self) -> str:
        return self._graph.graph_id

    @property
    def description(self) -> str:
        return self._graph.description

    def add_node(
        self,
        node_id: str,
        func: str | Callable[..., Any],
        deps: Sequence[str] | None = None,
        node_type: NodeType | str = NodeType.COMPUTE,
        node_role: NodeRole | str = NodeRole.DEFAULT,
        only_forward_compute: bool = False,
        config: dict[str, Any] | None = None,
        reads: Sequence[str] | None = None,
        writes: Sequence[str] | None = None,
        roles: Sequence[str] | None = None,
    ) -> Pipeline:
        """Add one step; ``func`` is ``"module:function"``, ``"module:Class.method"`` or a module-level function.

        ``reads`` / ``writes`` / ``roles`` declare the node's contract (batch keys, model roles) when its
        function does not carry one; the planner checks them before any worker starts.
        """
        ref = func if isinstance(func, str) else callable_ref(func, f"node {node_id!r}")
        owner = f"node {node_id!r}"
        declared = (reads, writes, roles) != (None, None, None)
        contract = (
            NodeContract(
                as_keys(reads, f"{owner} reads"), as_keys(writes, f"{owner} writes"), as_keys(roles, f"{owner} roles")
            )
            if declared
            else None
        )
        self._graph.add_node(
            Node(
                node_id=node_id,
                node_type=node_type,
                node_role=node_role,
                executable_ref=ref,
                dependencies=[] if deps is None else deps,
                only_forward_compute=only_forward_compute,
                config=dict(config or {}),
                contract=contract,
            )
        )
        return self

    def insert_after(self, after: str, node_id: str, func: str | Callable[..., Any], **node: Any) -> Pipeline:
        """Add a node that runs right after node ``after``: it depends on ``after``, and every node that
        depended on ``after`` depends on it instead. ``node`` takes ``add_node``'s other arguments."""
        if after not in self._graph:
            raise DAGValidationError(
                f"cannot insert node {node_id!r} after {after!r}: pipeline {self.pipeline_id!r} has no such node "
                f"(nodes: {', '.join(self._graph.nodes)})"
            )
        if "deps" in node:
            raise DAGValidationError(f"insert_after({after!r}, {node_id!r}) takes no deps: it runs after {after!r}")
        followers = [n for n in self._graph.nodes.values() if after in n.dependencies]
        self.add_node(node_id, func, deps=[after], **node)
        for follower in followers:
            deps = [node_id if dep == after else dep for dep in follower.dependencies]
            self._graph.nodes[follower.node_id] = follower.copy(deps)
        return self

    def build(self, resolve_executables: bool = True) -> TaskGraph:
        """Validate (structure, cycles and, by default, that every func imports) and return a fresh graph."""
        graph = self._graph.copy()
        graph.validate_graph(resolve_executables=resolve_executables)
        return graph
