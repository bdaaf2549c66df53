"""TaskGraph: nodes plus adjacency, with validation that names the culprit and a deterministic order."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from siirl.execution.dag.node import Node
from siirl.execution.dag.node_types import DAGValidationError


class TaskGraph:
    """A DAG of ``Node``s; ``adj[n]`` lists n's children, ``rev_adj[n]`` its parents (insertion order).

    Ties in the topological order are broken by insertion order, so the same graph always runs (and
    prints) the same way on every worker.
    """

    def __init__(self, graph_id: str, description: str = "") -> None:
        if not isinstance(graph_id, str) or not graph_id.strip():
            raise DAGValidationError(f"graph_id must be a non-empty string, got {graph_id!r}")
        self.graph_id = graph_id
        self.description = description
        self.nodes: dict[str, Node] = {}
        self.adj: dict[str, list[str]] = {}
        self.rev_adj: dict[str, list[str]] = {}

    def add_node(self, node: Node) -> None:
        if not isinstance(node, Node):
            raise DAGValidationError(
                f"graph {self.graph_id!r}: add_node expects a Node, got {type(node).__name__}"
            )
        if node.node_id in self.nodes:
            raise DAGValidationError(f"graph {self.graph_id!r}: duplicate node_id {node.node_id!r}")
        self.nodes[node.node_id] = node
        self.adj.clear()
        self.rev_adj.clear()

    def get_node(self, node_id: str) -> Node:
        if node_id not in self.nodes:
            raise KeyError(f"graph {self.graph_id!r} has no node {node_id!r}")
        return self.nodes[node_id]

    def get_nodes(self) -> list[Node]:
        """The nodes in execution (topological) order, as a worker runs them."""
        return [self.nodes[node_id] for node_id in self.get_execution_order()]

    def ancestors(self, node_id: str) -> set[str]:
        """Every node ``node_id`` depends on, directly or through others."""
        self.build_adjacency_lists()
        seen: set[str] = set()
        stack = list(self.rev_adj[node_id])
        while stack:
            parent = stack.pop()
            if parent not in seen:
                seen.add(parent)
                stack.extend(self.rev_adj[parent])
        return seen

    def build_adjacency_lists(self) -> None:
        """Fill ``adj`` / ``rev_adj``; a dependency on a node that is not in the graph is an error."""
        adj: dict[str, list[str]] = {node_id: [] for node_id in self.nodes}
        rev_adj: dict[str, list[str]] = {node_id: [] for node_id in self.nodes}
        for node in self.nodes.values():
            for dep in node.dependencies:
                if dep not in self.nodes:
                    raise DAGValidationError(
                        f"graph {self.graph_id!r}: node {node.node_id!r} depends on missing node {dep!r}"
                    )
                adj[dep].append(node.node_id)
                rev_adj[node.node_id].append(dep)
        self.adj, self.rev_adj = adj, rev_adj

    def validate_graph(self, resolve_executables: bool = True) -> None:
        """Raise ``DAGValidationError`` on an empty graph, a missing dependency, a cycle or a bad function.

        ``resolve_executables=False`` checks the structure only (no imports), e.g. for plotting a
        workflow on a machine without the model stack.
        """
        if not self.nodes:
            raise DAGValidationError(f"graph {self.graph_id!r} is empty: add at least one node")
        self.get_execution_order()
        if resolve_executables:
            for node in self.nodes.values():
                _ = node.executable

    def get_execution_order(self) -> list[str]:
        """Node ids in topological order (Kahn's algorithm, ties by insertion order).

        Adjacency is rebuilt first, so edits to a node's dependencies are never served stale.
        """
        self.build_adjacency_lists()
        pending = {node_id: len(parents) for node_id, parents in self.rev_adj.items()}
        position = {node_id: i for i, node_id in enumerate(self.nodes)}
        ready = [node_id for node_id, count in pending.items() if count == 0]
        order: list[str] = []
        while ready:
            current = min(ready, key=position.__getitem__)
            ready.remove(current)
            order.append(current)
            for child in self.adj[current]:
                pending[child] -= 1
                if pending[child] == 0:
                    ready.append(child)
        if len(order) != len(self.nodes):
            raise DAGValidationError(
                f"graph {self.graph_id!r} has a cycle: {self._describe_cycle(set(order))}"
            )
        return order

    def _describe_cycle(self, ordered: set[str]) -> str:
        """Walk parent links among the unordered nodes until one repeats; that loop is a cycle."""
        stuck = [node_id for node_id in self.nodes if node_id not in ordered]
        walk, seen = [stuck[0]], {stuck[0]: 0}
        while True:
            parent = next(dep for dep in self.rev_adj[walk[-1]] if dep not in ordered)
            if parent in seen:
                cycle = list(reversed(walk[seen[parent] :]))
                break
            seen[parent] = len(walk)
            walk.append(parent)
        position = {node_id: i for i, node_id in enumerate(self.nodes)}
        start = min(range(len(cycle)), key=lambda i: position[cycle[i]])
        cycle = cycle[start:] + cycle[:start]
        return " -> ".join([*cycle, cycle[0]])

    def subgraph(self, node_ids: Iterable[str], graph_id: str) -> TaskGraph:
        """Copy of the named nodes (in this graph's order); dependencies on left-out nodes are dropped."""
        keep = set(node_ids)
        unknown = sorted(keep - set(self.nodes))
        if unknown:
            raise DAGValidationError(f"graph {self.graph_id!r} has no node {unknown[0]!r}")
        sub = TaskGraph(graph_id, self.description)
        for node_id, node in self.nodes.items():
            if node_id in keep:
                sub.add_node(node.copy([d for d in node.dependencies if d in keep]))
        sub.build_adjacency_lists()
        return sub

    def copy(self, graph_id: str | None = None) -> TaskGraph:
        """Independent copy with every node and dependency kept (even dangling ones, for validation)."""
        clone = TaskGraph(graph_id or self.graph_id, self.description)
        for node in self.nodes.values():
            clone.add_node(node.copy())
        return clone

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TaskGraph):
            return NotImplemented
        return (
            self.graph_id == other.graph_id
            and self.description == other.description
            and list(self.nodes.items()) == list(other.nodes.items())
        )

    __hash__ = None  # type: ignore[assignment]  # mutable container

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.nodes

    def __repr__(self) -> str:
        return f"TaskGraph({self.graph_id!r}, nodes={list(self.nodes)})"
