"""Importable targets for ``func`` / ``custom_pipeline_fn`` references used by the DAG tests."""

from siirl.algorithms import declare_estimator_needs
from siirl.execution.dag import NodeOutput, Pipeline, TaskGraph

NOT_CALLABLE = 42


def passthrough(batch, config=None, **kwargs):
    return NodeOutput(batch)


class Stage:
    def run(self, batch, config=None, **kwargs):
        return NodeOutput(batch, info={"stage": self})


def returns_list():
    return ["not", "a", "graph"]


def two_nodes() -> TaskGraph:
    return (
        Pipeline("two_nodes")
        .add_node("a", func="dag_helpers:passthrough")
        .add_node("b", func="dag_helpers:passthrough", deps=["a"])
        .build()
    )


def from_config(cfg) -> TaskGraph:
    """Reads the (typed) config it is given, so tests can see that select_pipeline passed it."""
    return Pipeline(cfg.trainer.experiment_name).add_node("only", func="dag_helpers:passthrough").build()


def returns_cyclic_graph() -> TaskGraph:
    from siirl.execution.dag import Node

    graph = TaskGraph("handmade")
    graph.add_node(Node("x", "COMPUTE", "DEFAULT", "dag_helpers:passthrough", ["y"]))
    graph.add_node(Node("y", "COMPUTE", "DEFAULT", "dag_helpers:passthrough", ["x"]))
    return graph


@declare_estimator_needs(values=True, groups=False)
def value_estimator(inputs):
    """Advantage = value-free return minus the critic's value (declares that it needs values)."""
    return inputs.token_level_rewards - inputs.require("values"), inputs.token_level_rewards


def plain_estimator(inputs):
    """Raw outcome scores as advantages; declares nothing, so it is treated like GRPO."""
    return inputs.token_level_rewards, inputs.token_level_rewards
