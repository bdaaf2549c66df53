"""Ascend NPU backend: torch_npu, HCCL, Ray "NPU" bundles, vLLM through the vllm-ascend plugin."""

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any, ClassVar

import torch

from siirl.device.base import DeviceBackend
from siirl.device.registry import register_backend


def _import_torch_npu() -> ModuleType | None:
    """Importing torch_npu is what registers ``torch.npu``; None when the package is absent."""
    try:
        return importlib.import_module("torch_npu")
    except ImportError:
        return None


@register_backend("npu", auto_priority=10)
class NpuBackend(DeviceBackend):
    dist_backend = "hccl"
    ray_resource = "NPU"
    visible_devices_env = "ASCEND_RT_VISIBLE_DEVICES"
    rollout_engines = ("hf", "vllm")
    default_dtype = torch.bfloat16
    inverse_cdf_sampling = False  # Ascend's softmax and cumsum kernels have no float64
    install_hint = "pip install siirl[npu]"
    rollout_install_hints: ClassVar[dict[str, str]] = {"vllm": "pip install siirl[npu] (vllm + vllm-ascend)"}

    def is_available(self) -> bool:
        if _import_torch_npu() is None:
            return False
        ns = getattr(torch, "npu", None)
        return ns is not None and ns.is_available() and ns.device_count() > 0

    def unavailable_reason(self) -> str:
        if _import_torch_npu() is None:
            return f"device=npu requested but torch_npu is not installed; fix: {self.install_hint}"
        return "device=npu requested but no Ascend NPU is visible (check ASCEND_RT_VISIBLE_DEVICES and the CANN driver)"

    def torch_namespace(self) -> ModuleType:
        _import_torch_npu()
        return torch.npu

    def attn_implementation(self) -> str:
        return "eager"

    def rollout_env(self, engine: str, local_device: int) -> dict[str, str]:
        """vLLM on Ascend runs through the vllm-ascend platform plugin, whose sleep mode and in-process
        model access are those of vLLM's V1 engine."""
        env = super().rollout_env(engine, local_device)
        if engine == "vllm":
            env["VLLM_USE_V1"] = "1"
        return env

    def apply_model_patches(self, model: Any, generation: bool = False) -> list[str]:
        """torch_npu fused RMSNorm, rotary embedding and varlen fusion attention (Qwen2/Qwen3/Llama/Mistral)."""
        from siirl.device.kernels import apply_patches

        return apply_patches(model, self.name, generation)

    def fused_log_probs(self) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        from siirl.device.kernels.logprob import npu_log_probs

        return npu_log_probs
