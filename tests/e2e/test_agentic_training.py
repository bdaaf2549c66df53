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


@pytest.mark.parametrize(("placement", "shards"), [("own", ["rank_0_of_1"]), ("shared", ["rank_0_of_2", "rank_1_of_2"])])
def test_two_agent_team_trains(tmp_path, ray_session, placement, shards):
    from siirl.tasks.three_sum import generate

    train, val = generate(str(tmp_path / "data"), n_train=64, n_val=16)
    run_dir = tmp_path / "team"
    team = ["dag.custom_pipeline_fn=siirl.user_interface.agent_teams:two_agent_adders",
            f"dag.agent_placement={placement}", f"data.train_files=[{train}]", f"data.val_files=[{val}]",
            "trainer.val_before_train=true"]
    code = run_main(run_dir, "trainer.total_training_steps=2", "trainer.save_freq=2", *team)
    assert code == 0
    steps = _steps(run_dir, "team/final_accuracy")
    assert [r["step"] for r in steps] == [1, 2]
    assert all("adder/actor/pg_loss" in r and "finisher/actor/pg_loss" in r for r in steps)
    assert all(("timing_s/handoff" in r) == (placement == "own") for r in steps)
    # greedy team episodes before training and after the last step, the val set read whole both times
    assert [r["step"] for r in read_metrics(run_dir) if "val/score" in r] == [0, 2]
    assert (run_dir / "reward_curve.png").is_file()
    saved = run_dir / "checkpoints" / "global_step_2"
    # own placement: each agent lives on one worker only (a dp group of one), so each built only its own
    for agent in ("adder_actor", "finisher_actor"):
        assert sorted(p.name.split(".")[0] for p in (saved / agent).iterdir()) == shards
    # resume: both agents' weights and optimisers come back, training goes on from step 3
    code = run_main(run_dir, "trainer.total_training_steps=3", *team)
    assert code == 0
    assert [r["step"] for r in _steps(run_dir, "team/final_accuracy")] == [1, 2, 3]
