"""A vision-language policy's log-probs and gradients are the same in every padding-free layout as in the
padded reference; the shared layout keys prompts by text AND image and encodes each distinct image once."""

from __future__ import annotations

from io import BytesIO

import pytest
import torch
from PIL import Image
from tensordict import TensorDict
from vlm_testutils import build_image_processor, build_vlm, build_vlm_tokenizer, png_bytes

from siirl.data_coordinator.tensordict_ops import set_non_tensor_list
from siirl.device.kernels.hf_models import set_text_attn_implementation
from siirl.engine.workers.actor import log_prob_reduce
from siirl.engine.workers.padding_free import response_outputs
from siirl.engine.workers.varlen_attention import VARLEN_SDPA
from siirl.engine.workers.vision_inputs import vision_rows

RESPONSE = 5
PAD = "<|vision_start|>" + "<|image_pad|>" * 4 + "<|vision_end|>"


def pixel_inputs(seed: int) -> dict:
    out = build_image_processor()(images=[Image.open(BytesIO(png_bytes(seed)))], return_tensors="pt")
    return {"pixel_values": out["pixel_values"], "image_grid_thw": out["image_grid_thw"]}


def make_micro(tokenizer, prompts: list[tuple[str, int | None]], prompt_width: int = 14) -> TensorDict:
    """Rows ``[left-padded prompt | right-padded response]``; a prompt is (text, image seed or None)."""
    rows, masks, inputs = [], [], []
    gen = torch.Generator().manual_seed(0)
    for i, (text, seed) in enumerate(prompts):
        ids = tokenizer(("[U]" + PAD if seed is not None else "[U]") + text + "[A]", add_special_tokens=False)["input_ids"]
        length = 2 + i % 4  # responses of different lengths
        response = torch.randint(20, 60, (length,), generator=gen).tolist()
        pad = prompt_width - len(ids)
        rows.append([0] * pad + ids + response + [0] * (RESPONSE - length))
        masks.append([0] * pad + [1] * (len(ids) + length) + [0] * (RESPONSE - length))
        inputs.append(pixel_inputs(seed) if seed is not None else {})
    mask = torch.tensor(masks)
    micro = TensorDict(
        {"input_ids": torch.tensor(rows), "attention_mask": mask, "position_ids": (mask.cumsum(1) - 1).clamp(min=0)},
        batch_size=[len(rows)],
    )
    set_non_tensor_list(micro, "multi_modal_inputs", inputs)
    return micro


@pytest.fixture(scope="module")
def tokenizer():
    return build_vlm_tokenizer()


def outputs_and_grads(model, micro, layout: str):
    model.zero_grad()
    out = response_outputs(
        model, micro["input_ids"], micro["attention_mask"], micro["position_ids"], RESPONSE, layout,
        log_prob_reduce(1.0, with_entropy=False), True,
        vision_rows(model, micro, micro["input_ids"], micro["attention_mask"]),
    )
    assert out.shape == micro["attention_mask"][:, -RESPONSE:].shape
    out.sum().backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


GROUPS = [("Digit?", 1), ("Digit?", 1), ("Digit?", 2), ("Digit?", 2), ("Sum?", None), ("Sum?", None)]


@pytest.mark.parametrize("layout", ["trimmed", "packed", "shared"])
def test_layouts_match_the_padded_reference_with_images(tokenizer, layout):
    model = build_vlm(tokenizer).train()
    micro = make_micro(tokenizer, GROUPS)
    want, want_grads = outputs_and_grads(model, micro, "padded")
    if layout in ("packed", "shared"):
        set_text_attn_implementation(model, VARLEN_SDPA)
    got, grads = outputs_and_grads(model, micro, layout)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert grads.keys() == want_grads.keys() and any("visual" in n for n in grads)
    for name in grads:
        torch.testing.assert_close(grads[name], want_grads[name], atol=1e-5, rtol=1e-4, msg=name)


def test_padded_log_probs_are_those_of_the_models_own_forward(tokenizer):
    model = build_vlm(tokenizer).eval()
    micro = make_micro(tokenizer, GROUPS[:4])
    with torch.no_grad():
        rows = vision_rows(model, micro, micro["input_ids"], micro["attention_mask"])
        images, _ = rows.model_inputs(model, torch.arange(4))
        logits = model(
            input_ids=micro["input_ids"], attention_mask=micro["attention_mask"],
            mm_token_type_ids=(micro["input_ids"] == model.config.image_token_id).int(), **images,
        ).logits[:, -RESPONSE - 1 : -1]
        want = torch.log_softmax(logits, -1).gather(-1, micro["input_ids"][:, -RESPONSE:, None])[..., 0]
        got = response_outputs(
            model, micro["input_ids"], micro["attention_mask"], micro["position_ids"], RESPONSE, "padded",
            log_prob_reduce(1.0, with_entropy=False), True, rows,
        )
    mask = micro["attention_mask"][:, -RESPONSE:].bool()
    torch.testing.assert_close(got[mask], want[mask], atol=1e-5, rtol=1e-5)


def test_shared_layout_keys_prompts_by_image_and_encodes_each_distinct_image_once(tokenizer):
    model = build_vlm(tokenizer).eval()
    set_text_attn_implementation(model, VARLEN_SDPA)
    micro = make_micro(tokenizer, GROUPS)
    encoded = []
    handle = model.model.visual.register_forward_hook(
        lambda m, args, kwargs, out: encoded.append(kwargs["grid_thw"].tolist()), with_kwargs=True
    )
    with torch.no_grad():
        response_outputs(
            model, micro["input_ids"], micro["attention_mask"], micro["position_ids"], RESPONSE, "shared",
            log_prob_reduce(1.0, with_entropy=False), True,
            vision_rows(model, micro, micro["input_ids"], micro["attention_mask"]),
        )
    handle.remove()
    assert encoded == [[[1, 4, 4], [1, 4, 4]]]  # two distinct images (same text), not four


def test_a_micro_batch_without_images_still_runs_the_vision_tower(tokenizer):
    model = build_vlm(tokenizer).train()
    micro = make_micro(tokenizer, GROUPS[4:])
    calls = []
    handle = model.model.visual.register_forward_hook(lambda *a: calls.append(1))
    _, grads = outputs_and_grads(model, micro, "padded")
    handle.remove()
    assert calls and all(float(g.abs().sum()) == 0.0 for n, g in grads.items() if "visual" in n)
    assert any("visual" in n for n in grads)  # in the graph: every rank reduces the tower's gradients
