"""verl's DAPO recipe keys, as its launch scripts write them, train on the embedded task with 2 DAG workers:
generation chunks of ``data.gen_batch_size`` prompts fill a train batch of groups whose ``acc`` varies."""

import pytest

from .e2e_helpers import read_metrics, run_main

pytestmark = pytest.mark.slow

RECIPE = [
    "algorithm.adv_estimator=grpo",
    "algorithm.workflow_type=dapo",
    "data.gen_batch_size=16",  # FAST trains on 8 prompts: 2 DAG workers x 8 prompts per chunk
    "algorithm.filter_groups.enable=True",
    "algorithm.filter_groups.metric=acc",
    "algorithm.filter_groups.max_num_gen_batches=10",
    "reward_model.reward_manager=dapo",
    "reward_model.overlong_buffer.enable=True",
    "reward_model.overlong_buffer.len=2",
    "reward_model.overlong_buffer.penalty_factor=1.0",
    "reward_model.overlong_buffer.log=True",
    "actor_rollout_ref.actor.clip_ratio_low=0.2",
    "actor_rollout_ref.actor.clip_ratio_high=0.28",
    "actor_rollout_ref.actor.clip_ratio_c=10.0",
    "actor_rollout_ref.actor.loss_agg_mode=token-mean",
]


def test_dapo_recipe_fills_the_train_batch_from_chunks(tmp_path, ray_session):
    run_dir = tmp_path / "dapo"
    assert run_main(run_dir, "trainer.total_training_steps=2", "trainer.test_freq=-1", *RECIPE) == 0
    steps = [r for r in read_metrics(run_dir) if "actor/pg_loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for row in steps:
        chunks = row["train/num_gen_batches"]
        assert chunks == row["data/gen_batches"] and 1 <= chunks <= 10
        assert row["dynamic_sampling/kept_groups_total"] >= 8  # the train batch: 8 groups of 4
        assert row["dynamic_sampling/surplus_groups"] == row["dynamic_sampling/kept_groups_total"] - 8
        assert -1.0 <= row["reward/overlong_reward"] <= 0.0 and 0.0 <= row["reward/overlong"] <= 1.0
        assert row["actor/grad_norm"] > 0
