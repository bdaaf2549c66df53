"""Which Hugging Face model families the kernel patches know, and where their replaceable parts live.

A family qualifies when its modeling module defines ``<Prefix>RMSNorm`` computing
``weight * x * rsqrt(mean(x^2) + eps)`` and a module-level ``apply_rotary_pos_emb(q, k, cos, sin,
unsqueeze_dim)`` in the rotate-half convention (checked against transformers 5.x sources).
"""

from __future__ import annotations

import sys
from types import ModuleType

from torch import nn

#: ``config.model_type`` -> name of the RMSNorm class in ``modeling_<model_type>``.
RMS_NORM_CLASSES: dict[str, str] = {
    "qwen2": "Qwen2RMSNorm",
    "qwen2_moe": "Qwen2MoeRMSNorm",
    "qwen3": "Qwen3RMSNorm",
    "qwen3_moe": "Qwen3MoeRMSNorm",
    "llama": "LlamaRMSNorm",
    "mistral": "MistralRMSNorm",
}


def model_type(model: nn.Module) -> str | None:
    config = getattr(model, "config", None)
    return getattr(config, "model_type", None)


def modeling_module(model: nn.Module) -> ModuleType | None:
    """The ``transformers.models.<type>.modeling_<type>`` module of a supported model, else None."""
    kind = model_type(model)
    if kind not in RMS_NORM_CLASSES:
        return None
    return sys.modules.get(f"transformers.models.{kind}.modeling_{kind}")


def rms_norm_class(model: nn.Module) -> type | None:
    module = modeling_module(model)
    return getattr(module, RMS_NORM_CLASSES[model_type(model)], None) if module is not None else None


def uses_sliding_window(model: nn.Module) -> bool:
    """Sliding-window layers need a banded mask the varlen kernels here do not build."""
    config = getattr(model, "config", None)
    config = config.get_text_config() if config is not None else None
    return "sliding_attention" in (getattr(config, "layer_types", None) or ())


def text_config(model: nn.Module):
    """The config of the model's language model: the config itself for a text LM, ``text_config`` for a
    vision-language model (whose vision tower has its own)."""
    return model.config.get_text_config()


def set_text_attn_implementation(model: nn.Module, name: str) -> None:
    """Switch the LANGUAGE model's attention to ``name``. A VLM's vision tower keeps its own: the packed
    kernels read text-sequence boundaries, which the tower's patch attention does not pass."""
    if text_config(model) is model.config:
        model.set_attn_implementation(name)
        return
    key = next(k for k in model.config.sub_configs if getattr(model.config, k) is text_config(model))
    model.set_attn_implementation({key: name})
