"""Agentic end-to-end runs on the embedded model, 2 DAG workers: embodied, multi-turn, two agents."""

import pytest

from .e2e_helpers import read_metrics, run_main

pytestmark = pytest.mark.slow


def _steps(run_dir, key):
    return [r for r in read_metrics(run_dir) if key in r]


def test_embodied_workflow_trains_on_the_builtin_env(tmp_path, ray_session):
    run_dir = tmp_path / "embodied"
    code = run_main(run_dir, "trainer.total_training_steps=2", "algorithm.workflow_type=EMBODIED",
                    "+env.kwargs.steps=2", "data.val_batch_size=32")
    assert code == 0
    steps = _steps(run_dir, "actor/pg_loss")
    assert [r["step"] for r in steps] == [1, 2]
    assert all("embodied_sampling/success_rate" in r and "embodied_sampling/kept_groups" in r for r in steps)
    assert all(r["env/steps"] == 2.0 for r in steps)
    assert 0.0 <= read_metrics(run_dir)[-1]["val/success_rate"] <= 1.0
    assert all(r["reward/max"] <= 1.0 for r in steps)
    assert (run_dir / "reward_curve.png").is_file()


def test_multi_turn_grpo_trains(tmp_path, ray_session):
    run_dir = tmp_path / "multi_turn"
    code = run_main(run_dir, "trainer.total_training_steps=2", "actor_rollout_ref.rollout.multi_turn.enable=true",
                    "actor_rollout_ref.rollout.multi_turn.max_turns=2", "+env.kwargs.steps=2",
                    "env.num_workers=2", "data.val_batch_size=32")
    assert code == 0
    steps = _steps(run_dir, "actor/pg_loss")
    assert len(steps) == 2
    assert all(r["env/turns"] == 2.0 and r["env/errors"] == 0.0 for r in steps)  # arith_chain: 2 steps
    assert all(0.0 <= r["env/success_rate"] <= 1.0 for r in steps)


def test_two_agent_team_trains(tmp_path, ray_session):
    from siirl.tasks.three_sum import generate

    train, val = generate(str(tmp_path / "data"), n_train=64, n_val=16)
    run_dir = tmp_path / "team"
    code = run_main(run_dir, "trainer.total_training_steps=2", f"data.train_files=[{train}]",
                    f"data.val_files=[{val}]",
                    "dag.custom_pipeline_fn=siirl.user_interface.agent_teams:two_agent_adders", "trainer.save_freq=2")
    assert code == 0
    steps = _steps(run_dir, "team/final_accuracy")
    assert [r["step"] for r in steps] == [1, 2]
    assert all("adder/actor/pg_loss" in r and "finisher/actor/pg_loss" in r for r in steps)
    assert "val/score" in read_metrics(run_dir)[-1]
    assert (run_dir / "reward_curve.png").is_file()
    saved = run_dir / "checkpoints" / "global_step_2"
    assert (saved / "agent_adder").is_dir() and (saved / "agent_finisher").is_dir()
    # resume: both agents' weights and optimisers come back, training goes on from step 3
    code = run_main(run_dir, "trainer.total_training_steps=3", f"data.train_files=[{train}]",
                    f"data.val_files=[{val}]",
                    "dag.custom_pipeline_fn=siirl.user_interface.agent_teams:two_agent_adders")
    assert code == 0
    assert [r["step"] for r in _steps(run_dir, "team/final_accuracy")] == [1, 2, 3]
