"""The algorithm as a DAG: nodes, the TaskGraph, the Pipeline builder, built-in graphs and workflow YAML."""

from siirl.execution.dag.contract import NodeContract, node_contract
from siirl.execution.dag.node import NEED_MORE_DATA, Node, NodeOutput, resolve_callable
from siirl.execution.dag.node_types import DAGValidationError, NodeRole, NodeType
from siirl.execution.dag.pipeline import Pipeline
from siirl.execution.dag.task_graph import TaskGraph
from siirl.execution.dag.workflow_yaml import dump_workflow_yaml, load_workflow_yaml

__all__ = [
    "NEED_MORE_DATA",
    "DAGValidationError",
    "Node",
    "NodeContract",
    "NodeOutput",
    "NodeRole",
    "NodeType",
    "Pipeline",
    "TaskGraph",
    "dump_workflow_yaml",
    "load_workflow_yaml",
    "node_contract",
    "resolve_callable",
]
