"""The SGLang rollout engine against the fake ``sglang`` package: requests, weights, memory order, batches."""

from __future__ import annotations

import sys

import pytest
import torch
from transformers import Qwen2ForCausalLM

from siirl.data_coordinator.tensordict_ops import non_tensor_list
from siirl.device import get_backend
from siirl.engine.rollout.hf import HFRolloutEngine
from siirl.errors import SiirlUserError

from .accel_testutils import EOS, PAD, model_cfg, prompt_batch, rollout_cfg, tiny_qwen2_config

R = 6


def make_engine(path, backend="cuda", model_overrides=None, **overrides):
    from siirl.engine.rollout.sglang_engine import SGLangRolloutEngine

    cfg = {"n": 2, "temperature": 0.8, "top_p": 0.9, "top_k": 4, "gpu_memory_utilization": 0.3, **overrides}
    return SGLangRolloutEngine(
        model_cfg(path, **(model_overrides or {})), rollout_cfg("sglang", **cfg), get_backend(backend),
        max_response_length=R,
    )


def calls(sglang, *names):
    return [(name, payload) for name, payload in sglang.CALLS if name in names]


def test_engine_args_and_requests(fake_cuda, fake_sglang, tiny_model_dir):
    engine = make_engine(tiny_model_dir, enforce_eager=True)
    (_, args), = calls(fake_sglang, "Engine")
    assert args["model_path"] == str(tiny_model_dir) and args["tp_size"] == 1 and args["base_gpu_id"] == 0
    assert args["dtype"] == "bfloat16" and args["mem_fraction_static"] == 0.3
    assert args["enable_memory_saver"] is True and args["disable_cuda_graph"] is True
    assert args["skip_tokenizer_init"] is True

    batch = prompt_batch()
    out = engine.generate(batch)
    (_, request), = calls(fake_sglang, "generate")
    prompts = [row[mask.bool()].tolist() for row, mask in zip(batch["input_ids"], batch["attention_mask"])]
    assert request["input_ids"] == [p for p in prompts for _ in range(2)]  # each prompt n times, adjacent
    sampling = request["sampling_params"]
    assert sampling == {"n": 1, "max_new_tokens": R, "temperature": 0.8, "top_p": 0.9, "top_k": 4,
                        "stop_token_ids": [EOS]}
    uids = non_tensor_list(out, "uid")
    assert out.batch_size[0] == 6 and uids[0] == uids[1] != uids[2] == uids[3]


def test_validation_is_greedy_and_stop_strings_keep_the_tokenizer(fake_cuda, fake_sglang, tiny_model_dir):
    engine = make_engine(tiny_model_dir, stop=["w7"], val_kwargs={"n": 1, "temperature": 0.5})
    assert calls(fake_sglang, "Engine")[0][1]["skip_tokenizer_init"] is False
    engine.generate(prompt_batch(), validate=True)
    sampling = calls(fake_sglang, "generate")[0][1]["sampling_params"]
    assert (sampling["temperature"], sampling["top_p"], sampling["top_k"]) == (0.0, 1.0, -1)
    assert sampling["stop"] == ["w7"]


def test_weights_streamed_from_tensors_match_the_hf_state_dict(fake_cuda, fake_sglang, tiny_model_dir):
    engine = make_engine(tiny_model_dir)
    engine.bucket_mb = 0.01  # sub-MB buckets (the config takes whole MB) so the tiny model spans several
    torch.manual_seed(7)
    trainer = Qwen2ForCausalLM(tiny_qwen2_config())
    engine.sync_weights(trainer.named_parameters())
    updates = [payload for _, payload in calls(fake_sglang, "update_weights_from_tensor")]
    assert len(updates) > 1 and not any(update["flush_cache"] for update in updates)
    streamed = {name: (shape, dtype) for update in updates for name, shape, dtype in update["tensors"]}
    state = Qwen2ForCausalLM(tiny_qwen2_config()).to(torch.bfloat16).state_dict()
    state.pop("lm_head.weight")  # tied to the embedding
    assert streamed == {name: (tuple(t.shape), t.dtype) for name, t in state.items()}
    for name, param in trainer.named_parameters():
        assert torch.equal(engine.engine.lm.params[name], param.detach().to(torch.bfloat16))


def test_release_resume_order_around_training(fake_cuda, fake_sglang, tiny_model_dir):
    engine = make_engine(tiny_model_dir)
    trainer = Qwen2ForCausalLM(tiny_qwen2_config())
    for step in range(2):
        engine.wake_up()
        engine.sync_weights(trainer.named_parameters())
        engine.generate(prompt_batch(step))
        engine.sleep()
    order = [(n, p) if "memory" in n else n for n, p in fake_sglang.CALLS]
    assert order == [
        "Engine",
        "update_weights_from_tensor", "flush_cache", "generate", ("release_memory_occupation", None),
        ("resume_memory_occupation", ["weights"]), "update_weights_from_tensor",
        ("resume_memory_occupation", ["kv_cache"]), "flush_cache", "generate",
        ("release_memory_occupation", None),
    ]


def test_whole_resume_on_releases_without_tags(fake_cuda, fake_sglang, tiny_model_dir, monkeypatch):
    original = fake_sglang.Engine.resume_memory_occupation
    monkeypatch.setattr(fake_sglang.Engine, "resume_memory_occupation", lambda self: original(self))
    engine = make_engine(tiny_model_dir)
    engine.sleep()
    engine.wake_up()
    engine.generate(prompt_batch())
    assert [p for _, p in calls(fake_sglang, "resume_memory_occupation")] == [None]


def test_responses_match_the_hf_engine(fake_cuda, fake_sglang, tiny_model_dir):
    greedy = {"n": 2, "do_sample": False}
    engine = make_engine(tiny_model_dir, model_overrides={"dtype": "float32"}, val_kwargs=greedy)
    hf = HFRolloutEngine(
        model_cfg(tiny_model_dir, dtype="float32"), rollout_cfg("hf", val_kwargs=greedy), "cpu",
        max_response_length=R,
    )
    batch = prompt_batch(seed=3)
    ours, reference = engine.generate(batch, validate=True), hf.generate(batch, validate=True)
    for key in ("prompts", "responses", "response_mask", "input_ids", "attention_mask", "position_ids"):
        assert torch.equal(ours[key], reference[key]), key
    lengths = ours["response_mask"].sum(-1)
    assert (lengths < R).any() and (lengths == R).any()
    ended = lengths < R
    assert (ours["responses"][ended, lengths[ended] - 1] == EOS).all()
    assert all((ours["responses"][row, length:] == PAD).all() for row, length in enumerate(lengths.tolist()))


def test_bad_setups(fake_cuda, fake_sglang, tiny_model_dir, monkeypatch):
    """Tensor parallelism is refused by the config checks before Ray (tests/cli/test_verl_model_keys.py), and
    so is a device that does not run SGLang (tests/accelerators/test_rollout_choice.py)."""
    monkeypatch.setitem(sys.modules, "sglang", None)
    with pytest.raises(SiirlUserError, match=r"needs the 'sglang' package .*pip install siirl\[sglang\]"):
        make_engine(tiny_model_dir)
