"""An embodied observation as a vision-language-action prompt: one camera image and the instruction.

OpenVLA's prompt asks the policy which action the robot should take for the task; the image is the
third-person camera frame (``agentview_image`` in LIBERO), turned right side up (the simulator renders it
upside down, which is why OpenVLA's LIBERO evaluation rotates it by 180 degrees) and resized to
``image_size`` pixels a side before the policy's own image processor sees it. The prompt's image block is
expanded to the image's token count, and the row keeps verl's ``multi_modal_inputs`` (what the HF model takes)
and ``multi_modal_data`` (what vLLM / SGLang take), so rollout and training see the same pixels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from siirl.data_coordinator.images import PLACEHOLDER, ImagePrompts
from siirl.engine.rollout.vision_requests import MULTIMODAL_DATA
from siirl.engine.workers.vision_inputs import MULTIMODAL_INPUTS

QUESTION = "What action should the robot take to {instruction}?"


class VlaPrompts:
    def __init__(
        self, tokenizer: Any, image_processor: Any, max_prompt_length: int,
        image_key: str = "agentview_image", image_size: int = 56,
    ) -> None:
        self.tokenizer, self.images = tokenizer, ImagePrompts(image_processor)
        self.max_prompt_length, self.image_key, self.image_size = max_prompt_length, image_key, image_size

    def accepts(self, observation: Any) -> bool:
        return isinstance(observation, Mapping) and self.image_key in observation

    def __call__(self, observation: Mapping[str, Any]) -> tuple[list[int], dict[str, Any]]:
        """(prompt tokens, the row's image fields)."""
        from PIL import Image

        frame = np.ascontiguousarray(np.asarray(observation[self.image_key], dtype=np.uint8)[::-1, ::-1])
        image = Image.fromarray(frame).convert("RGB").resize((self.image_size, self.image_size), Image.BILINEAR)
        question = QUESTION.format(instruction=str(observation.get("instruction", "")).strip().rstrip("."))
        text = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": PLACEHOLDER + question}], tokenize=False, add_generation_prompt=True
        )
        text = self.images.expand(text, [image.size], "observation")
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) > self.max_prompt_length:
            raise ValueError(
                f"an observation's prompt is {len(ids)} tokens, more than data.max_prompt_length="
                f"{self.max_prompt_length} (its image and instruction must fit whole)"
            )
        pixels = self.images.image_processor(images=[image], return_tensors="pt")
        inputs = {"pixel_values": pixels["pixel_values"], "image_grid_thw": pixels["image_grid_thw"]}
        return ids, {MULTIMODAL_INPUTS: inputs, MULTIMODAL_DATA: {"image": [image]}}
