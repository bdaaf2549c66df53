"""verl's DAPO recipe keys load with verl's meaning, or end as ONE line (exit 2) before Ray starts."""

import pytest
from cli_testutils import one_line_refusal

from siirl.config_checks import load_config
from siirl.execution.dag.run_pipeline import select_pipeline

DAPO = ["algorithm.workflow_type=dapo", "algorithm.filter_groups.enable=True"]


def _refusal(capsys, *overrides: str, flag: str = "--print-config") -> str:
    return one_line_refusal(capsys, flag, "device=cpu", *overrides)


def test_the_recipe_keys_load():
    cfg = load_config([
        *DAPO, "data.train_batch_size=32", "data.gen_batch_size=96", "algorithm.filter_groups.metric=acc",
        "algorithm.filter_groups.max_num_gen_batches=-1", "reward_model.reward_manager=dapo",
        "reward_model.overlong_buffer.enable=True", "reward_model.overlong_buffer.len=4",
        "data.max_response_length=8", "reward_model.overlong_buffer.penalty_factor=0.5",
        "reward_model.overlong_buffer.log=True",
    ])
    assert cfg.data.prompts_per_generation() == 96 and cfg.algorithm.filter_groups.max_num_gen_batches == -1
    assert cfg.reward_model.overlong_buffer.log is True
    assert load_config([]).data.prompts_per_generation() == 32  # null: the train batch


@pytest.mark.parametrize(
    ("metric", "reads"),
    [("acc", "acc"), ("score", "score"), ("seq_reward", "token_level_scores"),
     ("seq_final_reward", "token_level_rewards")],
)
def test_each_metric_plans_with_the_key_it_reads(metric, reads):
    cfg = load_config([*DAPO, f"algorithm.filter_groups.metric={metric}"])
    node = select_pipeline(cfg).get_node("dynamic_sampling")
    assert reads in node.effective_contract(cfg).reads


@pytest.mark.parametrize("metric", ["accuracy", "seq_score", "pred"])
def test_unknown_metrics_are_refused(capsys, metric):
    err = _refusal(capsys, *DAPO, f"algorithm.filter_groups.metric={metric}", flag="--plan")
    assert f"algorithm.filter_groups.metric='{metric}'" in err
    assert "registered: acc, score, seq_final_reward, seq_reward" in err


@pytest.mark.parametrize("metric", ["acc", "score"])
def test_metrics_the_reward_model_cannot_report_are_refused(capsys, metric):
    err = _refusal(capsys, *DAPO, f"algorithm.filter_groups.metric={metric}", "reward_model.enable=true")
    assert f"metric={metric}" in err and "reward_model.enable=true" in err and "seq_reward" in err


def test_the_reward_model_still_filters_on_its_score():
    cfg = load_config([*DAPO, "algorithm.filter_groups.metric=seq_reward", "reward_model.enable=true"])
    assert cfg.algorithm.filter_groups.metric == "seq_reward"


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        (["data.gen_batch_size=0"], ["data.gen_batch_size=0"]),
        (["reward_model.overlong_buffer.enable=true"], ["reward_model.reward_manager=dapo"]),
        (["reward_model.overlong_buffer.enable=true", "reward_model.reward_manager=dapo",
          "reward_model.overlong_buffer.len=6"], ["overlong_buffer.len=6", "max_response_length=6"]),
        (["reward_model.overlong_buffer.penalty_factor=-1"], ["penalty_factor=-1"]),
    ],
)
def test_dapo_keys_alone_are_refused(capsys, overrides, names):
    err = _refusal(capsys, *overrides)
    assert all(name in err for name in names), err


def test_gen_batch_size_equal_to_the_train_batch_needs_no_filter():
    assert load_config(["data.gen_batch_size=32"]).data.gen_batch_size == 32


def test_without_the_group_filter_the_generation_batch_trains_whole():
    """verl's DAPO trainer with filter_groups.enable=false trains on every generated group."""
    data = load_config(["data.gen_batch_size=64", "data.train_batch_size=16"]).data
    assert data.train_batch_size == data.gen_batch_size == 64
    assert load_config([*DAPO, "data.gen_batch_size=64", "data.train_batch_size=16"]).data.train_batch_size == 16


def test_gen_batch_size_must_split_over_the_rollout_ranks(capsys):
    err = _refusal(capsys, *DAPO, "data.gen_batch_size=33", "trainer.n_devices_per_node=2", flag="--plan")
    assert "data.gen_batch_size=33 must be divisible by the rollout data-parallel size 2" in err
