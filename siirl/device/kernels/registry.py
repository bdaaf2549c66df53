"""Per-device-family lists of model patches: adding a kernel is one function and one decorator.

A patch takes a built Hugging Face model, applies itself when the model is one it knows, and answers
whether it did; ``apply_patches`` runs a family's patches in registration order and names those applied.
Patches that serve only the packed training layout (varlen attention) are registered with
``for_generation=False`` and left out of models built for generation, which keep the stock batched
attention with the padding mask and KV cache.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from torch import nn

logger = logging.getLogger(__name__)

PatchFn = Callable[[nn.Module], bool]
_PATCHES: dict[str, dict[str, PatchFn]] = {}
#: (family, name) of the patches that models built for generation do not get.
_TRAINING_ONLY: set[tuple[str, str]] = set()


def register_patch(family: str, name: str, for_generation: bool = True) -> Callable[[PatchFn], PatchFn]:
    """Decorator: run ``fn(model) -> applied?`` when models are built on device family ``family``
    (for generation too unless ``for_generation`` is False)."""

    def wrap(fn: PatchFn) -> PatchFn:
        patches = _PATCHES.setdefault(family, {})
        if name in patches and patches[name] is not fn:
            raise ValueError(f"model patch '{name}' is already registered for device family '{family}'")
        patches[name] = fn
        if not for_generation:
            _TRAINING_ONLY.add((family, name))
        return fn

    return wrap


def apply_patches(model: nn.Module, family: str, generation: bool = False) -> list[str]:
    """Apply every patch of ``family`` that fits ``model`` (built for generation, or for training and
    scoring); the names of those applied, in order."""
    patches = _PATCHES.get(family, {})
    wanted = {n: fn for n, fn in patches.items() if not (generation and (family, n) in _TRAINING_ONLY)}
    applied = [name for name, fn in wanted.items() if fn(model)]
    logger.info("%s: device kernels applied for %s: %s", type(model).__name__, family, applied or "none")
    return applied
