"""Built-in graphs (documented order, types, roles, functions) and the config-driven choice."""

import pytest
from config_testutils import typed_config

from siirl.errors import ConfigError
from siirl.execution.dag import DAGValidationError, NodeRole, NodeType, TaskGraph, dump_workflow_yaml
from siirl.execution.dag.builtin_pipelines import (
    PIPELINES,
    builtin_pipeline_name,
    dapo_pipeline,
    embodied_pipeline,
    grpo_pipeline,
    ppo_pipeline,
)
from siirl.execution.dag.run_pipeline import select_pipeline
from siirl.params.algorithm import AlgorithmConfig
from siirl.params.enums import AdvantageEstimator, WorkflowType
from siirl.params.model import CriticConfig
from siirl.params.root import SiirlConfig
from siirl.params.trainer import DagConfig

GRPO_TAIL = ["calculate_advantages", "actor_old_log_prob", "reference_log_prob", "actor_train"]
EXPECTED_ORDERS = {
    "grpo": ["rollout_actor", "function_reward", *GRPO_TAIL],
    "ppo": [
        "rollout_actor",
        "function_reward",
        "actor_old_log_prob",
        "reference_log_prob",
        "critic_value",
        "calculate_advantages",
        "critic_train",
        "actor_train",
    ],
    "dapo": ["rollout_actor", "function_reward", "dynamic_sampling", *GRPO_TAIL],
    "embodied": ["rollout_actor", "embodied_sampling", "function_reward", *GRPO_TAIL],
}
#: node_id -> (type, role, only_forward_compute, function)
EXPECTED_NODES = {
    "rollout_actor": (NodeType.MODEL_INFERENCE, NodeRole.ROLLOUT, False, "builtin_nodes:generate"),
    "function_reward": (NodeType.COMPUTE, NodeRole.REWARD, False, "builtin_nodes:compute_reward"),
    "calculate_advantages": (NodeType.COMPUTE, NodeRole.ADVANTAGE, False, "builtin_nodes:compute_advantage"),
    "actor_old_log_prob": (
        NodeType.MODEL_INFERENCE,
        NodeRole.ACTOR,
        True,
        "builtin_nodes:compute_old_log_prob",
    ),
    "reference_log_prob": (
        NodeType.MODEL_INFERENCE,
        NodeRole.REFERENCE,
        False,
        "builtin_nodes:compute_ref_log_prob",
    ),
    "critic_value": (NodeType.MODEL_INFERENCE, NodeRole.CRITIC, True, "builtin_nodes:compute_value"),
    "actor_train": (NodeType.MODEL_TRAIN, NodeRole.ACTOR, False, "builtin_nodes:train_actor"),
    "critic_train": (NodeType.MODEL_TRAIN, NodeRole.CRITIC, False, "builtin_nodes:train_critic"),
    "dynamic_sampling": (NodeType.COMPUTE, NodeRole.DYNAMIC_SAMPLING, False, "filters:dynamic_sampling"),
    "embodied_sampling": (NodeType.COMPUTE, NodeRole.EMBODIED_SAMPLING, False, "filters:embodied_sampling"),
}
BUILDERS = {"grpo": grpo_pipeline, "ppo": ppo_pipeline, "dapo": dapo_pipeline, "embodied": embodied_pipeline}


@pytest.mark.parametrize("name", sorted(EXPECTED_ORDERS))
def test_builtin_pipeline_has_documented_order_and_nodes(name):
    graph = BUILDERS[name]()
    assert PIPELINES.get(name) is BUILDERS[name]
    graph.validate_graph()
    order = EXPECTED_ORDERS[name]
    assert graph.graph_id == name
    assert graph.get_execution_order() == order
    for previous, node_id in zip([None, *order], order):
        node = graph.nodes[node_id]
        assert node.dependencies == ([] if previous is None else [previous])
        node_type, role, forward_only, func = EXPECTED_NODES[node_id]
        assert (node.node_type, node.node_role, node.only_forward_compute) == (node_type, role, forward_only)
        assert node.executable_ref.endswith(func)
        assert callable(node.executable)


def _cfg(estimator="grpo", workflow="DEFAULT", critic=False, **dag):
    """Built with the dataclasses directly, so enum members can stand in for their values."""
    return SiirlConfig(
        algorithm=AlgorithmConfig(adv_estimator=estimator, workflow_type=workflow),
        critic=CriticConfig(enable=critic),
        dag=DagConfig(**dag),
    )


@pytest.mark.parametrize(
    ("cfg", "expected"),
    [
        (_cfg("grpo"), "grpo"),
        (_cfg("gspo"), "grpo"),
        (_cfg("cpgd"), "grpo"),
        (_cfg("rloo"), "grpo"),
        (_cfg("reinforce_plus_plus"), "grpo"),
        (_cfg("gae"), "ppo"),
        (_cfg("grpo", critic=True), "ppo"),
        (_cfg("grpo", "DAPO"), "dapo"),
        (_cfg("grpo", "dapo"), "dapo"),
        (_cfg("grpo", "EMBODIED"), "embodied"),
        (_cfg(AdvantageEstimator.GAE, WorkflowType.DEFAULT), "ppo"),
        (typed_config({"algorithm": {"filter_groups": {"enable": True}}}), "dapo"),
        (SiirlConfig(), "grpo"),
        (None, "grpo"),
    ],
)
def test_select_builtin_from_config(cfg, expected):
    assert builtin_pipeline_name(cfg) == expected
    assert select_pipeline(cfg) == BUILDERS[expected]()


def _order(cfg):
    return select_pipeline(cfg).get_execution_order()


def test_kl_in_reward_moves_the_log_prob_passes_before_the_advantage():
    cfg = _cfg("grpo")
    cfg.algorithm.use_kl_in_reward = True
    assert _order(cfg) == [
        "rollout_actor", "function_reward", "actor_old_log_prob", "reference_log_prob",
        "calculate_advantages", "actor_train",
    ]


def test_remax_gets_its_greedy_baseline_node_before_the_advantage():
    order = _order(_cfg("remax"))
    assert order[:3] == ["rollout_actor", "function_reward", "reward_baseline"]
    assert order.index("reward_baseline") < order.index("calculate_advantages")


def test_estimator_needing_values_brings_the_critic_into_any_workflow():
    order = _order(_cfg("gae", "DAPO"))
    assert {"critic_value", "critic_train", "dynamic_sampling"} <= set(order)
    assert order.index("critic_value") < order.index("calculate_advantages")


def test_estimator_from_user_code_is_accepted_and_its_needs_shape_the_graph():
    assert builtin_pipeline_name(_cfg("dag_helpers:value_estimator")) == "ppo"
    assert "critic_value" in _order(_cfg("dag_helpers:value_estimator"))
    assert builtin_pipeline_name(_cfg("dag_helpers:plain_estimator")) == "grpo"


def test_select_from_the_loaded_config():
    from siirl.config_checks import load_config

    cfg = load_config()
    assert select_pipeline(cfg).graph_id == "grpo"
    cfg.algorithm.adv_estimator = "gae"
    assert select_pipeline(cfg).graph_id == "ppo"


@pytest.mark.parametrize(
    ("cfg", "expected"),
    [
        (_cfg("ppo_magic"), "unknown advantage estimator 'ppo_magic'; registered: cpgd, gae"),
        (_cfg("nowhere_mod:est"), "advantage estimator 'nowhere_mod:est' cannot be imported"),
        (
            _cfg(custom_pipeline_fn="dag_helpers:two_nodes", workflow_path="x.yaml"),
            "set only one of dag.custom_pipeline_fn and dag.workflow_path",
        ),
    ],
)
def test_select_config_errors(cfg, expected):
    with pytest.raises(ConfigError) as excinfo:
        select_pipeline(cfg)
    assert expected in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_custom_pipeline_fn_replaces_builtin_example():
    graph = select_pipeline(_cfg("gae", custom_pipeline_fn="examples.custom_pipeline.pipeline:build"))
    assert graph.graph_id == "grpo_length_penalty"
    assert graph.get_execution_order() == [
        "rollout_actor",
        "function_reward",
        "response_stats",
        "length_penalty",
        *GRPO_TAIL,
    ]
    assert graph.nodes["length_penalty"].config == {"coef": 0.5}
    assert graph.nodes["length_penalty"].node_config().coef == 0.5
    assert graph.nodes["length_penalty"].executable.__name__ == "length_penalty"


def test_custom_pipeline_fn_receives_config_when_it_takes_one():
    cfg = _cfg(custom_pipeline_fn="dag_helpers:from_config")
    cfg.trainer.experiment_name = "named_by_config"
    assert select_pipeline(cfg).graph_id == "named_by_config"


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        (
            "dag_helpers:returns_list",
            "dag.custom_pipeline_fn 'dag_helpers:returns_list' returned list, expected a TaskGraph",
        ),
        ("dag_helpers:returns_cyclic_graph", "graph 'handmade' has a cycle: x -> y -> x"),
        ("dag_helpers:no_builder", "dag_helpers has no attribute 'no_builder'"),
        ("dag_helpers", "must look like 'module:function'"),
    ],
)
def test_custom_pipeline_fn_errors(ref, expected):
    with pytest.raises(DAGValidationError) as excinfo:
        select_pipeline(_cfg(custom_pipeline_fn=ref))
    assert expected in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_workflow_path_selects_a_yaml_workflow(tmp_path):
    path = tmp_path / "mine.yaml"
    dump_workflow_yaml(ppo_pipeline(), path)
    graph = select_pipeline(_cfg("grpo", workflow_path=str(path)))
    assert isinstance(graph, TaskGraph) and graph == ppo_pipeline()
