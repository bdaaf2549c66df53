"""LoRA through peft on one process: only adapters train, the reference is the base model with adapters
off, engines get the merged weights, checkpoints hold the adapter alone, bad targets fail in one line."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from engine_testutils import actor_config, make_batch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from siirl.algorithms import logprobs_from_logits
from siirl.engine.manifest import write_manifest
from siirl.engine.rollout import make_rollout_engine
from siirl.engine.workers import ActorWorker, ReferenceWorker
from siirl.engine.workers.actor import ADAPTER_DIR
from siirl.engine.workers.lora import check_lora_targets
from siirl.engine.workers.model_loading import ModelLoadError
from siirl.engine.workers.reference import BaseModelReference
from siirl.params.model import ModelConfig, PolicyModelConfig, RefConfig, RolloutConfig

ROWS = 8


def lora_model(path, **overrides) -> PolicyModelConfig:
    return PolicyModelConfig(path=str(path), **{"lora_rank": 4, "lora_alpha": 8, **overrides})


def lora_actor(path, **overrides) -> ActorWorker:
    return ActorWorker(lora_model(path, **overrides), actor_config(ppo_mini_batch_size=ROWS, lr=5e-2), "cpu")


def snapshot(actor: ActorWorker) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in actor.model.named_parameters()}


def test_only_adapters_train_and_reference_is_the_base_model(tiny_model_dir, single_process_group):
    actor = lora_actor(tiny_model_dir)
    trainable = [n for n, p in actor.model.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    # all-linear: every projection of both blocks, not the (tied) output head
    assert len(trainable) == 2 * 7 * 2
    optimized = {id(p) for group in actor.optimizer.param_groups for p in group["params"]}
    assert optimized == {id(p) for p in actor.model.parameters() if p.requires_grad}

    batch = make_batch(ROWS, seed=3)
    before = snapshot(actor)
    actor.update_policy(batch)
    after = snapshot(actor)
    changed = {n for n in before if not torch.equal(before[n], after[n])}
    assert changed and changed <= set(trainable)
    assert any(".lora_B." in n for n in changed)  # B starts at zero: the adapter now changes the output

    base = ReferenceWorker(ModelConfig(path=str(tiny_model_dir)), RefConfig(), "cpu")
    reference = BaseModelReference(actor, RefConfig(log_prob_max_token_len_per_gpu=30))
    want = base.compute_ref_log_prob(batch)
    torch.testing.assert_close(reference.compute_ref_log_prob(batch), want, atol=1e-6, rtol=1e-6)
    policy = actor.compute_log_prob(batch, calculate_entropy=False)["old_log_probs"]
    assert (policy - want).abs().max() > 1e-3  # the adapters are back on for the policy
    with pytest.raises(TypeError, match="no adapters"):
        BaseModelReference(ActorWorker(ModelConfig(path=str(tiny_model_dir)), actor_config(), "cpu"), RefConfig())


def test_rollout_engine_receives_merged_weights(tiny_model_dir, single_process_group):
    actor = lora_actor(tiny_model_dir)
    actor.update_policy(make_batch(ROWS, seed=4))
    merged = dict(actor.named_parameters_for_sync())
    plain = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    assert set(merged) == {n for n, _ in plain.named_parameters()}
    want = copy.deepcopy(actor.model).merge_and_unload()
    for name, tensor in want.named_parameters():
        torch.testing.assert_close(merged[name], tensor, atol=1e-6, rtol=1e-6)

    engine = make_rollout_engine(
        "hf", model_cfg=lora_model(tiny_model_dir), rollout_cfg=RolloutConfig(), backend="cpu", max_response_length=4
    )
    engine.sync_weights(actor.named_parameters_for_sync())
    batch = make_batch(ROWS, seed=5)  # 6 prompt + 8 response columns
    with torch.no_grad():
        logits = engine.model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"]
        ).logits[:, 5:-1]
    got = logprobs_from_logits(logits, batch["responses"]) * batch["response_mask"]
    want_lp = actor.compute_log_prob(batch, calculate_entropy=False)["old_log_probs"]
    torch.testing.assert_close(got, want_lp, atol=1e-5, rtol=1e-5)


def test_checkpoint_holds_the_adapter_and_resumes_it(tiny_model_dir, tmp_path, single_process_group):
    actor = lora_actor(tiny_model_dir)
    batch = make_batch(ROWS, seed=6)
    actor.update_policy(batch)
    saved = snapshot(actor)
    actor.save_checkpoint(tmp_path / "actor")
    write_manifest(tmp_path)
    shard = load_file(tmp_path / "actor" / "rank_0_of_1.safetensors")
    model_keys = [k for k in shard if k.startswith("model/")]
    assert model_keys and all(".lora_A." in k or ".lora_B." in k for k in model_keys)
    assert all(".lora_" in k for k in shard if k.startswith("optimizer/"))
    adapter = tmp_path / "actor" / ADAPTER_DIR
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"], config["peft_type"]) == (4, 8, "LORA")
    assert len(load_file(adapter / "adapter_model.safetensors")) == len(model_keys)

    actor.update_policy(batch)
    next_step = snapshot(actor)
    actor.update_policy(batch)
    actor.load_checkpoint(tmp_path / "actor")
    for name, tensor in snapshot(actor).items():
        torch.testing.assert_close(tensor, saved[name], atol=0, rtol=0)
    at_save = {name: tensor.clone() for name, tensor in actor.named_parameters_for_sync()}
    actor.update_policy(batch)
    for name, tensor in snapshot(actor).items():
        torch.testing.assert_close(tensor, next_step[name], atol=1e-6, rtol=1e-6)

    # The exported adapter starts a new run (lora_adapter_path) where this one stands.
    resumed = lora_actor(tiny_model_dir, lora_adapter_path=str(adapter), lora_rank=0)
    assert resumed.lora
    for name, tensor in resumed.named_parameters_for_sync():
        torch.testing.assert_close(tensor, at_save[name], atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"target_modules": ["q_proj", "nope_proj"]}, "nope_proj match no module of Qwen2ForCausalLM"),
        ({"target_modules": ".*embed_tokens"}, "linear layers only"),
        ({"target_modules": "x_proj"}, "cannot add LoRA adapters"),
    ],
)
def test_bad_targets_fail_in_one_line_before_loading(tiny_model_dir, overrides, message):
    with pytest.raises(ModelLoadError, match=message) as info:
        check_lora_targets(lora_model(tiny_model_dir, **overrides))
    assert "\n" not in str(info.value)


def test_targets_of_a_vision_model_are_checked_on_its_image_text_class():
    """A VL config.json builds through the image-text Auto class (the causal-LM one refuses it)."""
    from siirl.embedded_assets import default_vlm_model_path

    check_lora_targets(lora_model(default_vlm_model_path(), target_modules="all-linear"))
    with pytest.raises(ModelLoadError, match="nope_proj match no module of Qwen2VLForConditionalGeneration"):
        check_lora_targets(lora_model(default_vlm_model_path(), target_modules=["q_proj", "nope_proj"]))


def test_exclude_modules_and_lists(tiny_model_dir, single_process_group):
    actor = lora_actor(tiny_model_dir, target_modules=["q_proj", "v_proj"], exclude_modules=["layers.1.self_attn.v_proj"])
    adapted = {n.split(".lora_")[0] for n, p in actor.model.named_parameters() if p.requires_grad}
    assert sorted(a.removeprefix("base_model.model.") for a in adapted) == [
        "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj", "model.layers.1.self_attn.q_proj",
    ]
