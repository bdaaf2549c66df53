"""A verl-style trainer section runs as written: wandb (offline, no API key) next to the console,
critic warm-up, and checkpoints in ``trainer.default_local_dir``."""

import time

import pytest

from .e2e_helpers import read_metrics, run_main

pytestmark = pytest.mark.slow


def test_verl_trainer_keys_two_steps(tmp_path, ray_session, monkeypatch):
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    run, ckpt = tmp_path / "run", tmp_path / "verl_ckpt"
    began = time.perf_counter()
    code = run_main(
        run, "trainer.total_training_steps=2", "trainer.test_freq=-1", "trainer.save_freq=2",
        "trainer.logger=[console,jsonl,wandb]", "trainer.critic_warmup=1", "critic.enable=true",
        f"trainer.default_local_dir={ckpt}",
    )
    assert code == 0
    assert time.perf_counter() - began < 60
    assert list((run / "wandb").glob("offline-run-*/run-*.wandb"))
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == "2"
    assert (ckpt / "global_step_2" / "critic").is_dir() and not (run / "checkpoints").exists()
    steps = {r["step"]: r for r in read_metrics(run) if r["step"] > 0}
    assert steps[1]["actor/critic_warmup"] == 1.0 and "actor/pg_loss" not in steps[1]
    assert "actor/critic_warmup" not in steps[2] and "actor/pg_loss" in steps[2]
    assert "critic/vf_loss" in steps[1] and "critic/vf_loss" in steps[2]
