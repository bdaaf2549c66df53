"""verl's ``data.image_patch_size``: the pixel grid images are resized onto before the image processor.

verl's dataset resizes every image (through ``qwen_vl_utils``) so that its sides are multiples of the patch
size times the vision tower's spatial merge (2 in the Qwen-VL family): 28 pixels for Qwen2-VL / Qwen2.5-VL's
14-pixel patches, 32 for Qwen3-VL / Qwen3.5's 16-pixel ones. The aspect ratio is kept and the area is held
between 4 and 16384 merged patches, so tiny images grow and huge ones shrink. The image processor then fits
the result to its own grid, which changes nothing when the two patch sizes agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

#: verl's bounds on one image's merged patches (vision tokens) when it resizes.
MIN_TOKENS, MAX_TOKENS = 4, 16384


def grid_size(width: int, height: int, patch_size: int, merge: int) -> tuple[int, int]:
    """(width, height) of an image resized onto the ``patch_size * merge`` grid within verl's token bounds."""
    step = patch_size * merge

    def snap(side: int, scale: float, rounding: Callable[[float], int]) -> int:
        return max(step, rounding(side * scale / step) * step)

    new_w, new_h = snap(width, 1.0, round), snap(height, 1.0, round)
    area = new_w * new_h
    if area > MAX_TOKENS * step * step:
        scale = math.sqrt(MAX_TOKENS * step * step / (width * height))
        new_w, new_h = snap(width, scale, math.floor), snap(height, scale, math.floor)
    elif area < MIN_TOKENS * step * step:
        scale = math.sqrt(MIN_TOKENS * step * step / (width * height))
        new_w, new_h = snap(width, scale, math.ceil), snap(height, scale, math.ceil)
    return new_w, new_h


def merge_size(image_processor: Any) -> int:
    """The vision tower's spatial merge as the image processor states it (1 when it states none)."""
    return int(getattr(image_processor, "merge_size", 1) or 1)


def patch_size_mismatch(image_processor: Any, patch_size: int | None) -> str | None:
    """The warning for a ``data.image_patch_size`` that is not the processor's own patch size, else ``None``.

    verl does not refuse it: its dataset resizes onto the key's grid and the processor then resizes onto its
    own, so the run works with images resampled twice. siiRL does the same and says so once."""
    own = getattr(image_processor, "patch_size", None)
    if patch_size is None or own is None or int(own) == patch_size:
        return None
    merge = merge_size(image_processor)
    return (
        f"data.image_patch_size={patch_size} is not the policy's image patch size ({own}): images are resized "
        f"to multiples of {patch_size * merge} pixels as verl's dataset does, then the image processor resizes "
        f"them to multiples of {int(own) * merge}; set data.image_patch_size={own} to resize once"
    )
