"""verl's LoRA keys run as written: two GRPO steps with a KL loss train only the adapters (the reference is
the base model with adapters off, so the KL starts at 0), the checkpoint holds the adapter alone, and a
resumed run continues from it."""

import json

import pytest
from safetensors.torch import load_file

from .e2e_helpers import read_metrics, run_main

pytestmark = pytest.mark.slow

LORA = [
    "actor_rollout_ref.model.lora_rank=8",
    "actor_rollout_ref.model.lora_alpha=16",
    "actor_rollout_ref.model.target_modules=all-linear",
    "actor_rollout_ref.model.use_shm=true",
    "actor_rollout_ref.rollout.load_format=safetensors",
    "actor_rollout_ref.rollout.layered_summon=true",
    "actor_rollout_ref.actor.optim.lr=2e-3",
    "actor_rollout_ref.actor.use_kl_loss=true",
    "trainer.test_freq=-1",
    "trainer.save_freq=2",
]


def test_lora_two_steps_checkpoint_and_resume(tmp_path, ray_session):
    run = tmp_path / "run"
    assert run_main(run, "trainer.total_training_steps=2", *LORA) == 0
    steps = {r["step"]: r for r in read_metrics(run) if r["step"] > 0}
    assert steps[1]["actor/kl_loss"] == pytest.approx(0.0, abs=1e-6)  # B = 0: policy == base == reference
    assert steps[2]["actor/kl_loss"] > 0.0  # the adapters moved the policy away from the frozen base

    actor = run / "checkpoints" / "global_step_2" / "actor"
    shards = [load_file(actor / f"rank_{r}_of_2.safetensors") for r in range(2)]
    for shard in shards:
        model = [k for k in shard if k.startswith("model/")]
        optimizer = [k for k in shard if k.startswith("optimizer/")]
        assert model and all(".lora_A." in k or ".lora_B." in k for k in model)
        assert optimizer and all(".lora_" in k for k in optimizer)  # nothing else can have moved
    adapter = load_file(actor / "lora_adapter" / "adapter_model.safetensors")
    assert len(adapter) == 3 * 7 * 2  # lora_A and lora_B of 7 projections in each of the 3 blocks
    assert all(t.abs().max() > 0 for name, t in adapter.items() if ".lora_B." in name)  # B left zero: trained
    assert json.loads((actor / "lora_adapter" / "adapter_config.json").read_text())["r"] == 8

    assert run_main(run, "trainer.total_training_steps=3", "trainer.resume_mode=auto", *LORA) == 0
    resumed = {r["step"]: r for r in read_metrics(run) if r["step"] > 0}
    assert resumed[3]["actor/kl_loss"] > 0.0  # the restored adapters, not fresh ones (those give 0)
