"""Plan-time node contracts: every read produced upstream or by the dataloader, every model role present."""

import pytest
from config_testutils import typed_config

from siirl.execution.dag import NodeRole, NodeType, Pipeline
from siirl.execution.dag.builtin_pipelines import PIPELINES
from siirl.execution.dag.contract_check import ContractError, check_contracts
from siirl.execution.dag.run_pipeline import select_pipeline
from siirl.execution.scheduler.planner import plan_from_config

NODES = "siirl.dag_worker.builtin_nodes"


def _cfg(**algorithm):
    return typed_config({"algorithm": algorithm})


KL_LOSS = {"actor_rollout_ref": {"actor": {"use_kl_loss": True}}}


def _refused(graph, cfg, *needles):
    with pytest.raises(ContractError) as excinfo:
        plan_from_config(graph, cfg)
    message = str(excinfo.value)
    assert "\n" not in message and all(n in message for n in needles), message


@pytest.mark.parametrize(
    "cfg",
    [
        _cfg(),
        _cfg(use_kl_in_reward=True),
        _cfg(adv_estimator="remax"),
        _cfg(adv_estimator="gae"),
        _cfg(workflow_type="DAPO"),
        typed_config(KL_LOSS),
    ],
)
def test_every_builtin_graph_satisfies_its_contracts(cfg):
    check_contracts(select_pipeline(cfg), cfg)


def test_old_order_with_kl_in_reward_is_refused_naming_node_and_key():
    # The pre-contract GRPO graph ran the advantage before the log-prob passes.
    graph = PIPELINES.get("grpo")()
    _refused(graph, _cfg(use_kl_in_reward=True), "node 'calculate_advantages'", "'old_log_probs'")


def test_remax_without_its_baseline_node_is_refused():
    _refused(PIPELINES.get("grpo")(), _cfg(adv_estimator="remax"), "calculate_advantages", "'reward_baselines'")


def test_embodied_without_an_environment_is_refused_in_one_line():
    embodied = {"algorithm": {"workflow_type": "EMBODIED"}}
    cfg = typed_config({**embodied, "env": {"name": ""}})  # no environment to supply task_success
    _refused(select_pipeline(cfg), cfg, "node 'rollout_actor'", "needs the environment model")
    cfg = typed_config({**embodied, "env": {"name": "arith_chain"}})
    check_contracts(select_pipeline(cfg), cfg)


def test_kl_loss_reads_the_reference_log_probs():
    graph = PIPELINES.get("grpo")()
    del graph.nodes["reference_log_prob"]
    graph.nodes["actor_train"].dependencies = ["actor_old_log_prob"]
    _refused(graph, typed_config(KL_LOSS), "node 'actor_train'", "'ref_log_prob'")


def _custom(*extra):
    pipeline = Pipeline("custom").add_node(
        "rollout", func=f"{NODES}:generate", node_type=NodeType.MODEL_INFERENCE, node_role=NodeRole.ROLLOUT
    )
    for node_id, func, deps, kwargs in extra:
        pipeline.add_node(node_id, func=func, deps=deps, **kwargs)
    return pipeline.build()


def test_custom_node_reading_an_unwritten_key_is_refused():
    graph = _custom(
        ("bonus", "contract_nodes:adds_bonus", ["rollout"], {}),
        ("typo", "contract_nodes:reads_typo", ["bonus"], {}),
    )
    _refused(graph, _cfg(), "node 'typo'", "'bonus_typo'")


def test_contract_declared_in_the_pipeline_counts_like_a_decorator():
    graph = _custom(
        ("mine", "contract_nodes:undeclared", ["rollout"], {"writes": ["bonus_typo"]}),
        ("typo", "contract_nodes:reads_typo", ["mine"], {}),
    )
    check_contracts(graph, _cfg())
    graph = _custom(("mine", "contract_nodes:undeclared", ["rollout"], {"reads": ["nowhere"]}))
    _refused(graph, _cfg(), "node 'mine'", "'nowhere'")


def test_reads_below_an_undeclared_node_are_not_judged():
    graph = _custom(
        ("free", "contract_nodes:undeclared", ["rollout"], {}),
        ("typo", "contract_nodes:reads_typo", ["free"], {}),
    )
    check_contracts(graph, _cfg())


def test_missing_model_role_is_refused():
    graph = _custom(("value", "contract_nodes:needs_critic", ["rollout"], {}))
    _refused(graph, _cfg(), "node 'value' needs the critic model", "critic.enable=false")
    check_contracts(graph, typed_config({"critic": {"enable": True}}))
    graph = _custom(("ref", f"{NODES}:compute_ref_log_prob", ["rollout"], {"roles": ["reward_model"]}))
    _refused(graph, _cfg(), "node 'ref' needs the reward_model model")


def test_node_config_becomes_its_dataclass_and_unknown_keys_are_refused():
    graph = _custom(("scale", "contract_nodes:scaled", ["rollout"], {"config": {"factor": 0.5}}))
    assert graph.nodes["scale"].node_config().factor == 0.5
    placed = _custom(("scale", "contract_nodes:scaled", ["rollout"], {"config": {"factor": 2, "placement_group": "a"}}))
    assert placed.nodes["scale"].node_config().factor == 2  # the planner's key is not the node's
    graph = _custom(("scale", "contract_nodes:scaled", ["rollout"], {"config": {"facter": 0.5}}))
    with pytest.raises(Exception, match="node 'scale' config has unknown key 'facter'; ScaleConfig has: factor"):
        check_contracts(graph, _cfg())


def test_a_node_must_write_what_it_declares():
    import torch
    from tensordict import TensorDict

    from siirl.execution.dag.contract import NodeContract
    from siirl.execution.dag.contract_check import check_declared_writes

    batch = TensorDict({"bonus": torch.zeros(2)}, batch_size=[2])
    check_declared_writes("adds", NodeContract(writes=("bonus",)), batch)
    check_declared_writes("free", None, batch)
    with pytest.raises(ContractError, match="node 'adds' declares that it writes 'other', but its output"):
        check_declared_writes("adds", NodeContract(writes=("bonus", "other")), batch)


def test_node_output_accepts_the_published_none_defaults():
    from siirl.execution.dag import NodeOutput

    out = NodeOutput(batch="b", metrics=None, info=None)
    assert out.metrics == {} and out.info == {}
