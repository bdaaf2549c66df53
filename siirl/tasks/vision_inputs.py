"""Model inputs and greedy accuracy of image prompts for the embedded VLM, without a Qwen2-VL processor.

transformers' ``Qwen2VLProcessor`` cannot be built without torchvision (it wants a video processor), which
CPU torch here lacks; the PIL image processor alone works. So a prompt is rendered by the chat template and
its ``<image>`` placeholders are expanded by the data loader's ``ImagePrompts`` (one ``<|image_pad|>`` per
merged patch, what the processor would insert), so the warm-up sees the tokens the pipeline trains on.
``mm_token_type_ids`` marks those tokens: Qwen2-VL builds its 3-D mrope positions from it, and refuses
images without it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from PIL import Image
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from siirl.data_coordinator.images import ImagePrompts
from siirl.tasks.evaluation import count_exact, greedy_generate, render_prompt
from siirl.tasks.tiny_tokenizer import VISION_TOKENS


@dataclass
class EncodedImagePrompts:
    """Token ids of each prompt and the pixel inputs of all their images, in row order."""

    input_ids: list[list[int]]
    pixel_values: torch.Tensor
    image_grid_thw: torch.Tensor


def encode_image_prompts(
    tokenizer: PreTrainedTokenizerBase,
    image_processor: Any,
    contents: Sequence[str],
    images: Sequence[Sequence[Image.Image]],
) -> EncodedImagePrompts:
    """Single-turn user prompts whose i-th ``<image>`` shows the row's i-th image."""
    processed = image_processor(images=[im for row in images for im in row], return_tensors="pt")
    expander = ImagePrompts(image_processor)
    input_ids = []
    for i, (content, row) in enumerate(zip(contents, images, strict=True)):
        text = expander.expand(render_prompt(tokenizer, content), [im.size for im in row], f"prompt {i}")
        input_ids.append(tokenizer(text, add_special_tokens=False)["input_ids"])
    return EncodedImagePrompts(input_ids, processed["pixel_values"], processed["image_grid_thw"])


def image_step_inputs(
    model: PreTrainedModel, prompts: EncodedImagePrompts
) -> Callable[[torch.Tensor, torch.Tensor], dict[str, torch.Tensor]]:
    """The forward's image inputs for token ids ``ids`` of these prompts (plus whatever was appended)."""
    image_token_id = model.config.image_token_id

    def inputs(ids: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        return {
            "pixel_values": prompts.pixel_values,
            "image_grid_thw": prompts.image_grid_thw,
            "mm_token_type_ids": (ids == image_token_id).int(),
        }

    return inputs


def greedy_image_accuracy(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    image_processor: Any,
    contents: Sequence[str],
    images: Sequence[Sequence[Image.Image]],
    answers: Sequence[str],
    batch_size: int = 256,
) -> float:
    """Fraction of image prompts whose greedy completion (special tokens dropped, stripped, vision tokens
    never chosen) is the answer."""
    if not len(contents) == len(images) == len(answers) > 0:
        raise ValueError(
            f"need as many prompts, image lists and answers (>0): {len(contents)}, {len(images)}, "
            f"{len(answers)}"
        )
    was_training = model.training
    model.eval()
    correct = 0
    for start in range(0, len(contents), batch_size):
        chunk = slice(start, start + batch_size)
        prompts = encode_image_prompts(tokenizer, image_processor, contents[chunk], images[chunk])
        outs = greedy_generate(
            model,
            prompts.input_ids,
            tokenizer.eos_token_id,
            tokenizer.pad_token_id,
            max_new_tokens=4,
            step_inputs=image_step_inputs(model, prompts),
            suppress=tokenizer.convert_tokens_to_ids(VISION_TOKENS),
        )
        correct += count_exact(tokenizer, outs, answers[chunk])
    model.train(was_training)
    return correct / len(contents)
