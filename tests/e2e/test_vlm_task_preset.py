"""The README's VLM command (``task=digits``) for a few steps: the embedded tiny Qwen2-VL trains on the image
task with GRPO on 2 DAG workers, and the greedy validation runs on all 1024 val images, before and after."""

import pytest

from .e2e_helpers import read_metrics, run_main

pytestmark = pytest.mark.slow


def test_digit_task_trains_and_validates_on_images(tmp_path, ray_session):
    run = tmp_path / "run"
    code = run_main(
        run, "task=digits", "trainer.total_training_steps=3", "trainer.test_freq=3", "data.val_batch_size=-1",
        "trainer.val_before_train=true", "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=16",
    )
    assert code == 0
    rows = read_metrics(run)
    steps = [r for r in rows if "actor/pg_loss" in r]
    assert [r["step"] for r in steps] == [1, 2, 3]
    assert all(r["actor/grad_norm"] > 0 and r["response_length/mean"] > 0 for r in steps)
    validations = [r for r in rows if "val/score" in r]
    assert [r["val/prompts"] for r in validations] == [1024, 1024]
    # the shipped warm-up reads 0.259 of the val images greedily; 3 small steps keep it near there
    assert abs(validations[0]["val/score"] - 0.259) < 0.005 and 0.15 <= validations[1]["val/score"] <= 0.4
    assert (run / "reward_curve.png").is_file()
