"""Images of verl's multimodal rows: decoding, ``<image>`` placeholder expansion and pixel inputs.

A row's ``data.image_key`` cell is a list of images, each ``{"bytes": ...}`` / ``{"path": ...}`` (the Hugging
Face ``Image`` feature's layout, as verl writes it) or a plain path. Every ``<image>`` in the rendered prompt
becomes the vision block of the Qwen-VL family, ``<|vision_start|>`` + one ``<|image_pad|>`` per merged patch
+ ``<|vision_end|>``, so token counts (and the over-long filter) see what the model sees. The count comes from
the image size alone, so scanning a dataset decodes no pixels. With ``data.image_patch_size`` set, each image
is first resized onto verl's patch grid (``image_grid``); sizes, tokens and pixels are then those of the resized
image, and the resized image is what an inference engine receives.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from typing import Any

import torch

from siirl.data_coordinator.errors import DataError
from siirl.data_coordinator.image_grid import grid_size, merge_size
from siirl.errors import first_line

PLACEHOLDER = "<image>"
VISION_START, IMAGE_PAD, VISION_END = "<|vision_start|>", "<|image_pad|>", "<|vision_end|>"


def _label(value: Any, index: int) -> str:
    """How an image is named in errors: its file when it has one, else its position in the row."""
    path = value if isinstance(value, str) else (value or {}).get("path") if isinstance(value, dict) else None
    return f"image {index} ({path})" if path else f"image {index}"


def open_image(value: Any, where: str, index: int, decode: bool):
    """One cell entry as a PIL image: decoded to RGB, or (``decode=False``) only integrity-checked, which
    keeps its size but not its pixels (PIL's ``verify``)."""
    from PIL import Image, UnidentifiedImageError

    label = _label(value, index)
    data = value.get("bytes") if isinstance(value, dict) else None
    path = value if isinstance(value, str) else value.get("path") if isinstance(value, dict) else None
    if data is None and not path:
        raise DataError(f"{where}: {label} has neither bytes nor a path (got {type(value).__name__})")
    if data is None and not os.path.isfile(path):
        raise DataError(f"{where}: {label} not found")
    try:
        image = Image.open(io.BytesIO(data) if data is not None else path)
        if decode:
            return image.convert("RGB")
        image.verify()
        return image
    except Image.DecompressionBombError as exc:  # PIL refuses sizes past Image.MAX_IMAGE_PIXELS x 2
        raise DataError(f"{where}: {label} is too large to decode ({exc})") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise DataError(f"{where}: {label} is not a readable image ({first_line(exc)})") from None


def image_list(cell: Any, where: str) -> list:
    """A row's image cell as a list (null: no images)."""
    if cell is None:
        return []
    if isinstance(cell, (list, tuple)):
        return list(cell)
    raise DataError(f"{where}: the image column must hold a list of images, got {type(cell).__name__}")


def expand_placeholders(text: str, pads: Sequence[int], where: str) -> str:
    """``text`` with its i-th ``<image>`` replaced by a vision block of ``pads[i]`` image-pad tokens."""
    pieces = text.split(PLACEHOLDER)
    if len(pieces) - 1 != len(pads):
        raise DataError(
            f"{where}: the prompt has {len(pieces) - 1} {PLACEHOLDER} placeholder(s) but the row has "
            f"{len(pads)} image(s)"
        )
    blocks = [VISION_START + IMAGE_PAD * count + VISION_END for count in pads]
    return pieces[0] + "".join(block + piece for block, piece in zip(blocks, pieces[1:]))


class ImagePrompts:
    """Expands ``<image>`` placeholders and builds the pixel inputs, with the policy's image processor."""

    def __init__(self, image_processor: Any, patch_size: int | None = None) -> None:
        self.image_processor = image_processor
        self.merge = merge_size(image_processor) ** 2
        #: ``data.image_patch_size``; ``None``: the image processor alone resizes, onto its own grid.
        self.patch_size = patch_size

    def resized(self, size: tuple[int, int]) -> tuple[int, int]:
        """The (width, height) an image of ``size`` is given before the image processor sees it."""
        if self.patch_size is None:
            return size
        return grid_size(*size, self.patch_size, merge_size(self.image_processor))

    def tokens_per_image(self, size: tuple[int, int]) -> int:
        width, height = size
        return self.image_processor.get_number_of_image_patches(height, width) // self.merge

    def sizes(self, cell: Any, where: str) -> list[tuple[int, int]]:
        """(width, height) of each image of a row as the image processor receives it, each file checked."""
        sizes = []
        for i, value in enumerate(image_list(cell, where)):
            sizes.append(self.resized(open_image(value, where, i, decode=False).size))
        return sizes

    def expand(self, text: str, sizes: Sequence[tuple[int, int]], where: str) -> str:
        """``text`` with its i-th ``<image>`` replaced by image i's vision block."""
        return expand_placeholders(text, [self.tokens_per_image(s) for s in sizes], where)

    def row_inputs(self, cell: Any, where: str) -> tuple[dict[str, torch.Tensor], dict[str, list]]:
        """verl's ``multi_modal_inputs`` (``pixel_values``, ``image_grid_thw``: what the HF model takes) and
        ``multi_modal_data`` (``{"image": [RGB images]}``: what vLLM takes) of one row; {} without images."""
        values = image_list(cell, where)
        if not values:
            return {}, {}
        images = [self._decoded(v, where, i) for i, v in enumerate(values)]
        out = self.image_processor(images=images, return_tensors="pt")
        return {"pixel_values": out["pixel_values"], "image_grid_thw": out["image_grid_thw"]}, {"image": images}

    def _decoded(self, value: Any, where: str, index: int):
        """One image decoded to RGB and resized onto the patch grid (bicubic, as verl's resize)."""
        from PIL import Image

        image = open_image(value, where, index, decode=True)
        size = self.resized(image.size)
        return image if size == image.size else image.resize(size, Image.Resampling.BICUBIC)
