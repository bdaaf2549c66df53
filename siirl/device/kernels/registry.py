"""Per-device-family model patches: adding a kernel is one function and ``@PATCHES.register("npu/name")``.

A patch takes a built Hugging Face model, applies itself when the model is one it knows, and answers
whether it did; ``apply_patches`` runs a family's patches in registration order and names those applied.
Patches that serve only the packed training layout (varlen attention) are registered with
``for_generation=False`` metadata and left out of models built for generation, which keep the stock batched
attention with the padding mask and KV cache.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from torch import nn

from siirl.registry import Registry

logger = logging.getLogger(__name__)

PatchFn = Callable[[nn.Module], bool]
#: Patches keyed ``"<device family>/<patch name>"``; metadata ``for_generation=False`` marks training-only ones.
PATCHES: Registry[PatchFn] = Registry("model patch")


def apply_patches(model: nn.Module, family: str, generation: bool = False) -> list[str]:
    """Apply every patch of ``family`` that fits ``model`` (built for generation, or for training and
    scoring); the names of those applied, in registration order."""
    prefix = f"{family}/"
    wanted = [
        (key.removeprefix(prefix), fn)
        for key, fn in PATCHES.items()
        if key.startswith(prefix) and not (generation and not PATCHES.metadata(key).get("for_generation", True))
    ]
    applied = [name for name, fn in wanted if fn(model)]
    logger.info("%s: device kernels applied for %s: %s", type(model).__name__, family, applied or "none")
    return applied
