"""The HF rollout engine's greedy output on the GPU equals the CPU's for the embedded tiny model (fp32)."""

import torch
from tensordict import TensorDict

from siirl.config_checks import load_config
from siirl.engine.rollout.hf import HFRolloutEngine


def _engine(device: str) -> HFRolloutEngine:
    cfg = load_config([f"device={device}", "actor_rollout_ref.model.dtype=float32"])
    return HFRolloutEngine(cfg.actor_rollout_ref.model, cfg.actor_rollout_ref.rollout, device,
                           max_response_length=int(cfg.data.max_response_length))


def test_greedy_generation_equal_on_gpu_and_cpu():
    cpu, gpu = _engine("cpu"), _engine("cuda")
    assert gpu.model.device.type == "cuda" and gpu.model.config._attn_implementation in ("sdpa", "flash_attention_2")
    prompts = [[{"role": "user", "content": f"{a}+{b}="}] for a, b in [(1, 2), (13, 29), (7, 0), (97, 70), (42, 8)]]
    texts = [cpu.tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False) for p in prompts]
    enc = cpu.tokenizer(texts, return_tensors="pt", padding=True, padding_side="left")
    batch = TensorDict({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}, batch_size=[len(texts)])
    on_cpu, on_gpu = cpu.generate(batch, validate=True), gpu.generate(batch, validate=True)
    assert torch.equal(on_cpu["responses"], on_gpu["responses"])
    assert torch.equal(on_cpu["response_mask"], on_gpu["response_mask"])
    assert on_cpu["response_mask"].sum(-1).min() > 1, "the model answered, not just ended"
