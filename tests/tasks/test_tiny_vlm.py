"""The embedded tiny Qwen2-VL: Auto-class loading without torchvision, image tokens, 3-D positions, partial
accuracy on the val images, reproducible warm-up."""

import io

import pyarrow.parquet as pq
import pytest
import torch
from PIL import Image
from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoTokenizer

import siirl.embedded_assets
from siirl.embedded_assets import default_vlm_data_files, default_vlm_model_path
from siirl.errors import SiirlUserError
from siirl.tasks.build_tiny_vlm import VlmWarmupConfig, warm_up
from siirl.tasks.evaluation import greedy_generate
from siirl.tasks.tiny_tokenizer import build_tokenizer
from siirl.tasks.vision_inputs import encode_image_prompts, greedy_image_accuracy, image_step_inputs


@pytest.fixture(scope="module")
def shipped():
    path = default_vlm_model_path()
    model = AutoModelForImageTextToText.from_pretrained(path, local_files_only=True).eval()
    return model, AutoTokenizer.from_pretrained(path), AutoImageProcessor.from_pretrained(path)


@pytest.fixture(scope="module")
def val_rows():
    rows = pq.read_table(default_vlm_data_files()[1]).to_pylist()[:64]
    contents = [r["prompt"][0]["content"] for r in rows]
    images = [[Image.open(io.BytesIO(im["bytes"])) for im in r["images"]] for r in rows]
    return contents, images, [r["reward_model"]["ground_truth"] for r in rows]


def test_shipped_parts_fit_together(shipped):
    model, tok, processor = shipped
    assert model.config.model_type == "qwen2_vl"
    assert type(processor).__name__ == "Qwen2VLImageProcessorPil"
    assert tok.get_vocab() == build_tokenizer(vision=True).get_vocab()
    assert model.config.image_token_id == tok.convert_tokens_to_ids("<|image_pad|>")
    assert model.config.vision_start_token_id == tok.convert_tokens_to_ids("<|vision_start|>")
    assert model.config.text_config.vocab_size == len(tok)
    assert model.generation_config.eos_token_id == tok.eos_token_id
    assert 600_000 <= model.num_parameters() <= 1_000_000


def test_a_28px_image_is_four_tokens_and_the_forward_is_finite(shipped, val_rows):
    model, tok, processor = shipped
    contents, images, _ = val_rows
    prompts = encode_image_prompts(tok, processor, contents[:1], images[:1])
    assert prompts.image_grid_thw.tolist() == [[1, 4, 4]]
    assert tok.decode(prompts.input_ids[0]) == (
        "<|user|><|vision_start|>" + "<|image_pad|>" * 4 + "<|vision_end|>Digit?<|assistant|>"
    )
    ids = torch.tensor(prompts.input_ids)
    logits = model(input_ids=ids, **image_step_inputs(model, prompts)(ids, torch.ones_like(ids))).logits
    assert logits.shape == (1, ids.shape[1], len(tok)) and torch.isfinite(logits).all()


def test_image_tokens_get_3d_positions(shipped, val_rows):
    model, tok, processor = shipped
    contents, images, _ = val_rows
    prompts = encode_image_prompts(tok, processor, contents[:4], images[:4])
    ids = torch.tensor(prompts.input_ids)
    inputs = image_step_inputs(model, prompts)(ids, torch.ones_like(ids))
    positions, _ = model.model.get_rope_index(ids, inputs["mm_token_type_ids"], prompts.image_grid_thw)
    # the 2x2 merged grid after <|user|><|vision_start|>: rows (height) and columns (width) from position 2
    assert positions[1:, 0, 2:6].tolist() == [[2, 2, 3, 3], [2, 3, 2, 3]]
    implicit = model(input_ids=ids, **inputs).logits
    explicit = model(input_ids=ids, position_ids=positions, **inputs).logits
    flat = model(input_ids=ids, position_ids=torch.arange(ids.shape[1]).expand_as(ids), **inputs).logits
    assert torch.equal(implicit, explicit)
    assert not torch.allclose(implicit, flat, atol=1e-4)


def test_partial_greedy_accuracy(shipped, val_rows):
    model, tok, processor = shipped
    acc = greedy_image_accuracy(model, tok, processor, *val_rows)
    assert 0.1 <= acc <= 0.5, f"greedy val accuracy {acc:.3f} outside [0.1, 0.5]"


def test_generate_agrees_with_reference_greedy(shipped, val_rows):
    model, tok, processor = shipped
    contents, images, _ = val_rows
    prompts = encode_image_prompts(tok, processor, contents[:1], images[:1])
    ids = torch.tensor(prompts.input_ids)
    inputs = image_step_inputs(model, prompts)(ids, torch.ones_like(ids))
    out = model.generate(input_ids=ids, do_sample=False, max_new_tokens=4, **inputs)
    reference = greedy_generate(
        model, prompts.input_ids, tok.eos_token_id, tok.pad_token_id, 4, image_step_inputs(model, prompts)
    )
    assert out[0, ids.shape[1] :].tolist()[: len(reference[0])] == reference[0]


def _small(**overrides) -> VlmWarmupConfig:
    shape = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 64}
    vision = {"vision_dim": 16, "vision_heads": 2, "mrope_section": (2, 3, 3)}
    return VlmWarmupConfig(**shape, **vision, n_train=32, n_val=4, batch_size=4, **overrides)


def test_warm_up_is_reproducible():
    states = []
    for _ in range(2):
        model, _, _, step, _ = warm_up(seed=5, cfg=_small(eval_every=2, target_low=0.0))
        assert step == 2
        states.append(model.state_dict())
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


def test_warm_up_reports_missing_target():
    with pytest.raises(RuntimeError, match="did not reach 0.99 within 2 steps"):
        warm_up(seed=0, cfg=_small(eval_every=1, max_steps=2, target_low=0.99, target_high=1.0))


@pytest.mark.parametrize("helper", [default_vlm_model_path, default_vlm_data_files])
def test_missing_assets_name_the_rebuild_command(helper, monkeypatch, tmp_path):
    monkeypatch.setattr(siirl.embedded_assets, "ASSETS_DIR", tmp_path)
    with pytest.raises(
        SiirlUserError, match=r"embedded asset missing: .*python -m siirl.tasks.build_tiny_vlm"
    ):
        helper()
