"""vLLM under LoRA: engine arguments and adapter requests (against the fake ``vllm``, which records them),
responses equal to the HF engine's with the merged weights (fake and real CPU build); the policy sends adapters
to vLLM and merged weights elsewhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from siirl.config_checks import load_config
from siirl.dag_worker.policy import Policy
from siirl.device import get_backend
from siirl.engine.rollout.hf import HFRolloutEngine
from siirl.engine.workers.lora import adapter_config, adapter_tensors, apply_lora, merged_named_parameters
from siirl.errors import ConfigError, SiirlUserError
from siirl.params.model import PolicyModelConfig

from .accel_testutils import prompt_batch, rollout_cfg

R = 6
GREEDY = {"n": 2, "do_sample": False}


def lora_cfg(path, **overrides) -> PolicyModelConfig:
    return PolicyModelConfig(path=str(path), dtype="float32", **{"lora_rank": 4, "lora_alpha": 8, **overrides})


def trained_peft_model(path, seed: int = 0):
    """A peft model whose adapters change the outputs (B is zero at init, so it is filled at random)."""
    torch.manual_seed(seed)
    model = apply_lora(AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), lora_cfg(path))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if ".lora_B." in name:
                param.normal_(0.0, 0.5)
    return model


def make_engine(path, backend: str = "cuda", **model_overrides):
    from siirl.engine.rollout.vllm_engine import VLLMRolloutEngine

    return VLLMRolloutEngine(
        lora_cfg(path, **model_overrides), rollout_cfg("vllm", n=2, val_kwargs=GREEDY, load_format="safetensors"),
        get_backend(backend), max_response_length=R,
    )


def test_engine_args_and_adapter_requests(fake_cuda, fake_vllm, tiny_model_dir):
    engine = make_engine(tiny_model_dir)
    ((_, args),) = [c for c in fake_vllm.CALLS if c[0] == "LLM"]
    assert (args["enable_lora"], args["max_lora_rank"], args["max_loras"]) == (True, 8, 1)  # rank 4 -> 8
    assert args["load_format"] == "safetensors"
    with pytest.raises(RuntimeError, match="before the first sync_lora_adapter"):
        engine.generate(prompt_batch())

    model = trained_peft_model(tiny_model_dir)
    for version in (1, 2):
        engine.sync_lora_adapter(adapter_config(model), adapter_tensors(model))
        engine.generate(prompt_batch())
        request = [c for c in fake_vllm.CALLS if c[0] == "generate"][-1][1]["lora_request"]
        assert request.lora_int_id == version and Path(request.lora_path, "adapter_model.safetensors").is_file()
        saved = json.loads(Path(request.lora_path, "adapter_config.json").read_text())
        assert (saved["r"], saved["lora_alpha"]) == (4, 8)
    first = Path(engine.adapters.root, "v1")
    assert not first.exists()  # only the newest adapter folder is kept
    loads = [c[1] for c in fake_vllm.CALLS if c[0] == "load_lora"]
    assert [load["id"] for load in loads] == [1, 2] and all(load["r"] == 4 for load in loads)
    assert len(loads[0]["tensors"]) == 2 * 2 * 7  # lora_A + lora_B of 7 projections in 2 blocks
    engine.close()
    assert not engine.adapters.root.exists()


def test_adapter_responses_match_the_hf_engine_with_merged_weights(vllm_build, tiny_model_dir):
    """On the fake and on the real CPU build (its LoRA kernels are punica's CPU ones)."""
    model = trained_peft_model(tiny_model_dir, seed=1)
    engine = make_engine(tiny_model_dir, backend="cpu")
    hf = HFRolloutEngine(lora_cfg(tiny_model_dir), rollout_cfg("hf", val_kwargs=GREEDY), "cpu", max_response_length=R)
    batch = prompt_batch(seed=3)
    base = hf.generate(batch, validate=True)["responses"]

    engine.sync_lora_adapter(adapter_config(model), adapter_tensors(model))
    hf.sync_weights(merged_named_parameters(model))
    ours, reference = engine.generate(batch, validate=True), hf.generate(batch, validate=True)
    assert torch.equal(ours["responses"], reference["responses"])
    assert not torch.equal(reference["responses"], base)  # the adapter changed what is generated


class _LoraActor:
    """The actor surface ``Policy.refresh`` uses, backed by a peft model."""

    lora = True

    def __init__(self, model) -> None:
        self.model = model

    def lora_adapter(self):
        return adapter_config(self.model), adapter_tensors(self.model)

    def named_parameters_for_sync(self):
        return merged_named_parameters(self.model)


def test_policy_sends_the_adapter_to_vllm_and_merged_weights_to_hf(fake_cuda, fake_vllm, tiny_model_dir):
    actor = _LoraActor(trained_peft_model(tiny_model_dir))
    vllm_policy = Policy(actor, make_engine(tiny_model_dir), kl_ctrl=None)
    vllm_policy.refresh()
    assert [c[0] for c in fake_vllm.CALLS].count("load_weights") == 0
    assert vllm_policy.rollout._lora_request.lora_int_id == 1

    hf = HFRolloutEngine(lora_cfg(tiny_model_dir), rollout_cfg("hf"), "cpu", max_response_length=R)
    Policy(actor, hf, kl_ctrl=None).refresh()
    merged = dict(merged_named_parameters(actor.model))
    for name, tensor in merged.items():
        assert torch.equal(hf.params[name], tensor), name


def test_a_rank_beyond_vllm_is_refused_before_ray():
    with pytest.raises(ConfigError, match=r"^bad config: actor_rollout_ref.model.lora_rank=1024, beyond the largest "
                       r"max_lora_rank 512 the 'vllm' rollout engine serves$"):
        load_config(["actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.model.lora_rank=1024"])
    load_config(["actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.model.lora_rank=512"])
    load_config(["actor_rollout_ref.rollout.name=hf", "actor_rollout_ref.model.lora_rank=1024"])  # no such bound


def test_a_saved_adapter_whose_config_does_not_parse_is_one_line_before_ray(tmp_path):
    """The rank check reads the saved adapter's config first: a broken one is the same line the preflight gives."""
    (tmp_path / "adapter_config.json").write_text("{not json")
    (tmp_path / "adapter_model.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(SiirlUserError, match=r"^actor_rollout_ref.model.lora_adapter_path=.*: adapter_config.json does "
                       r"not load \(.*\)$"):
        load_config(["actor_rollout_ref.rollout.name=vllm", f"actor_rollout_ref.model.lora_adapter_path={tmp_path}"])
