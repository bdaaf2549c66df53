"""The TaskGraph a run trains: the user's ``dag.custom_pipeline_fn``, else a ``dag.workflow_path`` file, else
the built-in pipeline the config names.

Apart from ``builtin_pipelines`` because a workflow file's MARFT team is built from that module's steps.
"""

from __future__ import annotations

import inspect
from dataclasses import asdict

from siirl.errors import ConfigError, SiirlUserError
from siirl.execution.dag.builtin_pipelines import PIPELINES, builtin_pipeline_name
from siirl.execution.dag.marft_workflow import load_run_workflow
from siirl.execution.dag.node import resolve_callable
from siirl.execution.dag.node_types import DAGValidationError
from siirl.execution.dag.pipeline import Pipeline
from siirl.execution.dag.task_graph import TaskGraph
from siirl.execution.dag.workflow_yaml import ENV_REWARDS_NEED_MARFT
from siirl.params.root import SiirlConfig, or_defaults


def _run_custom_pipeline_fn(ref: str, cfg: SiirlConfig) -> TaskGraph:
    """Call the user's builder (with the config if it takes a parameter) and check what it returns."""
    builder = resolve_callable(ref, "dag.custom_pipeline_fn")
    takes_config = bool(inspect.signature(builder).parameters)
    try:
        graph = builder(cfg) if takes_config else builder()
    except SiirlUserError:
        raise
    except Exception as exc:
        raise DAGValidationError(
            f"dag.custom_pipeline_fn {ref!r} raised {type(exc).__name__}: {' '.join(str(exc).split())}"
        ) from exc
    if not isinstance(graph, TaskGraph):
        raise DAGValidationError(
            f"dag.custom_pipeline_fn {ref!r} returned {type(graph).__name__}, expected a TaskGraph "
            "(return Pipeline(...).build())"
        )
    graph.validate_graph()
    return graph


def select_pipeline(cfg: SiirlConfig | None) -> TaskGraph:
    """The run's TaskGraph: ``dag.custom_pipeline_fn``, else ``dag.workflow_path``, else a built-in, with the
    ``dag.insert_nodes`` added."""
    cfg = or_defaults(cfg)
    graph = _chosen_pipeline(cfg)
    if not cfg.dag.insert_nodes:
        return graph
    pipeline = Pipeline.from_graph(graph)
    for entry in cfg.dag.insert_nodes:
        node = asdict(entry)
        pipeline.insert_after(node.pop("after"), node.pop("node_id"), node.pop("func"), **node)
    return pipeline.build()


def _chosen_pipeline(cfg: SiirlConfig) -> TaskGraph:
    custom_fn, workflow_path = cfg.dag.custom_pipeline_fn, cfg.dag.workflow_path
    if custom_fn and workflow_path:
        raise ConfigError("set only one of dag.custom_pipeline_fn and dag.workflow_path")
    if workflow_path:
        return load_run_workflow(workflow_path, cfg)
    if cfg.actor_rollout_ref.rollout.agent.rewards_with_env:
        raise ConfigError(ENV_REWARDS_NEED_MARFT)
    if custom_fn:
        return _run_custom_pipeline_fn(custom_fn, cfg)
    return PIPELINES.get(builtin_pipeline_name(cfg))(cfg)
