"""Human views of a plan: a text report, a Graphviz DOT picture (PNG when ``dot`` is installed)."""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

from siirl.execution.dag.node_types import NodeRole, NodeType
from siirl.execution.dag.task_graph import TaskGraph
from siirl.execution.dag.workflow_yaml import dump_workflow_yaml
from siirl.execution.scheduler.placement import PLACEMENT_KEY
from siirl.execution.scheduler.plan import ALL_RANKS, ExecutionPlan, span

logger = logging.getLogger(__name__)

_SHAPES = {
    NodeType.MODEL_INFERENCE: "box",
    NodeType.MODEL_TRAIN: "box3d",
    NodeType.COMPUTE: "ellipse",
    NodeType.DATA_LOAD: "cylinder",
}
_COLORS = {
    NodeRole.ROLLOUT: "#8dd3c7",
    NodeRole.ACTOR: "#fb8072",
    NodeRole.CRITIC: "#bebada",
    NodeRole.REFERENCE: "#80b1d3",
    NodeRole.TEACHER: "#80b1d3",
    NodeRole.REWARD: "#fdb462",
    NodeRole.ADVANTAGE: "#b3de69",
    NodeRole.DYNAMIC_SAMPLING: "#fccde5",
    NodeRole.EMBODIED_SAMPLING: "#fccde5",
    NodeRole.DEFAULT: "#d9d9d9",
}


def render_plan(plan: ExecutionPlan) -> str:
    """Execution order, placements with their nodes, the per-rank table and the process-group table."""
    per_placement: dict[str, dict[str, None]] = {name: {} for name in plan.placements}
    for worker in plan.workers:
        for node in worker.graph:
            per_placement[node.config.get(PLACEMENT_KEY, ALL_RANKS)][node.node_id] = None
    lines = [
        (
            f"Plan for graph {plan.graph_id!r}: {plan.nnodes} node(s) x {plan.devices_per_node} device(s) "
            f"= {plan.world_size} rank(s)"
        ),
        "Execution order: " + " -> ".join(plan.execution_order),
        "Placements:",
    ]
    for name, ranks in plan.placements.items():
        if per_placement[name]:
            lines.append(f"  {name}: ranks {span(ranks)}: {', '.join(per_placement[name])}")
    lines += _agent_lines(plan)
    if plan.handoffs:
        lines.append("Hand-offs between placement groups: " + ", ".join(h.key for h in plan.handoffs))
    lines += ["", "Ranks:", plan.to_table(), "", "Process groups:", plan.groups_table()]
    return "\n".join(lines)


def _agent_lines(plan: ExecutionPlan) -> list[str]:
    """``Agents:`` and, per agent of a multi-agent graph, the ranks holding its actor."""
    agents = {key.split("/")[0]: g for key, g in plan.groups.items() if key.endswith(f"/{NodeRole.ACTOR.value}")}
    agents = {name: g for name, g in agents.items() if f"{name}/{NodeRole.ROLLOUT.value}" in plan.groups}
    if not agents:
        return []
    shared = all(len(g.ranks) == plan.world_size for g in agents.values())
    lines = [f"Agents ({'shared: every rank holds every agent' if shared else 'own ranks per agent'}):"]
    lines += [f"  {name}: ranks {span(g.ranks)}" for name, g in agents.items()]
    return lines


def _quote(*lines: str) -> str:
    """A DOT string literal; several ``lines`` are joined with DOT's own ``\\n`` line break."""
    escaped = (line.replace("\\", "\\\\").replace('"', '\\"') for line in lines)
    return '"' + "\\n".join(escaped) + '"'


def graph_to_dot(graph: TaskGraph) -> str:
    """DOT source: shape by node type, colour by role, one cluster per placement group."""
    lines = [
        f"digraph {_quote(graph.graph_id)} {{",
        "  rankdir=LR;",
        '  node [style=filled, fontname="Helvetica"];',
    ]
    clusters: dict[str, list[str]] = {}
    for node in graph:
        label = _quote(node.node_id, f"{node.node_type.name} / {node.node_role.name}")
        attrs = f"label={label}, shape={_SHAPES[node.node_type]}, fillcolor={_quote(_COLORS[node.node_role])}"
        line = f"  {_quote(node.node_id)} [{attrs}];"
        placement = node.config.get(PLACEMENT_KEY, ALL_RANKS)
        if placement == ALL_RANKS:
            lines.append(line)
        else:
            clusters.setdefault(str(placement), []).append(line)
    for i, (name, members) in enumerate(clusters.items()):
        lines += [
            f"  subgraph cluster_{i} {{",
            f"    label={_quote(name)};",
            *("  " + m for m in members),
            "  }",
        ]
    for node in graph:
        lines += [f"  {_quote(dep)} -> {_quote(node.node_id)};" for dep in node.dependencies]
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_dot(graph: TaskGraph, path: str | Path) -> dict[str, Path]:
    """Write ``path`` (DOT) and, if the Graphviz ``dot`` binary is installed, a PNG next to it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(graph_to_dot(graph), encoding="utf-8")
    written = {"dot": path}
    dot_binary = shutil.which("dot")
    if dot_binary is None:
        logger.info("Graphviz 'dot' not installed: skipped the PNG of %s (install graphviz to get it)", path)
        return written
    png = path.with_suffix(".png")
    result = subprocess.run(
        [dot_binary, "-Tpng", str(path), "-o", str(png)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        logger.warning("dot failed on %s (exit %d): %s", path, result.returncode, result.stderr.strip())
        return written
    written["png"] = png
    return written


def show_plan(graph: TaskGraph, plan: ExecutionPlan, out_dir: str | Path) -> dict[str, Path]:
    """Write ``plan.txt``, ``workflow.yaml`` and ``graph.dot`` (+ ``graph.png``) to ``out_dir``.

    Returns the written paths keyed ``text``, ``yaml``, ``dot`` and, when Graphviz made it, ``png``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"text": out_dir / "plan.txt", "yaml": out_dir / "workflow.yaml"}
    paths["text"].write_text(render_plan(plan) + "\n", encoding="utf-8")
    dump_workflow_yaml(graph, paths["yaml"])
    paths.update(write_dot(placed_graph(graph, plan), out_dir / "graph.dot"))
    return paths


def placed_graph(graph: TaskGraph, plan: ExecutionPlan) -> TaskGraph:
    """``graph`` with the placement groups the planner chose (e.g. one per agent) written into the node
    configs, so the picture clusters nodes by the ranks that really run them."""
    placed = graph.copy()
    for node in placed:
        groups = {w.placement for w in plan.workers if node.node_id in w.graph.nodes}
        if len(groups) == 1 and ALL_RANKS not in groups:
            node.config = {**node.config, PLACEMENT_KEY: groups.pop()}
    return placed
