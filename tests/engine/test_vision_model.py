"""A vision-language policy loads through the image-text-to-text class, its image processor works without
torchvision, packed attention reaches the language model only, and ``freeze_vision_tower`` freezes the tower."""

from __future__ import annotations

import pytest
import torch
from vlm_testutils import build_image_processor, png_bytes, save_tiny_vlm

from siirl.device import get_backend
from siirl.device.kernels.hf_models import set_text_attn_implementation
from siirl.embedded_assets import default_model_path
from siirl.engine.workers.model_loading import load_causal_lm
from siirl.engine.workers.varlen_attention import VARLEN_SDPA
from siirl.engine.workers.vision import load_image_processor, policy_loader, vision_tower
from siirl.params.model import ModelConfig


@pytest.fixture(scope="module")
def vlm_cfg(tmp_path_factory):
    return ModelConfig(path=str(save_tiny_vlm(tmp_path_factory.mktemp("vlm"))))


def pixel_inputs(seed: int = 0) -> dict:
    from io import BytesIO

    from PIL import Image

    return dict(build_image_processor()(images=[Image.open(BytesIO(png_bytes(seed)))], return_tensors="pt"))


def test_vlm_loads_as_image_text_to_text_and_its_image_processor_needs_no_torchvision(vlm_cfg):
    model = load_causal_lm(vlm_cfg, get_backend("cpu"), torch.float32)
    assert type(model).__name__ == "Qwen2VLForConditionalGeneration" and vision_tower(model) is not None
    processor = load_image_processor(vlm_cfg)
    assert type(processor).__name__ == "Qwen2VLImageProcessorPil"
    assert load_image_processor(ModelConfig(path=str(default_model_path()))) is None  # a text LM has none


def test_packed_attention_is_set_on_the_language_model_only(vlm_cfg):
    model = load_causal_lm(vlm_cfg, get_backend("cpu"), torch.float32)
    inputs = pixel_inputs()
    before = model.model.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"])
    set_text_attn_implementation(model, VARLEN_SDPA)
    assert model.config.text_config._attn_implementation == VARLEN_SDPA
    assert model.config.vision_config._attn_implementation != VARLEN_SDPA
    after = model.model.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"])
    assert torch.equal(before.pooler_output[0], after.pooler_output[0])  # the tower still runs, unchanged


def test_freeze_vision_tower_leaves_only_the_language_model_trainable(vlm_cfg):
    backend = get_backend("cpu")
    frozen = policy_loader(True)(vlm_cfg, backend, torch.float32)
    tower = {id(p) for p in vision_tower(frozen).parameters()}
    assert tower and all(not p.requires_grad for p in vision_tower(frozen).parameters())
    assert all(p.requires_grad for p in frozen.parameters() if id(p) not in tower)
    trained = policy_loader(False)(vlm_cfg, backend, torch.float32)
    assert all(p.requires_grad for p in trained.parameters())
