"""A few real training steps of every built-in workflow with 2 DAG workers on the CPU."""

import pytest

from .e2e_helpers import read_metrics, run_main

pytestmark = pytest.mark.slow

ALGORITHMS = {
    "grpo": [],
    "ppo": ["critic.enable=true", "algorithm.adv_estimator=gae"],
    "dapo": ["algorithm.workflow_type=DAPO", "algorithm.filter_groups.enable=true",
             "algorithm.filter_groups.max_num_gen_batches=0", "actor_rollout_ref.actor.clip_ratio_high=0.28"],
    "gspo": ["algorithm.adv_estimator=gspo", "actor_rollout_ref.actor.policy_loss.loss_mode=gspo",
             "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean"],
    "cpgd": ["algorithm.adv_estimator=cpgd", "actor_rollout_ref.actor.policy_loss.loss_mode=cpgd",
             "actor_rollout_ref.actor.policy_drift_coeff=0.001"],
    "remax": ["algorithm.adv_estimator=remax"],
    "kl_in_reward": ["algorithm.use_kl_in_reward=true"],
}
#: A metric only that workflow produces, proving its distinctive node ran.
SIGNATURE = {
    "ppo": "critic/vf_loss",
    "dapo": "dynamic_sampling/kept_groups",
    "remax": "reward_baseline/mean",
    "kl_in_reward": "actor/reward_kl_penalty",
}


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_workflow_trains_two_steps(name, tmp_path, ray_session):
    run_dir = tmp_path / name
    assert run_main(run_dir, "trainer.total_training_steps=2", *ALGORITHMS[name]) == 0
    rows = read_metrics(run_dir)
    steps = [r for r in rows if "actor/pg_loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    assert all("reward/mean" in r and "actor/grad_norm" in r for r in steps)
    assert "val/score" in rows[-1]
    if name in SIGNATURE:
        assert all(SIGNATURE[name] in r for r in steps)
    assert (run_dir / "reward_curve.png").is_file()


def test_custom_pipeline_runs(tmp_path, ray_session):
    run_dir = tmp_path / "custom"
    fn = "dag.custom_pipeline_fn=examples.custom_pipeline.pipeline:build"
    assert run_main(run_dir, "trainer.total_training_steps=2", fn) == 0
    steps = [r for r in read_metrics(run_dir) if "actor/pg_loss" in r]
    assert len(steps) == 2
    assert all(r["length_penalty/coef"] == 0.5 for r in steps)  # the node's own config section
    assert [r["response_stats/calls"] for r in steps] == [1, 2]  # bound instance method keeps its state


def test_training_crosses_epoch_boundaries(tmp_path, ray_session):
    from siirl.tasks.arithmetic import generate

    train, val = generate(str(tmp_path / "data"), seed=3, n_train=16, n_val=8)
    run_dir = tmp_path / "epochs"
    assert run_main(run_dir, "trainer.total_training_steps=5", f"data.train_files=[{train}]",
                    f"data.val_files=[{val}]") == 0
    assert [r["step"] for r in read_metrics(run_dir) if "actor/pg_loss" in r] == [1, 2, 3, 4, 5]
