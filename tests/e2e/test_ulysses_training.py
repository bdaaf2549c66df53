"""A PPO step of the embedded job with the actor's, reference's and critic's sequences split over both DAG
workers (Ulysses, ulysses_sequence_parallel_size=2: one data-parallel rank) trains exactly as the plain job (two
data-parallel ranks) when one optimiser step takes the whole batch."""

from __future__ import annotations

import pytest

from .e2e_helpers import read_metrics, run_main

ONE_OPTIMISER_STEP = [
    "trainer.total_training_steps=1",
    "data.train_batch_size=16",
    "actor_rollout_ref.actor.ppo_mini_batch_size=16",
    "actor_rollout_ref.actor.use_kl_loss=true",
    "critic.enable=true",
    "critic.ppo_mini_batch_size=16",
]


@pytest.mark.slow
def test_sequence_parallel_ppo_step_equals_the_data_parallel_one(tmp_path, ray_session, capsys):
    runs = {}
    for size in (1, 2):
        run_dir = tmp_path / f"sp{size}"
        sizes = [f"actor_rollout_ref.actor.ulysses_sequence_parallel_size={size}", f"critic.ulysses_sequence_parallel_size={size}"]
        assert run_main(run_dir, *ONE_OPTIMISER_STEP, *sizes) == 0
        (step,) = [m for m in read_metrics(run_dir) if "actor/pg_loss" in m]
        runs[size] = step
    plain, split = runs[1], runs[2]
    assert split["response_length/mean"] == plain["response_length/mean"]  # the same rollouts
    for key in ("actor/pg_loss", "actor/grad_norm", "actor/kl_loss", "critic/vf_loss", "critic/grad_norm"):
        assert split[key] == pytest.approx(plain[key], abs=1e-5, rel=1e-4), key
    printed = capsys.readouterr().out  # the plans the runs printed
    assert "actor      0-1    2 (sp)  1" in printed and "critic     0-1    2 (sp)  1" in printed
