"""Model inputs and greedy accuracy of image prompts for the embedded VLM, without a Qwen2-VL processor.

transformers' ``Qwen2VLProcessor`` cannot be built without torchvision (it wants a video processor), which
CPU torch here lacks; the PIL image processor alone works. So a prompt is rendered by the chat template and
each ``<image>`` in it becomes the vision block, one ``<|image_pad|>`` per merged patch of that image (what
the processor would insert). ``mm_token_type_ids`` marks those tokens: Qwen2-VL builds its 3-D mrope
positions from it, and refuses images without it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from PIL import Image
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from siirl.tasks.evaluation import count_exact, greedy_generate, render_prompt
from siirl.tasks.tiny_tokenizer import IMAGE_PAD, VISION_END, VISION_START, VISION_TOKENS

PLACEHOLDER = "<image>"


@dataclass
class ImagePrompts:
    """Token ids of each prompt and the pixel inputs of all their images, in row order."""

    input_ids: list[list[int]]
    pixel_values: torch.Tensor
    image_grid_thw: torch.Tensor


def encode_image_prompts(
    tokenizer: PreTrainedTokenizerBase,
    image_processor: Any,
    contents: Sequence[str],
    images: Sequence[Sequence[Image.Image]],
) -> ImagePrompts:
    """Single-turn user prompts whose i-th ``<image>`` shows the row's i-th image."""
    processed = image_processor(images=[im for row in images for im in row], return_tensors="pt")
    grid = processed["image_grid_thw"]
    counts = iter((grid.prod(-1) // image_processor.merge_size**2).tolist())
    input_ids = []
    for content, row in zip(contents, images, strict=True):
        pieces = render_prompt(tokenizer, content).split(PLACEHOLDER)
        if len(pieces) - 1 != len(row):
            raise ValueError(
                f"prompt {content!r} has {len(pieces) - 1} {PLACEHOLDER} for {len(row)} image(s)"
            )
        text = pieces[0] + "".join(
            VISION_START + IMAGE_PAD * next(counts) + VISION_END + p for p in pieces[1:]
        )
        input_ids.append(tokenizer(text, add_special_tokens=False)["input_ids"])
    return ImagePrompts(input_ids, processed["pixel_values"], grid)


def image_step_inputs(
    model: PreTrainedModel, prompts: ImagePrompts
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
