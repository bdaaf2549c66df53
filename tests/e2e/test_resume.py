"""Stopping after a checkpoint and resuming gives the same later steps as one uninterrupted run."""

import pytest

from .e2e_helpers import read_metrics, run_main

pytestmark = pytest.mark.slow

COMPARED = ("reward/mean", "actor/pg_loss", "actor/entropy", "actor/grad_norm", "response_length/mean")


def _by_step(rows):
    return {r["step"]: {k: r[k] for k in COMPARED if k in r} for r in rows if "actor/pg_loss" in r}


def test_resume_reproduces_uninterrupted_run(tmp_path, ray_session):
    # The lr schedule decays over the same 4 steps in all three runs (the first stops halfway, as an
    # interrupted run would), so resuming must restore where it was.
    common = ["trainer.save_freq=2", "trainer.test_freq=-1", "trainer.seed=7",
              "actor_rollout_ref.actor.optim.total_training_steps=4"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert run_main(straight, "trainer.total_training_steps=4", *common) == 0
    assert run_main(resumed, "trainer.total_training_steps=2", *common) == 0
    assert (resumed / "checkpoints" / "latest_checkpointed_iteration.txt").read_text() == "2"
    assert run_main(resumed, "trainer.total_training_steps=4", "trainer.resume_mode=auto", *common) == 0
    expected, got = _by_step(read_metrics(straight)), _by_step(read_metrics(resumed))
    assert sorted(got) == [1, 2, 3, 4]
    for step in (3, 4):
        for key, value in expected[step].items():
            assert got[step][key] == pytest.approx(value, rel=1e-5, abs=1e-7), (step, key)


def test_damaged_latest_checkpoint_falls_back_to_previous(tmp_path, ray_session, caplog):
    import logging
    import math

    common = ["trainer.save_freq=1", "trainer.test_freq=-1", "trainer.seed=7"]
    run = tmp_path / "run"
    assert run_main(run, "trainer.total_training_steps=2", *common) == 0
    shard = run / "checkpoints" / "global_step_2" / "actor" / "rank_0_of_2.safetensors"
    data = bytearray(shard.read_bytes())
    data[-64:-48] = bytes(b ^ 0xFF for b in data[-64:-48])  # 16 bytes inside the last tensor
    shard.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        assert run_main(run, "trainer.total_training_steps=3", "trainer.resume_mode=auto", *common) == 0
    assert str(shard) in caplog.text and "previous intact checkpoint" in caplog.text
    steps = [r for r in read_metrics(run) if "actor/pg_loss" in r]
    # steps 2-3 re-run from step 1's checkpoint; metrics.jsonl keeps each step once (the re-run's)
    assert [r["step"] for r in steps] == [1, 2, 3]
    assert all(math.isfinite(r["actor/entropy"]) for r in steps)
