"""verl's rollout engine knobs reach vLLM's ``LLM`` and SGLang's ``Engine`` under their own argument names
(the fakes record what they got and refuse names the real libraries do not take); hf ignores them."""

from __future__ import annotations

import logging
import sys

import pytest
import torch
from transformers import Qwen2ForCausalLM

from siirl.device import get_backend
from siirl.engine.rollout.hf import HFRolloutEngine
from siirl.errors import ConfigError
from siirl.params.model import EngineKwargs

from .accel_testutils import model_cfg, prompt_batch, rollout_cfg, tiny_qwen2_config

R = 6
KNOBS = {
    "prompt_length": 10, "response_length": R, "max_num_batched_tokens": 2048, "max_num_seqs": 32,
    "enable_chunked_prefill": False, "enable_prefix_caching": False, "disable_log_stats": False,
    "cudagraph_capture_sizes": [1, 2, 4], "dtype": "float16", "multi_stage_wake_up": False,
}


def _engine_args(calls, name):
    (args,) = [payload for call, payload in calls if call == name]
    return args


def test_vllm_gets_the_knobs(vllm_build, tiny_model_dir, monkeypatch):
    """The real CPU build takes every one of them (the fake refuses a name the library does not take), and the
    published scripts' ``disable_mm_preprocessor_cache=True`` under the name vLLM took for it since."""
    from siirl.engine.rollout.vllm_engine import VLLMRolloutEngine

    from .test_vllm_engine import spy_engine_calls

    seen = spy_engine_calls(vllm_build, monkeypatch)
    knobs = {**KNOBS, "dtype": "bfloat16"}  # the CPU build's half precision
    cfg = rollout_cfg("vllm", engine_kwargs=EngineKwargs(vllm={"disable_mm_preprocessor_cache": True}), **knobs)
    engine = VLLMRolloutEngine(model_cfg(tiny_model_dir), cfg, get_backend("cpu"), max_response_length=R)
    (args,) = seen["LLM"]
    assert args["max_model_len"] == 10 + R  # verl's rule: prompt + response limits
    assert (args["max_num_batched_tokens"], args["max_num_seqs"]) == (2048, 32)
    assert (args["enable_chunked_prefill"], args["enable_prefix_caching"], args["disable_log_stats"]) == (
        False, False, False)
    assert args["compilation_config"] == {"cudagraph_capture_sizes": [1, 2, 4]}
    assert args["dtype"] == "bfloat16" and args["mm_processor_cache_gb"] == 0
    assert "disable_mm_preprocessor_cache" not in args
    assert engine.memory.staged is False
    assert engine.generate(prompt_batch())["responses"].shape[1] == R


def test_vllm_unset_knobs_keep_the_engine_defaults_and_engine_kwargs_win(fake_cuda, fake_vllm, tiny_model_dir):
    from siirl.engine.rollout.vllm_engine import VLLMRolloutEngine

    cfg = rollout_cfg("vllm", max_model_len=64, engine_kwargs=EngineKwargs(vllm={"max_num_seqs": 8}))
    VLLMRolloutEngine(model_cfg(tiny_model_dir), cfg, get_backend("cuda"), max_response_length=R)
    args = _engine_args(fake_vllm.CALLS, "LLM")
    assert args["max_model_len"] == 64 and args["max_num_seqs"] == 8
    assert args["max_num_batched_tokens"] is None and args["compilation_config"] is None


def test_unknown_engine_kwarg_is_the_library_error(vllm_build, tiny_model_dir):
    from siirl.engine.rollout.vllm_engine import VLLMRolloutEngine

    cfg = rollout_cfg("vllm", engine_kwargs=EngineKwargs(vllm={"no_such_arg": 1}))
    with pytest.raises(TypeError, match="no_such_arg"):
        VLLMRolloutEngine(model_cfg(tiny_model_dir), cfg, get_backend("cpu"), max_response_length=R)


def test_sglang_gets_the_knobs(fake_cuda, fake_sglang, tiny_model_dir):
    from siirl.engine.rollout.sglang_engine import SGLangRolloutEngine

    cfg = rollout_cfg("sglang", engine_kwargs=EngineKwargs(sglang={"attention_backend": "triton"}), **KNOBS)
    engine = SGLangRolloutEngine(model_cfg(tiny_model_dir), cfg, get_backend("cuda"), max_response_length=R)
    args = _engine_args(fake_sglang.CALLS, "Engine")
    assert args["context_length"] == 10 + R
    assert (args["max_prefill_tokens"], args["max_running_requests"]) == (2048, 32)
    assert args["chunked_prefill_size"] == -1 and args["disable_radix_cache"] is True
    assert args["cuda_graph_bs"] == [1, 2, 4] and args["log_level"] == "info"
    assert args["dtype"] == "float16" and args["attention_backend"] == "triton"
    assert engine.memory.staged is False


def test_sglang_defaults_leave_the_server_args_alone(fake_cuda, fake_sglang, tiny_model_dir):
    from siirl.engine.rollout.sglang_engine import SGLangRolloutEngine

    SGLangRolloutEngine(model_cfg(tiny_model_dir), rollout_cfg("sglang"), get_backend("cuda"), max_response_length=R)
    args = _engine_args(fake_sglang.CALLS, "Engine")
    assert args["context_length"] is None and args["chunked_prefill_size"] is None
    assert args["max_prefill_tokens"] == 16384 and args["disable_radix_cache"] is False
    assert args["log_level"] == "error"


def test_response_length_limits_generation(vllm_build, tiny_model_dir, monkeypatch):
    from siirl.engine.rollout.vllm_engine import VLLMRolloutEngine

    from .test_vllm_engine import spy_engine_calls

    seen = spy_engine_calls(vllm_build, monkeypatch)
    engine = VLLMRolloutEngine(model_cfg(tiny_model_dir), rollout_cfg("vllm"), get_backend("cpu"),
                               max_response_length=3)
    out = engine.generate(prompt_batch())
    (params,) = seen["generate"]
    assert params.max_tokens == 3 and out["responses"].shape[1] == 3


def test_hf_ignores_the_engine_knobs(tiny_model_dir):
    engine = HFRolloutEngine(model_cfg(tiny_model_dir), rollout_cfg("hf", **{**KNOBS, "dtype": "auto"}), "cpu",
                             max_response_length=R)
    assert engine.generate(prompt_batch())["responses"].shape[1] == R


def test_quantization_reaches_vllm_under_its_own_name(fake_cuda, fake_vllm, tiny_model_dir):
    """verl's fp8 rollout: ``rollout.quantization`` is vLLM's ``quantization`` argument."""
    from siirl.engine.rollout.vllm_engine import VLLMRolloutEngine

    VLLMRolloutEngine(model_cfg(tiny_model_dir), rollout_cfg("vllm", quantization="fp8"), get_backend("cuda"),
                      max_response_length=R)
    assert _engine_args(fake_vllm.CALLS, "LLM")["quantization"] == "fp8"


def test_sglang_refuses_quantization_in_one_line(fake_cuda):
    from siirl.main_dag import prepare

    with pytest.raises(ConfigError, match="quantization=fp8 is not implemented for rollout.name=sglang"):
        prepare(["device=cuda", "actor_rollout_ref.rollout.name=sglang", "actor_rollout_ref.rollout.quantization=fp8"])


def test_vllm_refuses_a_quantization_method_it_does_not_know(fake_cuda, fake_vllm, tiny_model_dir):
    from siirl.engine.rollout.vllm_engine import VLLMRolloutEngine

    with pytest.raises(ValueError, match="fp7"):
        VLLMRolloutEngine(model_cfg(tiny_model_dir), rollout_cfg("vllm", quantization="fp7"), get_backend("cuda"),
                          max_response_length=R)


def test_hf_accepts_quantization_with_one_warning(caplog):
    from siirl.main_dag import prepare

    with caplog.at_level(logging.WARNING):
        cfg, *_ = prepare(["device=cpu", "actor_rollout_ref.rollout.name=hf",
                           "actor_rollout_ref.rollout.quantization=fp8"])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert cfg.actor_rollout_ref.rollout.quantization == "fp8"
    assert len(warnings) == 1 and "quantization=fp8" in warnings[0], warnings


def test_quantized_vllm_engine_reloads_whole_layers_in_place(fake_cuda, fake_vllm, tiny_model_dir):
    """vLLM's quantized layers refuse plain load_weights after start-up (the fake does too): the sync goes
    through vLLM's in-place reload, each call holding whole fused layers, and the engine ends up with the
    trainer's weights quantized again (fp8 values)."""
    from siirl.engine.rollout.vllm_engine import VLLMRolloutEngine

    engine = VLLMRolloutEngine(model_cfg(tiny_model_dir), rollout_cfg("vllm", quantization="fp8"),
                               get_backend("cuda"), max_response_length=R)
    engine.bucket_mb = 0.001  # smaller than any layer: every bucket closes at the end of a layer
    torch.manual_seed(5)
    trainer = Qwen2ForCausalLM(tiny_qwen2_config())
    engine.sync_weights(trainer.named_parameters())
    engine.generate(prompt_batch())
    reloads = [[name for name, _, _ in payload] for name, payload in fake_vllm.CALLS if name == "reload_weights"]
    assert len(reloads) > 4 and not [name for name, _ in fake_vllm.CALLS if name == "load_weights"]
    qkv = [call for call in reloads if any(".q_proj." in name for name in call)]
    assert all(sum(".k_proj." in n or ".v_proj." in n for n in call) == 4 for call in qkv), qkv
    weight = "model.layers.0.self_attn.q_proj.weight"
    sent = trainer.get_parameter(weight).detach().to(engine.llm.lm.params[weight].dtype)
    assert torch.equal(engine.llm.lm.params[weight], sent.to(torch.float8_e4m3fn).to(sent.dtype))
    assert not torch.equal(engine.llm.lm.params[weight], sent)
    assert engine.generate(prompt_batch())["responses"].shape[1] == R


def test_quantized_sync_on_a_vllm_without_the_in_place_reload_is_one_line(fake_cuda, fake_vllm, tiny_model_dir,
                                                                          monkeypatch):
    from siirl.engine.rollout.vllm_engine import VLLMRolloutEngine

    monkeypatch.delattr(sys.modules["vllm.llm"]._Worker, "reload_weights")
    engine = VLLMRolloutEngine(model_cfg(tiny_model_dir), rollout_cfg("vllm", quantization="fp8"),
                               get_backend("cuda"), max_response_length=R)
    with pytest.raises(ConfigError, match="needs vLLM's in-place reload_weights") as info:
        engine.sync_weights([("model.norm.weight", torch.ones(128))])
        engine.generate(prompt_batch())
    assert "\n" not in str(info.value)
