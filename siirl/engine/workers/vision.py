"""Vision-language policies (Qwen2-VL family): what differs from a text LM when loading and training.

The processor is NOT loaded whole: ``AutoProcessor`` / ``Qwen2VLProcessor`` need torchvision, which CPU
hosts may lack. The data side needs only the tokenizer (loaded as for any LM) and the image processor,
which ``AutoImageProcessor`` resolves to its PIL implementation when torchvision is missing.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoImageProcessor

from siirl.engine.workers.model_loading import ModelLoadError, is_vision_config, model_dir
from siirl.engine.workers.vision_inputs import vision_core
from siirl.errors import first_line

logger = logging.getLogger(__name__)


def load_image_processor(model_cfg: Any) -> Any | None:
    """The image processor of a vision policy, or ``None`` for a text-only model."""
    path = model_dir(model_cfg)
    trust = bool(model_cfg.trust_remote_code)
    if not is_vision_config(AutoConfig.from_pretrained(path, trust_remote_code=trust)):
        return None
    if not (path / "preprocessor_config.json").is_file():
        raise ModelLoadError(f"vision model '{model_cfg.path}' has no preprocessor_config.json (its image processor)")
    try:
        return AutoImageProcessor.from_pretrained(path, trust_remote_code=trust)
    except (OSError, ValueError, ImportError) as exc:
        raise ModelLoadError(f"no usable image processor in '{model_cfg.path}': {first_line(exc)}") from None


@functools.lru_cache(maxsize=16)
def _has_vision_config(path: str) -> bool:
    config = Path(path).expanduser() / "config.json"
    try:
        return "vision_config" in json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False  # a missing or broken model dir is reported by the model checks, not here


def policy_sees_images(cfg: Any) -> bool:
    """Whether the run's policy is a vision-language model (read from its ``config.json`` at plan time):
    its batches then carry ``multi_modal_inputs`` from the dataloader to every policy forward."""
    return _has_vision_config(str(cfg.actor_rollout_ref.model.path or ""))


def vision_tower(model: torch.nn.Module) -> torch.nn.Module | None:
    """The vision encoder of a loaded VLM (``model.visual`` in the Qwen-VL family), peft wrapping looked
    through; ``None`` for a text LM."""
    return getattr(vision_core(model), "visual", None)


def freeze_vision_tower(model: torch.nn.Module) -> int:
    """verl's ``actor.freeze_vision_tower``: the vision encoder's parameters stop training. Returns how many
    parameters were frozen (0 for a text LM, which has no tower: as in verl, the key then does nothing)."""
    tower = vision_tower(model)
    if tower is None:
        logger.warning("actor.freeze_vision_tower=true but %s has no vision tower", type(model).__name__)
        return 0
    tower.requires_grad_(False)
    return sum(p.numel() for p in tower.parameters())


def policy_loader(freeze_vision: bool) -> Callable[..., torch.nn.Module]:
    """The actor's model loader: ``load_policy_lm``, its vision tower frozen when asked, before the model is
    sharded or given to the optimizer (which then never holds the tower's parameters)."""
    from siirl.engine.workers.lora import load_policy_lm  # peft: the driver's checks import this module

    if not freeze_vision:
        return load_policy_lm

    def load(model_cfg: Any, backend: Any, dtype: torch.dtype) -> torch.nn.Module:
        model = load_policy_lm(model_cfg, backend, dtype)
        freeze_vision_tower(model)
        return model

    return load
