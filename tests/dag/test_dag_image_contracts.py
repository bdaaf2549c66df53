"""A vision-language policy's batches declare their images: the dataloader provides ``multi_modal_inputs``
and every policy forward (rollout, old log-probs, reference, update) reads it; a text policy has none."""

import pytest
from config_testutils import typed_config
from vlm_testutils import save_tiny_vlm

from siirl.execution.dag import NodeRole, NodeType, Pipeline
from siirl.execution.dag.contract_check import ContractError, check_contracts, dataloader_keys
from siirl.execution.dag.run_pipeline import select_pipeline


@pytest.fixture(scope="module")
def vlm_cfg(tmp_path_factory):
    path = save_tiny_vlm(tmp_path_factory.mktemp("vlm"))
    return typed_config({"actor_rollout_ref": {"model": {"path": str(path)}, "actor": {"use_kl_loss": True}}})


def test_policy_forwards_read_the_images_the_dataloader_provides(vlm_cfg):
    graph = select_pipeline(vlm_cfg)
    check_contracts(graph, vlm_cfg)
    assert "multi_modal_inputs" in dataloader_keys(vlm_cfg)
    readers = {n.node_id for n in graph.nodes.values() if "multi_modal_inputs" in n.effective_contract(vlm_cfg).reads}
    assert {"rollout_actor", "actor_old_log_prob", "reference_log_prob", "actor_train"} <= readers, readers
    assert "multi_modal_data" in dataloader_keys(vlm_cfg)
    assert "multi_modal_data" in graph.nodes["rollout_actor"].effective_contract(vlm_cfg).reads  # vLLM takes it


def test_a_text_policy_has_no_images_to_read():
    cfg = typed_config({})
    assert "multi_modal_inputs" not in dataloader_keys(cfg)
    graph = Pipeline("images").add_node(
        "rollout", func="siirl.dag_worker.builtin_nodes:generate", node_type=NodeType.MODEL_INFERENCE,
        node_role=NodeRole.ROLLOUT, reads=("multi_modal_inputs",),
    )
    with pytest.raises(ContractError, match="multi_modal_inputs"):
        check_contracts(graph.build(), cfg)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"actor_rollout_ref": {"rollout": {"name": "sglang"}}}, "the 'sglang' rollout engine does not pass images"),
        ({"algorithm": {"adv_estimator": "gae"}}, "a critic .* of a vision-language policy is not implemented"),
        ({"actor_rollout_ref": {"rollout": {"skip": {"enable": True}}}},
         "rollout.skip.enable=true with a vision-language policy: the rollout dump does not hold its image inputs"),
    ],
)
def test_what_cannot_take_images_is_refused_in_one_line(vlm_cfg, overrides, message, monkeypatch):
    from siirl.engine.rollout.sglang_engine import SGLangRolloutEngine
    from siirl.errors import ConfigError
    from siirl.execution.roles import check_vision_policy

    monkeypatch.setattr(SGLangRolloutEngine, "takes_images", False)  # as an engine registered without image support

    cfg = typed_config({
        "actor_rollout_ref": {"model": {"path": vlm_cfg.actor_rollout_ref.model.path}, **overrides.get("actor_rollout_ref", {})},
        **{k: v for k, v in overrides.items() if k != "actor_rollout_ref"},
    })
    with pytest.raises(ConfigError, match=message) as info:
        check_vision_policy(cfg)
    assert "\n" not in str(info.value)
    check_vision_policy(vlm_cfg)  # grpo on hf: fine
