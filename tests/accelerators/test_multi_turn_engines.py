"""Multi-turn rollouts through the vLLM and SGLang engines: the fake packages (the GPU faked too), and vLLM's
real CPU build where installed."""

from __future__ import annotations

import torch

from siirl.data_coordinator.prompt_encoding import PromptEncoder
from siirl.data_coordinator.tensordict_ops import set_non_tensor_list
from siirl.device import get_backend
from siirl.embedded_assets import default_model_path
from siirl.engine.rollout.env_session import EnvSession, single_sample_config
from siirl.engine.rollout.hf import HFRolloutEngine
from siirl.engine.rollout.multi_turn import MultiTurnRollout
from siirl.engine.workers.model_loading import load_tokenizer
from siirl.params.environment import EnvConfig

from .accel_testutils import model_cfg, rollout_cfg

R = 5
GREEDY = {"n": 2, "do_sample": False}


def _multi_turn(inner, tokenizer, cfg):
    env = EnvConfig(num_workers=0, kwargs={"steps": 3})
    return MultiTurnRollout(EnvSession(inner, tokenizer, cfg, env), max_turns=3, max_response_length=R,
                            max_observation_length=12)


def _prompts(tokenizer):
    from tensordict import TensorDict

    encoder = PromptEncoder(tokenizer, 12, "error", True)
    problems = ["12+30=", "5+7="]
    batch = TensorDict(encoder.encode([[{"role": "user", "content": p}] for p in problems], str), [2])
    set_non_tensor_list(batch, "uid", ["q0", "q1"])  # same uids -> same environment seeds in both runs
    return batch


def _compare_with_hf(engine_cls, name, device="cuda"):
    path = default_model_path()
    tokenizer = load_tokenizer(model_cfg(path))
    cfg = rollout_cfg(name, n=2, val_kwargs=GREEDY, gpu_memory_utilization=0.4)
    engine = engine_cls(model_cfg(path, dtype="float32"), single_sample_config(cfg), get_backend(device),
                        max_response_length=R)
    hf = HFRolloutEngine(model_cfg(path, dtype="float32"), single_sample_config(rollout_cfg("hf", val_kwargs=GREEDY)),
                         "cpu", max_response_length=R)
    batch = _prompts(tokenizer)
    ours = _multi_turn(engine, tokenizer, cfg).generate(batch, validate=True)
    reference = _multi_turn(hf, tokenizer, cfg).generate(batch, validate=True)
    for key in ("responses", "response_mask", "attention_mask", "env_turn_rewards", "env_turn_index"):
        assert torch.equal(ours[key], reference[key]), key
    assert int(ours["num_turns"].min()) == 3


def test_vllm_multi_turn_matches_hf(vllm_build, monkeypatch):
    from siirl.engine.rollout.vllm_engine import VLLMRolloutEngine

    from .test_vllm_engine import spy_engine_calls

    seen = spy_engine_calls(vllm_build, monkeypatch)
    _compare_with_hf(VLLMRolloutEngine, "vllm", device="cpu")
    assert len(seen["generate"]) == 3  # one engine call per turn


def test_sglang_multi_turn_matches_hf(fake_cuda, fake_sglang):
    from siirl.engine.rollout.sglang_engine import SGLangRolloutEngine

    _compare_with_hf(SGLangRolloutEngine, "sglang")
