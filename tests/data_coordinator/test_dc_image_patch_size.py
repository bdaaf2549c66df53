"""verl's ``data.image_patch_size``: images resized onto the patch x merge grid before the image processor
(32 pixels for Qwen3.5's 16-pixel patches, 28 for Qwen2.5-VL's 14), and a tiny Qwen3.5 taking the result."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from dc_testutils import data_config
from PIL import Image
from qwen3_5_testutils import build_image_processor, build_qwen3_5
from vlm_testutils import build_vlm_tokenizer, image_row, write_image_rows

from siirl.data_coordinator import build_train_dataloader
from siirl.data_coordinator.image_grid import MAX_TOKENS, MIN_TOKENS, grid_size, patch_size_mismatch
from siirl.data_coordinator.images import ImagePrompts
from siirl.engine.workers.vision_inputs import stack_images

SIZES = [(1, 1), (28, 28), (50, 90), (640, 480), (1000, 10), (3000, 2000), (20000, 15000)]
PROCESSOR = build_image_processor()


def png(width: int, height: int, seed: int = 0) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize(("patch", "step"), [(16, 32), (14, 28)])
def test_sides_are_multiples_of_patch_times_merge_within_verls_token_bounds(patch, step):
    for width, height in SIZES:
        new_w, new_h = grid_size(width, height, patch, 2)
        assert new_w % step == 0 and new_h % step == 0, (width, height)
        assert MIN_TOKENS <= (new_w // step) * (new_h // step) <= MAX_TOKENS, (width, height)
    assert grid_size(640, 480, patch, 2) == ((640, 480) if patch == 16 else (644, 476))  # nearest multiples


@pytest.fixture(scope="module")
def tokenizer():
    return build_vlm_tokenizer()


def _batch(tmp_path, tokenizer, patch_size, sizes):
    rows = [image_row(i, [{"bytes": png(w, h, i), "path": None}]) for i, (w, h) in enumerate(sizes)]
    config = data_config(
        train_files=[write_image_rows(tmp_path / "d.parquet", rows)], train_batch_size=len(rows), shuffle=False,
        max_prompt_length=128, image_patch_size=patch_size,
    )
    return next(iter(build_train_dataloader(config, tokenizer, 0, 1, image_processor=PROCESSOR)))


def test_a_16_pixel_patch_gives_a_32_pixel_grid_the_tiny_qwen3_5_takes(tmp_path, tokenizer):
    sizes = [(50, 90), (100, 40)]
    batch = _batch(tmp_path, tokenizer, 16, sizes)
    inputs, data = list(batch["multi_modal_inputs"]), list(batch["multi_modal_data"])
    assert [d["image"][0].size for d in data] == [grid_size(w, h, 16, 2) for w, h in sizes] == [(64, 96), (128, 64)]
    grids = torch.cat([i["image_grid_thw"] for i in inputs])
    # (t, h, w) in 16-pixel patches of the resized images: the processor resized nothing again; 100x40 is below
    # 4 tokens on the grid (96x32: 3), so it grew
    assert grids.tolist() == [[1, 6, 4], [1, 4, 8]]
    image_pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert (batch["input_ids"] == image_pad).sum(dim=1).tolist() == (grids.prod(dim=1) // 4).tolist()
    model = build_qwen3_5(tokenizer)
    with torch.no_grad():
        out = model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
            mm_token_type_ids=(batch["input_ids"] == image_pad).int(), **stack_images(inputs, torch.device("cpu")),
        )
    assert out.logits.shape[:2] == batch["input_ids"].shape and torch.isfinite(out.logits).all()


def test_a_14_pixel_patch_resizes_onto_28_pixels_and_the_processor_then_onto_its_own_32(tmp_path, tokenizer):
    batch = _batch(tmp_path, tokenizer, 14, [(50, 90)])
    (data,), (inputs,) = list(batch["multi_modal_data"]), list(batch["multi_modal_inputs"])
    assert data["image"][0].size == (56, 84)
    assert inputs["image_grid_thw"].tolist() == [[1, 6, 4]]  # the processor's 32-pixel grid: 64 x 96
    warning = patch_size_mismatch(PROCESSOR, 14)
    assert "multiples of 28" in warning and "multiples of 32" in warning and "\n" not in warning
    assert patch_size_mismatch(PROCESSOR, 16) is None and patch_size_mismatch(PROCESSOR, None) is None
    assert patch_size_mismatch(None, 14) is None  # a text policy has no image processor


def test_without_the_key_the_image_processor_alone_resizes():
    prompts = ImagePrompts(PROCESSOR)
    assert prompts.resized((50, 90)) == (50, 90)
    assert ImagePrompts(PROCESSOR, 14).resized((50, 90)) == (56, 84)
