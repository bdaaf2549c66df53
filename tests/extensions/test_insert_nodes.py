"""A built-in pipeline is extended by inserting a node after a named one (``Pipeline.insert_after`` and the
config's ``dag.insert_nodes``) instead of copying the graph; the contracts still check the result."""

import pytest

from siirl.errors import ConfigError
from siirl.execution.dag import Pipeline
from siirl.execution.dag.builtin_pipelines import grpo_pipeline
from siirl.execution.dag.node_types import DAGValidationError
from siirl.main_dag import prepare

PENALTY = "examples.custom_pipeline.nodes:length_penalty"
GRPO_ORDER = ["rollout_actor", "function_reward", "calculate_advantages", "actor_old_log_prob",
              "reference_log_prob", "actor_train"]


def test_insert_after_rewires_the_followers_of_the_named_node():
    graph = (
        Pipeline.from_graph(grpo_pipeline(), "grpo_penalised")
        .insert_after("function_reward", "length_penalty", PENALTY, config={"coef": 0.5})
        .build()
    )
    assert graph.graph_id == "grpo_penalised"
    assert graph.get_execution_order() == [*GRPO_ORDER[:2], "length_penalty", *GRPO_ORDER[2:]]
    assert graph.nodes["length_penalty"].dependencies == ["function_reward"]
    assert graph.nodes["calculate_advantages"].dependencies == ["length_penalty"]
    assert grpo_pipeline().get_execution_order() == GRPO_ORDER  # the built-in graph itself is untouched


def test_insert_after_an_unknown_node_is_one_line():
    with pytest.raises(DAGValidationError, match="cannot insert node 'x' after 'reward': pipeline 'grpo' has no"):
        Pipeline.from_graph(grpo_pipeline()).insert_after("reward", "x", PENALTY)


def test_dag_insert_nodes_extends_the_builtin_pipeline_from_the_config():
    entry = f"{{after:function_reward,node_id:length_penalty,func:'{PENALTY}',config:{{coef:0.5}}}}"
    _, _, graph, plan = prepare(["device=cpu", f"dag.insert_nodes=[{entry}]"])
    assert graph.graph_id == "grpo"
    assert graph.get_execution_order() == [*GRPO_ORDER[:2], "length_penalty", *GRPO_ORDER[2:]]
    assert graph.nodes["length_penalty"].node_config().coef == 0.5
    assert "length_penalty" in plan.worker(0).graph.nodes


def test_an_inserted_node_reading_what_is_not_written_yet_is_refused_at_plan_time():
    # the penalty reads token_level_scores, which the reward node writes: after the rollout it cannot run
    entry = f"{{after:rollout_actor,node_id:length_penalty,func:'{PENALTY}'}}"
    with pytest.raises(ConfigError, match="node 'length_penalty' reads 'token_level_scores', which no upstream"):
        prepare(["device=cpu", f"dag.insert_nodes=[{entry}]"])
