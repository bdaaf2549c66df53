"""What ``generate`` needs besides token ids when the policy is a vision-language model.

- The images of the chunk's rows (``pixel_values``, ``image_grid_thw``) and ``mm_token_type_ids``: without
  the latter transformers cannot build the 3-D (mrope) positions and silently falls back to 1-D ones, so
  the sampled tokens would come from positions the training forward never uses.
- ``rope_deltas`` (each row's offset between its mrope position and its token index) set on the model
  for every row before decoding: decode steps read it, and after a shared-prompt prefill (one row per
  distinct prompt) it must cover every sample, not only the prefilled rows.
- The vision special tokens are never sampled (``vision_token_ids``, suppressed by the engine after its
  log-prob recorder): an image-pad token in a response would have no image features in training.
"""

from __future__ import annotations

import torch
from torch import nn

from siirl.engine.workers.vision_inputs import MULTIMODAL_INPUTS, mrope_positions, stack_images, vision_core


class RolloutImages:
    """The image inputs of one generation chunk (rows in runs of ``repeats`` identical prompts)."""

    def __init__(self, model: nn.Module, ids: torch.Tensor, mask: torch.Tensor, inputs: list[dict]) -> None:
        self.core = vision_core(model)
        self.inputs = inputs
        self.positions, self.deltas, self.token_types = mrope_positions(self.core, ids, mask, inputs)
        self.device = ids.device
        self.any_image = any(inputs)

    def prefill_inputs(self, repeats: int) -> dict[str, torch.Tensor]:
        """Inputs of the shared prefill over every prompt token but the last, one row per prompt."""
        heads = range(0, len(self.inputs), repeats)
        return {
            "position_ids": self.positions[:, ::repeats, :-1],
            **stack_images([self.inputs[r] for r in heads], self.device),
        }

    def generate_inputs(self, prefilled: bool) -> dict[str, torch.Tensor]:
        """Keyword inputs of ``generate``; ``rope_deltas`` are set on the model for every row first."""
        self.core.rope_deltas = self.deltas
        if prefilled or not self.any_image:  # prefilled: the images are in the cache already
            return {}
        return {"mm_token_type_ids": self.token_types, **stack_images(self.inputs, self.device)}

    def last_token_is_image(self) -> bool:
        return bool(self.token_types[:, -1].any())


def rollout_images(model: nn.Module, chunk, ids: torch.Tensor, mask: torch.Tensor) -> RolloutImages | None:
    if MULTIMODAL_INPUTS not in set(chunk.keys()):
        return None
    return RolloutImages(model, ids, mask, list(chunk[MULTIMODAL_INPUTS]))
