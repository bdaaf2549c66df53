"""verl's distillation.* keys: the published script's keys load, the teacher role is planned as a node and a
model, and each unsupported or inconsistent value is one line before Ray."""

import pytest

from siirl.config_checks import load_config
from siirl.errors import ConfigError
from siirl.main_dag import prepare

#: verl's examples/on_policy_distillation_trainer/run_qwen3_8b_fsdp.sh, its distillation keys (teacher path
#: left to the embedded default).
SCRIPT_KEYS = [
    "distillation.enabled=True",
    "distillation.n_gpus_per_node=4",
    "distillation.nnodes=1",
    "distillation.teacher_models.teacher_model.inference.tensor_model_parallel_size=2",
    "distillation.teacher_models.teacher_model.inference.name=vllm",
    "distillation.teacher_models.teacher_model.inference.gpu_memory_utilization=0.4",
    "distillation.teacher_models.teacher_model.inference.max_model_len=3073",
    "distillation.distillation_loss.loss_mode=k1",
    "distillation.distillation_loss.topk=64",
    "distillation.distillation_loss.use_task_rewards=False",
    "distillation.distillation_loss.use_policy_gradient=True",
    "distillation.distillation_loss.loss_max_clamp=10.0",
    "distillation.distillation_loss.log_prob_min_clamp=-10.0",
]


def test_the_scripts_keys_load_and_the_embedded_policy_gets_the_embedded_teacher():
    cfg = load_config(SCRIPT_KEYS)
    loss = cfg.distillation.distillation_loss
    assert (loss.loss_mode, loss.use_policy_gradient, loss.use_task_rewards, loss.loss_max_clamp) == ("k1", True, False, 10.0)
    assert cfg.distillation.teacher_models["teacher_model"].model_path == cfg.actor_rollout_ref.model.path


def test_the_teacher_is_a_planned_role_scoring_before_the_update(tmp_path):
    _, _, graph, plan = prepare([*SCRIPT_KEYS, f"trainer.output_dir={tmp_path}"], None, None)
    order = list(graph.get_execution_order())
    assert order.index("actor_old_log_prob") < order.index("teacher_log_prob") < order.index("actor_train")
    assert "teacher" in plan.groups
    assert "teacher_log_prob" not in prepare([f"trainer.output_dir={tmp_path}"], None, None)[2].nodes


@pytest.mark.parametrize(("overrides", "named"), [
    (["distillation.distillation_loss.loss_mode=forward_kl_topk"], "forward_kl_topk (top-k teacher logits) is not implemented"),
    (["distillation.distillation_loss.loss_mode=k1", "distillation.distillation_loss.use_policy_gradient=False"],
     "the gradient of k1 does not depend on the teacher"),
    (["distillation.distillation_loss.policy_loss_mode=gspo", "distillation.distillation_loss.use_policy_gradient=True"],
     "only vanilla"),
    (["distillation.distillation_loss.clip_ratio_low=1.0", "distillation.distillation_loss.use_policy_gradient=True"],
     ("bad config: distillation.distillation_loss.clip_ratio_low must be in [0, 1) and clip_ratio_high >= 0, got "
      "1.0 and 0.2 (policy_loss_mode=vanilla)")),
    (["+distillation.teacher_models.teacher_model2.model_path=/m"], "multi-teacher distillation is not implemented"),
    (["distillation.teacher_models.teacher_model.inference.max_model_len=10"], "is below prompt + response + 1"),
    (["distillation.distillation_loss.loss_mode=k9"], "k9"),
])
def test_bad_values_are_one_line(overrides, named):
    with pytest.raises(ConfigError) as info:
        load_config(["distillation.enabled=True", *overrides])
    assert named in str(info.value) and "\n" not in str(info.value)


def test_a_policy_of_ones_own_needs_a_teacher_path(tmp_path):
    from siirl.embedded_assets import default_model_path

    with pytest.raises(ConfigError, match="needs distillation.teacher_models.teacher_model.model_path"):
        load_config(["distillation.enabled=True", f"actor_rollout_ref.model.path={default_model_path()}/."])


def test_a_missing_teacher_is_found_before_ray(tmp_path):
    from siirl.errors import SiirlUserError

    with pytest.raises(SiirlUserError, match="does not exist"):
        prepare(["distillation.enabled=True", f"distillation.teacher_models.teacher_model.model_path={tmp_path}/nowhere",
                 f"trainer.output_dir={tmp_path}"], None, None)
