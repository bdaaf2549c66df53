"""Ascend fused RMSNorm and rotary embedding for Qwen2/Qwen3/Llama/Mistral-family transformers models.

``torch_npu.npu_rms_norm(x, gamma, epsilon) -> (y, rstd)`` and ``torch_npu.npu_rotary_mul(x, r1, r2)``
(half rotation: ``r1 * x + r2 * rotate_half(x)``) compute exactly what the eager modules do, in one
kernel each. The patches replace the family's ``<Prefix>RMSNorm.forward`` and the modeling module's
``apply_rotary_pos_emb`` (looked up at call time by the attention modules), so they hold for every model
of the family built in this process.
"""

from __future__ import annotations

import importlib

import torch
from torch import nn

from siirl.device.kernels.hf_models import modeling_module, rms_norm_class
from siirl.device.kernels.registry import PATCHES


def _torch_npu():
    return importlib.import_module("torch_npu")


def npu_rms_norm_forward(self: nn.Module, hidden_states: torch.Tensor) -> torch.Tensor:
    weight = self.weight.to(hidden_states.dtype)
    return _torch_npu().npu_rms_norm(hidden_states, weight, epsilon=self.variance_epsilon)[0]


def npu_apply_rotary_pos_emb(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, unsqueeze_dim: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    rotary_mul = _torch_npu().npu_rotary_mul
    return rotary_mul(q, cos, sin), rotary_mul(k, cos, sin)


@PATCHES.register("npu/npu_rms_norm")
def patch_rms_norm(model: nn.Module) -> bool:
    norm_cls = rms_norm_class(model)
    if norm_cls is None:
        return False
    norm_cls.forward = npu_rms_norm_forward
    return True


@PATCHES.register("npu/npu_rotary_mul")
def patch_rotary(model: nn.Module) -> bool:
    module = modeling_module(model)
    if module is None or not hasattr(module, "apply_rotary_pos_emb"):
        return False
    module.apply_rotary_pos_emb = npu_apply_rotary_pos_emb
    return True
