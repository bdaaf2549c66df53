"""The images of a micro-batch as a vision-language model's forward takes them, in every padding-free layout.

Rows carry verl's ``multi_modal_inputs`` (``pixel_values``, ``image_grid_thw``; ``{}`` without images).
Positions are the model's 3-D mrope positions, computed here from the padded rows (``get_rope_index``) and
then cut by the layout like any position tensor. The images passed are those of the rows whose prompt
tokens are in the model input, in row order, which is the order the model scatters image features into
the image-pad tokens; in the ``shared`` layout that is one row per distinct prompt, so the vision tower
encodes each distinct prompt image once. Two prompts with equal text and different images must not share:
``row_key`` numbers the distinct image contents so the layout keys prompts by text and image.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
from torch import nn

MULTIMODAL_INPUTS = "multi_modal_inputs"


def vision_core(model: nn.Module) -> nn.Module:
    """The module holding ``get_rope_index`` and ``get_image_features`` (``Qwen2VLModel`` and kin)."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return getattr(inner, "model", inner)


def stack_images(rows: list[dict], device: torch.device) -> dict[str, torch.Tensor]:
    """The model's image inputs for these rows' ``multi_modal_inputs``, in row order ({} without images)."""
    chosen = [r for r in rows if r]
    if not chosen:
        return {}
    return {
        "pixel_values": torch.cat([c["pixel_values"] for c in chosen]).to(device),
        "image_grid_thw": torch.cat([c["image_grid_thw"] for c in chosen]).to(device),
    }


def mrope_positions(
    core: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, inputs: list[dict]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(3-D positions (3, rows, width), per-row rope deltas, ``mm_token_type_ids``) of left-padded rows,
    by the model's own ``get_rope_index`` (which needs the token types to find the image blocks)."""
    token_types = (input_ids == int(core.config.image_token_id)).int()
    grids = [i["image_grid_thw"] for i in inputs if i]
    positions, deltas = core.get_rope_index(
        input_ids,
        mm_token_type_ids=token_types,
        image_grid_thw=torch.cat(grids).to(input_ids.device) if grids else None,
        attention_mask=attention_mask,
    )
    return positions, deltas, token_types


def _digest(inputs: dict) -> bytes:
    if not inputs:
        return b""
    digest = hashlib.sha1(inputs["image_grid_thw"].cpu().numpy().tobytes())
    digest.update(inputs["pixel_values"].detach().cpu().float().numpy().tobytes())
    return digest.digest()


@dataclass(frozen=True)
class VisionRows:
    """Per-row image inputs of one micro-batch plus what the layouts need of them."""

    inputs: list[dict]
    #: (3, rows, width) mrope positions of the padded rows.
    positions: torch.Tensor
    #: (rows,) number of each row's image content (0: no image); equal numbers = identical images.
    row_key: torch.Tensor

    def model_inputs(self, model: nn.Module, prompt_rows: torch.Tensor) -> tuple[dict, torch.Tensor | None]:
        """``pixel_values`` / ``image_grid_thw`` of ``prompt_rows``, and an anchor to add to the outputs.

        Without an image among those rows the tower still runs, on one blank minimal image whose features
        enter the result times zero: sharded vision blocks gather their parameters in forward and reduce
        their gradients in backward on every rank, so no rank may skip them."""
        device = self.positions.device
        images = stack_images([self.inputs[r] for r in prompt_rows.tolist()], device)
        if images:
            return images, None
        core = vision_core(model)
        merge = int(core.config.vision_config.spatial_merge_size)
        grid = torch.tensor([[1, merge, merge]], device=device)
        width = self._patch_width(core)
        dtype = next(core.visual.parameters()).dtype
        features = core.get_image_features(torch.zeros(merge * merge, width, device=device, dtype=dtype), grid)
        pooled = features.pooler_output if hasattr(features, "pooler_output") else features
        return {}, 0.0 * sum(f.sum() for f in pooled)

    @staticmethod
    def _patch_width(core: nn.Module) -> int:
        cfg = core.config.vision_config
        return int(cfg.in_channels) * int(cfg.temporal_patch_size) * int(cfg.patch_size) ** 2


def vision_rows(model: nn.Module, micro, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> VisionRows | None:
    """The micro-batch's ``VisionRows``; ``None`` for a text model (no ``multi_modal_inputs``)."""
    if MULTIMODAL_INPUTS not in set(micro.keys()):
        return None
    inputs = list(micro[MULTIMODAL_INPUTS])
    positions, _, _ = mrope_positions(vision_core(model), input_ids, attention_mask, inputs)
    numbers: dict[bytes, int] = {b"": 0}
    keys = [numbers.setdefault(_digest(i), len(numbers)) for i in inputs]
    return VisionRows(inputs, positions, torch.tensor(keys, device=input_ids.device))
