"""vLLM and SGLang rollouts of a vision-language policy, against the fakes: each image's block collapsed to one
placeholder plus the images (``multi_modal_data`` / ``image_data``), the tokenizer kept, vision tokens never sampled, and
the same greedy tokens as the HF engine. Fake only: vLLM's Qwen2-VL imports torchvision, and no CPU build of
torchvision that fits torch 2.13 installs from PyPI, so the real CPU build's tier removes it (docs/hardware.md);
there vLLM refuses the model ("No module named 'torchvision'" while it inspects the architecture)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from siirl.device import get_backend
from siirl.engine.rollout.hf import HFRolloutEngine
from siirl.engine.rollout.vision_requests import collapse_image_pads, vision_token_ids
from siirl.params.model import ModelConfig, RolloutConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vlm_testutils import build_image_processor, image_row, png_bytes, save_tiny_vlm, write_image_rows

RESPONSE = 5


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory):
    return save_tiny_vlm(tmp_path_factory.mktemp("vlm"))


def image_batch(tmp_path, vlm_dir):
    from siirl.data_coordinator import build_train_dataloader
    from siirl.engine.workers.model_loading import load_tokenizer
    from siirl.params.data import DataConfig

    rows = [image_row(i, [{"bytes": png_bytes(i, size=28 + 28 * (i % 2)), "path": None}]) for i in range(3)]
    rows.append({**image_row(3, []), "prompt": [{"role": "user", "content": "Sum?"}]})
    path = write_image_rows(tmp_path / "d.parquet", rows)
    config = DataConfig(train_files=[path], train_batch_size=4, shuffle=False, max_prompt_length=32)
    tokenizer = load_tokenizer(ModelConfig(path=str(vlm_dir)))
    return next(iter(build_train_dataloader(config, tokenizer, 0, 1, image_processor=build_image_processor())))


def test_collapse_keeps_one_placeholder_per_image():
    assert collapse_image_pads([5, 9, 9, 9, 6, 7, 9, 9, 8], 9) == [5, 9, 6, 7, 9, 8]


def test_vllm_gets_collapsed_prompts_with_images_and_matches_hf(fake_cuda, fake_vllm, vlm_dir, tmp_path):
    from siirl.engine.rollout.vllm_engine import VLLMRolloutEngine

    greedy = RolloutConfig(name="vllm", n=2, temperature=0.0, do_sample=False, load_format="safetensors")
    model_cfg = ModelConfig(path=str(vlm_dir))
    batch = image_batch(tmp_path, vlm_dir)
    engine = VLLMRolloutEngine(model_cfg, greedy, get_backend("cuda"), max_response_length=RESPONSE)
    out = engine.generate(batch)
    (llm_args,) = [args for name, args in fake_vllm.CALLS if name == "LLM"]
    assert llm_args["skip_tokenizer_init"] is False  # the processor needs it
    (call,) = [args for name, args in fake_vllm.CALLS if name == "generate"]
    pad = engine.hf_config.image_token_id
    assert [p.count(pad) for p in call["prompts"]] == [1, 1, 1, 0]  # one placeholder per image
    assert call["params"].logit_bias == dict.fromkeys(vision_token_ids(engine.hf_config), -100.0)
    assert len(out["multi_modal_inputs"]) == 8  # carried, per sample, for the training forward

    hf = HFRolloutEngine(model_cfg, RolloutConfig(n=2, temperature=0.0, do_sample=False), "cpu", max_response_length=RESPONSE)
    assert torch.equal(out["responses"], hf.generate(batch)["responses"])


def test_images_need_the_tokenizer_in_vllm(fake_cuda, fake_vllm, vlm_dir):
    llm = fake_vllm.LLM(model=str(vlm_dir), skip_tokenizer_init=True)
    from PIL import Image

    image = Image.new("RGB", (28, 28))
    with pytest.raises(ValueError, match="need the tokenizer"):
        llm.generate([{"prompt_token_ids": [5, 3, 6], "multi_modal_data": {"image": [image]}}], fake_vllm.SamplingParams())


def test_sglang_gets_collapsed_prompts_with_image_data_and_matches_hf(fake_cuda, fake_sglang, vlm_dir, tmp_path):
    from siirl.engine.rollout.sglang_engine import SGLangRolloutEngine

    greedy = RolloutConfig(name="sglang", n=2, temperature=0.0, do_sample=False, load_format="safetensors")
    model_cfg = ModelConfig(path=str(vlm_dir))
    batch = image_batch(tmp_path, vlm_dir)
    out = SGLangRolloutEngine(model_cfg, greedy, get_backend("cuda"), max_response_length=RESPONSE).generate(batch)
    (server,) = [args for name, args in fake_sglang.CALLS if name == "Engine"]
    assert server["skip_tokenizer_init"] is False
    (call,) = [args for name, args in fake_sglang.CALLS if name == "generate"]
    pad = 3  # <|image_pad|> of the test tokenizer
    assert [p.count(pad) for p in call["input_ids"]] == [1, 1, 1, 1, 1, 1, 0, 0]
    assert [len(images or []) for images in call["image_data"]] == [1, 1, 1, 1, 1, 1, 0, 0]
    assert set(call["sampling_params"]["logit_bias"].values()) == {-100.0}
    hf = HFRolloutEngine(model_cfg, RolloutConfig(n=2, temperature=0.0, do_sample=False), "cpu", max_response_length=RESPONSE)
    assert torch.equal(out["responses"], hf.generate(batch)["responses"])


def test_multi_turn_vllm_rollout_sends_each_rows_images_every_turn_and_matches_hf(fake_cuda, fake_vllm, vlm_dir, tmp_path):
    """Every turn's requests carry the row's images with its growing context; greedy turns equal the HF
    engine's multi-turn rollout of the same rows."""
    from vlm_testutils import LOOK_AGAIN

    from siirl.data_coordinator.tensordict_ops import set_non_tensor_list
    from siirl.engine.rollout.env_session import EnvSession, single_sample_config
    from siirl.engine.rollout.multi_turn import MultiTurnRollout
    from siirl.engine.rollout.vllm_engine import VLLMRolloutEngine
    from siirl.params.environment import EnvConfig

    model_cfg = ModelConfig(path=str(vlm_dir))
    greedy = {"n": 1, "temperature": 0.0, "do_sample": False}
    batch = image_batch(tmp_path, vlm_dir)
    set_non_tensor_list(batch, "uid", [f"u{i}" for i in range(4)])

    def multi_turn(inner, cfg):
        session = EnvSession(inner, inner.tokenizer, cfg, EnvConfig(name=LOOK_AGAIN, num_workers=0, kwargs={"steps": 2}))
        return MultiTurnRollout(session, max_turns=2, max_response_length=RESPONSE, max_observation_length=16).generate(batch)

    vllm_cfg = RolloutConfig(name="vllm", load_format="safetensors", **greedy)
    vllm = VLLMRolloutEngine(model_cfg, single_sample_config(vllm_cfg), get_backend("cuda"), max_response_length=RESPONSE)
    out = multi_turn(vllm, vllm_cfg)
    calls = [args for name, args in fake_vllm.CALLS if name == "generate"]
    assert len(calls) == 2  # one per turn
    pad = vllm.hf_config.image_token_id
    for call in calls:  # collapsed to one placeholder: the request carried the row's image (and not otherwise)
        assert [p.count(pad) for p in call["prompts"]] == [1, 1, 1, 0]
    first, second = calls[0]["prompts"][0], calls[1]["prompts"][0]
    assert len(second) > len(first) and second[: len(first)] == first  # the second turn extends the first's context
    hf_cfg = RolloutConfig(**greedy)
    hf = HFRolloutEngine(model_cfg, single_sample_config(hf_cfg), "cpu", max_response_length=RESPONSE)
    assert torch.equal(out["responses"], multi_turn(hf, hf_cfg)["responses"])
